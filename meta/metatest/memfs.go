package metatest

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
)

// Fixed parameters of a MemFS; ListLimit and the defaults are the engine's.
const (
	Superuser  = "root"       // may call SetOwner and SetQuota; owns "/"
	Supergroup = "supergroup" // the group of every new inode
	MaxFile    = 1 << 20      // largest file; a write past it is meta.ErrTooLarge
	ListLimit  = 1000         // most entries in one List page
)

// MemFS is an in-memory meta.FileSystem: a map from clean path to node under
// one mutex. Safe for concurrent use. The zero value is not usable; call
// NewMemFS.
type MemFS struct {
	// Hook, when set, is called at the start of every method with its name
	// ("stat", "mkdirs", "echo", ...: the op names of meta.OpError) and the
	// context, outside the lock; a non-nil error is returned as the method's
	// result. Tests use it to block calls or inject errors. Set it before
	// the first call.
	Hook func(ctx context.Context, method string) error

	mu struct {
		sync.Mutex
		nodes  map[string]*node
		nextID uint64
		echoes int64
	}
}

type node struct {
	st     meta.FileStatus // Length is the completed content's
	data   []byte          // completed content
	buf    []byte          // content written under the lease
	client string          // lease holder; "" when the file is complete
	acl    []meta.AclEntry // extended entries, sorted (memfs_acl.go)
	xattrs []meta.XAttr    // in the order they were set
}

// NewMemFS returns a file system holding only the root, owned by Superuser
// with mode 0755.
func NewMemFS() *MemFS {
	fs := &MemFS{}
	fs.mu.nodes = map[string]*node{meta.RootPath: {st: meta.FileStatus{Path: meta.RootPath, FileID: 1,
		Type: meta.TypeDir, Perm: meta.DefaultDir, Owner: Superuser, Group: Supergroup, NsQuota: -1, SpaceQuota: -1}}}
	fs.mu.nextID = 2
	return fs
}

// IsSuperuser implements meta.Superusers: Superuser is the only one.
func (fs *MemFS) IsSuperuser(u meta.User) bool { return u.Name == Superuser }

// Echo does nothing but count the call (and run the hook as "echo"). It makes
// MemFS a bench.Target.
func (fs *MemFS) Echo(ctx context.Context) error {
	if err := fs.hook(ctx, "echo"); err != nil {
		return err
	}
	fs.mu.Lock()
	fs.mu.echoes++
	fs.mu.Unlock()
	return nil
}

// Echoes returns how many times Echo succeeded.
func (fs *MemFS) Echoes() int64 {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.mu.echoes
}

func (fs *MemFS) hook(ctx context.Context, op string) error {
	if fs.Hook != nil {
		return fs.Hook(ctx, op)
	}
	return ctx.Err()
}

// begin runs the hook, takes the lock and cleans p, whose ancestors must be
// directories where they exist. On success the caller holds mu.
func (fs *MemFS) begin(ctx context.Context, op, p string) (string, error) {
	if err := fs.hook(ctx, op); err != nil {
		return "", err
	}
	c, err := meta.CleanPath(op, p)
	if err != nil {
		return "", err
	}
	fs.mu.Lock()
	if err := fs.checkAncestors(op, c); err != nil {
		fs.mu.Unlock()
		return "", err
	}
	return c, nil
}

// checkAncestors reports a symlink or a file on the way to c. Must hold mu.
func (fs *MemFS) checkAncestors(op, c string) error {
	cur := meta.RootPath
	parts := meta.SplitPath(c)
	for _, name := range parts[:max(len(parts)-1, 0)] {
		cur = meta.JoinPath(cur, name)
		n := fs.mu.nodes[cur]
		switch {
		case n == nil:
			return nil // the lookup of c reports it
		case n.st.Type == meta.TypeSymlink:
			return meta.Errorf(op, c, meta.ErrUnresolvedLink, "%s is a symbolic link", cur)
		case n.st.Type != meta.TypeDir:
			return meta.Errorf(op, c, meta.ErrNotDir, "%s is not a directory", cur)
		}
	}
	return nil
}

// lookup returns c's node or meta.ErrNotFound. Must hold mu.
func (fs *MemFS) lookup(op, c string) (*node, error) {
	if n := fs.mu.nodes[c]; n != nil {
		return n, nil
	}
	return nil, meta.Errorf(op, c, meta.ErrNotFound, "")
}

