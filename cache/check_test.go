package cache

import (
	"fmt"

	"github.com/nimbus-fs/nimbus/meta"
)

// check verifies the cache's invariants: the indexes and the slab agree,
// every entry but the root's hangs under its cached parent directory, the
// pages under their directory, and the byte count is the sum of the costs.
func (c *Cache) check() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	live, free, withAttrs := 0, 0, 0
	var bytes int64
	for i := range c.mu.entries {
		e := &c.mu.entries[i]
		if e.typ == 0 {
			continue
		}
		live++
		bytes += entryCost(e)
		if _, ok := c.mu.attrs[e.id]; ok != (e.flags&fAttrs != 0) {
			return fmt.Errorf("entry %d (id %d): attrs flag %v, in the attrs map %v", i, e.id, e.flags&fAttrs != 0, ok)
		}
		if e.flags&fAttrs != 0 {
			bytes += AttrsOverhead
			withAttrs++
		}
		if j, ok := c.mu.keys[c.keyHash(e.parent, e.name())]; !ok || j != int32(i) {
			return fmt.Errorf("entry %d (%d, %q) not in the key index", i, e.parent, e.name())
		}
		if j, ok := c.mu.ids[e.id]; !ok || j != int32(i) {
			return fmt.Errorf("entry %d (id %d) not in the id index", i, e.id)
		}
		if e.up < 0 {
			if e.parent != 0 || e.name() != "" {
				return fmt.Errorf("entry %d (%d, %q) has no parent", i, e.parent, e.name())
			}
		} else {
			p := &c.mu.entries[e.up]
			if p.typ != uint8(meta.TypeDir) || p.id != e.parent {
				return fmt.Errorf("entry %d (%d, %q) under slot %d, not its parent", i, e.parent, e.name(), e.up)
			}
			found := false
			for ch := p.child; ch >= 0; ch = c.mu.entries[ch].next {
				if ch == int32(i) {
					found = true
				}
			}
			if !found {
				return fmt.Errorf("entry %d not among its parent's children", i)
			}
		}
		for p := e.pages; p >= 0; p = c.mu.pages[p].next {
			if c.mu.pages[p].dir != int32(i) {
				return fmt.Errorf("page %d in the list of entry %d names %d", p, i, c.mu.pages[p].dir)
			}
		}
	}
	for i := c.mu.free; i >= 0; i = c.mu.entries[i].next {
		free++
	}
	if live != c.mu.nEnt || live != len(c.mu.keys) || live != len(c.mu.ids) || live+free != len(c.mu.entries) {
		return fmt.Errorf("%d live, %d free of %d slots; nEnt %d, keys %d, ids %d",
			live, free, len(c.mu.entries), c.mu.nEnt, len(c.mu.keys), len(c.mu.ids))
	}
	if withAttrs != len(c.mu.attrs) {
		return fmt.Errorf("%d entries with hot attributes, %d in the attrs map", withAttrs, len(c.mu.attrs))
	}
	pages := 0
	for p := range c.mu.pages {
		pg := &c.mu.pages[p]
		if pg.dir < 0 {
			continue
		}
		pages++
		bytes += pageCost(pg)
		if d := &c.mu.entries[pg.dir]; d.typ != uint8(meta.TypeDir) {
			return fmt.Errorf("page %d of a slot that is not a directory", p)
		}
	}
	if pages != c.mu.nPages || bytes != c.mu.bytes {
		return fmt.Errorf("%d pages (counted %d), %d bytes (counted %d)", pages, c.mu.nPages, bytes, c.mu.bytes)
	}
	if c.mu.bytes > c.cfg.MaxBytes {
		return fmt.Errorf("%d bytes over the budget %d", c.mu.bytes, c.cfg.MaxBytes)
	}
	return nil
}
