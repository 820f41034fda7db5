//go:build !linux

package pebblestore

// dirWatch: without inotify, only the periodic check
// (Options.IdentityCheckInterval) notices a removed directory, and a commit
// is acknowledged without a look at the directory.
type dirWatch struct{}

func (s *Store) watchDirEvents() (*dirWatch, error) { return nil, nil }

func (w *dirWatch) start(*Store)  {}
func (w *dirWatch) afterSync()    {}
func (w *dirWatch) expect(string) {}
func (w *dirWatch) forget(string) {}
func (w *dirWatch) close()        {}
