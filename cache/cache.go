package cache

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// Cache is one NameNode instance's metadata cache. Safe for concurrent use:
// lookups take a read lock and set a reference bit; fills, invalidations and
// evictions take the write lock. Nothing in it blocks on I/O.
type Cache struct {
	cfg  Config
	m    *metrics
	seed maphash.Seed

	// epoch counts invalidations (fill.go): a fill remembers it at Begin,
	// and the invalidation tables say, per slot, the epoch of the latest
	// invalidation that covered it.
	epoch atomic.Uint64

	mu struct {
		sync.RWMutex
		entries []entry
		free    int32             // free entry slots, linked by next
		keys    map[uint64]int32  // keyHash(parent, name) → slot
		ids     map[uint64]int32  // inode id → slot
		attrs   map[uint64]Attrs  // inode id → hot attributes (attrs.go), of cached entries only
		content map[uint64][]byte // inode id → a small file's bytes (content.go), of entries with attrs only
		pages   []page
		freePg  int32
		stack   []int32 // dropLocked's scratch
		hand    int     // CLOCK hands
		pgHand  int
		bytes   int64
		nEnt    int
		nPages  int

		// Owners and groups are few: an entry keeps their index. The table
		// never shrinks and is not counted against the budget: a cluster
		// has hundreds of users, not millions.
		users   []string
		userIdx map[string]uint32

		inv invalidations // fill.go
	}
}

// Stats is a snapshot of what the cache holds.
type Stats struct {
	Bytes   int64 // counted against Config.MaxBytes
	Entries int
	Pages   int
}

// New returns an empty cache.
func New(cfg Config) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Cache{cfg: cfg, seed: maphash.MakeSeed()}
	c.mu.free, c.mu.freePg = -1, -1
	c.mu.keys = make(map[uint64]int32)
	c.mu.ids = make(map[uint64]int32)
	c.mu.attrs = make(map[uint64]Attrs)
	c.mu.content = make(map[uint64][]byte)
	c.mu.userIdx = make(map[string]uint32)
	c.mu.inv.init()
	m, err := newMetrics(cfg.Registerer, c)
	if err != nil {
		return nil, err
	}
	c.m = m
	return c, nil
}

// Stats returns what the cache holds now.
func (c *Cache) Stats() Stats {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return Stats{Bytes: c.mu.bytes, Entries: c.mu.nEnt, Pages: c.mu.nPages}
}

// keyHash is the hash of an inode row's key (parent id, name): it indexes
// the entries and picks the key's slot in the invalidation table.
func (c *Cache) keyHash(parent uint64, name string) uint64 {
	var x uint64
	if c.cfg.HashSeed != 0 {
		x = fixedHash(c.cfg.HashSeed, name)
	} else {
		x = maphash.String(c.seed, name)
	}
	x ^= parent * 0x9e3779b97f4a7c15
	return x ^ x>>31
}

// fixedHash is FNV-1a over name from a seed, finished with a multiply and
// shift so that the top bits (keySlot) depend on every byte: the hash of
// Config.HashSeed, slower than maphash but the same in every run.
func fixedHash(seed uint64, name string) uint64 {
	x := seed ^ 0xcbf29ce484222325
	for i := 0; i < len(name); i++ {
		x = (x ^ uint64(name[i])) * 0x100000001b3
	}
	x *= 0xff51afd7ed558ccd
	return x ^ x>>33
}

func touch(ref *uint32) {
	if atomic.LoadUint32(ref) == 0 { // a hot entry's line is not written on every hit
		atomic.StoreUint32(ref, 1)
	}
}

// lookupLocked returns the slot of (parent, name), or -1. Read lock held.
func (c *Cache) lookupLocked(parent uint64, name string) int32 {
	return c.lookupHashLocked(c.keyHash(parent, name), parent, name)
}

// lookupHashLocked is lookupLocked given the key's hash h.
func (c *Cache) lookupHashLocked(h, parent uint64, name string) int32 {
	i, ok := c.mu.keys[h]
	if !ok {
		return -1
	}
	if e := &c.mu.entries[i]; e.parent != parent || e.name() != name {
		return -1 // another key of the same hash
	}
	return i
}

