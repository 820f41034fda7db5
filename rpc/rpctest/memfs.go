// Package rpctest provides a small in-memory meta.FileSystem for testing the
// RPC layer and the client without the real engine. It follows the contract
// closely enough to return every error kind the way the engine does for the
// simple cases (not found, exists, not a directory, is a directory, not
// empty, invalid path, lease, permission on the superuser-only calls), but it
// does not check permissions per component and does no quotas.
package rpctest

import (
	"context"
	"sort"
	"strings"
	"sync"

	"github.com/nimbus-fs/nimbus/meta"
)

// MemFS is an in-memory meta.FileSystem. Safe for concurrent use.
type MemFS struct {
	// Hook, when set, is called at the start of every method with its name
	// ("stat", "mkdirs", ...) and the context; a non-nil error is returned as
	// the method's result. Tests use it to block or fail calls.
	Hook func(ctx context.Context, method string) error

	mu     sync.Mutex
	nextID uint64
	nodes  map[string]*node
	now    int64
}

type node struct {
	st     meta.FileStatus
	data   []byte
	buf    []byte // data being written under the lease
	client string
}

// Superuser is the user MemFS treats as the superuser.
const Superuser = "root"

// NewMemFS returns an empty file system holding only the root.
func NewMemFS() *MemFS {
	fs := &MemFS{nextID: 2, nodes: map[string]*node{}}
	fs.nodes["/"] = &node{st: meta.FileStatus{Path: "/", FileID: 1, Type: meta.TypeDir, Perm: meta.DefaultDir,
		Owner: Superuser, Group: "supergroup", NsQuota: -1, SpaceQuota: -1}}
	return fs
}

func (fs *MemFS) hook(ctx context.Context, m string) error {
	if fs.Hook != nil {
		return fs.Hook(ctx, m)
	}
	return ctx.Err()
}

// resolve cleans p and checks its parent chain; it returns the clean path.
// Must hold mu.
func (fs *MemFS) resolve(op, p string) (string, error) {
	c, err := meta.CleanPath(op, p)
	if err != nil {
		return "", err
	}
	for dir, _ := meta.ParentPath(c); ; dir, _ = meta.ParentPath(dir) {
		n := fs.nodes[dir]
		if n != nil && n.st.Type != meta.TypeDir {
			return "", meta.Errorf(op, c, meta.ErrNotDir, "%s is not a directory", dir)
		}
		if dir == "/" {
			break
		}
	}
	return c, nil
}

func (fs *MemFS) add(c string, st meta.FileStatus) *node {
	fs.now++
	st.Path, st.FileID, st.Mtime, st.Atime = c, fs.nextID, fs.now, fs.now
	fs.nextID++
	n := &node{st: st}
	fs.nodes[c] = n
	parent, _ := meta.ParentPath(c)
	fs.nodes[parent].st.ChildrenNum++
	return n
}

func (fs *MemFS) mkdirsLocked(op, c string, u meta.User, perm meta.Perm) error {
	if c == "/" {
		return nil
	}
	parent, _ := meta.ParentPath(c)
	if fs.nodes[parent] == nil {
		if err := fs.mkdirsLocked(op, parent, u, perm); err != nil {
			return err
		}
	}
	if n := fs.nodes[c]; n != nil {
		if n.st.Type == meta.TypeDir {
			return nil
		}
		return meta.Errorf(op, c, meta.ErrExists, "")
	}
	if perm == 0 {
		perm = meta.DefaultDir
	}
	fs.add(c, meta.FileStatus{Type: meta.TypeDir, Perm: perm, Owner: u.Name, Group: "supergroup", NsQuota: -1, SpaceQuota: -1})
	return nil
}

