package namespace

import (
	"context"
	"slices"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// Stat implements meta.FileSystem.
// Locks: none; every component is read committed. One row read is atomic, so
// the result is a state the inode had between the call and the return.
func (e *Engine) Stat(ctx context.Context, u meta.User, path string) (*meta.FileStatus, error) {
	const op = "stat"
	p, err := clean(op, path)
	if err != nil {
		return nil, err
	}
	var out *meta.FileStatus
	cached := 0
	if e.cache != nil {
		var ok bool
		ok, cached, err = e.readCached(op, p, u, false, "", func(t *tx, r *resolved, v *cache.View) (bool, error) {
			if _, err := t.existing(op, r); err != nil {
				return true, err
			}
			if !v.HasAttrs {
				return false, nil
			}
			full := cache.ToStore(&v.Rows[len(v.Rows)-1], &v.Attrs)
			out = status(p, &full)
			return true, nil
		})
		if ok {
			return out, err
		}
	}
	if err := meta.CheckOwner(ctx); err != nil {
		return nil, err
	}
	var tk cache.Token
	var read *resolved
	fill := false
	if e.cache != nil {
		fill = e.serving()
		tk = e.cache.Begin()
	}
	err = e.run(ctx, op, p, u, func(t *tx) error {
		rs, err := t.resolve(ctx, want{path: p})
		if err != nil {
			return err
		}
		n, err := t.existing(op, rs[0])
		if err != nil {
			return err
		}
		out = status(p, n)
		read = rs[0]
		return nil
	})
	if err == nil && read != nil && fill && e.serving() {
		e.fillPath(tk, read, cached, true)
	}
	return out, err
}

// List implements meta.FileSystem.
// Locks: the directory shared, so that no entry is added or removed while a
// page is read.
func (e *Engine) List(ctx context.Context, u meta.User, dir, startAfter string, limit int) (*meta.Listing, error) {
	return e.list(ctx, u, dir, startAfter, limit, false)
}

// ListShared implements meta.SharedLister: List, answering a cached page
// with the page itself, and caching a page read from the store without
// copying it, since the caller will not change it.
func (e *Engine) ListShared(ctx context.Context, u meta.User, dir, startAfter string, limit int) (*meta.Listing, error) {
	return e.list(ctx, u, dir, startAfter, limit, true)
}

// list is List; shared says that the caller does not change the listing
// (ListShared).
func (e *Engine) list(ctx context.Context, u meta.User, dir, startAfter string, limit int, shared bool) (*meta.Listing, error) {
	const op = "list"
	p, err := clean(op, dir)
	if err != nil {
		return nil, err
	}
	if limit <= 0 || limit > e.cfg.ListLimit {
		limit = e.cfg.ListLimit
	}
	var out *meta.Listing
	cached := 0
	if e.cache != nil {
		var ok bool
		ok, cached, err = e.readCached(op, p, u, true, pageCursor(limit, startAfter), func(t *tx, r *resolved, v *cache.View) (bool, error) {
			n, err := t.existing(op, r)
			if err != nil {
				return true, err
			}
			if n.Type != meta.TypeDir {
				if !v.HasAttrs {
					return false, nil
				}
				full := cache.ToStore(&v.Rows[len(v.Rows)-1], &v.Attrs)
				out = listOfOne(p, &full, startAfter)
				return true, nil
			}
			if err := t.require(op, p, n, permR|permX); err != nil {
				return true, err
			}
			if !v.HasPage {
				return false, nil
			}
			out = v.Page.(*cachedPage).listing(p, shared)
			return true, nil
		})
		if ok {
			return out, err
		}
	}
	if err := meta.CheckOwner(ctx); err != nil {
		return nil, err
	}
	var tk cache.Token
	var read *resolved
	var readDir *store.Inode
	fill := false
	if e.cache != nil {
		fill = e.serving()
		tk = e.cache.Begin()
	}
	err = e.run(ctx, op, p, u, func(t *tx) error {
		rs, err := t.resolve(ctx, want{path: p, last: store.Shared})
		if err != nil {
			return err
		}
		n, err := t.existing(op, rs[0])
		if err != nil {
			return err
		}
		read, readDir = rs[0], n
		if n.Type != meta.TypeDir {
			out = listOfOne(p, n, startAfter)
			return nil
		}
		if err := t.require(op, p, n, permR|permX); err != nil {
			return err
		}
		size := min(int64(limit), n.Children)
		l := &meta.Listing{Entries: make([]meta.FileStatus, 0, size)}
		// The page's paths are slices of one string (meta.PagePaths).
		prefix := meta.JoinPath(p, "")
		var paths meta.PagePaths
		paths.Grow(int(size), len(prefix)+24)
		more := false
		err = t.children(ctx, n.ID, startAfter, limit+1, func(c *store.Inode) bool {
			if len(l.Entries) == limit {
				more = true
				return false
			}
			l.Entries = append(l.Entries, meta.FileStatus{})
			fillStatus(&l.Entries[len(l.Entries)-1], "", c)
			paths.Add(prefix, c.Name)
			return true
		})
		if err != nil {
			return err
		}
		paths.SetPaths(l.Entries)
		if more {
			// Exact on the first page; later pages would need a count of the
			// entries before the cursor, so they give a lower bound.
			l.Remaining = 1
			if startAfter == "" {
				l.Remaining = max(1, n.Children-int64(len(l.Entries)))
			}
		}
		out = l
		return nil
	})
	if err == nil && read != nil && fill && e.serving() {
		e.fillList(tk, read, cached, readDir, p, startAfter, limit, out, shared)
	}
	return out, err
}

// listOfOne is the listing of a path that is not a directory: its own
// status on the first page, nothing after.
func listOfOne(p string, n *store.Inode, startAfter string) *meta.Listing {
	if startAfter != "" {
		return &meta.Listing{}
	}
	return &meta.Listing{Entries: []meta.FileStatus{*status(p, n)}}
}

// fillList fills the cache after a listing read from the store: the path,
// and the page (a copy when the caller owns out, out's entries when it
// shares them: shared) or, for a file, its hot attributes.
func (e *Engine) fillList(tk cache.Token, r *resolved, cached int, n *store.Inode, p, startAfter string, limit int, out *meta.Listing, shared bool) {
	if n.Type != meta.TypeDir {
		e.fillPath(tk, r, cached, true)
		return
	}
	if !e.fillPath(tk, r, cached, false) || !e.owns(listingRoute(n.ID)) {
		return
	}
	entries := out.Entries // shared: capped when given out (cachedPage.listing)
	if !shared {
		entries = slices.Clone(entries)
	}
	pg := &cachedPage{dir: p, entries: entries, remaining: out.Remaining}
	e.cache.PutListingValue(tk, n.ID, pageCursor(limit, startAfter), pg, pg.size())
}

// Read implements meta.FileSystem.
// Locks: the file shared, so that content and length are read together.
func (e *Engine) Read(ctx context.Context, u meta.User, path string, offset, length int64) ([]byte, error) {
	const op = "read"
	p, err := clean(op, path)
	if err != nil {
		return nil, err
	}
	if offset < 0 || length < 0 {
		return nil, meta.Errorf(op, p, meta.ErrInvalidArgument, "negative offset %d or length %d", offset, length)
	}
	var out []byte
	cached := 0
	if e.cache != nil {
		var ok bool
		ok, cached, err = e.readCached(op, p, u, false, "", func(t *tx, r *resolved, v *cache.View) (bool, error) {
			n, err := t.existing(op, r)
			if err != nil {
				return true, err
			}
			if err := checkFile(op, p, n); err != nil {
				return true, err
			}
			if err := t.require(op, p, n, permR); err != nil {
				return true, err
			}
			e.cache.CountContent(n.ID, v.HasContent)
			if !v.HasContent || int64(len(v.Content)) != v.Attrs.Length || t.super && n.XAttrs {
				return false, nil
			}
			out = contentRange(v.Content, offset, length)
			return true, nil
		})
		if ok {
			return out, err
		}
	}
	if err := meta.CheckOwner(ctx); err != nil {
		return nil, err
	}
	var tk cache.Token
	var read *resolved
	var file *store.Inode
	fill := false
	if e.cache != nil {
		fill = e.serving()
		tk = e.cache.Begin()
	}
	err = e.run(ctx, op, p, u, func(t *tx) error {
		rs, n, err := t.regularFile(ctx, op, p, store.Shared, permR)
		if err != nil {
			return err
		}
		if t.super && n.XAttrs {
			if err := t.readableBySuperuser(ctx, op, p, n); err != nil {
				return err
			}
		}
		if n.Blocks {
			out, err = t.readBlocks(ctx, p, n, offset, length, n.Length)
		} else {
			out, err = t.readContent(ctx, n, offset, length, n.Length)
		}
		read, file = rs, n
		return err
	})
	// A whole small file, complete, goes into the cache with its path and
	// hot attributes (cache/content.go: its bytes live and die with them).
	if err == nil && fill && file != nil && !file.Blocks && !file.UnderConstruction() && offset == 0 &&
		int64(len(out)) == file.Length && file.Length <= maxCachedContent && e.serving() {
		if e.fillPath(tk, read, cached, true) {
			e.cache.PutContent(tk, file.ID, slices.Clone(out))
		}
	}
	return out, err
}

// maxCachedContent is the largest file whose bytes the metadata cache
// keeps (the default inline threshold): a bigger one lives in blocks.
const maxCachedContent = 64 << 10

// contentRange returns a copy of up to length bytes of content from
// offset (empty past the end).
func contentRange(content []byte, offset, length int64) []byte {
	size := int64(len(content))
	if offset >= size || length == 0 {
		return []byte{}
	}
	return slices.Clone(content[offset:min(size, offset+length)])
}

// regularFile locks path in mode and checks that it is a regular file on
// which the caller has bits.
func (t *tx) regularFile(ctx context.Context, op, path string, mode store.Mode, bits meta.Perm) (*resolved, *store.Inode, error) {
	rs, err := t.resolve(ctx, want{path: path, last: mode})
	if err != nil {
		return nil, nil, err
	}
	n, err := t.existing(op, rs[0])
	if err != nil {
		return nil, nil, err
	}
	if err := checkFile(op, path, n); err != nil {
		return nil, nil, err
	}
	if err := t.require(op, path, n, bits); err != nil {
		return nil, nil, err
	}
	return rs[0], n, nil
}

// checkFile fails unless n is a regular file.
func checkFile(op, path string, n *store.Inode) error {
	switch n.Type {
	case meta.TypeDir:
		return meta.Errorf(op, path, meta.ErrIsDir, "")
	case meta.TypeSymlink:
		return meta.Errorf(op, path, meta.ErrUnresolvedLink, "%s is a symbolic link to %s", path, n.Symlink)
	}
	return nil
}

// readContent returns up to length bytes from offset of n's content, which is
// size bytes long; the caller holds a lock on n.
func (t *tx) readContent(ctx context.Context, n *store.Inode, offset, length, size int64) ([]byte, error) {
	if offset >= size || length == 0 {
		return []byte{}, nil
	}
	end := min(size, offset+length)
	c := int64(t.e.cfg.ChunkSize)
	first, last := offset/c, (end-1)/c
	reqs := make([]store.ReadReq, 0, last-first+1)
	for k := first; k <= last; k++ {
		reqs = append(reqs, store.ReadReq{Key: store.DataKey(n.ID, k*c)})
	}
	vals, err := t.st.Read(ctx, reqs)
	if err != nil {
		return nil, err
	}
	for i, r := range reqs {
		if v, ok := t.chunks[string(r.Key)]; ok {
			vals[i] = v
		}
	}
	out := make([]byte, 0, end-offset)
	for i, v := range vals {
		k := first + int64(i)
		lo, hi := max(offset, k*c)-k*c, min(end, (k+1)*c)-k*c
		if int64(len(v)) < hi {
			return nil, meta.Errorf("read", "", meta.ErrInternal,
				"content of inode %d is missing bytes [%d, %d)", n.ID, k*c+int64(len(v)), k*c+hi)
		}
		out = append(out, v[lo:hi]...)
	}
	return out, nil
}

// ContentSummary implements meta.FileSystem.
// Locks: the root of the summary shared; the subtree is read committed,
// directory by directory, so under concurrent changes below it the counts are
// those of a recent state of each directory (as in HDFS, which yields its lock
// while counting).
func (e *Engine) ContentSummary(ctx context.Context, u meta.User, path string) (*meta.ContentSummary, error) {
	const op = "content summary"
	p, err := clean(op, path)
	if err != nil {
		return nil, err
	}
	var out *meta.ContentSummary
	err = e.run(ctx, op, p, u, func(t *tx) error {
		rs, err := t.resolve(ctx, want{path: p, last: store.Shared})
		if err != nil {
			return err
		}
		n, err := t.existing(op, rs[0])
		if err != nil {
			return err
		}
		cs := &meta.ContentSummary{NsQuota: -1, SpaceQuota: -1}
		if n.Type == meta.TypeDir {
			cs.NsQuota, cs.SpaceQuota = n.NsQuota, n.SpaceQuota
		}
		u, err := t.usage(ctx, op, p, n, true)
		if err != nil {
			return err
		}
		cs.Length, cs.FileCount, cs.DirectoryCount = u.length, u.files, u.dirs
		cs.NsConsumed, cs.SpaceConsumed = u.inodes(), u.space
		out = cs
		return nil
	})
	return out, err
}

// usage counts the subtree rooted at n (n included).
type usage struct {
	files, dirs, links int64
	length, space      int64
}

func (u usage) inodes() int64 { return u.files + u.dirs + u.links }

func (u *usage) add(n *store.Inode) {
	switch n.Type {
	case meta.TypeDir:
		u.dirs++
	case meta.TypeSymlink:
		u.links++
	default:
		u.files++
		u.length += n.Length
		u.space += n.Written * int64(n.Replication)
	}
}

// usage walks the subtree of n breadth first with unlocked scans. With
// checkRX, every directory must grant read and search to the caller (HDFS's
// sub-access check).
func (t *tx) usage(ctx context.Context, op, path string, n *store.Inode, checkRX bool) (usage, error) {
	var u usage
	u.add(n)
	if n.Type != meta.TypeDir {
		return u, nil
	}
	type dir struct {
		id   uint64
		path string
	}
	queue := []dir{{n.ID, path}}
	if checkRX {
		if err := t.require(op, path, n, permR|permX); err != nil {
			return u, err
		}
	}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		var permErr error
		err := t.children(ctx, d.id, "", 0, func(c *store.Inode) bool {
			u.add(c)
			if c.Type == meta.TypeDir {
				cp := meta.JoinPath(d.path, c.Name)
				if checkRX {
					if permErr = t.require(op, cp, c, permR|permX); permErr != nil {
						return false
					}
				}
				queue = append(queue, dir{c.ID, cp})
			}
			return true
		})
		if err != nil {
			return u, err
		}
		if permErr != nil {
			return u, permErr
		}
	}
	return u, nil
}

// DefersOwnerCheck implements meta.DefersOwnerCheck: Stat, Read and List
// run the context's ownership check after their cache lookup, before they
// read the store.
func (e *Engine) DefersOwnerCheck() {}
