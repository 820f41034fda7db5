package main

import (
	"context"
	"sort"
	"strings"
	"sync"

	"github.com/nimbus-fs/nimbus/meta"
)

// fakeFS is a small in-memory meta.FileSystem for the shell's unit tests,
// used until the real engine builds. It keeps no permissions beyond storing
// them, and every inode gets mtime fakeTime.
type fakeFS struct {
	mu    sync.Mutex
	nodes map[string]*fakeNode
	next  uint64
	limit int64 // largest file
}

type fakeNode struct {
	st   meta.FileStatus
	data []byte
	uc   string // lease holder while under construction
}

const fakeTime = int64(1795395720000) // 2026-11-23 01:02:00 UTC

func newFakeFS() *fakeFS {
	f := &fakeFS{nodes: map[string]*fakeNode{}, next: 16385, limit: 128 << 10}
	f.nodes["/"] = &fakeNode{st: meta.FileStatus{Path: "/", FileID: 16385, Type: meta.TypeDir,
		Perm: 0o755, Owner: "root", Group: "supergroup", Mtime: fakeTime, Atime: fakeTime, NsQuota: -1, SpaceQuota: -1}}
	return f
}

func (f *fakeFS) lookup(op, p string) (string, *fakeNode, error) {
	clean, err := meta.CleanPath(op, p)
	if err != nil {
		return "", nil, err
	}
	parts := meta.SplitPath(clean)
	cur := "/"
	for i := range parts {
		n := f.nodes[cur]
		if !n.st.IsDir() {
			return clean, nil, meta.Errorf(op, cur, meta.ErrNotDir, "")
		}
		cur = meta.JoinPath(cur, parts[i])
		if f.nodes[cur] == nil {
			return clean, nil, meta.Errorf(op, clean, meta.ErrNotFound, "")
		}
	}
	return clean, f.nodes[cur], nil
}

func (f *fakeFS) add(p string, t meta.FileType, perm meta.Perm, u meta.User) *fakeNode {
	f.next++
	n := &fakeNode{st: meta.FileStatus{Path: p, FileID: f.next, Type: t, Perm: perm, Owner: u.Name,
		Group: "supergroup", Mtime: fakeTime, Atime: fakeTime, NsQuota: -1, SpaceQuota: -1}}
	if t == meta.TypeFile {
		n.st.Replication, n.st.BlockSize = 3, 128<<20
	}
	f.nodes[p] = n
	parent, _ := meta.ParentPath(p)
	f.nodes[parent].st.ChildrenNum++
	return n
}

func (f *fakeFS) remove(p string) {
	for q := range f.nodes {
		if q == p || meta.IsAncestor(p, q) {
			delete(f.nodes, q)
		}
	}
	parent, _ := meta.ParentPath(p)
	f.nodes[parent].st.ChildrenNum--
}

func (f *fakeFS) Mkdirs(_ context.Context, u meta.User, dir string, perm meta.Perm) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	clean, err := meta.CleanPath("mkdirs", dir)
	if err != nil {
		return err
	}
	cur := "/"
	for _, name := range meta.SplitPath(clean) {
		cur = meta.JoinPath(cur, name)
		n := f.nodes[cur]
		switch {
		case n == nil:
			f.add(cur, meta.TypeDir, perm, u)
		case !n.st.IsDir() && cur == clean:
			return meta.Errorf("mkdirs", clean, meta.ErrExists, "")
		case !n.st.IsDir():
			return meta.Errorf("mkdirs", cur, meta.ErrNotDir, "")
		}
	}
	return nil
}

func (f *fakeFS) Create(_ context.Context, u meta.User, p string, opts meta.CreateOptions) (*meta.FileStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	clean, n, err := f.lookup("create", p)
	if meta.KindOf(err) != meta.KindNotFound && err != nil {
		return nil, err
	}
	if n != nil {
		if n.st.IsDir() {
			return nil, meta.Errorf("create", clean, meta.ErrIsDir, "")
		}
		if !opts.Overwrite {
			return nil, meta.Errorf("create", clean, meta.ErrExists, "")
		}
		f.remove(clean)
	}
	parent, _ := meta.ParentPath(clean)
	if opts.CreateParent && f.nodes[parent] == nil {
		f.mu.Unlock()
		err := f.Mkdirs(context.Background(), u, parent, meta.DefaultDir)
		f.mu.Lock()
		if err != nil {
			return nil, err
		}
	}
	if pn := f.nodes[parent]; pn == nil {
		return nil, meta.Errorf("create", clean, meta.ErrNotFound, "parent missing")
	} else if !pn.st.IsDir() {
		return nil, meta.Errorf("create", parent, meta.ErrNotDir, "")
	}
	perm := opts.Perm
	if perm == 0 {
		perm = meta.DefaultFile
	}
	n = f.add(clean, meta.TypeFile, perm, u)
	n.uc = opts.Client
	n.st.UnderConstruction = true
	st := n.st
	return &st, nil
}

