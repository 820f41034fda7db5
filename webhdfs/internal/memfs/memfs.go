// Package memfs is a small in-memory meta.FileSystem for the WebHDFS gateway's
// tests and its development server. It follows the contract of meta.FileSystem
// closely enough to exercise every gateway path (leases, sequential writes, a
// size limit, POSIX-ish write permission on the parent, quotas refused), but it
// is not durable and not fast: every call takes one global mutex.
//
// It is not the engine and must not be used as a reference for HDFS semantics;
// package namespace is.
package memfs

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
)

// Config sets the behaviour of a FS.
type Config struct {
	Superuser string // may do anything; owner of "/"
	MaxFile   int64  // largest file content; a write past it is meta.ErrTooLarge
	Now       func() time.Time
}

// DefaultConfig returns a superuser "root", a 128 KiB limit and the wall clock.
func DefaultConfig() Config {
	return Config{Superuser: "root", MaxFile: 128 << 10, Now: time.Now}
}

type inode struct {
	id       uint64
	typ      meta.FileType
	perm     meta.Perm
	owner    string
	group    string
	repl     uint16
	bsize    int64
	mtime    int64
	atime    int64
	data     []byte // completed content
	pending  []byte // content written under the current lease
	lease    string // holder; "" when complete
	symlink  string
	children map[string]*inode
}

// FS is the in-memory file system. Safe for concurrent use.
type FS struct {
	cfg    Config
	mu     sync.Mutex
	root   *inode
	nextID uint64
	// Calls counts calls per method name, for tests that check what the
	// gateway asked for (e.g. chunked writes).
	calls map[string]int
	// WriteSizes records the length of every Write, in order.
	writeSizes []int
	readSizes  []int64
}

// New returns an empty file system whose root is owned by the superuser with
// mode 0777, so that tests can write anywhere unless they chmod.
func New(cfg Config) *FS {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	f := &FS{cfg: cfg, nextID: 16386, calls: map[string]int{}}
	f.root = &inode{id: 16385, typ: meta.TypeDir, perm: 0o777, owner: cfg.Superuser, group: "supergroup",
		children: map[string]*inode{}, mtime: f.now()}
	return f
}

func (f *FS) now() int64 { return f.cfg.Now().UnixMilli() }

// Calls returns how often method was called.
func (f *FS) Calls(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// WriteSizes returns the sizes of all Write calls so far.
func (f *FS) WriteSizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.writeSizes...)
}

// ReadLengths returns the length argument of every Read call so far.
func (f *FS) ReadLengths() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.readSizes...)
}

func (f *FS) enter(method string) {
	f.mu.Lock()
	f.calls[method]++
}

// resolve walks a clean path; a symlink before the last component is
// meta.ErrUnresolvedLink.
func (f *FS) resolve(op, p string) (parent, n *inode, err error) {
	if p == meta.RootPath {
		return f.root, f.root, nil
	}
	cur := f.root
	parts := meta.SplitPath(p)
	for i, name := range parts {
		if cur.typ == meta.TypeSymlink {
			return nil, nil, meta.Errorf(op, p, meta.ErrUnresolvedLink, "")
		}
		if cur.typ != meta.TypeDir {
			return nil, nil, meta.Errorf(op, p, meta.ErrNotDir, "")
		}
		next := cur.children[name]
		if next == nil {
			if i == len(parts)-1 {
				return cur, nil, meta.Errorf(op, p, meta.ErrNotFound, "")
			}
			return nil, nil, meta.Errorf(op, p, meta.ErrNotFound, "")
		}
		parent, cur = cur, next
	}
	return parent, cur, nil
}

func (f *FS) clean(op, p string) (string, error) { return meta.CleanPath(op, p) }

func (f *FS) canWrite(u meta.User, dir *inode) bool {
	if u.Name == f.cfg.Superuser {
		return true
	}
	if u.Name == dir.owner {
		return dir.perm&0o200 != 0
	}
	return dir.perm&0o002 != 0
}

