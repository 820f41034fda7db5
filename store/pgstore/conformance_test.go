package pgstore

import (
	"context"
	"os"
	"testing"

	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestConformance runs the seam's whole suite on a real PostgreSQL: the
// suite's directory stands for a database, so that its reopen tests find
// their rows again.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, dir string) store.Store {
		opts := DefaultOptions()
		opts.PoolSize = 16
		opts.ScanPage = 64 // the snapshot tests then cross pages
		st, err := Open(context.Background(), pgtest.DBFor(t, dir), opts)
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}