// file returns c's node, which must be a file. Must hold mu.
func (fs *MemFS) file(op, c string) (*node, error) {
	n, err := fs.lookup(op, c)
	switch {
	case err != nil:
		return nil, err
	case n.st.Type == meta.TypeDir:
		return nil, meta.Errorf(op, c, meta.ErrIsDir, "")
	case n.st.Type == meta.TypeSymlink:
		return nil, meta.Errorf(op, c, meta.ErrUnresolvedLink, "")
	}
	return n, nil
}

// add makes c, whose parent exists. Must hold mu.
func (fs *MemFS) add(c string, st meta.FileStatus) *node {
	now := time.Now().UnixMilli()
	st.Path, st.FileID, st.Mtime, st.Atime = c, fs.mu.nextID, now, now
	fs.mu.nextID++
	n := &node{st: st}
	fs.mu.nodes[c] = n
	parent, _ := meta.ParentPath(c)
	fs.mu.nodes[parent].st.ChildrenNum++
	inheritDefaultACL(fs.mu.nodes[parent], n)
	return n
}

// remove deletes c and its subtree. Must hold mu.
func (fs *MemFS) remove(c string) {
	for p := range fs.mu.nodes {
		if meta.IsAncestor(c, p) {
			delete(fs.mu.nodes, p)
		}
	}
	delete(fs.mu.nodes, c)
	parent, _ := meta.ParentPath(c)
	fs.mu.nodes[parent].st.ChildrenNum--
}

// parentDir returns the directory c goes in, creating it when mkdir is set.
// Must hold mu.
func (fs *MemFS) parentDir(op, c string, u meta.User, mkdir bool) error {
	parent, _ := meta.ParentPath(c)
	if fs.mu.nodes[parent] != nil {
		return nil
	}
	if !mkdir {
		return meta.Errorf(op, c, meta.ErrNotFound, "parent %s does not exist", parent)
	}
	return fs.mkdirs(op, parent, u, meta.DefaultDir, nil)
}

// mkdirs is mkdir -p; the ancestors have been checked. unmasked, when not
// nil, is the client's mode before its umask, for c and the ancestors it
// creates (see meta.FileSystem.MkdirsUnmasked). Must hold mu.
func (fs *MemFS) mkdirs(op, c string, u meta.User, perm meta.Perm, unmasked *meta.Perm) error {
	if n := fs.mu.nodes[c]; n != nil {
		if n.st.Type != meta.TypeDir {
			return meta.Errorf(op, c, meta.ErrExists, "")
		}
		return nil
	}
	if parent, _ := meta.ParentPath(c); fs.mu.nodes[parent] == nil {
		if err := fs.mkdirs(op, parent, u, meta.DefaultDir, unmasked); err != nil {
			return err
		}
	}
	if perm == 0 {
		perm = meta.DefaultDir
	}
	n := fs.add(c, meta.FileStatus{Type: meta.TypeDir, Perm: perm & meta.PermMask, Owner: u.Name, Group: Supergroup,
		NsQuota: -1, SpaceQuota: -1})
	fs.inheritUnmasked(c, n, unmasked)
	return nil
}

// inheritUnmasked recomputes the new node n's ACL from its parent's default
// ACL with the unmasked mode, when there are both (HDFS-6962); add has
// computed it from the masked one. Must hold mu.
func (fs *MemFS) inheritUnmasked(c string, n *node, unmasked *meta.Perm) {
	parent, _ := meta.ParentPath(c)
	p := fs.mu.nodes[parent]
	if unmasked == nil || !slices.ContainsFunc(p.acl, func(e meta.AclEntry) bool { return e.Scope == meta.AclDefault }) {
		return
	}
	n.st.Perm, n.acl, n.st.AclBit = *unmasked&meta.PermMask, nil, false
	inheritDefaultACL(p, n)
}

// Mkdirs implements meta.FileSystem.
func (fs *MemFS) Mkdirs(ctx context.Context, u meta.User, dir string, perm meta.Perm) error {
	c, err := fs.begin(ctx, "mkdirs", dir)
	if err != nil {
		return err
	}
	defer fs.mu.Unlock()
	return fs.mkdirs("mkdirs", c, u, perm, nil)
}

// MkdirsUnmasked implements meta.FileSystem.
func (fs *MemFS) MkdirsUnmasked(ctx context.Context, u meta.User, dir string, perm, unmasked meta.Perm) error {
	c, err := fs.begin(ctx, "mkdirs", dir)
	if err != nil {
		return err
	}
	defer fs.mu.Unlock()
	return fs.mkdirs("mkdirs", c, u, perm, &unmasked)
}