func (f *FS) canRead(u meta.User, n *inode) bool {
	if u.Name == f.cfg.Superuser {
		return true
	}
	if u.Name == n.owner {
		return n.perm&0o400 != 0
	}
	return n.perm&0o004 != 0
}

func (f *FS) status(p string, n *inode) *meta.FileStatus {
	s := &meta.FileStatus{Path: p, FileID: n.id, Type: n.typ, Perm: n.perm, Owner: n.owner, Group: n.group,
		Mtime: n.mtime, Atime: n.atime, Symlink: n.symlink, UnderConstruction: n.lease != "", NsQuota: -1, SpaceQuota: -1}
	if n.typ == meta.TypeFile {
		s.Length = int64(len(n.data))
		s.Replication = n.repl
		s.BlockSize = n.bsize
	}
	if n.typ == meta.TypeDir {
		s.ChildrenNum = int64(len(n.children))
	}
	return s
}

func (f *FS) mkdirsLocked(op string, u meta.User, p string, perm meta.Perm) (*inode, error) {
	cur := f.root
	for _, name := range meta.SplitPath(p) {
		next := cur.children[name]
		if next == nil {
			if !f.canWrite(u, cur) {
				return nil, meta.Errorf(op, p, meta.ErrPermission, "no write permission on a parent")
			}
			next = &inode{id: f.nextID, typ: meta.TypeDir, perm: perm, owner: u.Name, group: "supergroup",
				children: map[string]*inode{}, mtime: f.now()}
			f.nextID++
			cur.children[name] = next
		} else if next.typ != meta.TypeDir {
			if next.typ == meta.TypeSymlink {
				return nil, meta.Errorf(op, p, meta.ErrUnresolvedLink, "")
			}
			return nil, meta.Errorf(op, p, meta.ErrNotDir, "")
		}
		cur = next
	}
	return cur, nil
}

// Mkdirs implements meta.FileSystem.
func (f *FS) Mkdirs(ctx context.Context, u meta.User, dir string, perm meta.Perm) error {
	f.enter("Mkdirs")
	defer f.mu.Unlock()
	p, err := f.clean("mkdirs", dir)
	if err != nil {
		return err
	}
	if _, n, err := f.resolve("mkdirs", p); err == nil && n.typ != meta.TypeDir {
		return meta.Errorf("mkdirs", p, meta.ErrExists, "")
	}
	_, err = f.mkdirsLocked("mkdirs", u, p, perm)
	return err
}

// Create implements meta.FileSystem.
func (f *FS) Create(ctx context.Context, u meta.User, path string, opts meta.CreateOptions) (*meta.FileStatus, error) {
	f.enter("Create")
	defer f.mu.Unlock()
	p, err := f.clean("create", path)
	if err != nil {
		return nil, err
	}
	if p == meta.RootPath {
		return nil, meta.Errorf("create", p, meta.ErrIsDir, "")
	}
	if opts.Client == "" {
		return nil, meta.Errorf("create", p, meta.ErrInvalidArgument, "no client name")
	}
	dirPath, name := meta.ParentPath(p)
	var dir *inode
	if opts.CreateParent {
		dir, err = f.mkdirsLocked("create", u, dirPath, meta.DefaultDir)
	} else {
		_, dir, err = f.resolve("create", dirPath)
		if err == nil && dir.typ != meta.TypeDir {
			err = meta.Errorf("create", p, meta.ErrNotDir, "")
		}
	}
	if err != nil {
		return nil, err
	}
	if old := dir.children[name]; old != nil {
		switch {
		case old.typ == meta.TypeDir:
			return nil, meta.Errorf("create", p, meta.ErrIsDir, "")
		case old.lease != "":
			return nil, meta.Errorf("create", p, meta.ErrLease, "held by %s", old.lease)
		case !opts.Overwrite:
			return nil, meta.Errorf("create", p, meta.ErrExists, "")
		}
	}
	if !f.canWrite(u, dir) {
		return nil, meta.Errorf("create", p, meta.ErrPermission, "")
	}
	perm := opts.Perm
	if perm == 0 {
		perm = meta.DefaultFile
	}
	repl, bs := opts.Replication, opts.BlockSize
	if repl == 0 {
		repl = 3
	}
	if bs == 0 {
		bs = 128 << 20
	}
	n := &inode{id: f.nextID, typ: meta.TypeFile, perm: perm, owner: u.Name, group: "supergroup", repl: repl,
		bsize: bs, mtime: f.now(), atime: f.now(), lease: opts.Client}
	f.nextID++
	dir.children[name] = n
	return f.status(p, n), nil
}

