package metatest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/fstest"
	"github.com/nimbus-fs/nimbus/meta/metatest"
)

var root = meta.User{Name: metatest.Superuser}

// TestFileSystem runs the behaviour suite against MemFS: it checks no
// permissions except on the superuser-only calls and enforces no quotas
// (the package's contract), and it has everything else.
func TestFileSystem(t *testing.T) {
	caps := fstest.AllCaps()
	caps.Permissions, caps.Quotas = false, false
	fstest.Run(t, fstest.Config{
		Superuser: metatest.Superuser,
		MaxFile:   metatest.MaxFile,
		ListLimit: metatest.ListLimit,
		Defaults:  &meta.ServerDefaults{Replication: 3, BlockSize: 128 << 20, InlineThreshold: metatest.MaxFile},
		Caps:      caps,
	}, func(*testing.T) meta.FileSystem { return metatest.NewMemFS() })
}

// TestHook: the hook sees every call by name and its error is the result.
func TestHook(t *testing.T) {
	fs := metatest.NewMemFS()
	var seen []string
	boom := errors.New("boom")
	fs.Hook = func(ctx context.Context, m string) error {
		seen = append(seen, m)
		if m == "stat" {
			return boom
		}
		return nil
	}
	ctx := context.Background()
	if err := fs.Mkdirs(ctx, root, "/x", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(ctx, root, "/x"); err != boom {
		t.Fatalf("stat = %v, want the hook's error", err)
	}
	if err := fs.Echo(ctx); err != nil || fs.Echoes() != 1 {
		t.Fatalf("echo = %v, %d echoes", err, fs.Echoes())
	}
	if strings.Join(seen, " ") != "mkdirs stat echo" {
		t.Fatalf("hook saw %v", seen)
	}
	// Without a hook, a done context fails the call.
	fs.Hook = nil
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := fs.Stat(cctx, root, "/x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("stat with a cancelled context = %v", err)
	}
}
