package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/fstest"
	"github.com/nimbus-fs/nimbus/namespace"
)

// TestFileSystemThroughPlatform runs the behaviour suite against the Go
// client through the local platform: `nimbus serve --platform local
// --hosting process` on PostgreSQL and etcd, a fresh database per case,
// its instances `nimbus namenode` children. The client is the one a user
// gets from client.Dial on the gateway's address (hybrid: its requests go
// over the instances' connect-backs or through the gateway).
func TestFileSystemThroughPlatform(t *testing.T) {
	caps := fstest.AllCaps()
	caps.OwnClientName = true // the Go client's
	def := namespace.DefaultConfig()
	fstest.Run(t, fstest.Config{
		Superuser: "root",
		// MaxFile stays 0: the platform keeps a file past the inline
		// threshold in blocks, and its limit (blocks per file) is far.
		ListLimit: def.ListLimit,
		Caps:      caps,
	}, func(t *testing.T) meta.FileSystem {
		gw := testproc.Start(t, binary, "", "", platformArgs(t, "--platform", "local", "--hosting", "process",
			"--deployments", "1", "--concurrency", "4", "--min-instances", "1", "--keep-alive", "10s")...)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := client.Dial(ctx, gw.URL(), client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	})
}