func (c *Cache) decodeLocked(e *entry, n *Inode) {
	decodeBlob(e, n)
	n.Owner, n.Group = c.mu.users[e.owner], c.mu.users[e.group]
}

// Get returns the cached row keyed (parent, name).
func (c *Cache) Get(parent uint64, name string) (n Inode, ok bool) {
	h := c.keyHash(parent, name)
	c.mu.RLock()
	if i := c.lookupHashLocked(h, parent, name); i >= 0 {
		e := &c.mu.entries[i]
		touch(&e.ref)
		c.decodeLocked(e, &n)
		ok = true
	}
	c.mu.RUnlock()
	if ok {
		c.m.hitEntry.add(h, 1)
	} else {
		c.m.missEntry.add(h, 1)
	}
	return n, ok
}

// Resolve looks up a path from the root: names are its components ("/a/b"
// is ["a", "b"]). It appends to dst the root's row and then the row of each
// component in turn, and stops at the first component that is not cached or
// whose parent is not a directory, so the rows returned are the longest
// cached prefix of the path (none if the root is not cached). All of them
// come from one consistent state of the cache. A full answer is
// len(names)+1 rows; anything shorter is one miss, and the caller reads the
// rest from the store (a fill beginning with the last row returned).
func (c *Cache) Resolve(names []string, dst []Inode) []Inode {
	c.mu.RLock()
	dst, h := c.resolveLocked(names, dst)
	c.mu.RUnlock()
	c.countResolve(h, len(names), dst)
	return dst
}

// resolveLocked is Resolve under the read lock; it also returns the hash of
// the last key looked up, which picks the stripe of the hit counters.
func (c *Cache) resolveLocked(names []string, dst []Inode) ([]Inode, uint64) {
	parent, name := store.RootParentID, ""
	var h uint64
	for k := -1; k < len(names); k++ {
		if k >= 0 {
			name = names[k]
		}
		h = c.keyHash(parent, name)
		i := c.lookupHashLocked(h, parent, name)
		if i < 0 {
			break
		}
		e := &c.mu.entries[i]
		touch(&e.ref)
		var n Inode
		c.decodeLocked(e, &n)
		dst = append(dst, n)
		if e.typ != uint8(meta.TypeDir) {
			break
		}
		parent = e.id
	}
	return dst, h
}

// countResolve counts the hits and the miss of a resolution of n names that
// found rows (the rows appended to dst by this resolution are its tail).
func (c *Cache) countResolve(h uint64, n int, rows []Inode) {
	found := min(len(rows), n+1)
	c.m.hitEntry.add(h, uint64(found))
	if found < n+1 && (found == 0 || rows[len(rows)-1].Type == meta.TypeDir) {
		c.m.missEntry.add(h, 1)
	}
}

// Listing returns the cached page of directory dir that starts after
// cursor ("" for the first page). The bytes belong to the cache: read only.
func (c *Cache) Listing(dir uint64, cursor string) ([]byte, bool) {
	data, _, ok := c.listing(dir, cursor)
	return data, ok
}

// ListingValue is Listing for a page installed by PutListingValue.
func (c *Cache) ListingValue(dir uint64, cursor string) (any, bool) {
	_, v, ok := c.listing(dir, cursor)
	return v, ok
}

// listing looks a page up under the read lock and counts the hit or miss.
func (c *Cache) listing(dir uint64, cursor string) (data []byte, val any, ok bool) {
	c.mu.RLock()
	if pg := c.pageLocked(dir, cursor); pg != nil {
		data, val, ok = pg.data, pg.val, true
	}
	c.mu.RUnlock()
	if ok {
		c.m.hitListing.add(dir, 1)
	} else {
		c.m.missListing.add(dir, 1)
	}
	return data, val, ok
}

// pageLocked returns the cached page of dir after cursor, or nil, and sets
// its reference bit. Read lock held.
func (c *Cache) pageLocked(dir uint64, cursor string) *page {
	i, found := c.mu.ids[dir]
	if !found {
		return nil
	}
	for p := c.mu.entries[i].pages; p >= 0; p = c.mu.pages[p].next {
		if pg := &c.mu.pages[p]; pg.cursor == cursor {
			touch(&pg.ref)
			return pg
		}
	}
	return nil
}

