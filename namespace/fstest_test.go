package namespace_test

import (
	"context"
	"os"
	"testing"

	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/fstest"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
	"github.com/nimbus-fs/nimbus/store/pgstore"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// Files up to this size are stored inline, and without DataNodes that is
// the engine's size limit.
const maxFile = 1 << 20

// suiteConfig is the behaviour suite's view of engineOn's engine: it has
// every capability.
var suiteConfig = fstest.Config{
	Superuser: "root",
	MaxFile:   maxFile,
	ListLimit: namespace.DefaultConfig().ListLimit,
	Defaults:  &meta.ServerDefaults{Replication: 3, BlockSize: 128 << 20, InlineThreshold: maxFile},
	Caps:      fstest.AllCaps(),
}

// engineOn runs the engine on st, superuser root, no user in any group.
func engineOn(t *testing.T, st store.Store) meta.FileSystem {
	t.Helper()
	cfg := namespace.DefaultConfig()
	cfg.Superuser = "root"
	cfg.Groups = func(string) []string { return nil }
	cfg.InlineThreshold = maxFile
	cfg.DefaultReplication = 3
	eng, err := namespace.New(st, cfg)
	if err != nil {
		_ = st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = eng.Close()
		_ = st.Close()
	})
	return eng
}

// TestFileSystemPebble runs the behaviour suite against the engine on Pebble.
func TestFileSystemPebble(t *testing.T) {
	fstest.Run(t, suiteConfig, func(t *testing.T) meta.FileSystem {
		st, err := pebblestore.Open(t.TempDir(), pebblestore.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		return engineOn(t, st)
	})
}

// TestFileSystemPostgres runs the behaviour suite against the engine on
// PostgreSQL, a fresh database per case.
func TestFileSystemPostgres(t *testing.T) {
	fstest.Run(t, suiteConfig, func(t *testing.T) meta.FileSystem {
		st, err := pgstore.Open(context.Background(), pgtest.DB(t), pgstore.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		return engineOn(t, st)
	})
}
