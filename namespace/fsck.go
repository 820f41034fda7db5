package namespace

import (
	"context"
	"fmt"
	"io"

	"github.com/nimbus-fs/nimbus/blocks"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// maxProblems bounds the report; a badly broken store would otherwise flood it.
const maxProblems = 1000

// Fsck walks the namespace in the store and checks its invariants:
//   - every inode row is reachable from the root exactly once (no orphans, no
//     cycles, no inode id used twice), and every parent is a directory;
//   - every directory's entry count matches its entries;
//   - every quota directory's usage matches its subtree;
//   - every file's content chunks cover exactly its written bytes, and no
//     chunk belongs to anything else;
//   - files under construction and lease rows match one to one;
//   - ACLs decode and are well formed (checked with every inode row), only
//     directories have a default ACL, and extended-attribute rows belong to
//     a reachable inode whose flag says it has some, have a namespace
//     prefix, and an inode with the flag has at least one;
//   - with block storage: every block row has its replica, every replica a
//     row, lengths and stamps agree, and every finalized replica reads back
//     with valid checksums (fsck reads all block data).
//
// Each directory is read under a shared lock, so a running server may be
// checked; quota usage under concurrent writes can be reported as off by what
// was being written.
func (e *Engine) Fsck(ctx context.Context) (*meta.FsckReport, error) {
	f := &fsck{e: e, rep: &meta.FsckReport{}, seen: make(map[uint64]string), keys: make(map[uint64]string), files: make(map[uint64]*store.Inode), xattrs: make(map[uint64]int)}
	if err := f.run(ctx); err != nil {
		return nil, err
	}
	return f.rep, nil
}

type fsck struct {
	e     *Engine
	rep   *meta.FsckReport
	seen  map[uint64]string       // inode id -> path
	keys  map[uint64]string       // inode id -> the row key it was reached by
	files map[uint64]*store.Inode // reachable files by id
	// xattrs counts the attribute rows of the reachable inodes whose
	// flag says they have some.
	xattrs map[uint64]int
	// flagged holds the reachable directories with a subtree flag, by id:
	// each has its row in the subtree operation table, and no row is
	// without its directory.
	flagged map[uint64]*store.Inode
}

func (f *fsck) problem(format string, args ...any) {
	if len(f.rep.Problems) < maxProblems {
		f.rep.Problems = append(f.rep.Problems, fmt.Sprintf(format, args...))
	} else if len(f.rep.Problems) == maxProblems {
		f.rep.Problems = append(f.rep.Problems, "... more problems not listed")
	}
}

func (f *fsck) run(ctx context.Context) error {
	rootKey := store.InodeKey(store.RootParentID, "")
	txn, err := f.e.st.Begin(ctx)
	if err != nil {
		return err
	}
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: rootKey}})
	txn.Rollback()
	if err != nil {
		return err
	}
	if vals[0] == nil {
		f.problem("the root inode is missing")
		return nil
	}
	var root store.Inode
	if err := store.DecodeInode(rootKey, vals[0], &root); err != nil {
		f.problem("root: %v", err)
		return nil
	}
	if _, err := f.walk(ctx, &root, meta.RootPath); err != nil {
		return err
	}
	if err := f.orphans(ctx); err != nil {
		return err
	}
	if err := f.content(ctx); err != nil {
		return err
	}
	if err := f.blockRows(ctx); err != nil {
		return err
	}
	if err := f.xattrRows(ctx); err != nil {
		return err
	}
	if err := f.subtreeRows(ctx); err != nil {
		return err
	}
	return f.leases(ctx)
}

