package store

import (
	"sync"
	"sync/atomic"
	"time"
)

// KeyMarker is implemented by a single-process store (SingleProcess) that
// keeps marks on keys in memory for every user of the store in the process.
// Such a store sees every transaction on it, so a mark set before a
// transaction takes a key's lock is seen by any transaction that takes the
// lock after it.
type KeyMarker interface {
	KeyMarks() *KeyMarks
}

// KeyMarks is a set of marked keys, each kept for a while after it was last
// marked. Safe for concurrent use. The zero KeyMarks is empty and ready.
//
// The namespace marks the key of a request record before a resubmission of
// the request takes its lock (namespace/once.go): a first submission that
// holds the lock and finds the key unmarked knows that no resubmission has
// written the record, without reading the store.
type KeyMarks struct {
	n  atomic.Int64 // len(mu.m): Marked's fast path while nothing is marked
	mu struct {
		sync.Mutex
		m      map[string]time.Time // key -> when last marked
		pruned time.Time
	}
}

// Mark marks key at now, and forgets the marks older than keep.
func (k *KeyMarks) Mark(key []byte, now time.Time, keep time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.mu.m == nil {
		k.mu.m = make(map[string]time.Time)
	}
	k.mu.m[string(key)] = now
	if now.Sub(k.mu.pruned) > keep/4 {
		for s, at := range k.mu.m {
			if now.Sub(at) > keep {
				delete(k.mu.m, s)
			}
		}
		k.mu.pruned = now
	}
	k.n.Store(int64(len(k.mu.m)))
}

// Marked reports whether key is marked (an expired mark not yet forgotten
// counts: a mark errs on the side of being there).
func (k *KeyMarks) Marked(key []byte) bool {
	if k.n.Load() == 0 {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.mu.m[string(key)]
	return ok
}
