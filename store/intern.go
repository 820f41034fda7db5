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
// Lookups read an immutable table through an atomic pointer: every inode
// decode does two, from every core, and a shared lock's reader count would
// bounce between the cores on each of them. A new name copies the table
// (rare: users and groups are few). The table's first names are also kept in
// a short array that a lookup compares before hashing: in most namespaces a
// handful of owners and groups (the superuser and its group first) are on
// nearly every row.
var names struct {
	mu sync.Mutex // serializes the copies
	t  atomic.Pointer[internTable]
}

type internTable struct {
	first [4]string // the first names interned, compared before m is hashed
	m     map[string]string
}

const maxInterned = 4096

func internBytes(b []byte) string {
	if t := names.t.Load(); t != nil {
		for _, s := range &t.first {
			if s == string(b) { // no allocation for the comparison
				return s
			}
		}
		if s, ok := t.m[string(b)]; ok { // nor for the lookup
			return s
		}
	}
	s := string(b)
	names.mu.Lock()
	defer names.mu.Unlock()
	old := names.t.Load()
	t := &internTable{}
	if old != nil {
		if cur, ok := old.m[s]; ok {
			return cur // added meanwhile
		}
		if len(old.m) >= maxInterned {
			return s
		}
		t.first = old.first
		t.m = maps.Clone(old.m)
	} else {
		t.m = make(map[string]string, 1)
	}
	if n := len(t.m); n < len(t.first) {
		t.first[n] = s
	}
	t.m[s] = s
	names.t.Store(t)
	return s
}