// Create implements meta.FileSystem.
func (fs *MemFS) Create(ctx context.Context, u meta.User, path string, o meta.CreateOptions) (*meta.FileStatus, error) {
	c, err := fs.begin(ctx, "create", path)
	if err != nil {
		return nil, err
	}
	defer fs.mu.Unlock()
	if o.Client == "" {
		return nil, meta.Errorf("create", c, meta.ErrInvalidArgument, "no lease holder")
	}
	if n := fs.mu.nodes[c]; n != nil {
		switch {
		case n.st.Type == meta.TypeDir:
			return nil, meta.Errorf("create", c, meta.ErrExists, "a directory is in the way")
		case n.client != "":
			return nil, meta.Errorf("create", c, meta.ErrLease, "held by %s", n.client)
		case !o.Overwrite:
			return nil, meta.Errorf("create", c, meta.ErrExists, "")
		}
		fs.remove(c)
	}
	if err := fs.parentDir("create", c, u, o.CreateParent); err != nil {
		return nil, err
	}
	if o.Perm == 0 {
		o.Perm = meta.DefaultFile
	}
	if o.Replication == 0 {
		o.Replication = 3
	}
	if o.BlockSize == 0 {
		o.BlockSize = 128 << 20
	}
	n := fs.add(c, meta.FileStatus{Type: meta.TypeFile, Perm: o.Perm & meta.PermMask, Owner: u.Name, Group: Supergroup,
		Replication: o.Replication, BlockSize: o.BlockSize, UnderConstruction: true})
	if o.HasUnmasked {
		fs.inheritUnmasked(c, n, &o.Unmasked)
	}
	n.client = o.Client
	st := n.st
	return &st, nil
}

// Append implements meta.FileSystem.
func (fs *MemFS) Append(ctx context.Context, u meta.User, path, client string) (*meta.FileStatus, error) {
	c, err := fs.begin(ctx, "append", path)
	if err != nil {
		return nil, err
	}
	defer fs.mu.Unlock()
	n, err := fs.file("append", c)
	if err != nil {
		return nil, err
	}
	if client == "" {
		return nil, meta.Errorf("append", c, meta.ErrInvalidArgument, "no lease holder")
	}
	if n.client != "" {
		return nil, meta.Errorf("append", c, meta.ErrLease, "held by %s", n.client)
	}
	n.client, n.st.UnderConstruction = client, true
	n.buf = append([]byte(nil), n.data...)
	st := n.st
	return &st, nil
}

// leased returns c's file if client holds its lease. Must hold mu.
func (fs *MemFS) leased(op, c, client string) (*node, error) {
	n, err := fs.file(op, c)
	if err != nil {
		return nil, err
	}
	if n.client == "" || n.client != client {
		return nil, meta.Errorf(op, c, meta.ErrLease, "%q does not hold the lease (holder: %q)", client, n.client)
	}
	return n, nil
}

// Write implements meta.FileSystem.
func (fs *MemFS) Write(ctx context.Context, u meta.User, path, client string, offset int64, data []byte) error {
	c, err := fs.begin(ctx, "write", path)
	if err != nil {
		return err
	}
	defer fs.mu.Unlock()
	n, err := fs.leased("write", c, client)
	if err != nil {
		return err
	}
	if offset != int64(len(n.buf)) {
		return meta.Errorf("write", c, meta.ErrInvalidArgument, "offset %d, expected %d", offset, len(n.buf))
	}
	if len(n.buf)+len(data) > MaxFile {
		return meta.Errorf("write", c, meta.ErrTooLarge, "limit is %d bytes", MaxFile)
	}
	n.buf = append(n.buf, data...)
	return nil
}

// Complete implements meta.FileSystem.
func (fs *MemFS) Complete(ctx context.Context, u meta.User, path, client string) (*meta.FileStatus, error) {
	c, err := fs.begin(ctx, "complete", path)
	if err != nil {
		return nil, err
	}
	defer fs.mu.Unlock()
	n, err := fs.leased("complete", c, client)
	if err != nil {
		return nil, err
	}
	n.data, n.buf, n.client = n.buf, nil, ""
	n.st.Length, n.st.UnderConstruction = int64(len(n.data)), false
	n.st.Mtime = time.Now().UnixMilli()
	st := n.st
	return &st, nil
}

