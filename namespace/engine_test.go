package namespace

import (
	"bytes"
	"context"
	"errors"
	"github.com/nimbus-fs/nimbus/cache"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
)

// newEngine opens an engine on a fresh Pebble store in a temporary directory.
// The superuser is "root"; "alice" and "bob" are ordinary users, alice in
// group "staff".
func newEngine(t testing.TB) (*Engine, store.Store) {
	t.Helper()
	return openEngine(t, t.TempDir())
}

func openEngine(t testing.TB, dir string) (*Engine, store.Store) {
	t.Helper()
	e, st, err := openEngineDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		st.Close()
	})
	return e, st
}

// openEngineDir opens an engine on a Pebble store in dir; the caller closes
// both.
func openEngineDir(dir string) (*Engine, store.Store, error) { return openEngineDirWith(dir, nil) }

// newCachedEngine is newEngine with a metadata cache of maxBytes.
func newCachedEngine(t testing.TB, maxBytes int64) (*Engine, store.Store) {
	t.Helper()
	e, st, err := openEngineDirWith(t.TempDir(), withCache(maxBytes))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		st.Close()
	})
	return e, st
}

// withCache gives a Config a metadata cache of maxBytes.
func withCache(maxBytes int64) func(*Config) {
	return func(cfg *Config) {
		c, err := cache.New(cache.Config{MaxBytes: maxBytes})
		if err != nil {
			panic(err)
		}
		cfg.Cache = c
	}
}

// openEngineDirWith is openEngineDir with edit applied to the Config.
func openEngineDirWith(dir string, edit func(*Config)) (*Engine, store.Store, error) {
	return openEngineDirWithStore(dir, nil, edit)
}

// openEngineDirWithStore is openEngineDirWith with the engine on
// wrap(store) when wrap is not nil.
func openEngineDirWithStore(dir string, wrap func(store.Store) store.Store, edit func(*Config)) (*Engine, store.Store, error) {
	opts := pebblestore.DefaultOptions()
	opts.CacheSize = 8 << 20
	opts.MemTableSize = 4 << 20
	var st store.Store
	st, err := pebblestore.Open(dir, opts)
	if err != nil {
		return nil, nil, err
	}
	if wrap != nil {
		st = wrap(st)
	}
	cfg := DefaultConfig()
	cfg.Superuser = "root"
	cfg.Groups = func(u string) []string {
		switch u {
		case "alice":
			return []string{"alice", "staff"}
		case "bob":
			return []string{"bob"}
		}
		return nil
	}
	if edit != nil {
		edit(&cfg)
	}
	e, err := New(st, cfg)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return e, st, nil
}

var (
	root  = meta.User{Name: "root"}
	alice = meta.User{Name: "alice"}
	bob   = meta.User{Name: "bob"}
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantKind(t testing.TB, err error, sentinel error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("got error %v, want %v", err, sentinel)
	}
	var oe *meta.OpError
	if !errors.As(err, &oe) || oe.Op == "" || oe.Path == "" {
		t.Fatalf("error %v does not name the operation and the path", err)
	}
}

// writeFile creates path with data as user u.
func writeFile(t testing.TB, e *Engine, u meta.User, path string, data []byte) {
	t.Helper()
	ctx := context.Background()
	_, err := e.Create(ctx, u, path, meta.CreateOptions{Client: "c1", Overwrite: true})
	must(t, err)
	for off := 0; off < len(data); {
		n := min(len(data)-off, 1000)
		must(t, e.Write(ctx, u, path, "c1", int64(off), data[off:off+n]))
		off += n
	}
	_, err = e.Complete(ctx, u, path, "c1")
	must(t, err)
}

func fsckClean(t testing.TB, e *Engine) {
	t.Helper()
	rep, err := e.Fsck(context.Background())
	must(t, err)
	if !rep.Clean() {
		t.Fatalf("fsck found problems: %v", rep.Problems)
	}
}

