package pebblestore

import (
	"hash/maphash"
	"sync"
)

// unsyncedKeys counts, per key, the commits that wrote it and are visible
// but not yet synced (early lock release, txn.go). A transaction that read
// none of those keys saw nothing a crash could take back, so it need not
// wait for a sync when it ends: under a steady stream of writes, stats and
// reads of other rows do not pay for their fsyncs.
type unsyncedKeys struct {
	seed   maphash.Seed
	shards [64]unsyncedShard
}

type unsyncedShard struct {
	mu   sync.Mutex
	m    map[string]int
	peak int // the most keys m has held since it was made
}

// A shard holds a few keys at a time, but one commit can bring thousands (a
// recursive delete), and a Go map never shrinks: every later lookup would
// pay for the big map's size and for the tombstones its deletions leave. So
// a map that held more than smallUnsynced keys is replaced by a new one the
// next time it is empty, which under any load is soon.
const smallUnsynced = 64

func newUnsyncedKeys() *unsyncedKeys {
	u := &unsyncedKeys{seed: maphash.MakeSeed()}
	for i := range u.shards {
		u.shards[i].m = make(map[string]int)
	}
	return u
}

func (u *unsyncedKeys) shard(k []byte) *unsyncedShard {
	return &u.shards[maphash.Bytes(u.seed, k)%uint64(len(u.shards))]
}

// add records the keys of a commit about to become visible.
func (u *unsyncedKeys) add(keys []written) {
	for _, w := range keys {
		s := u.shard(w.key)
		s.mu.Lock()
		s.m[string(w.key)]++
		s.peak = max(s.peak, len(s.m))
		s.mu.Unlock()
	}
}

// remove forgets them once the commit is synced (or failed).
func (u *unsyncedKeys) remove(keys []written) {
	for _, w := range keys {
		s := u.shard(w.key)
		s.mu.Lock()
		if s.m[string(w.key)] <= 1 {
			delete(s.m, string(w.key))
			if len(s.m) == 0 && s.peak > smallUnsynced {
				s.m, s.peak = make(map[string]int), 0
			}
		} else {
			s.m[string(w.key)]--
		}
		s.mu.Unlock()
	}
}

// has reports whether a visible, unsynced commit wrote k.
func (u *unsyncedKeys) has(k []byte) bool {
	s := u.shard(k)
	s.mu.Lock()
	_, ok := s.m[string(k)]
	s.mu.Unlock()
	return ok
}