func (f *fakeFS) Append(context.Context, meta.User, string, string) (*meta.FileStatus, error) {
	return nil, meta.ErrUnsupported
}

func (f *fakeFS) Write(_ context.Context, _ meta.User, p, client string, off int64, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	clean, n, err := f.lookup("write", p)
	if err != nil {
		return err
	}
	if n.uc != client {
		return meta.Errorf("write", clean, meta.ErrLease, "")
	}
	if off != int64(len(n.data)) {
		return meta.Errorf("write", clean, meta.ErrInvalidArgument, "offset")
	}
	if int64(len(n.data)+len(data)) > f.limit {
		return meta.Errorf("write", clean, meta.ErrTooLarge, "limit is %d bytes", f.limit)
	}
	n.data = append(n.data, data...)
	return nil
}

func (f *fakeFS) Complete(_ context.Context, _ meta.User, p, client string) (*meta.FileStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	clean, n, err := f.lookup("complete", p)
	if err != nil {
		return nil, err
	}
	if n.uc != client {
		return nil, meta.Errorf("complete", clean, meta.ErrLease, "")
	}
	n.uc, n.st.UnderConstruction, n.st.Length = "", false, int64(len(n.data))
	st := n.st
	return &st, nil
}

func (f *fakeFS) Read(_ context.Context, _ meta.User, p string, off, length int64) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	clean, n, err := f.lookup("open", p)
	if err != nil {
		return nil, err
	}
	if n.st.IsDir() {
		return nil, meta.Errorf("open", clean, meta.ErrIsDir, "")
	}
	data := n.data[:n.st.Length]
	if off >= int64(len(data)) {
		return nil, nil
	}
	end := min(int64(len(data)), off+length)
	return append([]byte(nil), data[off:end]...), nil
}

func (f *fakeFS) Stat(_ context.Context, _ meta.User, p string) (*meta.FileStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, n, err := f.lookup("getfileinfo", p)
	if err != nil {
		return nil, err
	}
	st := n.st
	return &st, nil
}

func (f *fakeFS) List(_ context.Context, _ meta.User, dir, after string, limit int) (*meta.Listing, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	clean, n, err := f.lookup("listing", dir)
	if err != nil {
		return nil, err
	}
	if !n.st.IsDir() {
		return &meta.Listing{Entries: []meta.FileStatus{n.st}}, nil
	}
	var all []meta.FileStatus
	for q, c := range f.nodes {
		if parent, name := meta.ParentPath(q); parent == clean && q != "/" && name > after {
			all = append(all, c.st)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name() < all[j].Name() })
	limit = min(limit, 2) // small pages, so that paging is exercised
	l := &meta.Listing{Entries: all}
	if len(all) > limit {
		l.Entries, l.Remaining = all[:limit], int64(len(all)-limit)
	}
	return l, nil
}

func (f *fakeFS) Delete(_ context.Context, _ meta.User, p string, recursive bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	clean, n, err := f.lookup("delete", p)
	if err != nil {
		return err
	}
	if clean == "/" {
		return meta.Errorf("delete", clean, meta.ErrInvalidPath, "root")
	}
	if n.st.IsDir() && n.st.ChildrenNum > 0 && !recursive {
		return meta.Errorf("delete", clean, meta.ErrNotEmpty, "")
	}
	f.remove(clean)
	return nil
}