func (f *FS) file(op string, u meta.User, path string) (string, *inode, error) {
	p, err := f.clean(op, path)
	if err != nil {
		return "", nil, err
	}
	_, n, err := f.resolve(op, p)
	if err != nil {
		return "", nil, err
	}
	if n.typ == meta.TypeDir {
		return "", nil, meta.Errorf(op, p, meta.ErrIsDir, "")
	}
	return p, n, nil
}

// Append implements meta.FileSystem.
func (f *FS) Append(ctx context.Context, u meta.User, path, client string) (*meta.FileStatus, error) {
	f.enter("Append")
	defer f.mu.Unlock()
	p, n, err := f.file("append", u, path)
	if err != nil {
		return nil, err
	}
	if n.lease != "" {
		return nil, meta.Errorf("append", p, meta.ErrLease, "held by %s", n.lease)
	}
	if !f.canWrite(u, n) {
		return nil, meta.Errorf("append", p, meta.ErrPermission, "")
	}
	n.lease = client
	n.pending = append([]byte(nil), n.data...)
	return f.status(p, n), nil
}

// Write implements meta.FileSystem.
func (f *FS) Write(ctx context.Context, u meta.User, path, client string, offset int64, data []byte) error {
	f.enter("Write")
	defer f.mu.Unlock()
	f.writeSizes = append(f.writeSizes, len(data))
	p, n, err := f.file("write", u, path)
	if err != nil {
		return err
	}
	if n.lease != client {
		return meta.Errorf("write", p, meta.ErrLease, "not the lease holder")
	}
	if offset != int64(len(n.pending)) {
		return meta.Errorf("write", p, meta.ErrInvalidArgument, "offset %d, written %d", offset, len(n.pending))
	}
	if int64(len(n.pending)+len(data)) > f.cfg.MaxFile {
		return meta.Errorf("write", p, meta.ErrTooLarge, "limit is %d bytes", f.cfg.MaxFile)
	}
	n.pending = append(n.pending, data...)
	return nil
}

// Complete implements meta.FileSystem.
func (f *FS) Complete(ctx context.Context, u meta.User, path, client string) (*meta.FileStatus, error) {
	f.enter("Complete")
	defer f.mu.Unlock()
	p, n, err := f.file("complete", u, path)
	if err != nil {
		return nil, err
	}
	if n.lease != client {
		return nil, meta.Errorf("complete", p, meta.ErrLease, "not the lease holder")
	}
	n.data, n.pending, n.lease = n.pending, nil, ""
	n.mtime = f.now()
	return f.status(p, n), nil
}

// Read implements meta.FileSystem.
func (f *FS) Read(ctx context.Context, u meta.User, path string, offset, length int64) ([]byte, error) {
	f.enter("Read")
	defer f.mu.Unlock()
	f.readSizes = append(f.readSizes, length)
	p, n, err := f.file("read", u, path)
	if err != nil {
		return nil, err
	}
	if n.typ != meta.TypeFile {
		return nil, meta.Errorf("read", p, meta.ErrUnresolvedLink, "")
	}
	if !f.canRead(u, n) {
		return nil, meta.Errorf("read", p, meta.ErrPermission, "")
	}
	if offset < 0 || length < 0 {
		return nil, meta.Errorf("read", p, meta.ErrInvalidArgument, "negative offset or length")
	}
	if offset >= int64(len(n.data)) {
		return nil, nil
	}
	end := min(int64(len(n.data)), offset+length)
	return append([]byte(nil), n.data[offset:end]...), nil
}

