package cache

import "github.com/nimbus-fs/nimbus/meta"

// The fill-race rule, in one place.
//
// A fill reads the store without the cache's lock and installs later. In
// between, a writer may change what it read: it invalidates (INV) every
// instance that may cache the row, waits for their ACKs, then commits. If
// the fill installed its read after that, the cache would hold the old value
// until the entry happened to go: stale, for good. So:
//
//  1. A fill calls Begin before it reads the store and keeps the Token.
//  2. Every invalidation moves the epoch on and records the new epoch in the
//     slots of the invalidation table that its target covers: the slot of
//     the key's hash (Key), of the inode id (Inode, Listing, Attrs), or, for a
//     subtree, one cache-wide epoch (Subtree: the cache cannot tell which
//     rows below a directory a fill in flight is carrying).
//  3. An install is refused if any slot its row maps to (its key's, its
//     id's, the subtree epoch) holds an epoch later than the fill's token,
//     or is held (below).
//
// Slots are shared by many keys (a hash table without keys), so a refusal
// may be needless, never missing: a fill that is refused is only a fill lost.
//
// Holds. The writer's INV arrives before its commit. A fill that begins
// after the INV but reads the store before the commit (read committed: the
// writer's exclusive lock does not stop it) reads the old value, and no
// invalidation arrives after it began: step 3 alone would install it. So an
// invalidation is a Hold, from the INV until the writer has committed or
// aborted: while it is held, nothing its targets cover installs, and its
// Release moves the epoch on again, which refuses every fill begun before
// the commit. Invalidate is a Hold released at once: enough only where
// fills read with a shared lock (they then wait for the writer's commit).
//
// Config.DisableFillCheck turns the rule off, for the tests that show it is
// needed.

// invSlots is the size of the invalidation table: with 4096 slots a fill is
// refused needlessly when one of the keys invalidated during its read shares
// its slot, about (invalidations during a fill)/4096.
const invSlots = 4096

// Token is a fill's start: the invalidation epoch when it began.
type Token struct{ epoch uint64 }

// Begin starts a fill: call it before reading the store, and pass the token
// to the Put that installs what was read.
func (c *Cache) Begin() Token { return Token{c.epoch.Load()} }

type invalidations struct {
	key, id         [invSlots]uint64 // epoch of the latest invalidation covering the slot
	keyHeld, idHeld [invSlots]int32  // holds now covering the slot
	tree            uint64           // epoch of the latest subtree release
	treeHeld        map[uint64]int32 // directories under a subtree hold
}

func (v *invalidations) init() { v.treeHeld = make(map[uint64]int32) }

func idSlot(id uint64) uint64 { return (id * 0x9e3779b97f4a7c15) >> 52 } // top 12 bits: 4096 slots
func keySlot(h uint64) uint64 { return h >> 52 }

// mayFillLocked is the rule: may a fill begun at t install a row with key
// hash h (hasKey: a resolution entry) and id id (a listing page: the
// directory's id)? Write lock held.
func (c *Cache) mayFillLocked(t Token, h uint64, hasKey bool, id uint64) bool {
	if c.cfg.DisableFillCheck {
		return true
	}
	v := &c.mu.inv
	if hasKey {
		if s := keySlot(h); v.key[s] > t.epoch || v.keyHeld[s] > 0 {
			return false
		}
	}
	if s := idSlot(id); v.id[s] > t.epoch || v.idHeld[s] > 0 {
		return false
	}
	if v.tree > t.epoch {
		return false
	}
	// A directory under a subtree hold cannot be installed, so nothing below
	// it can be (a child needs its parent cached).
	return len(v.treeHeld) == 0 || v.treeHeld[id] == 0
}

// Kind is what an invalidation target names.
type Kind uint8

const (
	// KindKey names the row keyed (Parent, Name): the row a write changes,
	// deletes, renames away or creates. A directory's entry goes with its
	// cached subtree.
	KindKey Kind = iota + 1
	// KindInode names the row of inode ID, whatever its key.
	KindInode
	// KindListing names the cached listing pages of directory ID: its entries
	// or their attributes changed.
	KindListing
	// KindSubtree names directory ID and everything below it: one target for
	// a whole subtree operation (chmod -R, chown -R, recursive delete, set
	// quota), never one per inode.
	KindSubtree
	// KindAttrs names the hot attributes of inode ID (attrs.go), and
	// nothing else: a create in a directory changes its entry count and
	// times, not its entry, so no cached path through it goes.
	KindAttrs
)

