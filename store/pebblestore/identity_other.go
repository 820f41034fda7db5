//go:build !linux

package pebblestore

// watchDirEvents: without inotify, only the periodic check
// (Options.IdentityCheckInterval) notices a removed directory.
func (s *Store) watchDirEvents() (func(), error) { return func() {}, nil }
