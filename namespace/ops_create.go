package namespace

import (
	"context"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// Mkdirs implements meta.FileSystem.
// Locks: the deepest existing directory exclusive (it gains an entry), the
// path itself shared.
func (e *Engine) Mkdirs(ctx context.Context, u meta.User, dir string, perm meta.Perm) error {
	return e.mkdirs(ctx, u, dir, modes{perm: perm})
}

// MkdirsUnmasked implements meta.FileSystem. Locks: as Mkdirs.
func (e *Engine) MkdirsUnmasked(ctx context.Context, u meta.User, dir string, perm, unmasked meta.Perm) error {
	return e.mkdirs(ctx, u, dir, modes{perm: perm, unmasked: unmasked, hasUnmasked: true})
}

// modes is the mode a new inode is created with: perm, the mode after the
// client's umask, and, when hasUnmasked, the mode before it (HDFS's
// FsCreateModes), which a parent's default ACL filters instead of perm.
type modes struct {
	perm, unmasked meta.Perm
	hasUnmasked    bool
}

func (e *Engine) mkdirs(ctx context.Context, u meta.User, dir string, m modes) error {
	const op = "mkdirs"
	p, err := clean(op, dir)
	if err != nil {
		return err
	}
	if m.perm == 0 {
		m.perm = meta.DefaultDir
	}
	if err := checkModes(op, p, m); err != nil {
		return err
	}
	_, err = e.runOnce(ctx, op, p, u, func(t *tx) error {
		rs, err := t.resolve(ctx, want{path: p, last: store.Shared, parent: store.Exclusive})
		if err != nil {
			return err
		}
		r := rs[0]
		if n := r.last(); n != nil {
			if err := t.checkAncestors(op, r); err != nil {
				return err
			}
			if n.Type != meta.TypeDir {
				return meta.Errorf(op, p, meta.ErrExists, "a %s is in the way", n.Type)
			}
			return nil
		}
		_, err = t.makeParents(ctx, op, r, r.depth(), m)
		return err
	})
	return err
}

// checkModes refuses a mode with bits beyond PermMask, the unmasked one
// included: it would be stored as the mode of a child under a default ACL.
func checkModes(op, p string, m modes) error {
	if m.perm&^meta.PermMask != 0 {
		return meta.Errorf(op, p, meta.ErrInvalidArgument, "permission %o out of range", m.perm)
	}
	if m.hasUnmasked && m.unmasked&^meta.PermMask != 0 {
		return meta.Errorf(op, p, meta.ErrInvalidArgument, "unmasked permission %o out of range", m.unmasked)
	}
	return nil
}

// inherit gives the new inode n, created with modes m in parent, the
// parent's default ACL if it has one, as HDFS's
// FSDirectory.copyINodeDefaultAcl does with POSIX ACL inheritance on (its
// default): the default ACL filtered by the unmasked mode when the client
// sent one, else by n.Perm (the masked mode, HDFS before HDFS-6962). Without
// a default ACL n keeps n.Perm: the umask applies.
func (t *tx) inherit(parent, n *store.Inode, m modes) {
	if parent.ACL == "" {
		return
	}
	if !m.hasUnmasked {
		t.inheritAcl(parent, n)
		return
	}
	pext, err := store.DecodeACL(parent.ACL)
	if err != nil {
		return // checked when the row was decoded: cannot happen
	}
	if ext, perm, ok := meta.InheritAcl(pext, m.unmasked, n.Type == meta.TypeDir); ok {
		n.ACL, n.Perm = store.EncodeACL(ext), perm
	}
}

// makeParents creates the missing directories of r's chain up to index last
// (mkdirs: the path itself; create -p: its parent) and returns chain[last].
// The deepest existing directory gains the first new entry, so it must be
// locked exclusive: when it is not, the operation restarts with it locked.
// m is the mode of chain[r.depth()] (mkdirs); the implicit ancestors take
// m.perm with u+wx and without the sticky bit, as HDFS's addImplicitUwx, and
// m.unmasked as it is.
func (t *tx) makeParents(ctx context.Context, op string, r *resolved, last int, m modes) (*store.Inode, error) {
	j := r.end // the first missing component
	if r.chain[j] != nil {
		j++
	}
	for k := 0; k < j && k <= last; k++ {
		if d := r.chain[k]; d.Type != meta.TypeDir {
			sub := &resolved{path: r.path, comps: r.comps[:k+1], chain: r.chain[:k+2]}
			if err := t.checkAncestors(op, sub); err != nil {
				return nil, err
			}
			return nil, meta.Errorf(op, r.path, meta.ErrNotDir, "%s is a %s", r.prefix(k), d.Type)
		}
	}
	if j > last {
		return r.chain[last], nil // nothing to create
	}
	top := r.chain[j-1]
	above := &resolved{path: r.path, comps: r.comps[:j-1], chain: r.chain[:j]}
	if err := t.checkAncestors(op, above); err != nil {
		return nil, err
	}
	if err := t.require(op, r.prefix(j-1), top, permW|permX); err != nil {
		return nil, err
	}
	if t.mode(top) != store.Exclusive {
		return nil, t.needExclusive(top.Key())
	}
	if err := t.charge(op, r.path, r.chain[:j], int64(last-j+1), 0); err != nil {
		return nil, err
	}
	parent := top
	parent.Children++
	parent.Mtime = t.now
	t.put(parent)
	for k := j; k <= last; k++ {
		id, err := t.e.newID(ctx)
		if err != nil {
			return nil, err
		}
		// Implicit parents stay writable and searchable by the owner, as in HDFS.
		dp := (m.perm | 0o300) &^ meta.StickyBit
		if k == r.depth() {
			dp = m.perm
		}
		d := &store.Inode{Parent: parent.ID, Name: r.comps[k-1], ID: id, Type: meta.TypeDir,
			Perm: dp, Owner: t.user, Group: parent.Group, Mtime: t.now, Atime: t.now,
			NsQuota: -1, SpaceQuota: -1}
		t.inherit(parent, d, m)
		if k < last {
			d.Children = 1
		}
		t.create(d)
		r.chain[k] = d
		parent = d
	}
	r.end = last
	return parent, nil
}

// Create implements meta.FileSystem.
// Locks: the parent exclusive (it gains an entry), the file exclusive.
func (e *Engine) Create(ctx context.Context, u meta.User, path string, opts meta.CreateOptions) (*meta.FileStatus, error) {
	return e.create(ctx, "create", u, path, opts, nil, false)
}

var _ meta.FileCreator = (*Engine)(nil)

// CreateFile implements meta.FileCreator: create, write and close in one
// transaction and one commit. Locks: as Create.
func (e *Engine) CreateFile(ctx context.Context, u meta.User, path string, opts meta.CreateOptions, data []byte) (*meta.FileStatus, error) {
	if opts.Client == "" {
		opts.Client = "create-file" // the lease never outlives the transaction
	}
	return e.create(ctx, "create", u, path, opts, data, true)
}

func (e *Engine) create(ctx context.Context, op string, u meta.User, path string, opts meta.CreateOptions, data []byte, complete bool) (*meta.FileStatus, error) {
	p, err := clean(op, path)
	if err != nil {
		return nil, err
	}
	if p == meta.RootPath {
		return nil, meta.Errorf(op, p, meta.ErrExists, "the root is a directory")
	}
	if err := checkName(op, p, "client", opts.Client); err != nil {
		return nil, err
	}
	perm := opts.Perm
	if perm == 0 {
		perm = meta.DefaultFile
	}
	repl, bs := opts.Replication, opts.BlockSize
	if repl == 0 {
		repl = e.cfg.DefaultReplication
	}
	if bs == 0 {
		bs = e.cfg.DefaultBlockSize
	}
	m := modes{perm: perm, unmasked: opts.Unmasked, hasUnmasked: opts.HasUnmasked}
	if err := checkModes(op, p, m); err != nil {
		return nil, err
	}
	switch {
	case repl > e.cfg.MaxReplication:
		return nil, meta.Errorf(op, p, meta.ErrInvalidArgument, "replication %d above the maximum %d", repl, e.cfg.MaxReplication)
	case bs < 0:
		return nil, meta.Errorf(op, p, meta.ErrInvalidArgument, "block size %d", bs)
	case bs < e.cfg.MinBlockSize:
		// HDFS's words, and its limit: a tiny block size turns a small file
		// into a block file and a row per few bytes.
		return nil, meta.Errorf(op, p, meta.ErrInvalidArgument,
			"specified block size %d is less than configured minimum value %d (the server's --min-block-size)", bs, e.cfg.MinBlockSize)
	}
	var out *meta.FileStatus
	err = e.runOnceStatus(ctx, op, p, u, &out, func(t *tx) error {
		rs, err := t.resolve(ctx, want{path: p, last: store.Exclusive, parent: store.Exclusive})
		if err != nil {
			return err
		}
		r := rs[0]
		parent, err := t.newEntryParent(ctx, op, r, opts.CreateParent)
		if err != nil {
			return err
		}
		dNs, dSpace := int64(1), int64(0)
		if old := r.last(); old != nil {
			if old.Type == meta.TypeDir {
				return meta.Errorf(op, p, meta.ErrExists, "a directory is in the way")
			}
			if !opts.Overwrite {
				return meta.Errorf(op, p, meta.ErrExists, "")
			}
			// As in HDFS, another client's file is taken over only once its
			// lease's soft limit has passed (a client that means to replace
			// its own abandoned file deletes it first: see the CLI's put).
			if old.UnderConstruction() && !holds(old.LeaseHolder, opts.Client, t.user) {
				exp, err := t.e.leaseExpired(ctx, t.st, old.LeaseHolder, t.e.cfg.LeaseSoftLimit, t.e.cfg.Now())
				if err != nil {
					return err
				}
				if !exp {
					return t.leaseConflict(op, p, old.LeaseHolder)
				}
			}
			if err := t.checkSticky(op, p, parent, old); err != nil {
				return err
			}
			if err := t.removeFile(ctx, old); err != nil {
				return err
			}
			parent.Children--
			dNs, dSpace = 0, -old.Written*int64(old.Replication)
		}
		if err := t.charge(op, p, r.chain[:r.depth()], dNs, dSpace); err != nil {
			return err
		}
		id, err := t.e.newID(ctx)
		if err != nil {
			return err
		}
		n := &store.Inode{Parent: parent.ID, Name: r.name(), ID: id, Type: meta.TypeFile,
			Perm: perm, Owner: t.user, Group: parent.Group, Mtime: t.now, Atime: t.now,
			Replication: repl, BlockSize: bs, LeaseHolder: opts.Client, LeaseRenewed: t.now,
			NsQuota: -1, SpaceQuota: -1}
		t.inherit(parent, n, m)
		parent.Children++
		parent.Mtime = t.now
		t.put(parent)
		if r.last() == nil {
			t.create(n)
		} else {
			t.put(n) // over the file it replaces
		}
		if complete {
			if int64(len(data)) > t.e.cfg.InlineThreshold {
				return meta.Errorf(op, p, meta.ErrTooLarge, "%d bytes; files are kept in the metadata store up to %d bytes", len(data), t.e.cfg.InlineThreshold)
			}
			if err := t.charge(op, p, r.chain[:r.depth()], 0, int64(len(data))*int64(n.Replication)); err != nil {
				return err
			}
			if err := t.appendContent(ctx, n, data); err != nil {
				return err
			}
			n.Length, n.LeaseHolder, n.LeaseRenewed = n.Written, "", 0
		} else {
			n.LeaseHolder = holderKey(opts.Client, t.user)
			t.putLease(n, p)
			t.renewLease(n.LeaseHolder)
		}
		out = status(p, n)
		t.answer(out)
		return nil
	})
	return out, err
}

// newEntryParent checks that r's parent can receive a new entry named r.name()
// (creating missing parents when createParent is set) and returns it.
func (t *tx) newEntryParent(ctx context.Context, op string, r *resolved, createParent bool) (*store.Inode, error) {
	parent := r.parent()
	if parent == nil && createParent {
		var err error
		// HDFS creates a file's missing parents without the client's
		// unmasked mode (FSDirMkdirOp.createAncestorDirectories).
		if parent, err = t.makeParents(ctx, op, r, r.depth()-1, modes{perm: meta.DefaultDir}); err != nil {
			return nil, err
		}
		return parent, nil
	}
	if err := t.checkAncestors(op, r); err != nil {
		return nil, err
	}
	if err := t.require(op, r.prefix(r.depth()-1), parent, permW|permX); err != nil {
		return nil, err
	}
	return parent, nil
}

// CreateSymlink implements meta.FileSystem.
// Locks: the parent exclusive, the link exclusive.
func (e *Engine) CreateSymlink(ctx context.Context, u meta.User, target, link string, createParent bool) error {
	const op = "create symlink"
	p, err := clean(op, link)
	if err != nil {
		return err
	}
	if target == "" {
		return meta.Errorf(op, p, meta.ErrInvalidArgument, "empty link target")
	}
	if p == meta.RootPath {
		return meta.Errorf(op, p, meta.ErrExists, "")
	}
	_, err = e.runOnce(ctx, op, p, u, func(t *tx) error {
		rs, err := t.resolve(ctx, want{path: p, last: store.Exclusive, parent: store.Exclusive})
		if err != nil {
			return err
		}
		r := rs[0]
		parent, err := t.newEntryParent(ctx, op, r, createParent)
		if err != nil {
			return err
		}
		if r.last() != nil {
			return meta.Errorf(op, p, meta.ErrExists, "")
		}
		if err := t.charge(op, p, r.chain[:r.depth()], 1, 0); err != nil {
			return err
		}
		id, err := t.e.newID(ctx)
		if err != nil {
			return err
		}
		parent.Children++
		parent.Mtime = t.now
		t.put(parent)
		t.create(&store.Inode{Parent: parent.ID, Name: r.name(), ID: id, Type: meta.TypeSymlink,
			Perm: 0o777, Owner: t.user, Group: parent.Group, Mtime: t.now, Atime: t.now,
			Symlink: target, NsQuota: -1, SpaceQuota: -1})
		return nil
	})
	return err
}
