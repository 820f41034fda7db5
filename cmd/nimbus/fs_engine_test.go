package main

import (
	"context"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
)

// fakeTime is the engine's clock in tests: 2026-11-23 01:02:00 UTC.
const fakeTime = int64(1795395720000)

// testSuperuser owns the root; the shell tests run as alice, whose home
// /user/alice it creates.
const testSuperuser = "hdfs"

// newTestFS returns the real engine on a Pebble store in a temporary
// directory, with a fixed clock, replication 3 (as HDFS's default, so that
// du shows it), listing pages of 2 entries (so that every listing pages),
// and group membership alice → {alice, staff}. /user/alice exists, owned by
// alice.
func newTestFS(t *testing.T) meta.FileSystem {
	t.Helper()
	return newTestFSWith(t, func(*namespace.Config) {})
}

// newTestFSWith is newTestFS's engine with a changed configuration.
func newTestFSWith(t *testing.T, change func(*namespace.Config)) meta.FileSystem {
	t.Helper()
	st, err := pebblestore.Open(t.TempDir(), pebblestore.DefaultOptions())
	if err != nil {
		t.Fatalf("pebblestore.Open: %v", err)
	}
	cfg := namespace.DefaultConfig()
	cfg.Superuser = testSuperuser
	cfg.Now = func() time.Time { return time.UnixMilli(fakeTime) }
	cfg.DefaultReplication = 3
	cfg.ListLimit = 2
	cfg.Groups = func(user string) []string {
		if user == "alice" {
			return []string{"alice", "staff"}
		}
		return []string{user}
	}
	change(&cfg)
	eng, err := namespace.New(st, cfg)
	if err != nil {
		_ = st.Close()
		t.Fatalf("namespace.New: %v", err)
	}
	t.Cleanup(func() {
		if err := eng.Close(); err != nil {
			t.Errorf("engine close: %v", err)
		}
		if err := st.Close(); err != nil {
			t.Errorf("store close: %v", err)
		}
	})
	ctx := context.Background()
	su := meta.User{Name: testSuperuser}
	if err := eng.Mkdirs(ctx, su, "/user/alice", meta.DefaultDir); err != nil {
		t.Fatalf("mkdirs home: %v", err)
	}
	if err := eng.SetOwner(ctx, su, "/user/alice", "alice", ""); err != nil {
		t.Fatalf("chown home: %v", err)
	}
	return eng
}