// blockRows checks that block rows belong to block files, are numbered
// without gaps and add up to each closed file's length, and, when the engine
// has block storage, that every row has its replica and every replica a row.
func (f *fsck) blockRows(ctx context.Context) error {
	txn, err := f.e.st.Begin(ctx)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	rows := make(map[uint64]*store.Block) // block id -> row
	sum := make(map[uint64]int64)         // file id -> bytes in its blocks
	next := make(map[uint64]uint32)       // file id -> next expected index
	start, end := store.AllBlocksRange()
	err = txn.Scan(ctx, start, end, 0, func(k, v []byte) bool {
		b := new(store.Block)
		if err := store.DecodeBlock(k, v, b); err != nil {
			f.problem("%v", err)
			return true
		}
		f.rep.Blocks++
		n := f.files[b.File]
		switch {
		case n == nil:
			f.problem("block %d belongs to no reachable file (inode %d)", b.ID, b.File)
		case !n.Blocks:
			f.problem("%s: block %d, but the file is kept inline", f.seen[b.File], b.ID)
		case b.Index != next[b.File]:
			f.problem("%s: block number %d where %d was expected", f.seen[b.File], b.Index, next[b.File])
		}
		next[b.File] = b.Index + 1
		sum[b.File] += b.Length
		rows[b.ID] = b
		return true
	})
	if err != nil {
		return err
	}
	for id, n := range f.files {
		if n.Blocks && !n.UnderConstruction() && sum[id] != n.Length {
			f.problem("%s: blocks hold %d bytes, the file %d", f.seen[id], sum[id], n.Length)
		}
	}
	if f.e.blocks == nil {
		if len(rows) > 0 && f.e.cfg.DataNodes == nil {
			f.problem("%d block rows, but the engine has no block storage to check them against", len(rows))
		}
		return nil
	}
	have := make(map[uint64]bool)
	err = f.e.blocks.Report(ctx, func(r blocks.Replica) error {
		b := rows[r.ID.Block]
		switch {
		case b == nil:
			f.problem("orphaned block replica %s: no file refers to it", r.ID)
			return nil
		case r.ID.GenStamp != b.GenStamp && !(r.State == blocks.BeingWritten):
			f.problem("%s: block replica %s, the row has generation stamp %d", f.seen[b.File], r.ID, b.GenStamp)
		case b.Complete && r.State == blocks.Finalized && r.Length != b.Length:
			f.problem("%s: block %d holds %d bytes, its row %d", f.seen[b.File], b.ID, r.Length, b.Length)
		case b.Complete && r.State == blocks.Finalized:
			// Read it through: every chunk's CRC32C is verified.
			if err := f.verify(ctx, r.ID); err != nil {
				f.problem("%s: block %d is corrupt: %v", f.seen[b.File], b.ID, err)
			}
		}
		have[r.ID.Block] = true
		return nil
	})
	if err != nil {
		return err
	}
	for id, b := range rows {
		if !have[id] {
			f.problem("%s: block %d is missing from block storage", f.seen[b.File], id)
		}
	}
	return nil
}

// walk checks the subtree of n and returns its usage.
func (f *fsck) walk(ctx context.Context, n *store.Inode, path string) (usage, error) {
	var use usage
	use.add(n)
	if prev, dup := f.seen[n.ID]; dup {
		f.problem("%s: inode id %d is also %s", path, n.ID, prev)
		return use, nil
	}
	f.seen[n.ID] = path
	f.keys[n.ID] = string(n.Key())
	f.rep.Inodes++
	if n.XAttrs {
		f.xattrs[n.ID] = 0
	}
	if n.SubtreeOwner != 0 {
		if n.Type != meta.TypeDir {
			f.problem("%s: a subtree flag on a %s", path, n.Type)
		}
		if f.flagged == nil {
			f.flagged = make(map[uint64]*store.Inode)
		}
		c := *n
		f.flagged[n.ID] = &c
	}
	if n.ACL != "" {
		if ext, err := store.DecodeACL(n.ACL); err != nil {
			f.problem("%s: %v", path, err)
		} else if n.Type != meta.TypeDir && len(ext) > 0 && ext[len(ext)-1].Scope == meta.AclDefault {
			f.problem("%s: a default ACL on a %s", path, n.Type)
		} else if _, err := meta.ValidateAcl(meta.LogicalAcl(n.Perm, ext)); err != nil {
			f.problem("%s: ACL %v", path, err)
		}
	}
	switch n.Type {
	case meta.TypeFile:
		f.rep.Files++
		f.rep.Bytes += n.Length
		f.files[n.ID] = n
		if n.Length > n.Written {
			f.problem("%s: length %d exceeds the %d bytes written", path, n.Length, n.Written)
		}
		if !n.UnderConstruction() && n.Length != n.Written {
			f.problem("%s: closed file with length %d but %d bytes written", path, n.Length, n.Written)
		}
		return use, nil
	case meta.TypeSymlink:
		f.rep.Symlinks++
		return use, nil
	}
	f.rep.Directories++
	if len(f.seen) > 1<<26 {
		return use, fmt.Errorf("fsck: namespace too large to check in memory")
	}
	// Read the entries under a shared lock so that the count and the entries agree.
	txn, err := f.e.st.Begin(ctx)
	if err != nil {
		return use, err
	}
	if _, err := txn.Read(ctx, []store.ReadReq{{Key: n.Key(), Mode: store.Shared}}); err != nil {
		txn.Rollback()
		return use, err
	}
	var kids []*store.Inode
	start, end := store.ChildrenRange(n.ID, "")
	err = txn.Scan(ctx, start, end, 0, func(k, v []byte) bool {
		c := new(store.Inode)
		if err := store.DecodeInode(k, v, c); err != nil {
			f.problem("%s: %v", path, err)
			return true
		}
		kids = append(kids, c)
		return true
	})
	// The count is re-read under the lock: the caller's copy may predate it.
	vals, rerr := txn.Read(ctx, []store.ReadReq{{Key: n.Key()}})
	txn.Rollback()
	if err != nil {
		return use, err
	}
	if rerr != nil {
		return use, rerr
	}
	cur := *n
	if vals[0] != nil {
		if err := store.DecodeInode(n.Key(), vals[0], &cur); err != nil {
			f.problem("%s: %v", path, err)
		}
	}
	// A recursive delete under way (or left by a crash, to be finished at
	// start) has removed entries that its directory's count and the usage
	// above still hold: its row says how many.
	var pending store.SubtreeOp
	if cur.SubtreeOwner != 0 {
		if err := f.pendingOf(ctx, cur.ID, &pending); err != nil {
			return use, err
		}
		use.files += pending.PendingInodes
		use.space += pending.PendingSpace
	}
	if int64(len(kids))+pending.PendingEntries != cur.Children {
		f.problem("%s: records %d entries but has %d", path, cur.Children, len(kids))
	}
	for _, c := range kids {
		if err := ctx.Err(); err != nil {
			return use, err
		}
		cu, err := f.walk(ctx, c, meta.JoinPath(path, c.Name))
		if err != nil {
			return use, err
		}
		use.files += cu.files
		use.dirs += cu.dirs
		use.links += cu.links
		use.length += cu.length
		use.space += cu.space
	}
	if cur.HasQuota() && (cur.NsUsed != use.inodes() || cur.SpaceUsed != use.space) {
		f.problem("%s: quota usage recorded as %d inodes and %d bytes, counted %d inodes and %d bytes",
			path, cur.NsUsed, cur.SpaceUsed, use.inodes(), use.space)
	}
	return use, nil
}

