//go:build linux

package pebblestore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"unsafe"
)

// dirWatch has the kernel report (inotify) every removal and rename in the
// store's directory, and the directory's own removal or move, and judges
// each:
//
//   - a name the store removed or renamed itself (Pebble's obsolete tables
//     and logs, a recycled log; walCountingFS tells the watch before it
//     asks the kernel) is nothing;
//   - any other name removed or renamed away fails the store: the directory
//     is the store's alone, and `rm -rf` of it begins so;
//   - the directory removed, moved or unmounted, or events lost, makes the
//     store check its identity (identity.go).
//
// The events are judged in the background as they come, and also, before
// any commit is acknowledged, synchronously after every sync of the log
// (afterSync): the kernel queues the event of an unlink before the unlink
// returns, so a commit whose sync returned after a removal in the directory
// began is never acknowledged. That costs every log sync (not every commit:
// one sync covers a group of them) one read of the watch that finds nothing;
// docs/OPERATIONS.md has the measured cost (BenchmarkDirWatchAfterSync).
type dirWatch struct {
	s   *Store
	f   *os.File // the inotify descriptor, non-blocking
	raw syscall.RawConn

	// mu is held to read events and judge them, so that afterSync sees
	// every event queued before it ran judged when it returns.
	mu     sync.Mutex
	own    map[string]int // names the store is removing or renaming
	buf    [16 << 10]byte
	failed bool // the store failed on an event: nothing more to judge
}

// watchDirEvents starts watching the store's directory; start then judges
// events in the background. It returns nil and an error when the kernel
// will not watch.
func (s *Store) watchDirEvents() (*dirWatch, error) {
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("pebblestore: inotify: %w", err)
	}
	const mask = syscall.IN_DELETE | syscall.IN_DELETE_SELF | syscall.IN_MOVED_FROM | syscall.IN_MOVE_SELF | syscall.IN_UNMOUNT
	if _, err := syscall.InotifyAddWatch(fd, s.dir, mask); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("pebblestore: inotify watch %s: %w", s.dir, err)
	}
	// Non-blocking, so os.File waits for it through the runtime's poller
	// and Close wakes the waiter.
	w := &dirWatch{s: s, f: os.NewFile(uintptr(fd), "inotify:"+s.dir), own: map[string]int{}}
	if w.raw, err = w.f.SyscallConn(); err != nil {
		w.f.Close()
		return nil, fmt.Errorf("pebblestore: inotify watch %s: %w", s.dir, err)
	}
	return w, nil
}

// start judges events in the background until close.
func (w *dirWatch) start(s *Store) {
	if w == nil {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		// Read calls the func when the descriptor may be readable, and waits
		// again while it returns false; it returns once the file is closed.
		_ = w.raw.Read(func(fd uintptr) bool {
			w.drain(int(fd))
			return false
		})
	}()
}

// afterSync judges every event queued so far; walCountingFS runs it after
// each successful sync of the log, before Pebble acknowledges the commits
// that waited for that sync. Nil without a watch.
func (w *dirWatch) afterSync() {
	if w == nil {
		return
	}
	// Control fails once the file is closed: the store is closing.
	_ = w.raw.Control(func(fd uintptr) { w.drain(int(fd)) })
}

// drain reads and judges events until none is queued.
func (w *dirWatch) drain(fd int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		n, err := syscall.Read(fd, w.buf[:])
		if err != nil || n <= 0 {
			return // EAGAIN: nothing more; EBADF: closed
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&w.buf[off]))
			name := ""
			if ev.Len > 0 {
				b := w.buf[off+syscall.SizeofInotifyEvent : off+syscall.SizeofInotifyEvent+int(ev.Len)]
				for i, c := range b {
					if c == 0 {
						b = b[:i]
						break
					}
				}
				name = string(b)
			}
			off += syscall.SizeofInotifyEvent + int(ev.Len)
			w.judge(ev.Mask, name)
		}
	}
}

// judge acts on one event; w.mu is held.
func (w *dirWatch) judge(mask uint32, name string) {
	if w.failed {
		return
	}
	switch {
	case mask&(syscall.IN_DELETE|syscall.IN_MOVED_FROM) != 0 && name != "":
		if w.own[name] > 0 {
			w.own[name]--
			if w.own[name] == 0 {
				delete(w.own, name)
			}
			return
		}
		w.failed = true
		w.s.failStop("watch data directory", fmt.Errorf("%w: %s removed or renamed by another process",
			errDataDir, filepath.Join(w.s.dir, name)))
	default: // the directory itself, or events lost
		w.failed = w.s.checkDir("watch data directory")
	}
}

// expect tells the watch that the store is about to remove or rename name
// (a path in its directory); forget undoes it when that failed.
func (w *dirWatch) expect(path string) {
	if w == nil || filepath.Dir(path) != filepath.Clean(w.s.dir) {
		return
	}
	w.mu.Lock()
	w.own[filepath.Base(path)]++
	w.mu.Unlock()
}

func (w *dirWatch) forget(path string) {
	if w == nil || filepath.Dir(path) != filepath.Clean(w.s.dir) {
		return
	}
	name := filepath.Base(path)
	w.mu.Lock()
	if w.own[name] > 1 {
		w.own[name]--
	} else {
		delete(w.own, name)
	}
	w.mu.Unlock()
}

// close stops the watch; the background reader returns.
func (w *dirWatch) close() {
	if w == nil {
		return
	}
	if err := w.f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		w.s.log.Warn("closing the directory watch", "dir", w.s.dir, "err", err)
	}
}