// Read implements meta.FileSystem.
func (fs *MemFS) Read(ctx context.Context, u meta.User, path string, offset, length int64) ([]byte, error) {
	c, err := fs.begin(ctx, "read", path)
	if err != nil {
		return nil, err
	}
	defer fs.mu.Unlock()
	n, err := fs.file("read", c)
	if err != nil {
		return nil, err
	}
	if offset < 0 || length < 0 {
		return nil, meta.Errorf("read", c, meta.ErrInvalidArgument, "negative offset or length")
	}
	if offset >= int64(len(n.data)) {
		return nil, nil
	}
	end := min(offset+length, int64(len(n.data)))
	return append([]byte(nil), n.data[offset:end]...), nil
}

// Stat implements meta.FileSystem.
func (fs *MemFS) Stat(ctx context.Context, u meta.User, path string) (*meta.FileStatus, error) {
	c, err := fs.begin(ctx, "stat", path)
	if err != nil {
		return nil, err
	}
	defer fs.mu.Unlock()
	n, err := fs.lookup("stat", c)
	if err != nil {
		return nil, err
	}
	st := n.st
	return &st, nil
}

// List implements meta.FileSystem. Pages hold at most ListLimit entries.
func (fs *MemFS) List(ctx context.Context, u meta.User, dir, startAfter string, limit int) (*meta.Listing, error) {
	c, err := fs.begin(ctx, "list", dir)
	if err != nil {
		return nil, err
	}
	defer fs.mu.Unlock()
	n, err := fs.lookup("list", c)
	if err != nil {
		return nil, err
	}
	if n.st.Type != meta.TypeDir {
		return &meta.Listing{Entries: []meta.FileStatus{n.st}}, nil
	}
	if limit <= 0 || limit > ListLimit {
		limit = ListLimit
	}
	var names []string
	for p := range fs.mu.nodes {
		if parent, name := meta.ParentPath(p); p != meta.RootPath && parent == c && name > startAfter {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	l := &meta.Listing{}
	for i, name := range names {
		if i == limit {
			l.Remaining = int64(len(names) - limit)
			break
		}
		l.Entries = append(l.Entries, fs.mu.nodes[meta.JoinPath(c, name)].st)
	}
	return l, nil
}

// Delete implements meta.FileSystem.
func (fs *MemFS) Delete(ctx context.Context, u meta.User, path string, recursive bool) error {
	c, err := fs.begin(ctx, "delete", path)
	if err != nil {
		return err
	}
	defer fs.mu.Unlock()
	if c == meta.RootPath {
		return meta.Errorf("delete", c, meta.ErrInvalidArgument, "cannot delete the root")
	}
	n, err := fs.lookup("delete", c)
	if err != nil {
		return err
	}
	if n.st.Type == meta.TypeDir && n.st.ChildrenNum > 0 && !recursive {
		return meta.Errorf("delete", c, meta.ErrNotEmpty, "")
	}
	fs.remove(c)
	return nil
}

// Rename implements meta.FileSystem, including the move into an existing
// destination directory.
func (fs *MemFS) Rename(ctx context.Context, u meta.User, src, dst string, o meta.RenameOptions) error {
	s, err := fs.begin(ctx, "rename", src)
	if err != nil {
		return err
	}
	defer fs.mu.Unlock()
	d, err := meta.CleanPath("rename", dst)
	if err != nil {
		return err
	}
	if err := fs.checkAncestors("rename", d); err != nil {
		return err
	}
	sn, err := fs.lookup("rename", s)
	if err != nil {
		return err
	}
	if s == meta.RootPath || meta.IsAncestor(s, d) {
		return meta.Errorf("rename", d, meta.ErrInvalidArgument, "cannot move %s into itself", s)
	}
	if s == d {
		return nil
	}
	if dn := fs.mu.nodes[d]; dn != nil && dn.st.Type == meta.TypeDir && !o.Overwrite {
		_, name := meta.ParentPath(s)
		d = meta.JoinPath(d, name)
		if s == d {
			return nil
		}
	}
	if dn := fs.mu.nodes[d]; dn != nil {
		switch {
		case !o.Overwrite:
			return meta.Errorf("rename", d, meta.ErrExists, "")
		case dn.st.Type == meta.TypeDir && sn.st.Type != meta.TypeDir:
			return meta.Errorf("rename", d, meta.ErrIsDir, "a file cannot replace a directory")
		case dn.st.Type != meta.TypeDir && sn.st.Type == meta.TypeDir:
			return meta.Errorf("rename", d, meta.ErrNotDir, "a directory cannot replace a file")
		case dn.st.Type == meta.TypeDir && dn.st.ChildrenNum > 0:
			return meta.Errorf("rename", d, meta.ErrNotEmpty, "")
		}
		fs.remove(d)
	}
	if err := fs.parentDir("rename", d, u, false); err != nil {
		return err
	}
	moved := map[string]*node{}
	for p, n := range fs.mu.nodes {
		if p == s || meta.IsAncestor(s, p) {
			moved[d+strings.TrimPrefix(p, s)] = n
			delete(fs.mu.nodes, p)
		}
	}
	for p, n := range moved {
		n.st.Path = p
		fs.mu.nodes[p] = n
	}
	sp, _ := meta.ParentPath(s)
	dp, _ := meta.ParentPath(d)
	fs.mu.nodes[sp].st.ChildrenNum--
	fs.mu.nodes[dp].st.ChildrenNum++
	return nil
}

// update runs f on path's node under the lock.
func (fs *MemFS) update(ctx context.Context, op, path string, f func(n *node, c string) error) error {
	c, err := fs.begin(ctx, op, path)
	if err != nil {
		return err
	}
	defer fs.mu.Unlock()
	n, err := fs.lookup(op, c)
	if err != nil {
		return err
	}
	return f(n, c)
}

// SetPermission implements meta.FileSystem: the owner or the superuser.
func (fs *MemFS) SetPermission(ctx context.Context, u meta.User, path string, perm meta.Perm) error {
	return fs.update(ctx, "setPermission", path, func(n *node, c string) error {
		if u.Name != n.st.Owner && u.Name != Superuser {
			return meta.Errorf("setPermission", c, meta.ErrPermission, "%s is not the owner", u.Name)
		}
		n.st.Perm = perm & meta.PermMask
		return nil
	})
}

// SetOwner implements meta.FileSystem: the superuser only (MemFS knows no
// group membership).
func (fs *MemFS) SetOwner(ctx context.Context, u meta.User, path, owner, group string) error {
	return fs.update(ctx, "setOwner", path, func(n *node, c string) error {
		if u.Name != Superuser {
			return meta.Errorf("setOwner", c, meta.ErrPermission, "only the superuser changes owners")
		}
		if owner != "" {
			n.st.Owner = owner
		}
		if group != "" {
			n.st.Group = group
		}
		return nil
	})
}

// SetTimes implements meta.FileSystem.
func (fs *MemFS) SetTimes(ctx context.Context, u meta.User, path string, mtime, atime int64) error {
	return fs.update(ctx, "setTimes", path, func(n *node, c string) error {
		if mtime != -1 {
			n.st.Mtime = mtime
		}
		if atime != -1 {
			n.st.Atime = atime
		}
		return nil
	})
}

// SetReplication implements meta.FileSystem.
func (fs *MemFS) SetReplication(ctx context.Context, u meta.User, path string, r uint16) error {
	return fs.update(ctx, "setReplication", path, func(n *node, c string) error {
		if n.st.Type != meta.TypeFile {
			return meta.Errorf("setReplication", c, meta.ErrIsDir, "")
		}
		if r == 0 {
			return meta.Errorf("setReplication", c, meta.ErrInvalidArgument, "replication 0")
		}
		n.st.Replication = r
		return nil
	})
}

// Truncate implements meta.FileSystem.
func (fs *MemFS) Truncate(ctx context.Context, u meta.User, path string, newLength int64) error {
	c, err := fs.begin(ctx, "truncate", path)
	if err != nil {
		return err
	}
	defer fs.mu.Unlock()
	n, err := fs.file("truncate", c)
	if err != nil {
		return err
	}
	if n.client != "" {
		return meta.Errorf("truncate", c, meta.ErrLease, "held by %s", n.client)
	}
	if newLength < 0 || newLength > n.st.Length {
		return meta.Errorf("truncate", c, meta.ErrInvalidArgument, "new length %d outside 0..%d", newLength, n.st.Length)
	}
	n.data, n.st.Length = n.data[:newLength:newLength], newLength
	return nil
}

// Concat implements meta.FileSystem.
func (fs *MemFS) Concat(ctx context.Context, u meta.User, target string, srcs []string) error {
	tc, err := fs.begin(ctx, "concat", target)
	if err != nil {
		return err
	}
	defer fs.mu.Unlock()
	t, err := fs.file("concat", tc)
	if err != nil {
		return err
	}
	if len(srcs) == 0 {
		return meta.Errorf("concat", tc, meta.ErrInvalidArgument, "no sources")
	}
	dir, _ := meta.ParentPath(tc)
	seen := map[string]bool{tc: true}
	var cs []string
	for _, s := range srcs {
		c, err := meta.CleanPath("concat", s)
		if err != nil {
			return err
		}
		n, err := fs.file("concat", c)
		if err != nil {
			return err
		}
		if d, _ := meta.ParentPath(c); d != dir || seen[c] {
			return meta.Errorf("concat", c, meta.ErrInvalidArgument, "a source must be a distinct file beside the target")
		}
		if n.client != "" {
			return meta.Errorf("concat", c, meta.ErrLease, "held by %s", n.client)
		}
		seen[c] = true
		cs = append(cs, c)
	}
	if t.client != "" {
		return meta.Errorf("concat", tc, meta.ErrLease, "held by %s", t.client)
	}
	for _, c := range cs {
		t.data = append(t.data, fs.mu.nodes[c].data...)
		fs.remove(c)
	}
	t.st.Length = int64(len(t.data))
	return nil
}

// ContentSummary implements meta.FileSystem.
func (fs *MemFS) ContentSummary(ctx context.Context, u meta.User, path string) (*meta.ContentSummary, error) {
	c, err := fs.begin(ctx, "contentSummary", path)
	if err != nil {
		return nil, err
	}
	defer fs.mu.Unlock()
	root, err := fs.lookup("contentSummary", c)
	if err != nil {
		return nil, err
	}
	cs := &meta.ContentSummary{NsQuota: root.st.NsQuota, SpaceQuota: root.st.SpaceQuota}
	if root.st.Type != meta.TypeDir {
		cs.NsQuota, cs.SpaceQuota = -1, -1
	}
	for p, n := range fs.mu.nodes {
		if p != c && !meta.IsAncestor(c, p) {
			continue
		}
		cs.NsConsumed++
		if n.st.Type == meta.TypeDir {
			cs.DirectoryCount++
		} else {
			cs.FileCount++
			cs.Length += n.st.Length
			cs.SpaceConsumed += n.st.Length * int64(n.st.Replication)
		}
	}
	return cs, nil
}

// SetQuota implements meta.FileSystem: the quotas are recorded, not enforced.
func (fs *MemFS) SetQuota(ctx context.Context, u meta.User, dir string, nsQuota, spaceQuota int64) error {
	return fs.update(ctx, "setQuota", dir, func(n *node, c string) error {
		if u.Name != Superuser {
			return meta.Errorf("setQuota", c, meta.ErrPermission, "superuser only")
		}
		if n.st.Type != meta.TypeDir {
			return meta.Errorf("setQuota", c, meta.ErrNotDir, "")
		}
		if nsQuota != 0 {
			n.st.NsQuota = nsQuota
		}
		if spaceQuota != 0 {
			n.st.SpaceQuota = spaceQuota
		}
		return nil
	})
}

// CreateSymlink implements meta.FileSystem.
func (fs *MemFS) CreateSymlink(ctx context.Context, u meta.User, target, link string, createParent bool) error {
	c, err := fs.begin(ctx, "createSymlink", link)
	if err != nil {
		return err
	}
	defer fs.mu.Unlock()
	if target == "" {
		return meta.Errorf("createSymlink", c, meta.ErrInvalidArgument, "empty target")
	}
	if fs.mu.nodes[c] != nil {
		return meta.Errorf("createSymlink", c, meta.ErrExists, "")
	}
	if err := fs.parentDir("createSymlink", c, u, createParent); err != nil {
		return err
	}
	fs.add(c, meta.FileStatus{Type: meta.TypeSymlink, Perm: 0o777, Owner: u.Name, Group: Supergroup, Symlink: target})
	return nil
}

// RenewLease implements meta.FileSystem.
func (fs *MemFS) RenewLease(ctx context.Context, u meta.User, client string) error {
	if err := fs.hook(ctx, "renewLease"); err != nil {
		return err
	}
	if client == "" {
		return meta.Errorf("renewLease", "", meta.ErrInvalidArgument, "no client name")
	}
	return nil
}

// Defaults implements meta.FileSystem.
func (fs *MemFS) Defaults(ctx context.Context) (*meta.ServerDefaults, error) {
	if err := fs.hook(ctx, "defaults"); err != nil {
		return nil, err
	}
	return &meta.ServerDefaults{BlockSize: 128 << 20, Replication: 3, InlineThreshold: MaxFile,
		LeaseSoftLimitMs: 60_000, LeaseHardLimitMs: 3_600_000}, nil
}

var _ meta.FileSystem = (*MemFS)(nil)
