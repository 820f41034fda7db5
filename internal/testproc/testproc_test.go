package testproc

import "testing"

// TestServingLine: the address is read from both forms of the line
// `nimbus serve` prints once it serves, and from nothing else.
func TestServingLine(t *testing.T) {
	for _, tc := range []struct{ out, want string }{
		{"nimbus serving on http://127.0.0.1:41234 (data in /tmp/d)\n", "127.0.0.1:41234"},
		{"nimbus serving on http://127.0.0.1:5000: the gateway of a local platform, 2 deployments, hosting process (data in /d)\n", "127.0.0.1:5000"},
		{"nimbus serving on http://[::1]:8020 (data in /d)\n", "[::1]:8020"},
		{"time=x level=INFO msg=\"nimbus serving\" addr=http://127.0.0.1:1\nnimbus serving on http://localhost:9 (data in /d)\n", "localhost:9"},
		{"time=x level=INFO msg=\"nimbus serving\" addr=http://127.0.0.1:1\n", ""},
		{"nimbus serving on http://127.0.0.1: the gateway\n", ""},
	} {
		got := ""
		if m := servingLine.FindStringSubmatch(tc.out); m != nil {
			got = m[1]
		}
		if got != tc.want {
			t.Errorf("%q: address %q, want %q", tc.out, got, tc.want)
		}
	}
}