// Stat implements meta.FileSystem.
func (f *FS) Stat(ctx context.Context, u meta.User, path string) (*meta.FileStatus, error) {
	f.enter("Stat")
	defer f.mu.Unlock()
	p, err := f.clean("stat", path)
	if err != nil {
		return nil, err
	}
	_, n, err := f.resolve("stat", p)
	if err != nil {
		return nil, err
	}
	return f.status(p, n), nil
}

// List implements meta.FileSystem; the page size is capped at 3 so that
// tests exercise paging.
func (f *FS) List(ctx context.Context, u meta.User, dir, startAfter string, limit int) (*meta.Listing, error) {
	f.enter("List")
	defer f.mu.Unlock()
	p, err := f.clean("list", dir)
	if err != nil {
		return nil, err
	}
	_, n, err := f.resolve("list", p)
	if err != nil {
		return nil, err
	}
	if n.typ != meta.TypeDir {
		return &meta.Listing{Entries: []meta.FileStatus{*f.status(p, n)}}, nil
	}
	if !f.canRead(u, n) {
		return nil, meta.Errorf("list", p, meta.ErrPermission, "")
	}
	names := make([]string, 0, len(n.children))
	for name := range n.children {
		if name > startAfter {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	if limit <= 0 || limit > 3 {
		limit = 3
	}
	l := &meta.Listing{}
	for i, name := range names {
		if i == limit {
			l.Remaining = int64(len(names) - limit)
			break
		}
		l.Entries = append(l.Entries, *f.status(meta.JoinPath(p, name), n.children[name]))
	}
	return l, nil
}

// Delete implements meta.FileSystem.
func (f *FS) Delete(ctx context.Context, u meta.User, path string, recursive bool) error {
	f.enter("Delete")
	defer f.mu.Unlock()
	p, err := f.clean("delete", path)
	if err != nil {
		return err
	}
	if p == meta.RootPath {
		return meta.Errorf("delete", p, meta.ErrInvalidArgument, "the root cannot be deleted")
	}
	parent, n, err := f.resolve("delete", p)
	if err != nil {
		return err
	}
	if n.typ == meta.TypeDir && len(n.children) > 0 && !recursive {
		return meta.Errorf("delete", p, meta.ErrNotEmpty, "")
	}
	if !f.canWrite(u, parent) {
		return meta.Errorf("delete", p, meta.ErrPermission, "")
	}
	_, name := meta.ParentPath(p)
	delete(parent.children, name)
	return nil
}

// Rename implements meta.FileSystem.
func (f *FS) Rename(ctx context.Context, u meta.User, src, dst string, opts meta.RenameOptions) error {
	f.enter("Rename")
	defer f.mu.Unlock()
	s, err := f.clean("rename", src)
	if err != nil {
		return err
	}
	d, err := f.clean("rename", dst)
	if err != nil {
		return err
	}
	if s == meta.RootPath || s == d || meta.IsAncestor(s, d) {
		return meta.Errorf("rename", d, meta.ErrInvalidArgument, "destination inside source")
	}
	sp, sn, err := f.resolve("rename", s)
	if err != nil {
		return err
	}
	dp, dn, err := f.resolve("rename", d)
	if err != nil && meta.KindOf(err) != meta.KindNotFound || dp == nil {
		return err
	}
	_, dname := meta.ParentPath(d)
	if dn != nil {
		switch {
		case dn.typ == meta.TypeDir && !opts.Overwrite:
			dp, dname = dn, sname(s)
			if dp.children[dname] != nil {
				return meta.Errorf("rename", meta.JoinPath(d, dname), meta.ErrExists, "")
			}
		case !opts.Overwrite:
			return meta.Errorf("rename", d, meta.ErrExists, "")
		case dn.typ == meta.TypeDir && len(dn.children) > 0:
			return meta.Errorf("rename", d, meta.ErrNotEmpty, "")
		}
	}
	if !f.canWrite(u, sp) || !f.canWrite(u, dp) {
		return meta.Errorf("rename", s, meta.ErrPermission, "")
	}
	delete(sp.children, sname(s))
	dp.children[dname] = sn
	return nil
}

func sname(p string) string { _, n := meta.ParentPath(p); return n }

func (f *FS) owned(op string, u meta.User, path string) (string, *inode, error) {
	p, err := f.clean(op, path)
	if err != nil {
		return "", nil, err
	}
	_, n, err := f.resolve(op, p)
	if err != nil {
		return "", nil, err
	}
	if u.Name != f.cfg.Superuser && u.Name != n.owner {
		return "", nil, meta.Errorf(op, p, meta.ErrPermission, "not the owner")
	}
	return p, n, nil
}

// SetPermission implements meta.FileSystem.
func (f *FS) SetPermission(ctx context.Context, u meta.User, path string, perm meta.Perm) error {
	f.enter("SetPermission")
	defer f.mu.Unlock()
	_, n, err := f.owned("setPermission", u, path)
	if err != nil {
		return err
	}
	n.perm = perm & meta.PermMask
	return nil
}

// SetOwner implements meta.FileSystem.
func (f *FS) SetOwner(ctx context.Context, u meta.User, path, owner, group string) error {
	f.enter("SetOwner")
	defer f.mu.Unlock()
	p, n, err := f.owned("setOwner", u, path)
	if err != nil {
		return err
	}
	if owner != "" && u.Name != f.cfg.Superuser {
		return meta.Errorf("setOwner", p, meta.ErrPermission, "only the superuser changes owners")
	}
	if owner != "" {
		n.owner = owner
	}
	if group != "" {
		n.group = group
	}
	return nil
}

// SetTimes implements meta.FileSystem.
func (f *FS) SetTimes(ctx context.Context, u meta.User, path string, mtime, atime int64) error {
	f.enter("SetTimes")
	defer f.mu.Unlock()
	_, n, err := f.owned("setTimes", u, path)
	if err != nil {
		return err
	}
	if mtime != -1 {
		n.mtime = mtime
	}
	if atime != -1 {
		n.atime = atime
	}
	return nil
}

// SetReplication implements meta.FileSystem.
func (f *FS) SetReplication(ctx context.Context, u meta.User, path string, replication uint16) error {
	f.enter("SetReplication")
	defer f.mu.Unlock()
	p, n, err := f.file("setReplication", u, path)
	if err != nil {
		return err
	}
	if replication == 0 {
		return meta.Errorf("setReplication", p, meta.ErrInvalidArgument, "replication 0")
	}
	n.repl = replication
	return nil
}

// Truncate implements meta.FileSystem.
func (f *FS) Truncate(ctx context.Context, u meta.User, path string, newLength int64) error {
	f.enter("Truncate")
	defer f.mu.Unlock()
	p, n, err := f.file("truncate", u, path)
	if err != nil {
		return err
	}
	if n.lease != "" {
		return meta.Errorf("truncate", p, meta.ErrLease, "")
	}
	if newLength < 0 || newLength > int64(len(n.data)) {
		return meta.Errorf("truncate", p, meta.ErrInvalidArgument, "new length %d", newLength)
	}
	n.data = n.data[:newLength:newLength]
	return nil
}

// Concat implements meta.FileSystem.
func (f *FS) Concat(ctx context.Context, u meta.User, target string, srcs []string) error {
	f.enter("Concat")
	defer f.mu.Unlock()
	p, t, err := f.file("concat", u, target)
	if err != nil {
		return err
	}
	if len(srcs) == 0 {
		return meta.Errorf("concat", p, meta.ErrInvalidArgument, "no sources")
	}
	tdir, _ := meta.ParentPath(p)
	var nodes []*inode
	for _, s := range srcs {
		sp, sn, err := f.file("concat", u, s)
		if err != nil {
			return err
		}
		if d, _ := meta.ParentPath(sp); d != tdir || sn == t {
			return meta.Errorf("concat", sp, meta.ErrInvalidArgument, "source not beside target")
		}
		nodes = append(nodes, sn)
	}
	_, dir, _ := f.resolve("concat", tdir)
	for i, sn := range nodes {
		t.data = append(t.data, sn.data...)
		delete(dir.children, sname(srcs[i]))
	}
	return nil
}

// ContentSummary implements meta.FileSystem.
func (f *FS) ContentSummary(ctx context.Context, u meta.User, path string) (*meta.ContentSummary, error) {
	f.enter("ContentSummary")
	defer f.mu.Unlock()
	p, err := f.clean("contentSummary", path)
	if err != nil {
		return nil, err
	}
	_, n, err := f.resolve("contentSummary", p)
	if err != nil {
		return nil, err
	}
	cs := &meta.ContentSummary{NsQuota: -1, SpaceQuota: -1}
	var walk func(n *inode)
	walk = func(n *inode) {
		cs.NsConsumed++
		switch n.typ {
		case meta.TypeDir:
			cs.DirectoryCount++
			for _, c := range n.children {
				walk(c)
			}
		default:
			cs.FileCount++
			cs.Length += int64(len(n.data))
			cs.SpaceConsumed += int64(len(n.data)) * int64(n.repl)
		}
	}
	walk(n)
	return cs, nil
}

// SetQuota implements meta.FileSystem: quotas are not supported here.
func (f *FS) SetQuota(ctx context.Context, u meta.User, dir string, nsQuota, spaceQuota int64) error {
	f.enter("SetQuota")
	defer f.mu.Unlock()
	return meta.Errorf("setQuota", dir, meta.ErrUnsupported, "memfs has no quotas")
}

// CreateSymlink implements meta.FileSystem.
func (f *FS) CreateSymlink(ctx context.Context, u meta.User, target, link string, createParent bool) error {
	f.enter("CreateSymlink")
	defer f.mu.Unlock()
	p, err := f.clean("createSymlink", link)
	if err != nil {
		return err
	}
	dirPath, name := meta.ParentPath(p)
	var dir *inode
	if createParent {
		dir, err = f.mkdirsLocked("createSymlink", u, dirPath, meta.DefaultDir)
	} else {
		_, dir, err = f.resolve("createSymlink", dirPath)
	}
	if err != nil {
		return err
	}
	if dir.children[name] != nil {
		return meta.Errorf("createSymlink", p, meta.ErrExists, "")
	}
	if strings.TrimSpace(target) == "" {
		return meta.Errorf("createSymlink", p, meta.ErrInvalidArgument, "empty target")
	}
	dir.children[name] = &inode{id: f.nextID, typ: meta.TypeSymlink, perm: 0o777, owner: u.Name, group: "supergroup",
		symlink: target, mtime: f.now()}
	f.nextID++
	return nil
}

// RenewLease implements meta.FileSystem.
func (f *FS) RenewLease(ctx context.Context, u meta.User, client string) error {
	f.enter("RenewLease")
	defer f.mu.Unlock()
	return nil
}

// Defaults implements meta.FileSystem.
func (f *FS) Defaults(ctx context.Context) (*meta.ServerDefaults, error) {
	f.enter("Defaults")
	defer f.mu.Unlock()
	return &meta.ServerDefaults{BlockSize: 128 << 20, Replication: 3, InlineThreshold: f.cfg.MaxFile,
		LeaseSoftLimitMs: 60_000, LeaseHardLimitMs: 3_600_000}, nil
}

var _ meta.FileSystem = (*FS)(nil)
