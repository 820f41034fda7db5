//go:build linux

package pebblestore

import (
	"fmt"
	"os"
	"syscall"
)

// watchDirEvents has the kernel report deletions and renames in the store's
// directory, and the directory's own removal (inotify), and checks the
// identity on each: rm -rf of the data directory fails the store as soon as
// it removes the identity file or the directory, not at the next periodic
// check, which narrows the time in which commits into the unlinked log are
// acknowledged from the check interval to the time rm takes. Free on the
// commit path; Pebble's own deletions (obsolete tables and logs) cost one
// check each. It returns the function that stops the watch.
func (s *Store) watchDirEvents() (func(), error) {
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("pebblestore: inotify: %w", err)
	}
	const mask = syscall.IN_DELETE | syscall.IN_DELETE_SELF | syscall.IN_MOVED_FROM | syscall.IN_MOVE_SELF | syscall.IN_UNMOUNT
	if _, err := syscall.InotifyAddWatch(fd, s.dir, mask); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("pebblestore: inotify watch %s: %w", s.dir, err)
	}
	// Non-blocking, so os.File reads it through the runtime's poller and
	// Close wakes the reader.
	f := os.NewFile(uintptr(fd), "inotify:"+s.dir)
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		buf := make([]byte, 4096) // the events' names do not matter: any is a reason to look
		for {
			if _, err := f.Read(buf); err != nil {
				return // closed by Close
			}
			if s.checkDir("watch data directory") {
				return
			}
		}
	}()
	return func() { f.Close() }, nil
}
