package cache

// A small regular file's bytes are the cache's third kind of value (after
// resolution entries and listing pages, with hot attributes): a read of a
// file kept in the metadata store (one up to the namespace's inline
// threshold) answered from memory, as λFS's NameNodes serve small files
// from their caches. The bytes live and die with the inode's hot
// attributes: PutContent refuses them unless the attributes are cached,
// and every drop of the attributes (an AttrsOf, InodeID or Subtree
// invalidation, the entry's eviction) drops them. That is what makes them
// coherent without an invalidation target of their own: every write that
// changes a file's content changes its length or its modification time,
// so it invalidates AttrsOf(id) (AttrsChanged), and an overwrite makes a
// new inode. The engine fills only the content of a complete file (no
// lease holder: a file being written is not cached).

// ContentOverhead is what one cached content counts against the budget
// besides its bytes: the map slot, key and slice header.
const ContentOverhead = 64

// PutContent installs the bytes of file id, read from the store by a fill
// that began with t. The file's entry and hot attributes must be cached;
// the fill-race rule is the attributes' (an invalidation of the id since t
// refuses it). The cache keeps data: the caller must not change it.
func (c *Cache) PutContent(t Token, id uint64, data []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.mu.ids[id]
	if !ok || c.mu.entries[i].flags&fAttrs == 0 {
		return false
	}
	if !c.mayFillLocked(t, 0, false, id) {
		c.m.fillsDropped.Inc()
		return false
	}
	c.dropContentLocked(id)
	c.mu.content[id] = data
	c.mu.bytes += int64(len(data)) + ContentOverhead
	c.evictLocked()
	return true
}

// dropContentLocked forgets the bytes of file id, if cached.
func (c *Cache) dropContentLocked(id uint64) {
	if old, ok := c.mu.content[id]; ok {
		delete(c.mu.content, id)
		c.mu.bytes -= int64(len(old)) + ContentOverhead
	}
}

// CountContent counts a read that found (hit) or did not find the bytes
// of file id in a View (Look fetches them with the attributes; only a
// read asks for them).
func (c *Cache) CountContent(id uint64, hit bool) {
	if hit {
		c.m.hitContent.add(id, 1)
	} else {
		c.m.missContent.add(id, 1)
	}
}
