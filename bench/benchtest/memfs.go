// Package benchtest holds test doubles for the benchmark driver: MemFS, an
// in-memory file system that implements bench.Target well enough to run
// every workload without a server. It is a test helper, not a reference
// implementation: permissions, quotas, leases and symlinks are not modelled.
package benchtest

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
)

// MemFS is a map from clean path to status and content under one mutex. It
// is safe for concurrent use.
type MemFS struct {
	mu struct {
		sync.Mutex
		nodes  map[string]*node
		nextID uint64
		echoes int64
	}
}

type node struct {
	st   meta.FileStatus
	data []byte
}

// NewMemFS returns a file system holding only the root.
func NewMemFS() *MemFS {
	m := &MemFS{}
	m.mu.nodes = map[string]*node{"/": {st: meta.FileStatus{Path: "/", FileID: 1, Type: meta.TypeDir, Perm: meta.DefaultDir}}}
	m.mu.nextID = 2
	return m
}

// Echoes returns how many times Echo was called.
func (m *MemFS) Echoes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.echoes
}

// Echo counts the call.
func (m *MemFS) Echo(context.Context) error {
	m.mu.Lock()
	m.mu.echoes++
	m.mu.Unlock()
	return nil
}

func (m *MemFS) lookup(op, p string) (string, *node, error) {
	c, err := meta.CleanPath(op, p)
	if err != nil {
		return "", nil, err
	}
	n := m.mu.nodes[c]
	if n == nil {
		return c, nil, meta.Errorf(op, c, meta.ErrNotFound, "")
	}
	return c, n, nil
}

func (m *MemFS) add(op, c string, t meta.FileType, perm meta.Perm) error {
	parent, _ := meta.ParentPath(c)
	pn := m.mu.nodes[parent]
	if pn == nil {
		return meta.Errorf(op, c, meta.ErrNotFound, "parent missing")
	}
	if pn.st.Type != meta.TypeDir {
		return meta.Errorf(op, c, meta.ErrNotDir, "")
	}
	pn.st.ChildrenNum++
	m.mu.nodes[c] = &node{st: meta.FileStatus{Path: c, FileID: m.mu.nextID, Type: t, Perm: perm, Mtime: time.Now().UnixMilli()}}
	m.mu.nextID++
	return nil
}

func (m *MemFS) Mkdirs(_ context.Context, _ meta.User, dir string, perm meta.Perm) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := meta.CleanPath("mkdirs", dir)
	if err != nil {
		return err
	}
	cur := "/"
	for _, name := range meta.SplitPath(c) {
		cur = meta.JoinPath(cur, name)
		n := m.mu.nodes[cur]
		if n == nil {
			if err := m.add("mkdirs", cur, meta.TypeDir, perm); err != nil {
				return err
			}
		} else if n.st.Type != meta.TypeDir {
			if cur == c {
				return meta.Errorf("mkdirs", cur, meta.ErrExists, "")
			}
			return meta.Errorf("mkdirs", cur, meta.ErrNotDir, "")
		}
	}
	return nil
}

