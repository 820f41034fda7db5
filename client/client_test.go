package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/metatest"
)

var (
	root = meta.User{Name: "root"}
	bob  = meta.User{Name: "bob"}
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestEngineOverTheWire drives every FileSystem method through the client
// against the real engine.
func TestEngineOverTheWire(t *testing.T) {
	e := engine(t)
	c := dial(t, serve(t, e, e.Fsck), client.Options{})
	ctx := context.Background()
	if !strings.HasPrefix(c.ClientName(), "nimbus-") || c.ClientName() == dial(t, serve(t, e, nil), client.Options{}).ClientName() {
		t.Fatalf("client name %q not unique", c.ClientName())
	}
	must(t, c.Echo(ctx))
	must(t, c.EchoHTTP(ctx))
	must(t, c.Mkdirs(ctx, root, "/a/b", 0o755))
	must(t, c.SetOwner(ctx, root, "/a", "bob", ""))
	must(t, c.SetOwner(ctx, root, "/a/b", "bob", ""))
	must(t, c.WriteFile(ctx, bob, "/a/f", []byte("hello"), meta.CreateOptions{}))
	if got, err := c.ReadFile(ctx, bob, "/a/f"); err != nil || string(got) != "hello" {
		t.Fatalf("ReadFile = %q, %v", got, err)
	}
	st, err := c.Stat(ctx, bob, "/a/f")
	must(t, err)
	if st.Length != 5 || st.Type != meta.TypeFile || st.Owner != "bob" || st.Path != "/a/f" || st.UnderConstruction {
		t.Fatalf("stat = %+v", st)
	}
	// Append through the raw calls.
	_, err = c.Append(ctx, bob, "/a/f", "other-client")
	must(t, err)
	must(t, c.Write(ctx, bob, "/a/f", "other-client", 5, []byte(" world")))
	must(t, c.RenewLease(ctx, bob, "other-client"))
	st, err = c.Complete(ctx, bob, "/a/f", "other-client")
	must(t, err)
	if st.Length != 11 {
		t.Fatalf("after append: %+v", st)
	}
	if b, err := c.Read(ctx, bob, "/a/f", 6, 100); err != nil || string(b) != "world" {
		t.Fatalf("Read = %q, %v", b, err)
	}
	must(t, c.SetPermission(ctx, bob, "/a/f", 0o600))
	must(t, c.SetTimes(ctx, bob, "/a/f", 1000, -1))
	must(t, c.SetReplication(ctx, bob, "/a/f", 2))
	st, _ = c.Stat(ctx, bob, "/a/f")
	if st.Perm != 0o600 || st.Mtime != 1000 || st.Replication != 2 {
		t.Fatalf("after set*: %+v", st)
	}
	must(t, c.Truncate(ctx, bob, "/a/f", 5))
	must(t, c.WriteFile(ctx, bob, "/a/g", []byte("!"), meta.CreateOptions{}))
	must(t, c.Concat(ctx, bob, "/a/f", []string{"/a/g"}))
	if b, _ := c.ReadFile(ctx, bob, "/a/f"); string(b) != "hello!" {
		t.Fatalf("after truncate+concat: %q", b)
	}
	must(t, c.CreateSymlink(ctx, bob, "/a/f", "/a/link", false))
	must(t, c.Rename(ctx, bob, "/a/f", "/a/b/f2", meta.RenameOptions{}))
	l, err := c.List(ctx, bob, "/a", "", 0)
	must(t, err)
	var names []string
	for _, e := range l.Entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "b,link" {
		t.Fatalf("list /a = %v", names)
	}
	must(t, c.SetQuota(ctx, root, "/a", 100, -1))
	cs, err := c.ContentSummary(ctx, bob, "/a")
	must(t, err)
	// FileCount: meta says files and symlinks (2); the engine counts 1 today.
	if cs.DirectoryCount != 2 || cs.FileCount < 1 || cs.NsConsumed != 4 || cs.Length != 6 || cs.NsQuota != 100 {
		t.Fatalf("content summary = %+v", cs)
	}
	d, err := c.Defaults(ctx)
	must(t, err)
	if d.InlineThreshold != 128<<10 {
		t.Fatalf("defaults = %+v", d)
	}
	must(t, c.Delete(ctx, bob, "/a/b", true))
	r, err := c.Fsck(ctx)
	must(t, err)
	if !r.Clean() || r.Inodes < 3 {
		t.Fatalf("fsck = %+v", r)
	}
}

// TestErrorKindsFromEngine: errors.Is works across the wire for every kind
// the engine produces from ordinary misuse, and the error names op and path.
func TestErrorKindsFromEngine(t *testing.T) {
	e := engine(t)
	c := dial(t, serve(t, e, nil), client.Options{})
	ctx := context.Background()
	must(t, c.Mkdirs(ctx, root, "/d/sub", 0o755))
	must(t, c.WriteFile(ctx, root, "/d/file", []byte("x"), meta.CreateOptions{}))
	must(t, c.Mkdirs(ctx, root, "/q", 0o777))
	must(t, c.SetQuota(ctx, root, "/q", 2, -1))
	cases := []struct {
		name string
		err  error
		want error
		path string
	}{
		{"not found", func() error { _, err := c.Stat(ctx, root, "/nope"); return err }(), meta.ErrNotFound, "/nope"},
		{"exists", func() error {
			_, err := c.Create(ctx, root, "/d/file", meta.CreateOptions{})
			return err
		}(), meta.ErrExists, "/d/file"},
		{"not a dir", c.Mkdirs(ctx, root, "/d/file/x", 0o755), meta.ErrNotDir, ""},
		{"is a dir", func() error { _, err := c.Read(ctx, root, "/d", 0, 1); return err }(), meta.ErrIsDir, "/d"},
		{"not empty", c.Delete(ctx, root, "/d", false), meta.ErrNotEmpty, "/d"},
		{"permission", c.SetPermission(ctx, bob, "/d", 0o777), meta.ErrPermission, "/d"},
		{"invalid path", func() error { _, err := c.Stat(ctx, root, "relative"); return err }(), meta.ErrInvalidPath, ""},
		{"quota", func() error {
			var err error
			for i := 0; i < 4 && err == nil; i++ {
				err = c.Mkdirs(ctx, root, fmt.Sprintf("/q/%d", i), 0o755)
			}
			return err
		}(), meta.ErrQuota, ""},
		{"too large", c.WriteFile(ctx, root, "/d/big", make([]byte, 200<<10), meta.CreateOptions{}), meta.ErrTooLarge, ""},
	}
	for _, tc := range cases {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: got %v", tc.name, tc.err)
			continue
		}
		var oe *meta.OpError
		if !errors.As(tc.err, &oe) || oe.Op == "" || (tc.path != "" && oe.Path != tc.path) {
			t.Errorf("%s: op/path missing: %#v", tc.name, tc.err)
		}
	}
}