// PutPath installs rows read from the store by a fill that began with t
// (Begin, before the read). rows[0] is the root's row or a row whose parent
// directory is cached; each later row is a child of the one before it. It
// installs rows in order and stops at the first that the fill-race rule
// refuses (fill.go), whose parent is not cached, or that cannot be encoded,
// and returns how many it installed. A row already cached under its key is
// replaced (its cached children stay: they are keyed by the id, which does
// not change).
func (c *Cache) PutPath(t Token, rows ...Inode) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k := range rows {
		if !c.installLocked(t, &rows[k]) {
			break
		}
		n++
	}
	c.evictLocked()
	return n
}

// Put installs one row: PutPath with one row.
func (c *Cache) Put(t Token, row Inode) bool { return c.PutPath(t, row) == 1 }

// PutListing installs a page of directory dir's listing, read by a fill that
// began with t, starting after cursor. The directory's own row must be
// cached (the page goes when it goes). The cache keeps data: the caller must
// not change it afterwards.
func (c *Cache) PutListing(t Token, dir uint64, cursor string, data []byte) bool {
	return c.putPage(t, dir, cursor, data, nil, 0)
}

// PutListingValue is PutListing for a page the caller keeps as a Go value
// rather than bytes (the engine keeps decoded listing pages: a hit then
// copies a slice, where bytes would be decoded entry by entry). The value
// must be immutable from now on: every hit returns it, to concurrent
// readers. size is what it counts against the budget.
func (c *Cache) PutListingValue(t Token, dir uint64, cursor string, v any, size int64) bool {
	return c.putPage(t, dir, cursor, nil, v, size)
}

func (c *Cache) putPage(t Token, dir uint64, cursor string, data []byte, val any, size int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.mu.ids[dir]
	if !ok || c.mu.entries[i].typ != uint8(meta.TypeDir) {
		return false
	}
	if !c.mayFillLocked(t, 0, false, dir) {
		c.m.fillsDropped.Inc()
		return false
	}
	e := &c.mu.entries[i]
	for p := e.pages; p >= 0; p = c.mu.pages[p].next {
		if pg := &c.mu.pages[p]; pg.cursor == cursor {
			c.mu.bytes -= pageCost(pg)
			pg.data, pg.val, pg.valSize = data, val, size
			c.mu.bytes += pageCost(pg)
			c.evictLocked()
			return true
		}
	}
	p := c.allocPageLocked()
	pg := &c.mu.pages[p]
	*pg = page{dir: i, next: e.pages, prev: -1, cursor: cursor, data: data, val: val, valSize: size}
	if e.pages >= 0 {
		c.mu.pages[e.pages].prev = p
	}
	e.pages = p
	c.mu.bytes += pageCost(pg)
	c.mu.nPages++
	c.evictLocked()
	return true
}

func (c *Cache) userLocked(s string) uint32 {
	if i, ok := c.mu.userIdx[s]; ok {
		return i
	}
	i := uint32(len(c.mu.users))
	c.mu.users = append(c.mu.users, s)
	c.mu.userIdx[s] = i
	return i
}

