package metatest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/metatest"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
)

var (
	root = meta.User{Name: metatest.Superuser}
	bob  = meta.User{Name: "bob"}
)

// engine returns the real engine on Pebble in a temporary directory,
// configured like MemFS: the same superuser, size limit and list page.
func engine(t *testing.T) meta.FileSystem {
	t.Helper()
	st, err := pebblestore.Open(t.TempDir(), pebblestore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	cfg := namespace.DefaultConfig()
	cfg.Superuser = metatest.Superuser
	cfg.Groups = func(string) []string { return nil }
	cfg.InlineThreshold = metatest.MaxFile
	cfg.DefaultReplication = 3
	cfg.ListLimit = metatest.ListLimit
	eng, err := namespace.New(st, cfg)
	if err != nil {
		_ = st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = eng.Close()
		_ = st.Close()
	})
	return eng
}

// check runs one step and fails the test with the step's name when err is
// not of kind want (nil: success).
type checker struct {
	t *testing.T
}

func (c checker) is(step string, err, want error) {
	c.t.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		c.t.Fatalf("%s: got %v, want %v", step, err, want)
	}
	var oe *meta.OpError
	if err != nil && !errors.As(err, &oe) {
		c.t.Fatalf("%s: %v is not a *meta.OpError", step, err)
	}
}

func (c checker) stat(fs meta.FileSystem, p string) *meta.FileStatus {
	c.t.Helper()
	st, err := fs.Stat(context.Background(), root, p)
	c.is("stat "+p, err, nil)
	return st
}

func (c checker) file(fs meta.FileSystem, p, data string) {
	c.t.Helper()
	_, err := meta.CreateFile(context.Background(), fs, root, p, meta.CreateOptions{Client: "setup", CreateParent: true}, []byte(data))
	c.is("create "+p, err, nil)
}

