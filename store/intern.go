package store

import "sync"

// names interns the owner and group strings of decoded rows: a namespace has
// few distinct users and groups and millions of inodes, so sharing them saves
// an allocation per name on every read. Bounded: past maxInterned distinct
// names, new ones are allocated as usual.
var names = struct {
	sync.RWMutex
	m map[string]string
}{m: make(map[string]string)}

const maxInterned = 4096

func internBytes(b []byte) string {
	names.RLock()
	s, ok := names.m[string(b)] // no allocation for the lookup
	names.RUnlock()
	if ok {
		return s
	}
	s = string(b)
	names.Lock()
	if len(names.m) < maxInterned {
		names.m[s] = s
	}
	names.Unlock()
	return s
}