func TestMkdirsStatList(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/a/b/c", 0o750))
	must(t, e.Mkdirs(ctx, root, "/a/b/c", 0)) // existing: fine
	s, err := e.Stat(ctx, root, "/a/b/c")
	must(t, err)
	if !s.IsDir() || s.Perm != 0o750 || s.Owner != "root" || s.Path != "/a/b/c" {
		t.Fatalf("stat /a/b/c = %+v", s)
	}
	s, err = e.Stat(ctx, root, "/a")
	must(t, err)
	if s.Perm != 0o750|0o300 || s.ChildrenNum != 1 {
		t.Fatalf("implicit parent /a = %+v", s)
	}
	for i := 0; i < 25; i++ {
		must(t, e.Mkdirs(ctx, root, "/a/d"+string(rune('a'+i)), 0))
	}
	l, err := e.List(ctx, root, "/a", "", 10)
	must(t, err)
	if len(l.Entries) != 10 || l.Entries[0].Name() != "b" || l.Remaining != 16 {
		t.Fatalf("first page: %d entries, first %q, remaining %d", len(l.Entries), l.Entries[0].Name(), l.Remaining)
	}
	var all []string
	after := ""
	for {
		l, err := e.List(ctx, root, "/a", after, 7)
		must(t, err)
		for _, en := range l.Entries {
			all = append(all, en.Name())
		}
		if l.Remaining == 0 {
			break
		}
		after = l.Entries[len(l.Entries)-1].Name()
	}
	if len(all) != 26 {
		t.Fatalf("paged listing saw %d entries: %v", len(all), all)
	}
	_, err = e.Stat(ctx, root, "/a/zz")
	wantKind(t, err, meta.ErrNotFound)
	_, err = e.Stat(ctx, root, "relative")
	wantKind(t, err, meta.ErrInvalidPath)
	fsckClean(t, e)
}

func TestFileLifecycle(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/d", 0o777))
	data := bytes.Repeat([]byte("0123456789"), 15000) // 150 KB: over the threshold
	_, err := e.Create(ctx, alice, "/d/f", meta.CreateOptions{Client: "w"})
	must(t, err)
	// Invisible while written.
	must(t, e.Write(ctx, alice, "/d/f", "w", 0, data[:70000]))
	s, err := e.Stat(ctx, alice, "/d/f")
	must(t, err)
	if s.Length != 0 || !s.UnderConstruction {
		t.Fatalf("under construction: %+v", s)
	}
	got, err := e.Read(ctx, alice, "/d/f", 0, 100)
	must(t, err)
	if len(got) != 0 {
		t.Fatalf("read %d bytes of a file being written", len(got))
	}
	// Another client cannot write or take it over.
	wantKind(t, e.Write(ctx, alice, "/d/f", "other", 70000, data[70000:70010]), meta.ErrLease)
	_, err = e.Append(ctx, alice, "/d/f", "other")
	wantKind(t, err, meta.ErrLease)
	wantKind(t, e.Write(ctx, alice, "/d/f", "w", 5, data[:10]), meta.ErrInvalidArgument)
	wantKind(t, e.Write(ctx, alice, "/d/f", "w", 70000, data[70000:]), meta.ErrTooLarge)
	must(t, e.Write(ctx, alice, "/d/f", "w", 70000, data[70000:131072]))
	_, err = e.Complete(ctx, alice, "/d/f", "w")
	must(t, err)
	got, err = e.Read(ctx, alice, "/d/f", 0, 1<<20)
	must(t, err)
	if !bytes.Equal(got, data[:131072]) {
		t.Fatalf("read back %d bytes, differ", len(got))
	}
	got, err = e.Read(ctx, alice, "/d/f", 65530, 20)
	must(t, err)
	if !bytes.Equal(got, data[65530:65550]) {
		t.Fatalf("read across a chunk boundary: %q", got)
	}
	// Truncate and append.
	must(t, e.Truncate(ctx, alice, "/d/f", 65540))
	_, err = e.Append(ctx, alice, "/d/f", "w2")
	must(t, err)
	must(t, e.Write(ctx, alice, "/d/f", "w2", 65540, []byte("tail")))
	_, err = e.Complete(ctx, alice, "/d/f", "w2")
	must(t, err)
	got, err = e.Read(ctx, alice, "/d/f", 0, 1<<20)
	must(t, err)
	want := append(append([]byte{}, data[:65540]...), "tail"...)
	if !bytes.Equal(got, want) {
		t.Fatalf("after truncate+append: %d bytes, want %d", len(got), len(want))
	}
	// Permissions: bob may read (0644) but not write.
	_, err = e.Read(ctx, bob, "/d/f", 0, 1)
	must(t, err)
	_, err = e.Append(ctx, bob, "/d/f", "b")
	wantKind(t, err, meta.ErrPermission)
	// Concat.
	writeFile(t, e, alice, "/d/g", []byte("GGG"))
	writeFile(t, e, alice, "/d/h", []byte("HH"))
	must(t, e.Concat(ctx, alice, "/d/g", []string{"/d/h"}))
	got, err = e.Read(ctx, alice, "/d/g", 0, 100)
	must(t, err)
	if string(got) != "GGGHH" {
		t.Fatalf("concat: %q", got)
	}
	_, err = e.Stat(ctx, alice, "/d/h")
	wantKind(t, err, meta.ErrNotFound)
	fsckClean(t, e)
}

