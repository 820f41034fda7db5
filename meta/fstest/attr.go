package fstest

import (
	"fmt"

	"github.com/nimbus-fs/nimbus/meta"
)

// Attributes: mode, owner, times, replication, quotas and what needs them,
// symlinks, the server's defaults.
var attrCases = []Case{
	{Name: "setters", Run: func(c *C, fs meta.FileSystem) {
		ctx := c.Ctx
		c.File(fs, c.Root, "/a/f", "hello")
		c.Is("chmod", fs.SetPermission(ctx, c.Root, "/a/f", 0o600), nil)
		c.Is("chown", fs.SetOwner(ctx, c.Root, "/a/f", "bob", "g"), nil)
		c.Is("setrep", fs.SetReplication(ctx, c.Root, "/a/f", 5), nil)
		st := c.Stat(fs, "/a/f")
		if st.Perm != 0o600 || st.Owner != "bob" || st.Group != "g" || st.Replication != 5 {
			c.T.Fatalf("after set* = %+v", st)
		}
		c.Is("chown the group only", fs.SetOwner(ctx, c.Root, "/a/f", "", "h"), nil)
		if st := c.Stat(fs, "/a/f"); st.Owner != "bob" || st.Group != "h" {
			c.T.Fatalf("after chown :h = %+v", st)
		}
		c.Is("chmod a directory", fs.SetPermission(ctx, c.Root, "/a", 0o1751), nil)
		if st := c.Stat(fs, "/a"); st.Perm != 0o1751 {
			c.T.Fatalf("directory mode %o, want 1751 (sticky)", st.Perm)
		}
		c.At("chmod missing", fs.SetPermission(ctx, c.Root, "/nope", 0o600), meta.ErrNotFound, "/nope")
		c.Is("chown by a user", fs.SetOwner(ctx, bob, "/a/f", "alice", ""), meta.ErrPermission)
		c.Is("quota by a user", fs.SetQuota(ctx, bob, "/a", 10, -1), meta.ErrPermission)
	}},
	{Name: "times", Run: func(c *C, fs meta.FileSystem) {
		ctx := c.Ctx
		c.File(fs, c.Root, "/f", "x")
		if st := c.Stat(fs, "/f"); st.Mtime <= 0 {
			c.T.Fatalf("a new file has mtime %d", st.Mtime)
		}
		c.Is("touch both", fs.SetTimes(ctx, c.Root, "/f", 1234, 5678), nil)
		if st := c.Stat(fs, "/f"); st.Mtime != 1234 || st.Atime != 5678 {
			c.T.Fatalf("after SetTimes(1234, 5678): mtime %d atime %d", st.Mtime, st.Atime)
		}
		c.Is("touch atime only", fs.SetTimes(ctx, c.Root, "/f", -1, 99), nil)
		if st := c.Stat(fs, "/f"); st.Mtime != 1234 || st.Atime != 99 {
			c.T.Fatalf("after SetTimes(-1, 99): mtime %d atime %d", st.Mtime, st.Atime)
		}
		c.Is("touch mtime only", fs.SetTimes(ctx, c.Root, "/f", 42, -1), nil)
		if st := c.Stat(fs, "/f"); st.Mtime != 42 || st.Atime != 99 {
			c.T.Fatalf("after SetTimes(42, -1): mtime %d atime %d", st.Mtime, st.Atime)
		}
		c.Is("touch a directory", fs.Mkdirs(ctx, c.Root, "/d", 0), nil)
		c.Is("touch a directory", fs.SetTimes(ctx, c.Root, "/d", 777, -1), nil)
		if st := c.Stat(fs, "/d"); st.Mtime != 777 {
			c.T.Fatalf("directory mtime %d, want 777", st.Mtime)
		}
		c.At("touch missing", fs.SetTimes(ctx, c.Root, "/nope", 1, 1), meta.ErrNotFound, "/nope")
	}},
	{Name: "truncate, concat, summary", Needs: func(k Caps) bool { return k.ConcatTruncate && k.Summary }, Run: func(c *C, fs meta.FileSystem) {
		ctx := c.Ctx
		c.File(fs, c.Root, "/a/f", "hello")
		c.File(fs, c.Root, "/a/g", "XY")
		c.Is("setrep", fs.SetReplication(ctx, c.Root, "/a/f", 5), nil)
		c.Is("truncate", fs.Truncate(ctx, c.Root, "/a/f", 4), nil)
		c.Is("truncate longer", fs.Truncate(ctx, c.Root, "/a/f", 10), meta.ErrInvalidArgument)
		c.Is("truncate a directory", fs.Truncate(ctx, c.Root, "/a", 0), meta.ErrIsDir)
		c.Is("concat", fs.Concat(ctx, c.Root, "/a/f", []string{"/a/g"}), nil)
		if b, err := fs.Read(ctx, c.Root, "/a/f", 0, 100); err != nil || string(b) != "hellXY" {
			c.T.Fatalf("after truncate and concat: %q, %v", b, err)
		}
		_, err := fs.Stat(ctx, c.Root, "/a/g")
		c.Is("concat source gone", err, meta.ErrNotFound)
		c.Is("quota", fs.SetQuota(ctx, c.Root, "/a", 100, -1), nil)
		cs, err := fs.ContentSummary(ctx, c.Root, "/a")
		c.Is("summary", err, nil)
		if cs.DirectoryCount != 1 || cs.FileCount != 1 || cs.Length != 6 || cs.NsQuota != 100 || cs.SpaceConsumed != 6*5 {
			c.T.Fatalf("summary = %+v", cs)
		}
		c.Is("clear the quota", fs.SetQuota(ctx, c.Root, "/a", -1, -1), nil)
		if cs, err := fs.ContentSummary(ctx, c.Root, "/a"); err != nil || cs.NsQuota != -1 {
			c.T.Fatalf("summary after clearing the quota = %+v, %v", cs, err)
		}
	}},
	{Name: "namespace quota", Needs: func(k Caps) bool { return k.Quotas }, Run: func(c *C, fs meta.FileSystem) {
		ctx := c.Ctx
		c.Is("mkdirs", fs.Mkdirs(ctx, c.Root, "/q", 0), nil)
		// The directory counts itself, as in HDFS: 3 leaves room for two.
		c.Is("quota", fs.SetQuota(ctx, c.Root, "/q", 3, -1), nil)
		c.Is("mkdirs within", fs.Mkdirs(ctx, c.Root, "/q/a", 0), nil)
		c.File(fs, c.Root, "/q/f", "x")
		c.Is("mkdirs past", fs.Mkdirs(ctx, c.Root, "/q/b", 0), meta.ErrQuota)
		_, err := fs.Create(ctx, c.Root, "/q/a/g", meta.CreateOptions{Client: "c"})
		c.Is("create past", err, meta.ErrQuota)
		c.Is("rename in past", fs.Mkdirs(ctx, c.Root, "/out", 0), nil)
		c.Is("rename in past", fs.Rename(ctx, c.Root, "/out", "/q/out", meta.RenameOptions{}), meta.ErrQuota)
		c.Stat(fs, "/out")
		c.Is("delete within", fs.Delete(ctx, c.Root, "/q/f", false), nil)
		c.Is("mkdirs once freed", fs.Mkdirs(ctx, c.Root, "/q/b", 0), nil)
		cs, err := fs.ContentSummary(ctx, c.Root, "/q")
		c.Is("summary", err, nil)
		if cs.NsQuota != 3 || cs.NsConsumed != 3 {
			c.T.Fatalf("summary = %+v", cs)
		}
	}},
	{Name: "permissions and ownership", Needs: func(k Caps) bool { return k.Permissions }, Run: func(c *C, fs meta.FileSystem) {
		ctx := c.Ctx
		c.Home(fs)
		c.Is("mkdirs as alice", fs.Mkdirs(ctx, alice, "/home/alice", 0o755), nil)
		c.File(fs, alice, "/home/alice/f", "secret")
		if st := c.Stat(fs, "/home/alice/f"); st.Owner != "alice" {
			c.T.Fatalf("alice's file = %+v", st)
		}
		if st := c.Stat(fs, "/home/alice"); st.Owner != "alice" || st.Group != c.Stat(fs, "/home").Group {
			c.T.Fatalf("alice's directory = %+v (a new inode takes its parent's group)", st)
		}
		_, err := fs.Create(ctx, bob, "/home/alice/g", meta.CreateOptions{Client: "b"})
		c.Is("create in another's directory", err, meta.ErrPermission)
		c.Is("mkdirs in another's directory", fs.Mkdirs(ctx, bob, "/home/alice/d", 0o755), meta.ErrPermission)
		c.Is("delete in another's directory", fs.Delete(ctx, bob, "/home/alice/f", false), meta.ErrPermission)
		c.Is("rename out of another's directory", fs.Rename(ctx, bob, "/home/alice/f", "/home/f", meta.RenameOptions{}), meta.ErrPermission)
		if got := c.Read(fs, bob, "/home/alice/f"); got != "secret" {
			c.T.Fatalf("bob reads %q", got)
		}
		c.Is("chmod by another", fs.SetPermission(ctx, bob, "/home/alice/f", 0o777), meta.ErrPermission)
		c.Is("chmod by the owner", fs.SetPermission(ctx, alice, "/home/alice/f", 0o600), nil)
		_, err = fs.Read(ctx, bob, "/home/alice/f", 0, 10)
		c.Is("read without r", err, meta.ErrPermission)
		if got := c.Read(fs, alice, "/home/alice/f"); got != "secret" {
			c.T.Fatalf("alice reads %q", got)
		}
		if got := c.Read(fs, c.Root, "/home/alice/f"); got != "secret" {
			c.T.Fatalf("the superuser reads %q", got)
		}
		c.Is("chmod the directory", fs.SetPermission(ctx, alice, "/home/alice", 0o700), nil)
		_, err = fs.Stat(ctx, bob, "/home/alice/f")
		c.Is("stat without x on the parent", err, meta.ErrPermission)
		_, err = fs.List(ctx, bob, "/home/alice", "", 0)
		c.Is("list without r", err, meta.ErrPermission)
		c.Is("chown to another by the owner", fs.SetOwner(ctx, alice, "/home/alice/f", "bob", ""), meta.ErrPermission)
		c.Is("chown by the superuser", fs.SetOwner(ctx, c.Root, "/home/alice/f", "bob", ""), nil)
		_, err = fs.Read(ctx, alice, "/home/alice/f", 0, 10)
		c.Is("read by the former owner", err, meta.ErrPermission)
		c.Is("delete own file in own directory", fs.Delete(ctx, alice, "/home/alice/f", false), nil)
		// The sticky bit: only an entry's owner (or the directory's) removes it.
		c.Is("sticky", fs.SetPermission(ctx, c.Root, "/home", 0o1777), nil)
		c.File(fs, bob, "/home/bobs", "b")
		c.Is("delete another's entry under the sticky bit", fs.Delete(ctx, alice, "/home/bobs", false), meta.ErrPermission)
		c.Is("delete own entry under the sticky bit", fs.Delete(ctx, bob, "/home/bobs", false), nil)
		if !c.Cfg.Caps.OwnUser {
			c.Is("nobody", fs.Mkdirs(ctx, meta.User{}, "/home/x", 0o755), meta.ErrPermission)
		}
	}},
	{Name: "recursive delete needs rights on the subtree", Needs: func(k Caps) bool { return k.Permissions }, Run: func(c *C, fs meta.FileSystem) {
		ctx := c.Ctx
		c.Home(fs)
		c.Is("mkdirs as bob", fs.Mkdirs(ctx, bob, "/home/bob", 0o777), nil)
		c.Is("mkdirs as alice", fs.Mkdirs(ctx, alice, "/home/bob/a", 0o755), nil)
		c.File(fs, alice, "/home/bob/a/f", "x")
		c.Is("delete a subtree holding another's closed directory", fs.Delete(ctx, bob, "/home/bob", true), meta.ErrPermission)
		c.Stat(fs, "/home/bob/a/f")
		c.Is("delete by the superuser", fs.Delete(ctx, c.Root, "/home/bob", true), nil)
	}},
	{Name: "symlinks", Needs: func(k Caps) bool { return k.Symlinks }, Run: func(c *C, fs meta.FileSystem) {
		ctx := c.Ctx
		c.File(fs, c.Root, "/a/f", "x")
		c.Is("symlink", fs.CreateSymlink(ctx, c.Root, "/a", "/l/ink", true), nil)
		if st := c.Stat(fs, "/l/ink"); st.Type != meta.TypeSymlink || st.Symlink != "/a" {
			c.T.Fatalf("stat link = %+v", st)
		}
		c.Is("symlink exists", fs.CreateSymlink(ctx, c.Root, "/a", "/l/ink", false), meta.ErrExists)
		c.Is("symlink without parent", fs.CreateSymlink(ctx, c.Root, "/a", "/m/ink", false), meta.ErrNotFound)
		_, err := fs.Stat(ctx, c.Root, "/l/ink/f")
		c.Is("stat through a link", err, meta.ErrUnresolvedLink)
		c.Is("delete a link", fs.Delete(ctx, c.Root, "/l/ink", false), nil)
		c.Stat(fs, "/a/f")
	}},
	{Name: "defaults", Run: func(c *C, fs meta.FileSystem) {
		d, err := fs.Defaults(c.Ctx)
		if err != nil {
			c.T.Fatalf("defaults: %v", err)
		}
		if w := c.Cfg.Defaults; w != nil {
			if w.Replication != 0 && d.Replication != w.Replication || w.BlockSize != 0 && d.BlockSize != w.BlockSize ||
				w.InlineThreshold != 0 && d.InlineThreshold != w.InlineThreshold {
				c.T.Fatalf("defaults = %+v, want %+v", d, w)
			}
		}
	}},
	{Name: "many entries", Run: func(c *C, fs meta.FileSystem) {
		ctx := c.Ctx
		const n = 40
		for i := range n {
			c.File(fs, c.Root, fmt.Sprintf("/m/%02d", i), fmt.Sprint(i))
		}
		if st := c.Stat(fs, "/m"); st.ChildrenNum != n {
			c.T.Fatalf("%d children, want %d", st.ChildrenNum, n)
		}
		c.Is("rename the directory", fs.Rename(ctx, c.Root, "/m", "/n", meta.RenameOptions{}), nil)
		for i := range n {
			if got := c.Read(fs, c.Root, fmt.Sprintf("/n/%02d", i)); got != fmt.Sprint(i) {
				c.T.Fatalf("/n/%02d holds %q", i, got)
			}
		}
		c.Is("delete", fs.Delete(ctx, c.Root, "/n", true), nil)
		if st := c.Stat(fs, "/"); st.ChildrenNum != 0 {
			c.T.Fatalf("root has %d children", st.ChildrenNum)
		}
	}},
}