// Mkdirs implements meta.FileSystem.
func (fs *MemFS) Mkdirs(ctx context.Context, u meta.User, dir string, perm meta.Perm) error {
	if err := fs.hook(ctx, "mkdirs"); err != nil {
		return err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	c, err := fs.resolve("mkdirs", dir)
	if err != nil {
		return err
	}
	return fs.mkdirsLocked("mkdirs", c, u, perm)
}

// Create implements meta.FileSystem.
func (fs *MemFS) Create(ctx context.Context, u meta.User, path string, o meta.CreateOptions) (*meta.FileStatus, error) {
	if err := fs.hook(ctx, "create"); err != nil {
		return nil, err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	c, err := fs.resolve("create", path)
	if err != nil {
		return nil, err
	}
	if o.Client == "" {
		return nil, meta.Errorf("create", c, meta.ErrInvalidArgument, "no lease holder")
	}
	parent, _ := meta.ParentPath(c)
	if fs.nodes[parent] == nil {
		if !o.CreateParent {
			return nil, meta.Errorf("create", c, meta.ErrNotFound, "parent %s does not exist", parent)
		}
		if err := fs.mkdirsLocked("create", parent, u, 0); err != nil {
			return nil, err
		}
	}
	if n := fs.nodes[c]; n != nil {
		if n.st.Type == meta.TypeDir {
			return nil, meta.Errorf("create", c, meta.ErrIsDir, "")
		}
		if !o.Overwrite {
			return nil, meta.Errorf("create", c, meta.ErrExists, "")
		}
		fs.deleteLocked(c)
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
	n := fs.add(c, meta.FileStatus{Type: meta.TypeFile, Perm: o.Perm, Owner: u.Name, Group: "supergroup",
		Replication: o.Replication, BlockSize: o.BlockSize, UnderConstruction: true})
	n.client = o.Client
	st := n.st
	return &st, nil
}

// Append implements meta.FileSystem.
func (fs *MemFS) Append(ctx context.Context, u meta.User, path, client string) (*meta.FileStatus, error) {
	if err := fs.hook(ctx, "append"); err != nil {
		return nil, err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, c, err := fs.file("append", path)
	if err != nil {
		return nil, err
	}
	if n.client != "" {
		return nil, meta.Errorf("append", c, meta.ErrLease, "held by %s", n.client)
	}
	n.client, n.st.UnderConstruction = client, true
	n.buf = append([]byte(nil), n.data...)
	st := n.st
	return &st, nil
}

func (fs *MemFS) file(op, path string) (*node, string, error) {
	c, err := fs.resolve(op, path)
	if err != nil {
		return nil, "", err
	}
	n := fs.nodes[c]
	if n == nil {
		return nil, c, meta.Errorf(op, c, meta.ErrNotFound, "")
	}
	if n.st.Type == meta.TypeDir {
		return nil, c, meta.Errorf(op, c, meta.ErrIsDir, "")
	}
	return n, c, nil
}

// Write implements meta.FileSystem.
func (fs *MemFS) Write(ctx context.Context, u meta.User, path, client string, offset int64, data []byte) error {
	if err := fs.hook(ctx, "write"); err != nil {
		return err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, c, err := fs.file("write", path)
	if err != nil {
		return err
	}
	if n.client != client {
		return meta.Errorf("write", c, meta.ErrLease, "lease held by %q", n.client)
	}
	if offset != int64(len(n.buf)) {
		return meta.Errorf("write", c, meta.ErrInvalidArgument, "offset %d, expected %d", offset, len(n.buf))
	}
	if len(n.buf)+len(data) > 1<<20 {
		return meta.Errorf("write", c, meta.ErrTooLarge, "limit is %d bytes", 1<<20)
	}
	n.buf = append(n.buf, data...)
	return nil
}

// Complete implements meta.FileSystem.
func (fs *MemFS) Complete(ctx context.Context, u meta.User, path, client string) (*meta.FileStatus, error) {
	if err := fs.hook(ctx, "complete"); err != nil {
		return nil, err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, c, err := fs.file("complete", path)
	if err != nil {
		return nil, err
	}
	if n.client != client {
		return nil, meta.Errorf("complete", c, meta.ErrLease, "lease held by %q", n.client)
	}
	n.data, n.buf, n.client = n.buf, nil, ""
	n.st.Length, n.st.UnderConstruction = int64(len(n.data)), false
	st := n.st
	return &st, nil
}

// Read implements meta.FileSystem.
func (fs *MemFS) Read(ctx context.Context, u meta.User, path string, offset, length int64) ([]byte, error) {
	if err := fs.hook(ctx, "read"); err != nil {
		return nil, err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, c, err := fs.file("read", path)
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
	if err := fs.hook(ctx, "stat"); err != nil {
		return nil, err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	c, err := fs.resolve("stat", path)
	if err != nil {
		return nil, err
	}
	n := fs.nodes[c]
	if n == nil {
		return nil, meta.Errorf("stat", c, meta.ErrNotFound, "")
	}
	st := n.st
	return &st, nil
}

// List implements meta.FileSystem.
func (fs *MemFS) List(ctx context.Context, u meta.User, dir, startAfter string, limit int) (*meta.Listing, error) {
	if err := fs.hook(ctx, "list"); err != nil {
		return nil, err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	c, err := fs.resolve("list", dir)
	if err != nil {
		return nil, err
	}
	n := fs.nodes[c]
	if n == nil {
		return nil, meta.Errorf("list", c, meta.ErrNotFound, "")
	}
	if n.st.Type != meta.TypeDir {
		return &meta.Listing{Entries: []meta.FileStatus{n.st}}, nil
	}
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	var names []string
	for p := range fs.nodes {
		if par, name := meta.ParentPath(p); par == c && p != "/" && name > startAfter {
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
		l.Entries = append(l.Entries, fs.nodes[meta.JoinPath(c, name)].st)
	}
	return l, nil
}

func (fs *MemFS) deleteLocked(c string) {
	for p := range fs.nodes {
		if meta.IsAncestor(c, p) {
			delete(fs.nodes, p)
		}
	}
	delete(fs.nodes, c)
	parent, _ := meta.ParentPath(c)
	fs.nodes[parent].st.ChildrenNum--
}

// Delete implements meta.FileSystem.
func (fs *MemFS) Delete(ctx context.Context, u meta.User, path string, recursive bool) error {
	if err := fs.hook(ctx, "delete"); err != nil {
		return err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	c, err := fs.resolve("delete", path)
	if err != nil {
		return err
	}
	if c == "/" {
		return meta.Errorf("delete", c, meta.ErrInvalidArgument, "cannot delete the root")
	}
	n := fs.nodes[c]
	if n == nil {
		return meta.Errorf("delete", c, meta.ErrNotFound, "")
	}
	if n.st.Type == meta.TypeDir && n.st.ChildrenNum > 0 && !recursive {
		return meta.Errorf("delete", c, meta.ErrNotEmpty, "")
	}
	fs.deleteLocked(c)
	return nil
}

// Rename implements meta.FileSystem (without the move-into-directory rule).
func (fs *MemFS) Rename(ctx context.Context, u meta.User, src, dst string, o meta.RenameOptions) error {
	if err := fs.hook(ctx, "rename"); err != nil {
		return err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	s, err := fs.resolve("rename", src)
	if err != nil {
		return err
	}
	d, err := fs.resolve("rename", dst)
	if err != nil {
		return err
	}
	if fs.nodes[s] == nil {
		return meta.Errorf("rename", s, meta.ErrNotFound, "")
	}
	if s == "/" || meta.IsAncestor(s, d) {
		return meta.Errorf("rename", d, meta.ErrInvalidArgument, "cannot move %s into itself", s)
	}
	if dn := fs.nodes[d]; dn != nil {
		if !o.Overwrite {
			return meta.Errorf("rename", d, meta.ErrExists, "")
		}
		fs.deleteLocked(d)
	}
	dp, _ := meta.ParentPath(d)
	if fs.nodes[dp] == nil {
		return meta.Errorf("rename", d, meta.ErrNotFound, "parent %s does not exist", dp)
	}
	moved := map[string]*node{}
	for p, n := range fs.nodes {
		if p == s || meta.IsAncestor(s, p) {
			moved[d+strings.TrimPrefix(p, s)] = n
			delete(fs.nodes, p)
		}
	}
	for p, n := range moved {
		n.st.Path = p
		fs.nodes[p] = n
	}
	sp, _ := meta.ParentPath(s)
	fs.nodes[sp].st.ChildrenNum--
	fs.nodes[dp].st.ChildrenNum++
	return nil
}

func (fs *MemFS) update(ctx context.Context, op, path string, f func(n *node, c string) error) error {
	if err := fs.hook(ctx, op); err != nil {
		return err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	c, err := fs.resolve(op, path)
	if err != nil {
		return err
	}
	n := fs.nodes[c]
	if n == nil {
		return meta.Errorf(op, c, meta.ErrNotFound, "")
	}
	return f(n, c)
}

// SetPermission implements meta.FileSystem.
func (fs *MemFS) SetPermission(ctx context.Context, u meta.User, path string, perm meta.Perm) error {
	return fs.update(ctx, "setPermission", path, func(n *node, c string) error {
		if u.Name != n.st.Owner && u.Name != Superuser {
			return meta.Errorf("setPermission", c, meta.ErrPermission, "%s is not the owner", u.Name)
		}
		n.st.Perm = perm & meta.PermMask
		return nil
	})
}

// SetOwner implements meta.FileSystem.
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
		n.st.Replication = r
		return nil
	})
}

// Truncate implements meta.FileSystem.
func (fs *MemFS) Truncate(ctx context.Context, u meta.User, path string, newLength int64) error {
	return fs.update(ctx, "truncate", path, func(n *node, c string) error {
		if n.st.Type != meta.TypeFile {
			return meta.Errorf("truncate", c, meta.ErrIsDir, "")
		}
		if newLength < 0 || newLength > n.st.Length {
			return meta.Errorf("truncate", c, meta.ErrInvalidArgument, "new length %d outside 0..%d", newLength, n.st.Length)
		}
		n.data, n.st.Length = n.data[:newLength], newLength
		return nil
	})
}

// Concat implements meta.FileSystem.
func (fs *MemFS) Concat(ctx context.Context, u meta.User, target string, srcs []string) error {
	if err := fs.hook(ctx, "concat"); err != nil {
		return err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	t, tc, err := fs.file("concat", target)
	if err != nil {
		return err
	}
	var ns []*node
	var cs []string
	for _, s := range srcs {
		n, c, err := fs.file("concat", s)
		if err != nil {
			return err
		}
		if c == tc {
			return meta.Errorf("concat", c, meta.ErrInvalidArgument, "source is the target")
		}
		ns, cs = append(ns, n), append(cs, c)
	}
	for i, n := range ns {
		t.data = append(t.data, n.data...)
		fs.deleteLocked(cs[i])
	}
	t.st.Length = int64(len(t.data))
	return nil
}

// ContentSummary implements meta.FileSystem.
func (fs *MemFS) ContentSummary(ctx context.Context, u meta.User, path string) (*meta.ContentSummary, error) {
	if err := fs.hook(ctx, "contentSummary"); err != nil {
		return nil, err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	c, err := fs.resolve("contentSummary", path)
	if err != nil {
		return nil, err
	}
	root := fs.nodes[c]
	if root == nil {
		return nil, meta.Errorf("contentSummary", c, meta.ErrNotFound, "")
	}
	cs := &meta.ContentSummary{NsQuota: root.st.NsQuota, SpaceQuota: root.st.SpaceQuota}
	for p, n := range fs.nodes {
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

// SetQuota implements meta.FileSystem.
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
	if err := fs.hook(ctx, "createSymlink"); err != nil {
		return err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	c, err := fs.resolve("createSymlink", link)
	if err != nil {
		return err
	}
	if fs.nodes[c] != nil {
		return meta.Errorf("createSymlink", c, meta.ErrExists, "")
	}
	parent, _ := meta.ParentPath(c)
	if fs.nodes[parent] == nil {
		if !createParent {
			return meta.Errorf("createSymlink", c, meta.ErrNotFound, "parent %s does not exist", parent)
		}
		if err := fs.mkdirsLocked("createSymlink", parent, u, 0); err != nil {
			return err
		}
	}
	fs.add(c, meta.FileStatus{Type: meta.TypeSymlink, Perm: 0o777, Owner: u.Name, Group: "supergroup", Symlink: target})
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
	return &meta.ServerDefaults{BlockSize: 128 << 20, Replication: 3, InlineThreshold: 1 << 20,
		LeaseSoftLimitMs: 60000, LeaseHardLimitMs: 3600000}, nil
}

var _ meta.FileSystem = (*MemFS)(nil)