func TestRenameAndDelete(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/x/y/z", 0))
	writeFile(t, e, root, "/x/y/z/f", []byte("hello"))
	must(t, e.Mkdirs(ctx, root, "/dst", 0))
	wantKind(t, e.Rename(ctx, root, "/x", "/x/y/z/in", meta.RenameOptions{}), meta.ErrInvalidArgument)
	// Into an existing directory.
	must(t, e.Rename(ctx, root, "/x/y", "/dst", meta.RenameOptions{}))
	got, err := e.Read(ctx, root, "/dst/y/z/f", 0, 10)
	must(t, err)
	if string(got) != "hello" {
		t.Fatalf("after rename: %q", got)
	}
	// Now /dst/y is a descendant of /dst: moving /dst under it must fail even with stale hints.
	wantKind(t, e.Rename(ctx, root, "/dst", "/dst/y/z/q", meta.RenameOptions{}), meta.ErrInvalidArgument)
	writeFile(t, e, root, "/dst/other", []byte("o"))
	wantKind(t, e.Rename(ctx, root, "/dst/other", "/dst/y/z/f", meta.RenameOptions{}), meta.ErrExists)
	must(t, e.Rename(ctx, root, "/dst/other", "/dst/y/z/f", meta.RenameOptions{Overwrite: true}))
	got, err = e.Read(ctx, root, "/dst/y/z/f", 0, 10)
	must(t, err)
	if string(got) != "o" {
		t.Fatalf("after overwrite: %q", got)
	}
	wantKind(t, e.Delete(ctx, root, "/dst", false), meta.ErrNotEmpty)
	must(t, e.Delete(ctx, root, "/dst", true))
	_, err = e.Stat(ctx, root, "/dst/y/z/f")
	wantKind(t, err, meta.ErrNotFound)
	fsckClean(t, e)
}

func TestPermissions(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/home", 0o755))
	must(t, e.Mkdirs(ctx, root, "/home/alice", 0o700))
	must(t, e.SetOwner(ctx, root, "/home/alice", "alice", "staff"))
	must(t, e.Mkdirs(ctx, alice, "/home/alice/docs", 0))
	wantKind(t, e.Mkdirs(ctx, bob, "/home/alice/bob", 0), meta.ErrPermission)
	_, err := e.Stat(ctx, bob, "/home/alice/docs")
	wantKind(t, err, meta.ErrPermission)
	_, err = e.List(ctx, bob, "/home/alice", "", 0)
	wantKind(t, err, meta.ErrPermission)
	wantKind(t, e.SetPermission(ctx, bob, "/home/alice", 0o777), meta.ErrPermission)
	wantKind(t, e.SetOwner(ctx, alice, "/home/alice", "bob", ""), meta.ErrPermission)
	wantKind(t, e.SetOwner(ctx, alice, "/home/alice", "", "bob"), meta.ErrPermission)
	must(t, e.SetPermission(ctx, alice, "/home/alice", 0o755))
	_, err = e.Stat(ctx, bob, "/home/alice/docs")
	must(t, err)
	wantKind(t, e.Delete(ctx, bob, "/home/alice/docs", true), meta.ErrPermission)
	// Sticky bit: bob may create in /tmp but not delete alice's file.
	must(t, e.Mkdirs(ctx, root, "/tmp", 0o1777))
	writeFile(t, e, alice, "/tmp/a", []byte("a"))
	wantKind(t, e.Delete(ctx, bob, "/tmp/a", false), meta.ErrPermission)
	must(t, e.Delete(ctx, alice, "/tmp/a", false))
	fsckClean(t, e)
}

