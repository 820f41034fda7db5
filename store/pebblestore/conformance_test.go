package pebblestore

import (
	"testing"

	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, dir string) store.Store {
		opts := DefaultOptions()
		opts.CacheSize = 8 << 20
		opts.MemTableSize = 4 << 20
		st, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}
