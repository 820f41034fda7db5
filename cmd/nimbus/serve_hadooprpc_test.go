package main

import "testing"

func TestHadoopRPCAddrDefault(t *testing.T) {
	for _, c := range []struct{ flag, listen, want string }{
		{defaultHadoopRPC, "127.0.0.1:9870", "127.0.0.1:8020"},
		{defaultHadoopRPC, "0.0.0.0:9870", "0.0.0.0:8020"},
		{defaultHadoopRPC, "127.0.0.1:0", ""},
		{defaultHadoopRPC, "127.0.0.1:9871", ""},
		{"", "127.0.0.1:9870", ""},
		{"127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"},
	} {
		if got := hadoopRPCAddr(c.flag, c.listen); got != c.want {
			t.Errorf("hadoopRPCAddr(%q, %q) = %q, want %q", c.flag, c.listen, got, c.want)
		}
	}
}