func TestQuota(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/q/sub", 0))
	writeFile(t, e, root, "/q/sub/f0", []byte("x"))
	must(t, e.SetQuota(ctx, root, "/q", 4, 10))
	writeFile(t, e, root, "/q/sub/f1", []byte("y"))
	_, err := e.Create(ctx, root, "/q/sub/f2", meta.CreateOptions{Client: "c"})
	wantKind(t, err, meta.ErrQuota)
	must(t, e.Delete(ctx, root, "/q/sub/f1", false))
	_, err = e.Create(ctx, root, "/q/f2", meta.CreateOptions{Client: "c"})
	must(t, err)
	wantKind(t, e.Write(ctx, root, "/q/f2", "c", 0, make([]byte, 10)), meta.ErrQuota)
	must(t, e.Write(ctx, root, "/q/f2", "c", 0, make([]byte, 9)))
	_, err = e.Complete(ctx, root, "/q/f2", "c")
	must(t, err)
	cs, err := e.ContentSummary(ctx, root, "/q")
	must(t, err)
	if cs.NsQuota != 4 || cs.NsConsumed != 4 || cs.SpaceConsumed != 10 || cs.FileCount != 2 || cs.DirectoryCount != 2 {
		t.Fatalf("summary %+v", cs)
	}
	// Moving out releases usage; moving in is checked.
	must(t, e.Mkdirs(ctx, root, "/out", 0))
	must(t, e.Rename(ctx, root, "/q/sub", "/out/sub", meta.RenameOptions{}))
	must(t, e.Mkdirs(ctx, root, "/out/big/a/b/c", 0))
	wantKind(t, e.Rename(ctx, root, "/out/big", "/q/big", meta.RenameOptions{}), meta.ErrQuota)
	fsckClean(t, e)
}

func TestSymlinkAndErrors(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/real", 0))
	must(t, e.CreateSymlink(ctx, root, "/real", "/link", false))
	s, err := e.Stat(ctx, root, "/link")
	must(t, err)
	if s.Type != meta.TypeSymlink || s.Symlink != "/real" {
		t.Fatalf("symlink stat %+v", s)
	}
	_, err = e.Stat(ctx, root, "/link/x")
	wantKind(t, err, meta.ErrUnresolvedLink)
	writeFile(t, e, root, "/file", nil)
	wantKind(t, e.Mkdirs(ctx, root, "/file/sub", 0), meta.ErrNotDir)
	wantKind(t, e.Mkdirs(ctx, root, "/file", 0), meta.ErrExists)
	_, err = e.Create(ctx, root, "/real", meta.CreateOptions{Client: "c"})
	wantKind(t, err, meta.ErrExists)
	_, err = e.Read(ctx, root, "/real", 0, 1)
	wantKind(t, err, meta.ErrIsDir)
	wantKind(t, e.Delete(ctx, root, "/", true), meta.ErrInvalidArgument)
	for _, bad := range []string{"/a/../b", "/a/./b", "/a\x00b", "/" + string(bytes.Repeat([]byte("n"), 256))} {
		wantKind(t, e.Mkdirs(ctx, root, bad, 0), meta.ErrInvalidPath)
	}
	fsckClean(t, e)
}

func TestLeaseRecovery(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	now := time.Now()
	e.cfg.Now = func() time.Time { return now }
	_, err := e.Create(ctx, root, "/f", meta.CreateOptions{Client: "dead"})
	must(t, err)
	must(t, e.Write(ctx, root, "/f", "dead", 0, []byte("durable")))
	must(t, e.RecoverExpiredLeases(ctx))
	if s, _ := e.Stat(ctx, root, "/f"); !s.UnderConstruction {
		t.Fatal("recovered before the hard limit")
	}
	now = now.Add(e.cfg.LeaseHardLimit + time.Second)
	must(t, e.RecoverExpiredLeases(ctx))
	s, err := e.Stat(ctx, root, "/f")
	must(t, err)
	if s.UnderConstruction || s.Length != 7 {
		t.Fatalf("after recovery: %+v", s)
	}
	fsckClean(t, e)
}

