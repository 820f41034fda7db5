// Package cache is a NameNode instance's metadata cache: the
// inode rows that paths resolve through, and pages of directory
// listings, in memory, bounded by a byte budget, kept coherent by
// invalidations that the coherence protocol delivers.
//
// It sits above the store seam: it caches decoded rows, not a backend's
// bytes, so it behaves the same over Pebble and PostgreSQL.
//
// # Keys
//
// An entry is keyed as its row in the store is: (parent id, name). That is
// also the key a write locks, the key routing hashes (the parent directory's
// id), and the key an invalidation names, so the key that routes an
// operation, the key that owns its cache entries and the key that receives
// their invalidations are one (λFS's prototype routed by parent path but
// invalidated by parent inode id, and could miss an invalidation). Paths are
// not keys: Resolve walks a path component by component from the root, one
// hash lookup each, under one read lock, with no store round trip.
//
// Because ids never change and a rename rewrites one row, a rename of a
// directory invalidates two keys (the old and the new), not a prefix: the
// rows below keep their keys. The cache still drops what it holds below the
// old key (an entry's children are cached only while it is, so that a
// subtree invalidation can find them by walking down), and they refill
// under the new path as they are used.
//
// # What an entry holds
//
// Only what resolution and permission checks need (Inode): id, type,
// permission bits, owner, group, extended ACL, symlink target, the xattr
// flag and the subtree-lock flag. Not a directory's entry count, times or
// quota usage, nor a file's length or lease: those change on every create
// in the directory or write to the file, and keeping them here would make
// every such write invalidate every cached path through the directory.
// Those hot attributes are a second kind of value (Attrs), keyed by inode
// id, kept only while the inode's entry is and invalidated on their own
// (AttrsOf): a create in a directory invalidates its Attrs and its listing,
// and no path through it. Listings, whose entries carry both, are pages the
// caller encodes (bytes, or an immutable Go value), cached per directory
// and invalidated per directory (ListingOf). Look reads a path, the hot
// attributes of its last row and a listing page under one read lock.
//
// An entry takes about 80 bytes in a slab (no pointer but its strings, so
// a million entries are not a million objects for the collector) plus its
// name, symlink target and ACL in one string, plus its slots in two
// indexes; owners and groups are interned (TestMemoryPerEntry measures the
// whole).
//
// # Use
//
//	rows := c.Resolve(names, nil)           // longest cached prefix of the path
//	if len(rows) < len(names)+1 {
//	    t := c.Begin()                      // before reading the store
//	    read := ...                         // the rest of the path, from the store
//	    c.PutPath(t, read...)               // refused if an invalidation raced it
//	}
//
//	h := c.Hold(cache.Key(p, name))         // when a writer's INV arrives
//	ack()
//	...                                     // the writer commits
//	h.Release()                             // when it says it committed (or aborted)
//
// fill.go states the fill-race rule and why invalidations are holds.
package cache
