package pebblestore

import "github.com/nimbus-fs/nimbus/store"

var (
	_ store.SingleProcess = (*Store)(nil)
	_ store.KeyMarker     = (*Store)(nil)
)

// SingleProcess implements store.SingleProcess: Pebble locks its directory,
// so no other process commits to the store.
func (s *Store) SingleProcess() {}

// KeyMarks implements store.KeyMarker: one set for every user of the store
// in this process (several engines on one store, in tests, share it).
func (s *Store) KeyMarks() *store.KeyMarks { return &s.marks }