func TestRestartKeepsNamespace(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	func() {
		opts := pebblestore.DefaultOptions()
		st, err := pebblestore.Open(dir, opts)
		must(t, err)
		e, err := New(st, DefaultConfig())
		must(t, err)
		must(t, e.Mkdirs(ctx, root, "/keep/me", 0))
		writeFile(t, e, root, "/keep/me/f", []byte("data"))
		e.Close()
		st.Close()
	}()
	e, _ := openEngine(t, dir)
	got, err := e.Read(ctx, root, "/keep/me/f", 0, 10)
	must(t, err)
	if string(got) != "data" {
		t.Fatalf("after restart: %q", got)
	}
	// New ids do not collide with old ones.
	must(t, e.Mkdirs(ctx, root, "/keep/new", 0))
	fsckClean(t, e)
}

// TestWriteFollowsRenamedFile: a writer keeps writing to its file after the
// file, or a directory above it, was renamed (HDFS semantics; Hadoop's
// contract test testRenameFileBeingAppended).
func TestWriteFollowsRenamedFile(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/d/sub", 0))
	_, err := e.Create(ctx, root, "/d/sub/f", meta.CreateOptions{Client: "w"})
	must(t, err)
	must(t, e.Write(ctx, root, "/d/sub/f", "w", 0, []byte("abc")))
	must(t, e.Rename(ctx, root, "/d/sub/f", "/d/sub/g", meta.RenameOptions{}))
	must(t, e.Write(ctx, root, "/d/sub/f", "w", 3, []byte("def")))
	must(t, e.Rename(ctx, root, "/d/sub", "/moved", meta.RenameOptions{}))
	must(t, e.Write(ctx, root, "/d/sub/f", "w", 6, []byte("ghi")))
	fsckClean(t, e)
	s, err := e.Complete(ctx, root, "/d/sub/f", "w")
	must(t, err)
	if s.Path != "/moved/g" || s.Length != 9 {
		t.Fatalf("completed %+v", s)
	}
	got, err := e.Read(ctx, root, "/moved/g", 0, 100)
	must(t, err)
	if string(got) != "abcdefghi" {
		t.Fatalf("read %q", got)
	}
	// Another client's writes do not follow.
	_, err = e.Create(ctx, root, "/x", meta.CreateOptions{Client: "a"})
	must(t, err)
	must(t, e.Rename(ctx, root, "/x", "/y", meta.RenameOptions{}))
	wantKind(t, e.Write(ctx, root, "/x", "b", 0, []byte("no")), meta.ErrNotFound)
	fsckClean(t, e)
}

// TestCreateFileOneStep: a small file created, written and closed in one
// transaction is complete at once, never leased, and obeys the same rules.
func TestCreateFileOneStep(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/d", 0))
	s, err := e.CreateFile(ctx, root, "/d/f", meta.CreateOptions{}, []byte("hello"))
	must(t, err)
	if s.UnderConstruction || s.Length != 5 {
		t.Fatalf("status %+v", s)
	}
	got, err := e.Read(ctx, root, "/d/f", 0, 10)
	must(t, err)
	if string(got) != "hello" {
		t.Fatalf("read %q", got)
	}
	_, err = e.CreateFile(ctx, root, "/d/f", meta.CreateOptions{}, nil)
	wantKind(t, err, meta.ErrExists)
	_, err = e.CreateFile(ctx, root, "/d/big", meta.CreateOptions{}, make([]byte, e.cfg.InlineThreshold+1))
	wantKind(t, err, meta.ErrTooLarge)
	_, err = e.Stat(ctx, root, "/d/big")
	wantKind(t, err, meta.ErrNotFound) // nothing half-made
	_, err = e.CreateFile(ctx, root, "/d/f", meta.CreateOptions{Overwrite: true}, []byte("x"))
	must(t, err)
	fsckClean(t, e)
}