// verify reads a finalized replica through, which checks every checksum.
func (f *fsck) verify(ctx context.Context, id blocks.ID) error {
	rc, err := f.e.blocks.Read(ctx, id, 0, -1)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = io.Copy(io.Discard, rc)
	return err
}

// orphans finds inode rows the walk did not reach.
func (f *fsck) orphans(ctx context.Context) error {
	txn, err := f.e.st.Begin(ctx)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	start, end := store.AllInodesRange()
	return txn.Scan(ctx, start, end, 0, func(k, v []byte) bool {
		var n store.Inode
		if err := store.DecodeInode(k, v, &n); err != nil {
			f.problem("%s: %v", store.FormatKey(k), err)
			return true
		}
		if p, ok := f.seen[n.ID]; !ok {
			f.problem("orphan inode %d %q under missing or unreachable parent %d", n.ID, n.Name, n.Parent)
		} else if f.keys[n.ID] != string(k) {
			f.problem("inode %d at %s has a second row %s", n.ID, p, store.FormatKey(k))
		}
		return true
	})
}

// content checks that content chunks belong to files and cover them.
func (f *fsck) content(ctx context.Context) error {
	txn, err := f.e.st.Begin(ctx)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	c := int64(f.e.cfg.ChunkSize)
	covered := make(map[uint64]int64) // file id -> bytes covered so far, in order
	start, end := store.AllDataRange()
	err = txn.Scan(ctx, start, end, 0, func(k, v []byte) bool {
		id, off, ok := store.DecodeDataKey(k)
		if !ok {
			f.problem("malformed content key %q", k)
			return true
		}
		f.rep.DataChunks++
		n := f.files[id]
		switch {
		case n == nil:
			f.problem("content chunk at %d belongs to no file (inode %d)", off, id)
		case off != covered[id]:
			f.problem("%s: content chunk at %d, expected one at %d", f.seen[id], off, covered[id])
		case n.Blocks:
			f.problem("%s: content chunk at %d, but the file is kept in blocks", f.seen[id], off)
		case off+int64(len(v)) > n.Written:
			f.problem("%s: content chunk at %d runs past the %d bytes written", f.seen[id], off, n.Written)
		case int64(len(v)) != c && off+int64(len(v)) != n.Written:
			f.problem("%s: short content chunk at %d (%d bytes)", f.seen[id], off, len(v))
		}
		covered[id] = off + int64(len(v))
		return true
	})
	if err != nil {
		return err
	}
	for id, n := range f.files {
		if !n.Blocks && covered[id] != n.Written {
			f.problem("%s: content covers %d of the %d bytes written", f.seen[id], covered[id], n.Written)
		}
	}
	return nil
}

