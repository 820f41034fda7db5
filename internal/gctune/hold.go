package gctune

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// heapHold is the process's one hold: the memory limit is the process's
// too, so holds taken by several servers in one process (tests) must share
// one count and one saved limit.
var heapHold struct {
	mu    sync.Mutex
	n     int   // holds not yet released
	saved int64 // the limit before the first hold; -1: not lowered
}

// HoldHeap keeps the Go runtime's memory from growing by more than margin
// bytes over what it holds now (memory/classes/total minus what was
// returned to the operating system), until every hold is released: the
// first hold lowers the soft memory limit (debug.SetMemoryLimit) to that,
// unless the limit in force is lower already, and the last release puts
// the limit back. Under the limit the collector runs earlier and the
// scavenger returns free pages, instead of the heap growing to its GOGC
// goal. Holds may be taken concurrently and nest; release must be called
// once (a second call does nothing). margin <= 0 takes no hold.
//
// A hold is for work of bounded length whose garbage would otherwise grow
// the heap for good (a recursive delete's); every goroutine of the process
// pays its collections meanwhile.
func HoldHeap(margin int64) (release func()) {
	if margin <= 0 {
		return func() {}
	}
	h := &heapHold
	h.mu.Lock()
	h.n++
	if h.n == 1 {
		h.saved = -1
		s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
		metrics.Read(s)
		if s[0].Value.Kind() == metrics.KindUint64 && s[1].Value.Kind() == metrics.KindUint64 {
			held := int64(s[0].Value.Uint64() - s[1].Value.Uint64())
			limit := held + margin
			if limit < debug.SetMemoryLimit(-1) {
				h.saved = debug.SetMemoryLimit(limit)
			}
		}
	}
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.n--
			if h.n == 0 && h.saved >= 0 {
				debug.SetMemoryLimit(h.saved)
				h.saved = -1
			}
		})
	}
}
