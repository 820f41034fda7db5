package namespace

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/nimbus-fs/nimbus/meta"
)

// refFS is the reference model: a map from path to node, with the error rules
// the contract states, written as plainly as possible.
type refFS struct {
	nodes map[string]*refNode
}

type refNode struct {
	dir  bool
	data []byte
	perm meta.Perm
}

func newRefFS() *refFS {
	return &refFS{nodes: map[string]*refNode{"/": {dir: true, perm: meta.DefaultDir}}}
}

// walk returns the error for reaching p's parent: ErrNotFound for a missing
// ancestor, ErrNotDir for a file in the way.
func (m *refFS) walk(p string) error {
	if p == "/" {
		return nil
	}
	parent, _ := meta.ParentPath(p)
	anc := "/"
	for _, c := range meta.SplitPath(parent) {
		anc = meta.JoinPath(anc, c)
		n := m.nodes[anc]
		if n == nil {
			return meta.ErrNotFound
		}
		if !n.dir {
			return meta.ErrNotDir
		}
	}
	return nil
}

func (m *refFS) children(p string) []string {
	var out []string
	for q := range m.nodes {
		if q != "/" && func() bool { d, _ := meta.ParentPath(q); return d == p }() {
			_, name := meta.ParentPath(q)
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func (m *refFS) mkdirs(p string) error {
	anc := "/"
	for _, c := range meta.SplitPath(p) {
		anc = meta.JoinPath(anc, c)
		if n := m.nodes[anc]; n != nil && !n.dir {
			if anc == p {
				return meta.ErrExists
			}
			return meta.ErrNotDir
		}
	}
	anc = "/"
	for _, c := range meta.SplitPath(p) {
		anc = meta.JoinPath(anc, c)
		if m.nodes[anc] == nil {
			perm := meta.DefaultDir | 0o300
			if anc == p {
				perm = meta.DefaultDir
			}
			m.nodes[anc] = &refNode{dir: true, perm: perm}
		}
	}
	return nil
}

func (m *refFS) writeFile(p string, data []byte, overwrite bool) error {
	if p == "/" {
		return meta.ErrExists
	}
	if err := m.walk(p); err != nil {
		return err
	}
	if parent, _ := meta.ParentPath(p); m.nodes[parent] == nil {
		return meta.ErrNotFound
	}
	if n := m.nodes[p]; n != nil && (n.dir || !overwrite) {
		return meta.ErrExists
	}
	m.nodes[p] = &refNode{data: bytes.Clone(data), perm: meta.DefaultFile}
	return nil
}

func (m *refFS) get(p string) (*refNode, error) {
	if err := m.walk(p); err != nil {
		return nil, err
	}
	n := m.nodes[p]
	if n == nil {
		return nil, meta.ErrNotFound
	}
	return n, nil
}

func (m *refFS) delete(p string, recursive bool) error {
	if p == "/" {
		return meta.ErrInvalidArgument
	}
	n, err := m.get(p)
	if err != nil {
		return err
	}
	if n.dir && len(m.children(p)) > 0 && !recursive {
		return meta.ErrNotEmpty
	}
	for q := range m.nodes {
		if q == p || meta.IsAncestor(p, q) {
			delete(m.nodes, q)
		}
	}
	return nil
}

func (m *refFS) rename(src, dst string, overwrite bool) error {
	if src == "/" || meta.IsAncestor(src, dst) {
		return meta.ErrInvalidArgument
	}
	n, err := m.get(src)
	if err != nil {
		return err
	}
	target := dst
	for pass := 0; pass < 2; pass++ {
		if err := m.walk(target); err != nil {
			return err
		}
		if target != "/" {
			if parent, _ := meta.ParentPath(target); m.nodes[parent] == nil {
				return meta.ErrNotFound
			}
		}
		if target == src {
			return nil
		}
		if old := m.nodes[target]; pass == 0 && old != nil && old.dir && !overwrite {
			_, name := meta.ParentPath(src)
			target = meta.JoinPath(dst, name)
			continue
		}
		break
	}
	if target == "/" {
		return meta.ErrExists
	}
	if old := m.nodes[target]; old != nil {
		switch {
		case !overwrite:
			return meta.ErrExists
		case old.dir && !n.dir:
			return meta.ErrIsDir
		case !old.dir && n.dir:
			return meta.ErrNotDir
		case old.dir && len(m.children(target)) > 0:
			return meta.ErrNotEmpty
		}
		delete(m.nodes, target)
	}
	moved := map[string]*refNode{}
	for q, v := range m.nodes {
		if q == src || meta.IsAncestor(src, q) {
			moved[target+strings.TrimPrefix(q, src)] = v
			delete(m.nodes, q)
		}
	}
	for q, v := range moved {
		m.nodes[q] = v
	}
	return nil
}

// sameKind reports whether the engine's error has the reference's kind.
func sameKind(t *rapid.T, op string, got, want error) {
	if want == nil {
		if got != nil {
			t.Fatalf("%s: engine failed with %v, the model succeeded", op, got)
		}
		return
	}
	if !errors.Is(got, want) {
		t.Fatalf("%s: engine returned %v, the model %v", op, got, want)
	}
}

// TestModel runs random operation sequences against the engine and the
// reference model and compares every result, then checks the whole tree and
// fsck; without a metadata cache, and with one small enough to evict
// (stats and listings answered from it must be the model's too).
func TestModel(t *testing.T) {
	t.Run("nocache", func(t *testing.T) { testModel(t, nil) })
	t.Run("cache", func(t *testing.T) { testModel(t, withCache(16<<10)) })
}

func testModel(t *testing.T, edit func(*Config)) {
	genPath := rapid.Custom(func(t *rapid.T) string {
		depth := rapid.IntRange(1, 3).Draw(t, "depth")
		p := ""
		for i := 0; i < depth; i++ {
			p += "/" + rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "name")
		}
		return p
	})
	base := t.TempDir()
	run := 0
	rapid.Check(t, func(t *rapid.T) {
		run++
		e, st, err := openEngineDirWith(filepath.Join(base, strconv.Itoa(run)), edit)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		defer e.Close()
		ctx := context.Background()
		m := newRefFS()
		steps := rapid.IntRange(10, 60).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			switch rapid.IntRange(0, 8).Draw(t, "op") {
			case 0:
				p := genPath.Draw(t, "path")
				sameKind(t, "mkdirs "+p, e.Mkdirs(ctx, root, p, 0), m.mkdirs(p))
			case 1:
				p := genPath.Draw(t, "path")
				data := rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, "data")
				ow := rapid.Bool().Draw(t, "overwrite")
				want := m.writeFile(p, data, ow)
				_, err := e.Create(ctx, root, p, meta.CreateOptions{Client: "m", Overwrite: ow})
				sameKind(t, "create "+p, err, want)
				if err == nil {
					if err := e.Write(ctx, root, p, "m", 0, data); err != nil {
						t.Fatalf("write %s: %v", p, err)
					}
					if _, err := e.Complete(ctx, root, p, "m"); err != nil {
						t.Fatalf("complete %s: %v", p, err)
					}
				}
			case 2:
				p := genPath.Draw(t, "path")
				r := rapid.Bool().Draw(t, "recursive")
				sameKind(t, "delete "+p, e.Delete(ctx, root, p, r), m.delete(p, r))
			case 3:
				src, dst := genPath.Draw(t, "src"), genPath.Draw(t, "dst")
				ow := rapid.Bool().Draw(t, "overwrite")
				sameKind(t, "rename "+src+" "+dst, e.Rename(ctx, root, src, dst, meta.RenameOptions{Overwrite: ow}), m.rename(src, dst, ow))
			case 4:
				p := genPath.Draw(t, "path")
				s, err := e.Stat(ctx, root, p)
				n, want := m.get(p)
				sameKind(t, "stat "+p, err, want)
				if err == nil && (s.IsDir() != n.dir || s.Length != int64(len(n.data)) || s.Perm != n.perm) {
					t.Fatalf("stat %s: engine %+v, model dir=%v len=%d perm=%o", p, s, n.dir, len(n.data), n.perm)
				}
			case 5:
				p := genPath.Draw(t, "path")
				data, err := e.Read(ctx, root, p, 0, 1000)
				n, want := m.get(p)
				if want == nil && n.dir {
					want = meta.ErrIsDir
				}
				sameKind(t, "read "+p, err, want)
				if err == nil && !bytes.Equal(data, n.data) {
					t.Fatalf("read %s: %q, model %q", p, data, n.data)
				}
			case 6:
				p := genPath.Draw(t, "path")
				perm := meta.Perm(rapid.IntRange(0, 0o777).Draw(t, "perm"))
				n, want := m.get(p)
				sameKind(t, "chmod "+p, e.SetPermission(ctx, root, p, perm), want)
				if want == nil {
					n.perm = perm
				}
			case 7:
				p := genPath.Draw(t, "path")
				size := int64(rapid.IntRange(0, 300).Draw(t, "size"))
				n, want := m.get(p)
				if want == nil && n.dir {
					want = meta.ErrIsDir
				} else if want == nil && size > int64(len(n.data)) {
					want = meta.ErrInvalidArgument
				}
				sameKind(t, "truncate "+p, e.Truncate(ctx, root, p, size), want)
				if want == nil {
					n.data = n.data[:size]
				}
			case 8:
				p := genPath.Draw(t, "path")
				l, err := e.List(ctx, root, p, "", 0)
				n, want := m.get(p)
				sameKind(t, "list "+p, err, want)
				if err == nil {
					var got []string
					for _, en := range l.Entries {
						got = append(got, en.Name())
					}
					exp := m.children(p)
					if !n.dir {
						_, name := meta.ParentPath(p)
						exp = []string{name}
					}
					if strings.Join(got, ",") != strings.Join(exp, ",") {
						t.Fatalf("list %s: %v, model %v", p, got, exp)
					}
				}
			}
		}
		// The whole tree agrees, and the store is consistent.
		for p, n := range m.nodes {
			s, err := e.Stat(ctx, root, p)
			if err != nil || s.IsDir() != n.dir {
				t.Fatalf("final stat %s: %+v, %v", p, s, err)
			}
		}
		rep, err := e.Fsck(ctx)
		if err != nil || !rep.Clean() || rep.Inodes != int64(len(m.nodes)) {
			t.Fatalf("fsck: %v %+v (model has %d inodes)", err, rep, len(m.nodes))
		}
	})
}
