package webhdfs_test

import (
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/nimbus-fs/nimbus/bench/webhdfs"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/fstest"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
	gateway "github.com/nimbus-fs/nimbus/webhdfs"
)

// TestFileSystem runs the behaviour suite against the WebHDFS client
// through Nimbus's gateway over the engine on Pebble. WebHDFS has no open
// files (a CREATE or APPEND request writes and closes the file, and CREATE
// makes missing parents), so the suite's OpenFiles cases do not apply;
// everything else does. Errors keep their kind except where WebHDFS (as
// HDFS answers it) cannot tell kinds apart: see reports.
func TestFileSystem(t *testing.T) {
	caps := fstest.AllCaps()
	caps.OpenFiles = false
	caps.OwnUser = true // an empty user is the client's Config.User
	fstest.Run(t, fstest.Config{
		Superuser: "root",
		ListLimit: 0, // LISTSTATUS_BATCH pages by the gateway's ListBatch, not the engine's cap
		Defaults:  &meta.ServerDefaults{Replication: 3, BlockSize: 128 << 20},
		Caps:      caps,
		Reports:   reports,
	}, func(t *testing.T) meta.FileSystem {
		st, err := pebblestore.Open(t.TempDir(), pebblestore.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		cfg := namespace.DefaultConfig()
		cfg.Superuser = "root"
		cfg.Groups = func(string) []string { return nil }
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
		gcfg := gateway.DefaultConfig()
		gcfg.Superuser = "root"
		h, err := gateway.New(eng, gcfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		c, err := webhdfs.New(webhdfs.Config{Addr: srv.URL, User: "root", Conns: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	})
}

// reports is what WebHDFS, answering as HDFS does, reports in place of a
// kind: FileNotFoundException for a path under a file and for a directory
// where a file is wanted; a bare false from DELETE of the root (which the
// client reads as nothing to delete); a generic
// IOException (no kind) for an extended attribute that exists or is
// missing.
func reports(want error) []meta.Kind {
	switch {
	case errors.Is(want, meta.ErrNotDir), errors.Is(want, meta.ErrIsDir):
		return []meta.Kind{meta.KindNotFound}
	case errors.Is(want, meta.ErrInvalidArgument):
		return []meta.Kind{meta.KindNotFound}
	case errors.Is(want, meta.ErrExists):
		return []meta.Kind{meta.KindUnknown}
	case errors.Is(want, meta.ErrNotFound):
		return []meta.Kind{meta.KindUnknown}
	}
	return nil
}