// TestStreaming writes in odd-sized pieces across chunk boundaries, reads
// back with a small buffer, and appends.
func TestStreaming(t *testing.T) {
	e := engine(t)
	c := dial(t, serve(t, e, nil), client.Options{})
	ctx := context.Background()
	data := make([]byte, 100<<10+7)
	for i := range data {
		data[i] = byte(i * 7)
	}
	w, err := c.CreateWriter(ctx, root, "/s", meta.CreateOptions{})
	must(t, err)
	for off := 0; off < len(data); {
		n := min(len(data)-off, 3001+off%70000)
		if _, err := w.Write(data[off : off+n]); err != nil {
			t.Fatal(err)
		}
		off += n
	}
	if st, _ := c.Stat(ctx, root, "/s"); st.Length != 0 || !st.UnderConstruction {
		t.Fatalf("content visible before Close: %+v", st)
	}
	must(t, w.Close())
	if w.Close() == nil {
		t.Fatal("second Close succeeded")
	}
	r, err := c.OpenReader(ctx, root, "/s")
	must(t, err)
	var got bytes.Buffer
	buf := make([]byte, 1000)
	if _, err := io.CopyBuffer(&got, struct{ io.Reader }{r}, buf); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("read back %d bytes, differ from the %d written", got.Len(), len(data))
	}
	aw, err := c.AppendWriter(ctx, root, "/s")
	must(t, err)
	aw.Write([]byte("tail"))
	must(t, aw.Close())
	all, err := c.ReadFile(ctx, root, "/s")
	must(t, err)
	if !bytes.Equal(all, append(data, "tail"...)) {
		t.Fatal("append lost or corrupted data")
	}
	if _, err := c.OpenReader(ctx, root, "/missing"); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("OpenReader missing: %v", err)
	}
}