func (f *fakeFS) Rename(_ context.Context, _ meta.User, src, dst string, opts meta.RenameOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	csrc, sn, err := f.lookup("rename", src)
	if err != nil {
		return err
	}
	cdst, dn, err := f.lookup("rename", dst)
	if err != nil && meta.KindOf(err) != meta.KindNotFound {
		return err
	}
	if dn != nil && dn.st.IsDir() && !opts.Overwrite {
		_, name := meta.ParentPath(csrc)
		cdst = meta.JoinPath(cdst, name)
		dn = f.nodes[cdst]
	}
	if cdst == csrc {
		return nil
	}
	if meta.IsAncestor(csrc, cdst) {
		return meta.Errorf("rename", cdst, meta.ErrInvalidPath, "into its own subtree")
	}
	if dn != nil {
		if !opts.Overwrite {
			return meta.Errorf("rename", cdst, meta.ErrExists, "")
		}
		f.remove(cdst)
	}
	parent, _ := meta.ParentPath(cdst)
	if f.nodes[parent] == nil {
		return meta.Errorf("rename", cdst, meta.ErrNotFound, "")
	}
	moved := map[string]*fakeNode{}
	for q, c := range f.nodes {
		if q == csrc || meta.IsAncestor(csrc, q) {
			moved[cdst+q[len(csrc):]] = c
			delete(f.nodes, q)
		}
	}
	for q, c := range moved {
		c.st.Path = q
		f.nodes[q] = c
	}
	sp, _ := meta.ParentPath(csrc)
	f.nodes[sp].st.ChildrenNum--
	f.nodes[parent].st.ChildrenNum++
	_ = sn
	return nil
}

func (f *fakeFS) SetPermission(_ context.Context, _ meta.User, p string, perm meta.Perm) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, n, err := f.lookup("setpermission", p)
	if err != nil {
		return err
	}
	n.st.Perm = perm
	return nil
}

func (f *fakeFS) SetOwner(_ context.Context, u meta.User, p, owner, group string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	clean, n, err := f.lookup("setowner", p)
	if err != nil {
		return err
	}
	if owner != "" && u.Name != "root" {
		return meta.Errorf("setowner", clean, meta.ErrPermission, "only a superuser changes the owner")
	}
	if owner != "" {
		n.st.Owner = owner
	}
	if group != "" {
		n.st.Group = group
	}
	return nil
}

func (f *fakeFS) SetTimes(_ context.Context, _ meta.User, p string, mtime, atime int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, n, err := f.lookup("settimes", p)
	if err != nil {
		return err
	}
	if mtime >= 0 {
		n.st.Mtime = mtime
	}
	if atime >= 0 {
		n.st.Atime = atime
	}
	return nil
}

func (f *fakeFS) SetReplication(context.Context, meta.User, string, uint16) error {
	return meta.ErrUnsupported
}
func (f *fakeFS) Truncate(context.Context, meta.User, string, int64) error {
	return meta.ErrUnsupported
}
func (f *fakeFS) Concat(context.Context, meta.User, string, []string) error {
	return meta.ErrUnsupported
}

func (f *fakeFS) ContentSummary(_ context.Context, _ meta.User, p string) (*meta.ContentSummary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	clean, n, err := f.lookup("contentsummary", p)
	if err != nil {
		return nil, err
	}
	cs := &meta.ContentSummary{NsQuota: n.st.NsQuota, SpaceQuota: n.st.SpaceQuota}
	for q, c := range f.nodes {
		if q != clean && !meta.IsAncestor(clean, q) {
			continue
		}
		cs.NsConsumed++
		if c.st.IsDir() {
			cs.DirectoryCount++
			continue
		}
		cs.FileCount++
		cs.Length += c.st.Length
		cs.SpaceConsumed += c.st.Length * int64(c.st.Replication)
	}
	return cs, nil
}

func (f *fakeFS) SetQuota(_ context.Context, _ meta.User, dir string, ns, space int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, n, err := f.lookup("setquota", dir)
	if err != nil {
		return err
	}
	if ns != 0 {
		n.st.NsQuota = ns
	}
	if space != 0 {
		n.st.SpaceQuota = space
	}
	return nil
}

func (f *fakeFS) CreateSymlink(_ context.Context, u meta.User, tgt, link string, _ bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	clean, n, err := f.lookup("createsymlink", link)
	if n != nil {
		return meta.Errorf("createsymlink", clean, meta.ErrExists, "")
	}
	if meta.KindOf(err) != meta.KindNotFound {
		return err
	}
	s := f.add(clean, meta.TypeSymlink, 0o777, u)
	s.st.Symlink = tgt
	return nil
}

func (f *fakeFS) RenewLease(context.Context, meta.User, string) error { return nil }

func (f *fakeFS) Defaults(context.Context) (*meta.ServerDefaults, error) {
	return &meta.ServerDefaults{BlockSize: 128 << 20, Replication: 3, InlineThreshold: f.limit}, nil
}

var _ meta.FileSystem = (*fakeFS)(nil)

// fakeTrim trims trailing spaces on each line, for golden comparisons.
func fakeTrim(s string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	return strings.Join(lines, "\n")
}

// newTestFS returns the file system the shell tests run against.
func newTestFS(t interface{ Helper() }) meta.FileSystem {
	t.Helper()
	return newFakeFS()
}