// Target is one thing a write invalidates.
type Target struct {
	Kind   Kind
	Parent uint64 // KindKey
	Name   string // KindKey
	ID     uint64 // the others
}

// Key targets the row keyed (parent, name).
func Key(parent uint64, name string) Target { return Target{Kind: KindKey, Parent: parent, Name: name} }

// InodeID targets the row of inode id, whatever its key: its entry with
// what goes with it (its hot attributes, its listing pages, its cached
// subtree).
func InodeID(id uint64) Target { return Target{Kind: KindInode, ID: id} }

// AttrsOf targets the hot attributes of inode id alone.
func AttrsOf(id uint64) Target { return Target{Kind: KindAttrs, ID: id} }

// ListingOf targets the listing pages of directory dir.
func ListingOf(dir uint64) Target { return Target{Kind: KindListing, ID: dir} }

// Subtree targets directory dir and everything cached below it.
func Subtree(dir uint64) Target { return Target{Kind: KindSubtree, ID: dir} }

// Hold is an invalidation in force: from the writer's INV until its commit
// or abort, nothing its targets cover is installed.
type Hold struct {
	c        *Cache
	targets  []Target
	released bool
}

// Hold drops what the targets cover now and refuses fills of it until
// Release. Call it when the INV arrives; Release when the writer has
// committed or aborted. Holds of one key may overlap (two writers). The
// cache keeps targets until Release.
func (c *Cache) Hold(targets ...Target) *Hold {
	c.mu.Lock()
	c.holdLocked(targets)
	c.mu.Unlock()
	return &Hold{c: c, targets: targets}
}

// Release ends the hold: fills that begin from now on may install, and
// every fill begun before is refused. A second Release does nothing.
func (h *Hold) Release() {
	c := h.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.released {
		return
	}
	h.released = true
	c.releaseLocked(h.targets)
}

// Invalidate drops what the targets cover and refuses every fill begun
// before it: a Hold released at once.
func (c *Cache) Invalidate(targets ...Target) {
	c.mu.Lock()
	c.holdLocked(targets)
	c.releaseLocked(targets)
	c.mu.Unlock()
}

func (c *Cache) holdLocked(targets []Target) {
	e := c.epoch.Add(1)
	v := &c.mu.inv
	for _, t := range targets {
		switch t.Kind {
		case KindKey:
			s := keySlot(c.keyHash(t.Parent, t.Name))
			v.key[s], v.keyHeld[s] = e, v.keyHeld[s]+1
			if i := c.lookupLocked(t.Parent, t.Name); i >= 0 {
				c.dropLocked(i)
			}
			c.m.invKey.Inc()
		case KindInode, KindListing, KindAttrs:
			s := idSlot(t.ID)
			v.id[s], v.idHeld[s] = e, v.idHeld[s]+1
			if i, ok := c.mu.ids[t.ID]; ok {
				switch t.Kind {
				case KindInode:
					c.dropLocked(i)
				case KindListing:
					c.dropPagesLocked(&c.mu.entries[i])
				case KindAttrs:
					c.dropAttrsLocked(&c.mu.entries[i])
				}
			}
			switch t.Kind {
			case KindInode:
				c.m.invInode.Inc()
			case KindListing:
				c.m.invListing.Inc()
			case KindAttrs:
				c.m.invAttrs.Inc()
			}
		case KindSubtree:
			s := idSlot(t.ID)
			v.id[s], v.idHeld[s] = e, v.idHeld[s]+1
			v.tree = e
			v.treeHeld[t.ID]++
			if i, ok := c.mu.ids[t.ID]; ok && c.mu.entries[i].typ == uint8(meta.TypeDir) {
				c.dropLocked(i)
			}
			c.m.invPrefix.Inc()
		}
	}
}

func (c *Cache) releaseLocked(targets []Target) {
	e := c.epoch.Add(1)
	v := &c.mu.inv
	for _, t := range targets {
		switch t.Kind {
		case KindKey:
			s := keySlot(c.keyHash(t.Parent, t.Name))
			v.key[s], v.keyHeld[s] = e, v.keyHeld[s]-1
		case KindInode, KindListing, KindAttrs:
			s := idSlot(t.ID)
			v.id[s], v.idHeld[s] = e, v.idHeld[s]-1
		case KindSubtree:
			s := idSlot(t.ID)
			v.id[s], v.idHeld[s] = e, v.idHeld[s]-1
			v.tree = e
			if v.treeHeld[t.ID]--; v.treeHeld[t.ID] == 0 {
				delete(v.treeHeld, t.ID)
			}
		}
	}
}