// Optional capabilities, checked where the implementation has them.
var optionalCases = []Case{
	{Name: "space quota", Needs: func(k Caps) bool { return k.Quotas }, Run: func(c *C, fs meta.FileSystem) {
		ctx := c.Ctx
		c.Is("mkdirs", fs.Mkdirs(ctx, c.Root, "/q", 0), nil)
		// Space is bytes times replication: 10 bytes at replication 1.
		c.Is("quota", fs.SetQuota(ctx, c.Root, "/q", -1, 10), nil)
		_, err := meta.CreateFile(ctx, fs, c.Root, "/q/small", meta.CreateOptions{Client: "c", Replication: 1}, []byte("0123456789"))
		c.Is("a file that fits", err, nil)
		_, err = meta.CreateFile(ctx, fs, c.Root, "/q/more", meta.CreateOptions{Client: "c", Replication: 1}, []byte("x"))
		c.Is("a file past the quota", err, meta.ErrQuota)
		cs, err := fs.ContentSummary(ctx, c.Root, "/q")
		c.Is("summary", err, nil)
		if cs.SpaceQuota != 10 || cs.SpaceConsumed != 10 || cs.Length != 10 {
			c.T.Fatalf("summary = %+v", cs)
		}
		c.Is("delete", fs.Delete(ctx, c.Root, "/q/small", false), nil)
		_, err = meta.CreateFile(ctx, fs, c.Root, "/q/more", meta.CreateOptions{Client: "c", Replication: 1}, []byte("x"))
		c.Is("a file once space is freed", err, nil)
	}},
	{Name: "recursive chmod and chown", Run: func(c *C, fs meta.FileSystem) {
		ra, ok := fs.(meta.RecursiveAttrs)
		if !ok {
			c.T.Skip("no meta.RecursiveAttrs")
		}
		ctx := c.Ctx
		c.File(fs, c.Root, "/r/a/f", "x")
		c.File(fs, c.Root, "/r/g", "y")
		c.Is("chmod -R", ra.SetPermissionRecursive(ctx, c.Root, "/r", 0o700), nil)
		c.Is("chown -R", ra.SetOwnerRecursive(ctx, c.Root, "/r", "alice", "staff"), nil)
		for _, p := range []string{"/r", "/r/a", "/r/a/f", "/r/g"} {
			if st := c.Stat(fs, p); st.Perm != 0o700 || st.Owner != "alice" || st.Group != "staff" {
				c.T.Fatalf("%s after chmod -R and chown -R: %+v", p, st)
			}
		}
		if c.Cfg.Caps.Permissions {
			c.Is("chmod -R by another", ra.SetPermissionRecursive(ctx, bob, "/r", 0o777), meta.ErrPermission)
			if st := c.Stat(fs, "/r/a/f"); st.Perm != 0o700 {
				c.T.Fatalf("a refused chmod -R changed %+v", st)
			}
		}
		c.At("chmod -R missing", ra.SetPermissionRecursive(ctx, c.Root, "/nope", 0o700), meta.ErrNotFound, "/nope")
	}},
}