// behaviour is what tests of the RPC, client, gateway and benchmark rely on;
// every case runs against MemFS and the engine.
var behaviour = []struct {
	name string
	run  func(c checker, fs meta.FileSystem)
}{
	{"mkdirs and stat", func(c checker, fs meta.FileSystem) {
		ctx := context.Background()
		c.is("mkdirs", fs.Mkdirs(ctx, root, "/a/b", 0o750), nil)
		c.is("mkdirs again", fs.Mkdirs(ctx, root, "/a/b", 0o750), nil)
		if st := c.stat(fs, "/a/b"); st.Type != meta.TypeDir || st.Perm != 0o750 || st.Owner != "root" || st.Path != "/a/b" {
			c.t.Fatalf("stat /a/b = %+v", st)
		}
		if st := c.stat(fs, "/a"); st.ChildrenNum != 1 {
			c.t.Fatalf("stat /a = %+v", st)
		}
		c.file(fs, "/a/f", "")
		c.is("mkdirs over a file", fs.Mkdirs(ctx, root, "/a/f", 0), meta.ErrExists)
		c.is("mkdirs under a file", fs.Mkdirs(ctx, root, "/a/f/x", 0), meta.ErrNotDir)
		_, err := fs.Stat(ctx, root, "/a/nope")
		c.is("stat missing", err, meta.ErrNotFound)
		_, err = fs.Stat(ctx, root, "/a/f/x")
		c.is("stat under a file", err, meta.ErrNotDir)
		_, err = fs.Stat(ctx, root, "a/b")
		c.is("relative path", err, meta.ErrInvalidPath)
	}},
	{"create, write, complete under a lease", func(c checker, fs meta.FileSystem) {
		ctx := context.Background()
		st, err := fs.Create(ctx, root, "/f", meta.CreateOptions{Client: "c1", Replication: 2})
		c.is("create", err, nil)
		if !st.UnderConstruction || st.Length != 0 || st.Replication != 2 || st.Type != meta.TypeFile || st.Perm != meta.DefaultFile {
			c.t.Fatalf("create = %+v", st)
		}
		_, err = fs.Create(ctx, root, "/f", meta.CreateOptions{Client: "c2", Overwrite: true})
		c.is("create over an open file", err, meta.ErrLease)
		c.is("write by another client", fs.Write(ctx, root, "/f", "c2", 0, []byte("x")), meta.ErrLease)
		c.is("write at a gap", fs.Write(ctx, root, "/f", "c1", 3, []byte("x")), meta.ErrInvalidArgument)
		c.is("write", fs.Write(ctx, root, "/f", "c1", 0, []byte("abc")), nil)
		if st := c.stat(fs, "/f"); st.Length != 0 || !st.UnderConstruction {
			c.t.Fatalf("open file visible early: %+v", st)
		}
		_, err = fs.Complete(ctx, root, "/f", "c2")
		c.is("complete by another client", err, meta.ErrLease)
		st, err = fs.Complete(ctx, root, "/f", "c1")
		c.is("complete", err, nil)
		if st.Length != 3 || st.UnderConstruction {
			c.t.Fatalf("complete = %+v", st)
		}
		c.is("write after complete", fs.Write(ctx, root, "/f", "c1", 3, []byte("x")), meta.ErrLease)
		_, err = fs.Create(ctx, root, "/f", meta.CreateOptions{Client: "c1"})
		c.is("create existing", err, meta.ErrExists)
		_, err = fs.Create(ctx, root, "/f", meta.CreateOptions{Client: "c1", Overwrite: true})
		c.is("overwrite", err, nil)
		if st := c.stat(fs, "/f"); st.Length != 0 {
			c.t.Fatalf("overwritten file kept its content: %+v", st)
		}
		_, err = fs.Create(ctx, root, "/", meta.CreateOptions{Client: "c1"})
		c.is("create the root", err, meta.ErrExists)
		c.is("mkdirs", fs.Mkdirs(ctx, root, "/d", 0), nil)
		_, err = fs.Create(ctx, root, "/d", meta.CreateOptions{Client: "c1", Overwrite: true})
		c.is("create over a directory", err, meta.ErrExists)
		_, err = fs.Create(ctx, root, "/no/f", meta.CreateOptions{Client: "c1"})
		c.is("create without parent", err, meta.ErrNotFound)
		_, err = fs.Create(ctx, root, "/no/f", meta.CreateOptions{Client: "c1", CreateParent: true})
		c.is("create with parent", err, nil)
		_, err = fs.Create(ctx, root, "/g", meta.CreateOptions{})
		c.is("create without client", err, meta.ErrInvalidArgument)
	}},
	{"append and read", func(c checker, fs meta.FileSystem) {
		ctx := context.Background()
		c.file(fs, "/f", "hello")
		st, err := fs.Append(ctx, root, "/f", "c1")
		c.is("append", err, nil)
		if st.Length != 5 || !st.UnderConstruction {
			c.t.Fatalf("append = %+v", st)
		}
		_, err = fs.Append(ctx, root, "/f", "c2")
		c.is("append to an open file", err, meta.ErrLease)
		c.is("truncate an open file", fs.Truncate(ctx, root, "/f", 1), meta.ErrLease)
		c.is("write", fs.Write(ctx, root, "/f", "c1", 5, []byte(" world")), nil)
		if b, err := fs.Read(ctx, root, "/f", 0, 100); err != nil || string(b) != "hello" {
			c.t.Fatalf("read while open = %q, %v", b, err)
		}
		_, err = fs.Complete(ctx, root, "/f", "c1")
		c.is("complete", err, nil)
		if b, err := fs.Read(ctx, root, "/f", 2, 100); err != nil || string(b) != "llo world" {
			c.t.Fatalf("read = %q, %v", b, err)
		}
		if b, err := fs.Read(ctx, root, "/f", 100, 1); err != nil || len(b) != 0 {
			c.t.Fatalf("read past the end = %q, %v", b, err)
		}
		_, err = fs.Read(ctx, root, "/", 0, 1)
		c.is("read a directory", err, meta.ErrIsDir)
		_, err = fs.Read(ctx, root, "/nope", 0, 1)
		c.is("read missing", err, meta.ErrNotFound)
		_, err = fs.Append(ctx, root, "/", "c1")
		c.is("append a directory", err, meta.ErrIsDir)
	}},
	{"size limit", func(c checker, fs meta.FileSystem) {
		ctx := context.Background()
		_, err := fs.Create(ctx, root, "/big", meta.CreateOptions{Client: "c"})
		c.is("create", err, nil)
		c.is("write to the limit", fs.Write(ctx, root, "/big", "c", 0, make([]byte, metatest.MaxFile)), nil)
		c.is("write past the limit", fs.Write(ctx, root, "/big", "c", metatest.MaxFile, []byte("x")), meta.ErrTooLarge)
	}},
	{"list pages in name order", func(c checker, fs meta.FileSystem) {
		ctx := context.Background()
		for _, n := range []string{"e", "b", "d", "a", "c"} {
			c.is("mkdirs", fs.Mkdirs(ctx, root, "/d/"+n, 0), nil)
		}
		var got []string
		after := ""
		for {
			l, err := fs.List(ctx, root, "/d", after, 2)
			c.is("list", err, nil)
			for _, e := range l.Entries {
				got = append(got, e.Path)
			}
			if want := int64(5 - len(got)); l.Remaining != want {
				c.t.Fatalf("after %v: remaining %d, want %d", got, l.Remaining, want)
			}
			if l.Remaining == 0 {
				break
			}
			after = l.Entries[len(l.Entries)-1].Name()
		}
		if strings.Join(got, " ") != "/d/a /d/b /d/c /d/d /d/e" {
			c.t.Fatalf("listed %v", got)
		}
		c.file(fs, "/d/f", "x")
		l, err := fs.List(ctx, root, "/d/f", "", 0)
		c.is("list a file", err, nil)
		if len(l.Entries) != 1 || l.Entries[0].Path != "/d/f" || l.Entries[0].Length != 1 {
			c.t.Fatalf("list a file = %+v", l)
		}
		_, err = fs.List(ctx, root, "/nope", "", 0)
		c.is("list missing", err, meta.ErrNotFound)
	}},
	{"list limit", func(c checker, fs meta.FileSystem) {
		ctx := context.Background()
		for i := 0; i < metatest.ListLimit+3; i++ {
			c.is("mkdirs", fs.Mkdirs(ctx, root, fmt.Sprintf("/big/%05d", i), 0), nil)
		}
		l, err := fs.List(ctx, root, "/big", "", metatest.ListLimit+100)
		c.is("list", err, nil)
		if len(l.Entries) != metatest.ListLimit || l.Remaining != 3 {
			c.t.Fatalf("%d entries, %d remaining", len(l.Entries), l.Remaining)
		}
	}},
	{"delete", func(c checker, fs meta.FileSystem) {
		ctx := context.Background()
		c.file(fs, "/d/e/f", "x")
		c.is("delete the root", fs.Delete(ctx, root, "/", true), meta.ErrInvalidArgument)
		c.is("delete non-empty", fs.Delete(ctx, root, "/d", false), meta.ErrNotEmpty)
		c.is("delete missing", fs.Delete(ctx, root, "/nope", false), meta.ErrNotFound)
		c.is("delete recursive", fs.Delete(ctx, root, "/d", true), nil)
		_, err := fs.Stat(ctx, root, "/d/e/f")
		c.is("stat deleted", err, meta.ErrNotFound)
		if st := c.stat(fs, "/"); st.ChildrenNum != 0 {
			c.t.Fatalf("root still has %d children", st.ChildrenNum)
		}
	}},
	{"rename", func(c checker, fs meta.FileSystem) {
		ctx := context.Background()
		c.file(fs, "/a/f", "1")
		c.file(fs, "/a/g", "22")
		c.is("mkdirs", fs.Mkdirs(ctx, root, "/b", 0), nil)
		c.is("rename into a directory", fs.Rename(ctx, root, "/a/f", "/b", meta.RenameOptions{}), nil)
		if st := c.stat(fs, "/b/f"); st.Length != 1 {
			c.t.Fatalf("moved file = %+v", st)
		}
		c.is("rename onto a file", fs.Rename(ctx, root, "/b/f", "/a/g", meta.RenameOptions{}), meta.ErrExists)
		c.is("rename with overwrite", fs.Rename(ctx, root, "/b/f", "/a/g", meta.RenameOptions{Overwrite: true}), nil)
		if st := c.stat(fs, "/a/g"); st.Length != 1 {
			c.t.Fatalf("overwritten file = %+v", st)
		}
		c.is("rename missing", fs.Rename(ctx, root, "/nope", "/x", meta.RenameOptions{}), meta.ErrNotFound)
		c.is("rename into itself", fs.Rename(ctx, root, "/a", "/a/x/y", meta.RenameOptions{}), meta.ErrInvalidArgument)
		c.is("rename to a missing parent", fs.Rename(ctx, root, "/a/g", "/no/g", meta.RenameOptions{}), meta.ErrNotFound)
		c.is("rename a directory", fs.Rename(ctx, root, "/a", "/c", meta.RenameOptions{}), nil)
		if st := c.stat(fs, "/c/g"); st.Path != "/c/g" || st.Length != 1 {
			c.t.Fatalf("child of a moved directory = %+v", st)
		}
		if st := c.stat(fs, "/"); st.ChildrenNum != 2 {
			c.t.Fatalf("root has %d children, want 2 (/b, /c)", st.ChildrenNum)
		}
	}},
	{"setters, truncate, concat, summary", func(c checker, fs meta.FileSystem) {
		ctx := context.Background()
		c.file(fs, "/a/f", "hello")
		c.file(fs, "/a/g", "XY")
		c.is("chmod", fs.SetPermission(ctx, root, "/a/f", 0o600), nil)
		c.is("chown", fs.SetOwner(ctx, root, "/a/f", "bob", "g"), nil)
		c.is("touch", fs.SetTimes(ctx, root, "/a/f", 1234, -1), nil)
		c.is("setrep", fs.SetReplication(ctx, root, "/a/f", 5), nil)
		st := c.stat(fs, "/a/f")
		if st.Perm != 0o600 || st.Owner != "bob" || st.Group != "g" || st.Mtime != 1234 || st.Replication != 5 {
			c.t.Fatalf("after set* = %+v", st)
		}
		c.is("chown by a user", fs.SetOwner(ctx, bob, "/a/g", "bob", ""), meta.ErrPermission)
		c.is("quota by a user", fs.SetQuota(ctx, bob, "/a", 10, -1), meta.ErrPermission)
		c.is("truncate", fs.Truncate(ctx, root, "/a/f", 4), nil)
		c.is("truncate longer", fs.Truncate(ctx, root, "/a/f", 10), meta.ErrInvalidArgument)
		c.is("concat", fs.Concat(ctx, root, "/a/f", []string{"/a/g"}), nil)
		if b, err := fs.Read(ctx, root, "/a/f", 0, 100); err != nil || string(b) != "hellXY" {
			c.t.Fatalf("after truncate and concat: %q, %v", b, err)
		}
		_, err := fs.Stat(ctx, root, "/a/g")
		c.is("concat source gone", err, meta.ErrNotFound)
		c.is("quota", fs.SetQuota(ctx, root, "/a", 100, -1), nil)
		cs, err := fs.ContentSummary(ctx, root, "/a")
		c.is("summary", err, nil)
		if cs.DirectoryCount != 1 || cs.FileCount != 1 || cs.Length != 6 || cs.NsQuota != 100 || cs.SpaceConsumed != 6*5 {
			c.t.Fatalf("summary = %+v", cs)
		}
	}},
	{"symlinks", func(c checker, fs meta.FileSystem) {
		ctx := context.Background()
		c.file(fs, "/a/f", "x")
		c.is("symlink", fs.CreateSymlink(ctx, root, "/a", "/l/ink", true), nil)
		if st := c.stat(fs, "/l/ink"); st.Type != meta.TypeSymlink || st.Symlink != "/a" {
			c.t.Fatalf("stat link = %+v", st)
		}
		c.is("symlink exists", fs.CreateSymlink(ctx, root, "/a", "/l/ink", false), meta.ErrExists)
		c.is("symlink without parent", fs.CreateSymlink(ctx, root, "/a", "/m/ink", false), meta.ErrNotFound)
		_, err := fs.Stat(ctx, root, "/l/ink/f")
		c.is("stat through a link", err, meta.ErrUnresolvedLink)
	}},
	{"leases and defaults", func(c checker, fs meta.FileSystem) {
		ctx := context.Background()
		c.is("renew", fs.RenewLease(ctx, root, "c1"), nil)
		d, err := fs.Defaults(ctx)
		c.is("defaults", err, nil)
		if d.Replication != 3 || d.BlockSize != 128<<20 || d.InlineThreshold != metatest.MaxFile {
			c.t.Fatalf("defaults = %+v", d)
		}
	}},
}