func (m *MemFS) Create(ctx context.Context, u meta.User, path string, opts meta.CreateOptions) (*meta.FileStatus, error) {
	if opts.CreateParent {
		if c, err := meta.CleanPath("create", path); err == nil && c != "/" {
			parent, _ := meta.ParentPath(c)
			if err := m.Mkdirs(ctx, u, parent, meta.DefaultDir); err != nil {
				return nil, err
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c, n, err := m.lookup("create", path)
	if c == "" {
		return nil, err
	}
	if n != nil {
		if !opts.Overwrite || n.st.Type == meta.TypeDir {
			return nil, meta.Errorf("create", c, meta.ErrExists, "")
		}
		n.data, n.st.Length = nil, 0
		st := n.st
		return &st, nil
	}
	if err := m.add("create", c, meta.TypeFile, meta.DefaultFile); err != nil {
		return nil, err
	}
	st := m.mu.nodes[c].st
	return &st, nil
}

func (m *MemFS) Append(_ context.Context, _ meta.User, path, _ string) (*meta.FileStatus, error) {
	return m.Stat(context.Background(), meta.User{}, path)
}

func (m *MemFS) Write(_ context.Context, _ meta.User, path, _ string, offset int64, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, n, err := m.lookup("write", path)
	if err != nil {
		return err
	}
	if offset != int64(len(n.data)) {
		return meta.Errorf("write", path, meta.ErrInvalidArgument, "offset %d, length %d", offset, len(n.data))
	}
	n.data = append(n.data, data...)
	n.st.Length = int64(len(n.data))
	return nil
}

func (m *MemFS) Complete(ctx context.Context, u meta.User, path, _ string) (*meta.FileStatus, error) {
	return m.Stat(ctx, u, path)
}

func (m *MemFS) Read(_ context.Context, _ meta.User, path string, offset, length int64) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, n, err := m.lookup("read", path)
	if err != nil {
		return nil, err
	}
	if n.st.Type == meta.TypeDir {
		return nil, meta.Errorf("read", path, meta.ErrIsDir, "")
	}
	if offset >= int64(len(n.data)) {
		return nil, nil
	}
	end := min(offset+length, int64(len(n.data)))
	return append([]byte(nil), n.data[offset:end]...), nil
}

func (m *MemFS) Stat(_ context.Context, _ meta.User, path string) (*meta.FileStatus, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, n, err := m.lookup("stat", path)
	if err != nil {
		return nil, err
	}
	st := n.st
	return &st, nil
}

func (m *MemFS) List(_ context.Context, _ meta.User, dir, startAfter string, limit int) (*meta.Listing, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, n, err := m.lookup("list", dir)
	if err != nil {
		return nil, err
	}
	if n.st.Type != meta.TypeDir {
		return &meta.Listing{Entries: []meta.FileStatus{n.st}}, nil
	}
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	var names []string
	for p := range m.mu.nodes {
		if p != "/" {
			if parent, name := meta.ParentPath(p); parent == c && name > startAfter {
				names = append(names, name)
			}
		}
	}
	sort.Strings(names)
	l := &meta.Listing{}
	for i, name := range names {
		if i == limit {
			l.Remaining = int64(len(names) - limit)
			break
		}
		l.Entries = append(l.Entries, m.mu.nodes[meta.JoinPath(c, name)].st)
	}
	return l, nil
}

func (m *MemFS) Delete(_ context.Context, _ meta.User, path string, recursive bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, n, err := m.lookup("delete", path)
	if err != nil {
		return err
	}
	if c == "/" {
		return meta.Errorf("delete", c, meta.ErrInvalidArgument, "root")
	}
	if n.st.ChildrenNum > 0 && !recursive {
		return meta.Errorf("delete", c, meta.ErrNotEmpty, "")
	}
	for p := range m.mu.nodes {
		if meta.IsAncestor(c, p) {
			delete(m.mu.nodes, p)
		}
	}
	delete(m.mu.nodes, c)
	parent, _ := meta.ParentPath(c)
	m.mu.nodes[parent].st.ChildrenNum--
	return nil
}

func (m *MemFS) Rename(_ context.Context, _ meta.User, src, dst string, _ meta.RenameOptions) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, n, err := m.lookup("rename", src)
	if err != nil {
		return err
	}
	d, err := meta.CleanPath("rename", dst)
	if err != nil {
		return err
	}
	if m.mu.nodes[d] != nil {
		return meta.Errorf("rename", d, meta.ErrExists, "")
	}
	if meta.IsAncestor(s, d) {
		return meta.Errorf("rename", d, meta.ErrInvalidArgument, "into itself")
	}
	if err := m.add("rename", d, n.st.Type, n.st.Perm); err != nil {
		return err
	}
	moved := m.mu.nodes[d]
	moved.data, moved.st.Length, moved.st.ChildrenNum = n.data, n.st.Length, n.st.ChildrenNum
	for p, c := range m.mu.nodes {
		if meta.IsAncestor(s, p) {
			delete(m.mu.nodes, p)
			c.st.Path = d + strings.TrimPrefix(p, s)
			m.mu.nodes[c.st.Path] = c
		}
	}
	delete(m.mu.nodes, s)
	parent, _ := meta.ParentPath(s)
	m.mu.nodes[parent].st.ChildrenNum--
	return nil
}

func (m *MemFS) SetPermission(_ context.Context, _ meta.User, path string, perm meta.Perm) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, n, err := m.lookup("setPermission", path)
	if err != nil {
		return err
	}
	n.st.Perm = perm
	return nil
}

func (m *MemFS) unsupported(op, path string) error {
	return meta.Errorf(op, path, meta.ErrUnsupported, "not in benchtest.MemFS")
}

func (m *MemFS) SetOwner(_ context.Context, _ meta.User, path, _, _ string) error {
	return m.unsupported("setOwner", path)
}
func (m *MemFS) SetTimes(_ context.Context, _ meta.User, path string, _, _ int64) error {
	return m.unsupported("setTimes", path)
}
func (m *MemFS) SetReplication(_ context.Context, _ meta.User, path string, _ uint16) error {
	return m.unsupported("setReplication", path)
}
func (m *MemFS) Truncate(_ context.Context, _ meta.User, path string, _ int64) error {
	return m.unsupported("truncate", path)
}
func (m *MemFS) Concat(_ context.Context, _ meta.User, target string, _ []string) error {
	return m.unsupported("concat", target)
}
func (m *MemFS) ContentSummary(_ context.Context, _ meta.User, path string) (*meta.ContentSummary, error) {
	return nil, m.unsupported("contentSummary", path)
}
func (m *MemFS) SetQuota(_ context.Context, _ meta.User, dir string, _, _ int64) error {
	return m.unsupported("setQuota", dir)
}
func (m *MemFS) CreateSymlink(_ context.Context, _ meta.User, _, link string, _ bool) error {
	return m.unsupported("createSymlink", link)
}
func (m *MemFS) RenewLease(context.Context, meta.User, string) error { return nil }
func (m *MemFS) Defaults(context.Context) (*meta.ServerDefaults, error) {
	return &meta.ServerDefaults{BlockSize: 128 << 20, Replication: 1, InlineThreshold: 128 << 10}, nil
}

var _ meta.FileSystem = (*MemFS)(nil)
