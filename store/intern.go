package store

import (
	"maps"
	"sync"
	"sync/atomic"
)

// names interns the owner and group strings of decoded rows: a namespace has
// few distinct users and groups and millions of inodes, so sharing them saves
// an allocation per name on every read. Bounded: past maxInterned distinct
// names, new ones are allocated as usual.
//
// Lookups read an immutable map through an atomic pointer: every inode decode
// does two, from every core, and a shared lock's reader count would bounce
// between the cores on each of them. A new name copies the map (rare: users
// and groups are few).
var names struct {
	mu sync.Mutex // serializes the copies
	m  atomic.Pointer[map[string]string]
}

const maxInterned = 4096

func internBytes(b []byte) string {
	if m := names.m.Load(); m != nil {
		if s, ok := (*m)[string(b)]; ok { // no allocation for the lookup
			return s
		}
	}
	s := string(b)
	names.mu.Lock()
	defer names.mu.Unlock()
	old := names.m.Load()
	if old != nil {
		if cur, ok := (*old)[s]; ok {
			return cur // added meanwhile
		}
		if len(*old) >= maxInterned {
			return s
		}
	}
	var m map[string]string
	if old == nil {
		m = make(map[string]string, 1)
	} else {
		m = maps.Clone(*old)
	}
	m[s] = s
	names.m.Store(&m)
	return s
}