// TestBehaviour runs every behaviour check against MemFS and the engine.
func TestBehaviour(t *testing.T) {
	impls := []struct {
		name string
		new  func(t *testing.T) meta.FileSystem
	}{
		{"memfs", func(*testing.T) meta.FileSystem { return metatest.NewMemFS() }},
		{"engine", engine},
	}
	for _, b := range behaviour {
		for _, impl := range impls {
			t.Run(b.name+"/"+impl.name, func(t *testing.T) { b.run(checker{t}, impl.new(t)) })
		}
	}
}

// TestHook: the hook sees every call by name and its error is the result.
func TestHook(t *testing.T) {
	fs := metatest.NewMemFS()
	var seen []string
	boom := errors.New("boom")
	fs.Hook = func(ctx context.Context, m string) error {
		seen = append(seen, m)
		if m == "stat" {
			return boom
		}
		return nil
	}
	ctx := context.Background()
	if err := fs.Mkdirs(ctx, root, "/x", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(ctx, root, "/x"); err != boom {
		t.Fatalf("stat = %v, want the hook's error", err)
	}
	if err := fs.Echo(ctx); err != nil || fs.Echoes() != 1 {
		t.Fatalf("echo = %v, %d echoes", err, fs.Echoes())
	}
	if strings.Join(seen, " ") != "mkdirs stat echo" {
		t.Fatalf("hook saw %v", seen)
	}
	// Without a hook, a done context fails the call.
	fs.Hook = nil
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := fs.Stat(cctx, root, "/x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("stat with a cancelled context = %v", err)
	}
}