// leases checks that lease rows and files under construction match.
func (f *fsck) leases(ctx context.Context) error {
	txn, err := f.e.st.Begin(ctx)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	leased := make(map[uint64]bool)
	start, end := store.AllLeasesRange()
	err = txn.Scan(ctx, start, end, 0, func(k, v []byte) bool {
		var l store.Lease
		if err := store.DecodeLease(k, v, &l); err != nil {
			f.problem("%v", err)
			return true
		}
		leased[l.ID] = true
		n := f.files[l.ID]
		switch {
		case n == nil:
			f.problem("lease of %s on inode %d, which is not a reachable file", describeHolder(l.Holder), l.ID)
		case n.LeaseHolder != l.Holder:
			f.problem("%s: lease row names %q, the file %q", f.seen[l.ID], l.Holder, n.LeaseHolder)
		case n.Parent != l.Parent || n.Name != l.Name:
			f.problem("%s: lease row points at (%d, %q)", f.seen[l.ID], l.Parent, l.Name)
		case l.Path != f.seen[l.ID]:
			f.problem("%s: lease row records the path %s", f.seen[l.ID], l.Path)
		}
		return true
	})
	if err != nil {
		return err
	}
	for id, n := range f.files {
		if n.UnderConstruction() && !leased[id] {
			f.problem("%s: under construction by %s without a lease row", f.seen[id], describeHolder(n.LeaseHolder))
		}
	}
	return nil
}

// xattrRows checks that extended-attribute rows belong to reachable inodes
// flagged as having some, and that every flagged inode has one.
func (f *fsck) xattrRows(ctx context.Context) error {
	txn, err := f.e.st.Begin(ctx)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	start, end := store.AllXAttrsRange()
	err = txn.Scan(ctx, start, end, 0, func(k, v []byte) bool {
		id, name, ok := store.DecodeXAttrKey(k)
		if !ok {
			f.problem("malformed xattr key %q", k)
			return true
		}
		n, flagged := f.xattrs[id]
		switch {
		case !flagged && f.seen[id] == "":
			f.problem("xattr %s belongs to no inode (inode %d)", name, id)
		case !flagged:
			f.problem("%s: xattr %s, but the inode is not flagged as having any", f.seen[id], name)
		default:
			f.xattrs[id] = n + 1
		}
		if norm, _, err := xattrName("fsck", "", name); err != nil || norm != name {
			f.problem("inode %d: xattr name %q without a lowercase namespace prefix", id, name)
		}
		return true
	})
	if err != nil {
		return err
	}
	for id, n := range f.xattrs {
		if n == 0 {
			f.problem("%s: flagged as having xattrs, but has none", f.seen[id])
		}
	}
	return nil
}

// pendingOf reads the subtree operation row of directory id into op (left
// zero when there is none).
func (f *fsck) pendingOf(ctx context.Context, id uint64, op *store.SubtreeOp) error {
	txn, err := f.e.st.Begin(ctx)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: store.SubtreeOpKey(id)}})
	if err != nil || vals[0] == nil {
		return err
	}
	if err := store.DecodeSubtreeOp(store.SubtreeOpKey(id), vals[0], op); err != nil {
		f.problem("%v", err)
		*op = store.SubtreeOp{}
	}
	return nil
}

// subtreeRows checks the subtree operation table against the flags: each
// row names a reachable directory, by the key it has, flagged by the same
// owner, and each flag has its row. A flag of a previous incarnation is not
// a problem: the engine clears it at start or when met (subtree.go).
func (f *fsck) subtreeRows(ctx context.Context) error {
	txn, err := f.e.st.Begin(ctx)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	rows := make(map[uint64]bool)
	start, end := store.AllSubtreeOpsRange()
	err = txn.Scan(ctx, start, end, 0, func(k, v []byte) bool {
		var op store.SubtreeOp
		if err := store.DecodeSubtreeOp(k, v, &op); err != nil {
			f.problem("%v", err)
			return true
		}
		id, _ := store.DecodeSubtreeOpKey(k)
		rows[id] = true
		n := f.flagged[id]
		switch {
		case n == nil && f.seen[id] == "":
			f.problem("subtree operation on %s: its directory (inode %d) is gone", op.Path, id)
		case n == nil:
			f.problem("%s: a subtree operation row, but no flag", f.seen[id])
		case n.SubtreeOwner != op.Owner:
			f.problem("%s: flagged by instance %d, its operation row says %d", f.seen[id], n.SubtreeOwner, op.Owner)
		case n.Parent != op.Parent || n.Name != op.Name:
			f.problem("%s: flagged, but its operation row names inode(%d,%q)", f.seen[id], op.Parent, op.Name)
		}
		return true
	})
	if err != nil {
		return err
	}
	for id := range f.flagged {
		if !rows[id] {
			f.problem("%s: a subtree flag without its operation row", f.seen[id])
		}
	}
	return nil
}