// installLocked installs one row of a fill begun at t. Write lock held.
func (c *Cache) installLocked(t Token, n *Inode) bool {
	if !encodable(n) {
		return false
	}
	up := int32(-1)
	if n.Parent != store.RootParentID || n.Name != "" {
		p, ok := c.mu.ids[n.Parent]
		if !ok || c.mu.entries[p].typ != uint8(meta.TypeDir) {
			return false // the parent is not cached: nothing could reach or invalidate it
		}
		up = p
	}
	h := c.keyHash(n.Parent, n.Name)
	if !c.mayFillLocked(t, h, true, n.ID) {
		c.m.fillsDropped.Inc()
		return false
	}
	if i, ok := c.mu.keys[h]; ok {
		e := &c.mu.entries[i]
		if e.parent == n.Parent && e.name() == n.Name && e.id == n.ID {
			c.mu.bytes -= entryCost(e)
			encodeBlob(e, n)
			e.owner, e.group = c.userLocked(n.Owner), c.userLocked(n.Group)
			c.mu.bytes += entryCost(e)
			touch(&e.ref)
			return true
		}
		c.dropLocked(i) // another inode under this key now, or another key of this hash
	}
	if i, ok := c.mu.ids[n.ID]; ok {
		c.dropLocked(i) // the inode under another key: it moved since
	}
	if up >= 0 && c.mu.entries[up].typ == 0 {
		return false // the drops above took the parent (a cycle in what was read)
	}
	i := c.allocLocked()
	e := &c.mu.entries[i]
	// A new entry starts with its bit clear: one the hand reaches before any
	// lookup used it goes first (a fill that is never read again, such as a
	// scan's, does not push out what lookups use).
	*e = entry{up: up, child: -1, next: -1, prev: -1, pages: -1}
	encodeBlob(e, n)
	e.owner, e.group = c.userLocked(n.Owner), c.userLocked(n.Group)
	if up >= 0 {
		p := &c.mu.entries[up]
		e.next = p.child
		if p.child >= 0 {
			c.mu.entries[p.child].prev = i
		}
		p.child = i
	}
	c.mu.keys[h] = i
	c.mu.ids[n.ID] = i
	c.mu.bytes += entryCost(e)
	c.mu.nEnt++
	return true
}

func (c *Cache) allocLocked() int32 {
	if i := c.mu.free; i >= 0 {
		c.mu.free = c.mu.entries[i].next
		return i
	}
	c.mu.entries = append(c.mu.entries, entry{})
	return int32(len(c.mu.entries) - 1)
}

func (c *Cache) allocPageLocked() int32 {
	if p := c.mu.freePg; p >= 0 {
		c.mu.freePg = c.mu.pages[p].next
		return p
	}
	c.mu.pages = append(c.mu.pages, page{})
	return int32(len(c.mu.pages) - 1)
}

// dropLocked removes entry i with its cached subtree (every entry below it
// and their listing pages): a child is cached only while its parent is, so
// that a subtree invalidation finds everything below a directory by walking
// down from it. It returns the number of entries removed.
func (c *Cache) dropLocked(i int32) int {
	e := &c.mu.entries[i]
	// Unlink i from its parent's children.
	if e.prev >= 0 {
		c.mu.entries[e.prev].next = e.next
	} else if e.up >= 0 {
		c.mu.entries[e.up].child = e.next
	}
	if e.next >= 0 {
		c.mu.entries[e.next].prev = e.prev
	}
	n := 0
	stack := append(c.mu.stack[:0], i)
	defer func() { c.mu.stack = stack[:0] }()
	for len(stack) > 0 {
		j := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		e := &c.mu.entries[j]
		for ch := e.child; ch >= 0; ch = c.mu.entries[ch].next {
			stack = append(stack, ch)
		}
		c.dropPagesLocked(e)
		c.dropAttrsLocked(e)
		delete(c.mu.keys, c.keyHash(e.parent, e.name()))
		if k, ok := c.mu.ids[e.id]; ok && k == j {
			delete(c.mu.ids, e.id)
		}
		c.mu.bytes -= entryCost(e)
		c.mu.nEnt--
		*e = entry{next: c.mu.free}
		c.mu.free = j
		n++
	}
	return n
}

func (c *Cache) dropPagesLocked(e *entry) {
	for p := e.pages; p >= 0; {
		pg := &c.mu.pages[p]
		next := pg.next
		c.freePageLocked(p)
		p = next
	}
	e.pages = -1
}

// freePageLocked frees page p without unlinking it.
func (c *Cache) freePageLocked(p int32) {
	pg := &c.mu.pages[p]
	c.mu.bytes -= pageCost(pg)
	c.mu.nPages--
	*pg = page{dir: -1, next: c.mu.freePg}
	c.mu.freePg = p
}

// unlinkPageLocked removes page p from its directory's list and frees it.
func (c *Cache) unlinkPageLocked(p int32) {
	pg := &c.mu.pages[p]
	if pg.prev >= 0 {
		c.mu.pages[pg.prev].next = pg.next
	} else {
		c.mu.entries[pg.dir].pages = pg.next
	}
	if pg.next >= 0 {
		c.mu.pages[pg.next].prev = pg.prev
	}
	c.freePageLocked(p)
}
