package pebblestore

import "github.com/nimbus-fs/nimbus/store"

var _ store.SingleProcess = (*Store)(nil)

// SingleProcess implements store.SingleProcess: Pebble locks its directory,
// so no other process commits to the store.
func (s *Store) SingleProcess() {}
