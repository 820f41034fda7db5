package fstest

import (
	"fmt"
	"strings"

	"github.com/nimbus-fs/nimbus/meta"
)

// The tree: mkdirs, files and their content, listing, delete and rename.
var treeCases = []Case{
	{Name: "mkdirs and stat", Run: func(c *C, fs meta.FileSystem) {
		ctx := c.Ctx
		c.Is("mkdirs", fs.Mkdirs(ctx, c.Root, "/a/b", 0o750), nil)
		c.Is("mkdirs again", fs.Mkdirs(ctx, c.Root, "/a/b", 0o750), nil)
		if st := c.Stat(fs, "/a/b"); st.Type != meta.TypeDir || st.Perm != 0o750 || st.Owner != c.Cfg.Superuser || st.Path != "/a/b" {
			c.T.Fatalf("stat /a/b = %+v", st)
		}
		if st := c.Stat(fs, "/a"); st.ChildrenNum != 1 {
			c.T.Fatalf("stat /a = %+v", st)
		}
		c.File(fs, c.Root, "/a/f", "")
		c.Is("mkdirs over a file", fs.Mkdirs(ctx, c.Root, "/a/f", 0), meta.ErrExists)
		c.Is("mkdirs under a file", fs.Mkdirs(ctx, c.Root, "/a/f/x", 0), meta.ErrNotDir)
		_, err := fs.Stat(ctx, c.Root, "/a/nope")
		c.At("stat missing", err, meta.ErrNotFound, "/a/nope")
		_, err = fs.Stat(ctx, c.Root, "/a/f/x")
		c.Is("stat under a file", err, meta.ErrNotDir)
		_, err = fs.Stat(ctx, c.Root, "a/b")
		c.Is("relative path", err, meta.ErrInvalidPath)
	}},
	{Name: "create, overwrite, exclusive", Run: func(c *C, fs meta.FileSystem) {
		ctx := c.Ctx
		c.File(fs, c.Root, "/f", "abc")
		if st := c.Stat(fs, "/f"); st.Type != meta.TypeFile || st.Length != 3 || st.UnderConstruction || st.Owner != c.Cfg.Superuser {
			c.T.Fatalf("stat /f = %+v", st)
		}
		_, err := fs.Create(ctx, c.Root, "/f", meta.CreateOptions{Client: "c1"})
		c.At("create existing", err, meta.ErrExists, "/f")
		if got := c.Read(fs, c.Root, "/f"); got != "abc" {
			c.T.Fatalf("a refused create changed the file: %q", got)
		}
		_, err = meta.CreateFile(ctx, fs, c.Root, "/f", meta.CreateOptions{Client: "c1", Overwrite: true}, []byte("xy"))
		c.Is("overwrite", err, nil)
		if got := c.Read(fs, c.Root, "/f"); got != "xy" {
			c.T.Fatalf("overwritten file holds %q, want xy", got)
		}
		_, err = fs.Create(ctx, c.Root, "/", meta.CreateOptions{Client: "c1"})
		c.Is("create the root", err, meta.ErrExists)
		c.Is("mkdirs", fs.Mkdirs(ctx, c.Root, "/d", 0), nil)
		_, err = fs.Create(ctx, c.Root, "/d", meta.CreateOptions{Client: "c1", Overwrite: true})
		c.Is("create over a directory", err, meta.ErrExists)
		if st := c.Stat(fs, "/d"); st.Type != meta.TypeDir {
			c.T.Fatalf("create over a directory replaced it: %+v", st)
		}
		_, err = fs.Create(ctx, c.Root, "/f/g", meta.CreateOptions{Client: "c1", CreateParent: true})
		c.Is("create under a file", err, meta.ErrNotDir)
		_, err = meta.CreateFile(ctx, fs, c.Root, "/no/f", meta.CreateOptions{Client: "c1", CreateParent: true}, []byte("1"))
		c.Is("create with parent", err, nil)
		if st := c.Stat(fs, "/no"); st.Type != meta.TypeDir {
			c.T.Fatalf("parent made by create = %+v", st)
		}
	}},
	{Name: "create, write, complete under a lease", Needs: func(k Caps) bool { return k.OpenFiles }, Run: func(c *C, fs meta.FileSystem) {
		ctx := c.Ctx
		st, err := fs.Create(ctx, c.Root, "/f", meta.CreateOptions{Client: "c1", Replication: 2})
		c.Is("create", err, nil)
		if !st.UnderConstruction || st.Length != 0 || st.Replication != 2 || st.Type != meta.TypeFile || st.Perm != meta.DefaultFile {
			c.T.Fatalf("create = %+v", st)
		}
		_, err = fs.Create(ctx, c.Root, "/f", meta.CreateOptions{Client: "c2", Overwrite: true})
		c.Is("create over an open file", err, meta.ErrLease)
		c.Is("write by another client", fs.Write(ctx, c.Root, "/f", "c2", 0, []byte("x")), meta.ErrLease)
		c.Is("write at a gap", fs.Write(ctx, c.Root, "/f", "c1", 3, []byte("x")), meta.ErrInvalidArgument)
		c.Is("write", fs.Write(ctx, c.Root, "/f", "c1", 0, []byte("abc")), nil)
		if st := c.Stat(fs, "/f"); st.Length != 0 || !st.UnderConstruction {
			c.T.Fatalf("open file visible early: %+v", st)
		}
		_, err = fs.Complete(ctx, c.Root, "/f", "c2")
		c.Is("complete by another client", err, meta.ErrLease)
		st, err = fs.Complete(ctx, c.Root, "/f", "c1")
		c.Is("complete", err, nil)
		if st.Length != 3 || st.UnderConstruction {
			c.T.Fatalf("complete = %+v", st)
		}
		c.Is("write after complete", fs.Write(ctx, c.Root, "/f", "c1", 3, []byte("x")), meta.ErrLease)
		_, err = fs.Create(ctx, c.Root, "/f", meta.CreateOptions{Client: "c1", Overwrite: true})
		c.Is("overwrite", err, nil)
		if st := c.Stat(fs, "/f"); st.Length != 0 {
			c.T.Fatalf("overwritten file kept its content: %+v", st)
		}
		_, err = fs.Create(ctx, c.Root, "/no/f", meta.CreateOptions{Client: "c1"})
		c.Is("create without parent", err, meta.ErrNotFound)
		_, err = fs.Create(ctx, c.Root, "/g", meta.CreateOptions{})
		if c.Cfg.Caps.OwnClientName {
			c.Is("create without client", err, nil)
			if st := c.Stat(fs, "/g"); !st.UnderConstruction {
				c.T.Fatalf("created under the implementation's name = %+v", st)
			}
		} else {
			c.Is("create without client", err, meta.ErrInvalidArgument)
		}
		c.Is("renew", fs.RenewLease(ctx, c.Root, "c1"), nil)
	}},
	{Name: "append and read ranges", Run: func(c *C, fs meta.FileSystem) {
		ctx := c.Ctx
		c.File(fs, c.Root, "/f", "hello")
		st, err := fs.Append(ctx, c.Root, "/f", "c1")
		c.Is("append", err, nil)
		if st.Length != 5 {
			c.T.Fatalf("append = %+v", st)
		}
		if c.Cfg.Caps.OpenFiles {
			if !st.UnderConstruction {
				c.T.Fatalf("append = %+v", st)
			}
			_, err = fs.Append(ctx, c.Root, "/f", "c2")
			c.Is("append to an open file", err, meta.ErrLease)
			if c.Cfg.Caps.ConcatTruncate {
				c.Is("truncate an open file", fs.Truncate(ctx, c.Root, "/f", 1), meta.ErrLease)
			}
		}
		c.Is("write", fs.Write(ctx, c.Root, "/f", "c1", 5, []byte(" world")), nil)
		if c.Cfg.Caps.OpenFiles {
			if b, err := fs.Read(ctx, c.Root, "/f", 0, 100); err != nil || string(b) != "hello" {
				c.T.Fatalf("read while open = %q, %v", b, err)
			}
		}
		_, err = fs.Complete(ctx, c.Root, "/f", "c1")
		c.Is("complete", err, nil)
		for _, r := range []struct {
			off, n int64
			want   string
		}{{0, 100, "hello world"}, {2, 100, "llo world"}, {0, 5, "hello"}, {6, 3, "wor"}, {10, 1, "d"}, {11, 5, ""}, {100, 1, ""}} {
			if b, err := fs.Read(ctx, c.Root, "/f", r.off, r.n); err != nil || string(b) != r.want {
				c.T.Fatalf("read %d+%d = %q, %v; want %q", r.off, r.n, b, err, r.want)
			}
		}
		_, err = fs.Read(ctx, c.Root, "/", 0, 1)
		c.Is("read a directory", err, meta.ErrIsDir)
		_, err = fs.Read(ctx, c.Root, "/nope", 0, 1)
		c.At("read missing", err, meta.ErrNotFound, "/nope")
		_, err = fs.Append(ctx, c.Root, "/", "c1")
		c.Is("append a directory", err, meta.ErrIsDir)
		_, err = fs.Append(ctx, c.Root, "/nope", "c1")
		c.Is("append missing", err, meta.ErrNotFound)
	}},
	{Name: "size limit", Needs: func(k Caps) bool { return k.OpenFiles }, Run: func(c *C, fs meta.FileSystem) {
		if c.Cfg.MaxFile == 0 {
			c.T.Skip("no size limit configured")
		}
		ctx := c.Ctx
		_, err := fs.Create(ctx, c.Root, "/big", meta.CreateOptions{Client: "c"})
		c.Is("create", err, nil)
		c.Is("write to the limit", fs.Write(ctx, c.Root, "/big", "c", 0, make([]byte, c.Cfg.MaxFile)), nil)
		c.Is("write past the limit", fs.Write(ctx, c.Root, "/big", "c", c.Cfg.MaxFile, []byte("x")), meta.ErrTooLarge)
	}},
	{Name: "list pages in name order", Run: func(c *C, fs meta.FileSystem) {
		ctx := c.Ctx
		for _, n := range []string{"e", "b", "d", "a", "c"} {
			c.Is("mkdirs", fs.Mkdirs(ctx, c.Root, "/d/"+n, 0), nil)
		}
		var got []string
		after := ""
		for {
			l, err := fs.List(ctx, c.Root, "/d", after, 2)
			c.Is("list", err, nil)
			for _, e := range l.Entries {
				got = append(got, e.Path)
			}
			if want := int64(5 - len(got)); l.Remaining != want {
				c.T.Fatalf("after %v: remaining %d, want %d", got, l.Remaining, want)
			}
			if l.Remaining == 0 {
				break
			}
			after = l.Entries[len(l.Entries)-1].Name()
		}
		if strings.Join(got, " ") != "/d/a /d/b /d/c /d/d /d/e" {
			c.T.Fatalf("listed %v", got)
		}
		c.File(fs, c.Root, "/d/f", "x")
		l, err := fs.List(ctx, c.Root, "/d/f", "", 0)
		c.Is("list a file", err, nil)
		if len(l.Entries) != 1 || l.Entries[0].Path != "/d/f" || l.Entries[0].Length != 1 {
			c.T.Fatalf("list a file = %+v", l)
		}
		_, err = fs.List(ctx, c.Root, "/nope", "", 0)
		c.At("list missing", err, meta.ErrNotFound, "/nope")
	}},
	{Name: "list limit", Run: func(c *C, fs meta.FileSystem) {
		if c.Cfg.ListLimit == 0 {
			c.T.Skip("no list limit configured")
		}
		ctx := c.Ctx
		for i := 0; i < c.Cfg.ListLimit+3; i++ {
			c.Is("mkdirs", fs.Mkdirs(ctx, c.Root, fmt.Sprintf("/big/%05d", i), 0), nil)
		}
		l, err := fs.List(ctx, c.Root, "/big", "", c.Cfg.ListLimit+100)
		c.Is("list", err, nil)
		if len(l.Entries) != c.Cfg.ListLimit || l.Remaining != 3 {
			c.T.Fatalf("%d entries, %d remaining", len(l.Entries), l.Remaining)
		}
	}},
	{Name: "delete", Run: func(c *C, fs meta.FileSystem) {
		ctx := c.Ctx
		c.File(fs, c.Root, "/d/e/f", "x")
		c.Is("delete the root", fs.Delete(ctx, c.Root, "/", true), meta.ErrInvalidArgument)
		c.Is("delete non-empty", fs.Delete(ctx, c.Root, "/d", false), meta.ErrNotEmpty)
		c.Stat(fs, "/d/e/f")
		c.At("delete missing", fs.Delete(ctx, c.Root, "/nope", false), meta.ErrNotFound, "/nope")
		c.File(fs, c.Root, "/d/g", "y")
		c.Is("delete a file", fs.Delete(ctx, c.Root, "/d/g", false), nil)
		c.Is("delete recursive", fs.Delete(ctx, c.Root, "/d", true), nil)
		_, err := fs.Stat(ctx, c.Root, "/d/e/f")
		c.Is("stat deleted", err, meta.ErrNotFound)
		if st := c.Stat(fs, "/"); st.ChildrenNum != 0 {
			c.T.Fatalf("root still has %d children", st.ChildrenNum)
		}
		c.Is("mkdirs where a deleted directory was", fs.Mkdirs(ctx, c.Root, "/d", 0), nil)
		if st := c.Stat(fs, "/d"); st.ChildrenNum != 0 {
			c.T.Fatalf("a new directory in place of a deleted one has %d children", st.ChildrenNum)
		}
	}},
	{Name: "rename", Run: func(c *C, fs meta.FileSystem) {
		ctx := c.Ctx
		c.File(fs, c.Root, "/a/f", "1")
		c.File(fs, c.Root, "/a/g", "22")
		c.Is("mkdirs", fs.Mkdirs(ctx, c.Root, "/b", 0), nil)
		c.Is("rename into a directory", fs.Rename(ctx, c.Root, "/a/f", "/b", meta.RenameOptions{}), nil)
		if st := c.Stat(fs, "/b/f"); st.Length != 1 {
			c.T.Fatalf("moved file = %+v", st)
		}
		c.Is("rename onto a file", fs.Rename(ctx, c.Root, "/b/f", "/a/g", meta.RenameOptions{}), meta.ErrExists)
		c.Is("rename with overwrite", fs.Rename(ctx, c.Root, "/b/f", "/a/g", meta.RenameOptions{Overwrite: true}), nil)
		if st := c.Stat(fs, "/a/g"); st.Length != 1 {
			c.T.Fatalf("overwritten file = %+v", st)
		}
		c.Is("rename missing", fs.Rename(ctx, c.Root, "/nope", "/x", meta.RenameOptions{}), meta.ErrNotFound)
		c.Is("rename into itself", fs.Rename(ctx, c.Root, "/a", "/a/x/y", meta.RenameOptions{}), meta.ErrInvalidArgument)
		c.Is("rename into its own child", fs.Rename(ctx, c.Root, "/a", "/a/x", meta.RenameOptions{}), meta.ErrInvalidArgument)
		c.Is("rename to a missing parent", fs.Rename(ctx, c.Root, "/a/g", "/no/g", meta.RenameOptions{}), meta.ErrNotFound)
		c.Is("rename a directory", fs.Rename(ctx, c.Root, "/a", "/c", meta.RenameOptions{}), nil)
		if st := c.Stat(fs, "/c/g"); st.Path != "/c/g" || st.Length != 1 {
			c.T.Fatalf("child of a moved directory = %+v", st)
		}
		_, err := fs.Stat(ctx, c.Root, "/a/g")
		c.Is("old path of a moved child", err, meta.ErrNotFound)
		if st := c.Stat(fs, "/"); st.ChildrenNum != 2 {
			c.T.Fatalf("root has %d children, want 2 (/b, /c)", st.ChildrenNum)
		}
		c.Is("mkdirs", fs.Mkdirs(ctx, c.Root, "/e/full/x", 0), nil)
		c.Is("mkdirs", fs.Mkdirs(ctx, c.Root, "/e/empty", 0), nil)
		c.Is("rename a directory over a non-empty one", fs.Rename(ctx, c.Root, "/c", "/e/full", meta.RenameOptions{Overwrite: true}), meta.ErrNotEmpty)
		c.Is("rename a directory over an empty one", fs.Rename(ctx, c.Root, "/c", "/e/empty", meta.RenameOptions{Overwrite: true}), nil)
		if got := c.Read(fs, c.Root, "/e/empty/g"); got != "1" {
			c.T.Fatalf("moved over an empty directory: %q", got)
		}
		// HDFS checks the types before the emptiness.
		c.Is("rename a file over a directory", fs.Rename(ctx, c.Root, "/e/empty/g", "/e/full", meta.RenameOptions{Overwrite: true}), meta.ErrIsDir)
		c.File(fs, c.Root, "/e/h", "h")
		c.Is("rename a directory over a file", fs.Rename(ctx, c.Root, "/e/full", "/e/h", meta.RenameOptions{Overwrite: true}), meta.ErrNotDir)
		c.Is("rename the root", fs.Rename(ctx, c.Root, "/", "/z", meta.RenameOptions{}), meta.ErrInvalidArgument)
	}},
}
