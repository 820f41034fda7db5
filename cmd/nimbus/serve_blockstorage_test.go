package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestBlockStorageFlag: --block-storage takes local or datanodes, the
// latter on PostgreSQL only and with DataNode liveness settings that make
// sense, replication duty bounds above 0; anything else exits 2 saying why, before anything is opened.
func TestBlockStorageFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--block-storage", "tape"}, `bad --block-storage "tape"`},
		{[]string{"--block-storage", "datanodes"}, "needs --store postgres://"},
		{[]string{"--block-storage", "datanodes", "--store", "postgres://u@127.0.0.1:1/db", "--datanode-heartbeat", "1s", "--datanode-stale-after", "1s"},
			"--datanode-stale-after"},
		{[]string{"--maintain-interval", "0s"}, "bad --maintain-interval 0s"},
		{[]string{"--block-orphan-grace", "-1s"}, "--block-orphan-grace -1s"},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"--data", t.TempDir()}, tc.args...)
		if code := cmdServe(context.Background(), args, &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("serve %q: exit %d, stderr %q; want 2 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
}