// TestWalkPages walks a directory bigger than one listing page.
func TestWalkPages(t *testing.T) {
	fs := metatest.NewMemFS()
	ctx := context.Background()
	n := client.ListPage + 37
	for i := 0; i < n; i++ {
		fs.Mkdirs(ctx, root, fmt.Sprintf("/w/big/%05d", i), 0)
	}
	fs.Mkdirs(ctx, root, "/w/a/b/c", 0)
	fs.Mkdirs(ctx, root, "/w/skip/x", 0)
	c := dial(t, serve(t, fs, nil), client.Options{})
	var seen []string
	err := c.Walk(ctx, root, "/w", func(s meta.FileStatus) error {
		seen = append(seen, s.Path)
		if s.Path == "/w/skip" {
			return client.SkipDir
		}
		return nil
	})
	must(t, err)
	want := 1 + 3 + 1 + n + 1 // /w, a,b,c, big, entries, skip
	if len(seen) != want || seen[0] != "/w" || seen[1] != "/w/a" || seen[4] != "/w/big" || seen[len(seen)-1] != "/w/skip" {
		t.Fatalf("walk saw %d paths (want %d): %v ...", len(seen), want, seen[:6])
	}
	stop := errors.New("stop")
	if err := c.Walk(ctx, root, "/w", func(meta.FileStatus) error { return stop }); err != stop {
		t.Fatalf("walk error not returned: %v", err)
	}
}

// TestConcurrentClients: many goroutines share a two-connection client.
func TestConcurrentClients(t *testing.T) {
	e := engine(t)
	c := dial(t, serve(t, e, nil), client.Options{Conns: 2})
	ctx := context.Background()
	must(t, c.Mkdirs(ctx, root, "/c", 0o777))
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				p := fmt.Sprintf("/c/%d-%d", g, i)
				if err := c.WriteFile(ctx, root, p, []byte(p), meta.CreateOptions{}); err != nil {
					errs <- err
					return
				}
				if b, err := c.ReadFile(ctx, root, p); err != nil || string(b) != p {
					errs <- fmt.Errorf("read %s = %q, %v", p, b, err)
					return
				}
				if _, err := c.Stat(ctx, root, p+"x"); !errors.Is(err, meta.ErrNotFound) {
					errs <- fmt.Errorf("stat missing: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	l, err := c.List(ctx, root, "/c", "", 1000)
	must(t, err)
	if len(l.Entries) != 320 {
		t.Fatalf("%d files, want 320", len(l.Entries))
	}
}

// TestListingsOutliveFrames: a listing page is decoded in place, its strings
// aliasing the received frame, and that frame and the pooled page are reused
// by the next calls. A listing kept by the caller must not change when they
// are; it would if the conversion kept an alias (owner, group, symlink or
// path) instead of a copy.
func TestListingsOutliveFrames(t *testing.T) {
	e := engine(t)
	c := dial(t, serve(t, e, nil), client.Options{Conns: 1})
	ctx := context.Background()
	const dirs = 8
	want := make([]*meta.Listing, dirs)
	for d := range dirs {
		dir := fmt.Sprintf("/d%d", d)
		must(t, c.Mkdirs(ctx, root, dir, 0o755))
		for i := range 20 {
			p := fmt.Sprintf("%s/entry-%d-%02d", dir, d, i)
			must(t, c.WriteFile(ctx, root, p, nil, meta.CreateOptions{}))
			must(t, c.SetOwner(ctx, root, p, fmt.Sprintf("owner%d", d), fmt.Sprintf("group%d", d)))
		}
		must(t, c.CreateSymlink(ctx, root, fmt.Sprintf("/target-of-dir-%d", d), dir+"/zlink", false))
		l, err := c.List(ctx, root, dir, "", 0)
		must(t, err)
		want[d] = l
	}
	copies := make([]string, dirs)
	for d, l := range want {
		copies[d] = fmt.Sprint(l.Entries)
	}
	for range 50 { // reuse every frame buffer and pooled page many times
		for d := range dirs {
			if _, err := c.List(ctx, root, fmt.Sprintf("/d%d", (d+3)%dirs), "", 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	for d, l := range want {
		if got := fmt.Sprint(l.Entries); got != copies[d] {
			t.Fatalf("listing of /d%d changed after later calls:\nwas %s\nnow %s", d, copies[d], got)
		}
		e := l.Entries[len(l.Entries)-1]
		if e.Path != fmt.Sprintf("/d%d/zlink", d) || e.Symlink != fmt.Sprintf("/target-of-dir-%d", d) {
			t.Fatalf("/d%d: last entry %s -> %q", d, e.Path, e.Symlink)
		}
		if l.Entries[0].Owner != fmt.Sprintf("owner%d", d) || l.Entries[0].Path != fmt.Sprintf("/d%d/entry-%d-00", d, d) {
			t.Fatalf("/d%d: first entry %+v", d, l.Entries[0])
		}
	}
}
