package webhdfs_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nimbus-fs/nimbus/bench"
	"github.com/nimbus-fs/nimbus/bench/benchtest"
	"github.com/nimbus-fs/nimbus/bench/webhdfs"
	"github.com/nimbus-fs/nimbus/meta"
)

// fakeNameNode serves WebHDFS over a MemFS the way HDFS does: CREATE, APPEND
// and OPEN answer 307 to a "DataNode" URL on the same server, errors are
// RemoteException JSON, rename and delete answer false rather than fail.
type fakeNameNode struct {
	fs        *benchtest.MemFS
	users     atomic.Value // last user.name seen
	dataPuts  atomic.Int64
	earlyData atomic.Int64 // CREATE requests to the NameNode that carried data
}

func (f *fakeNameNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	f.users.Store(q.Get("user.name"))
	u := meta.User{Name: q.Get("user.name")}
	if strings.HasPrefix(r.URL.Path, "/datanode") {
		path := strings.TrimPrefix(r.URL.Path, "/datanode")
		switch q.Get("op") {
		case "CREATE":
			f.dataPuts.Add(1)
			data, _ := io.ReadAll(r.Body)
			if _, err := f.fs.Create(ctx, u, path, meta.CreateOptions{Client: "dn", Overwrite: q.Get("overwrite") == "true"}); err != nil {
				fail(w, err)
				return
			}
			f.fs.Write(ctx, u, path, "dn", 0, data)
			w.WriteHeader(http.StatusCreated)
		case "APPEND":
			data, _ := io.ReadAll(r.Body)
			st, _ := f.fs.Stat(ctx, u, path)
			if err := f.fs.Write(ctx, u, path, "dn", st.Length, data); err != nil {
				fail(w, err)
			}
		case "OPEN":
			off, _ := strconv.ParseInt(q.Get("offset"), 10, 64)
			n, _ := strconv.ParseInt(q.Get("length"), 10, 64)
			b, err := f.fs.Read(ctx, u, path, off, n)
			if err != nil {
				fail(w, err)
				return
			}
			w.Write(b)
		}
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/webhdfs/v1")
	reply := func(v any) { json.NewEncoder(w).Encode(v) }
	switch op := q.Get("op"); op {
	case "CREATE", "APPEND", "OPEN":
		if n, _ := io.Copy(io.Discard, r.Body); n > 0 {
			f.earlyData.Add(1)
		}
		if op != "CREATE" {
			if _, err := f.fs.Stat(ctx, u, path); err != nil {
				fail(w, err)
				return
			}
		}
		w.Header().Set("Location", "http://"+r.Host+"/datanode"+path+"?"+r.URL.RawQuery)
		w.WriteHeader(http.StatusTemporaryRedirect)
	case "GETFILESTATUS":
		st, err := f.fs.Stat(ctx, u, path)
		if err != nil {
			fail(w, err)
			return
		}
		reply(map[string]any{"FileStatus": wire(st, "")})
	case "LISTSTATUS_BATCH":
		l, err := f.fs.List(ctx, u, path, q.Get("startAfter"), 2)
		if err != nil {
			fail(w, err)
			return
		}
		var fs []any
		for i := range l.Entries {
			fs = append(fs, wire(&l.Entries[i], l.Entries[i].Name()))
		}
		reply(map[string]any{"DirectoryListing": map[string]any{
			"partialListing":   map[string]any{"FileStatuses": map[string]any{"FileStatus": fs}},
			"remainingEntries": l.Remaining}})
	case "MKDIRS":
		p, _ := strconv.ParseUint(q.Get("permission"), 8, 16)
		if err := f.fs.Mkdirs(ctx, u, path, meta.Perm(p)); err != nil {
			fail(w, err)
			return
		}
		reply(map[string]bool{"boolean": true})
	case "DELETE":
		err := f.fs.Delete(ctx, u, path, q.Get("recursive") == "true")
		reply(map[string]bool{"boolean": err == nil})
	case "RENAME":
		err := f.fs.Rename(ctx, u, path, q.Get("destination"), meta.RenameOptions{})
		reply(map[string]bool{"boolean": err == nil})
	case "SETPERMISSION":
		p, err := strconv.ParseUint(q.Get("permission"), 8, 16)
		if err != nil {
			fail(w, meta.Errorf("setPermission", path, meta.ErrInvalidArgument, "bad permission"))
			return
		}
		if err := f.fs.SetPermission(ctx, u, path, meta.Perm(p)); err != nil {
			fail(w, err)
		}
	default:
		w.WriteHeader(http.StatusBadRequest)
		reply(map[string]any{"RemoteException": map[string]string{"exception": "IllegalArgumentException", "message": "Invalid value for webhdfs parameter \"op\""}})
	}
}

func wire(st *meta.FileStatus, suffix string) map[string]any {
	t := "FILE"
	if st.IsDir() {
		t = "DIRECTORY"
	}
	return map[string]any{"pathSuffix": suffix, "type": t, "length": st.Length, "fileId": st.FileID,
		"permission": strconv.FormatUint(uint64(st.Perm), 8), "childrenNum": st.ChildrenNum, "owner": "o", "group": "g"}
}

func fail(w http.ResponseWriter, err error) {
	names := map[meta.Kind]string{meta.KindNotFound: "FileNotFoundException", meta.KindExists: "FileAlreadyExistsException",
		meta.KindNotDir: "ParentNotDirectoryException", meta.KindNotEmpty: "PathIsNotEmptyDirectoryException"}
	name, ok := names[meta.KindOf(err)]
	if !ok {
		name = "IOException"
	}
	w.WriteHeader(http.StatusForbidden)
	json.NewEncoder(w).Encode(map[string]any{"RemoteException": map[string]string{"exception": name, "javaClassName": "x." + name, "message": err.Error()}})
}

func newClient(t *testing.T) (*webhdfs.Client, *fakeNameNode) {
	t.Helper()
	nn := &fakeNameNode{fs: benchtest.NewMemFS()}
	srv := httptest.NewServer(nn)
	t.Cleanup(srv.Close)
	c, err := webhdfs.New(webhdfs.Config{Addr: srv.URL, User: "alice", Conns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, nn
}

func TestClientOperations(t *testing.T) {
	c, nn := newClient(t)
	ctx := context.Background()
	u := meta.User{Name: "bob"}
	if err := c.Mkdirs(ctx, u, "/a/b", 0o755); err != nil {
		t.Fatal(err)
	}
	if nn.users.Load() != "bob" {
		t.Fatalf("user.name = %v", nn.users.Load())
	}
	if err := c.CreateFile(ctx, u, "/a/b/f", []byte("hello"), 0, false); err != nil {
		t.Fatal(err)
	}
	if nn.dataPuts.Load() != 1 || nn.earlyData.Load() != 0 {
		t.Fatalf("data went to the DataNode %d times, to the NameNode %d times", nn.dataPuts.Load(), nn.earlyData.Load())
	}
	if b, err := c.Read(ctx, u, "/a/b/f", 1, 3); err != nil || string(b) != "ell" {
		t.Fatalf("read %q, %v", b, err)
	}
	st, err := c.Stat(ctx, u, "/a/b/f")
	if err != nil || st.Length != 5 || st.Type != meta.TypeFile || st.Perm != 0o644 && st.Perm != 0 {
		t.Fatalf("stat %+v, %v", st, err)
	}
	if err := c.SetPermission(ctx, u, "/a/b/f", 0o600); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.Stat(ctx, u, "/a/b/f"); st.Perm != 0o600 {
		t.Fatalf("perm %o after SETPERMISSION", st.Perm)
	}
	if _, err := c.Create(ctx, u, "/a/b/g", meta.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, u, "/a/b/g", "", 0, []byte("xy")); err != nil {
		t.Fatal(err)
	}
	if b, _ := c.Read(ctx, u, "/a/b/g", 0, 10); string(b) != "xy" {
		t.Fatalf("appended content %q", b)
	}
	for _, n := range []string{"h", "i", "j"} {
		c.CreateFile(ctx, u, "/a/b/"+n, nil, 0, false)
	}
	// Paged listing: the fake serves two entries a page.
	var names []string
	after := ""
	for {
		l, err := c.List(ctx, u, "/a/b", after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range l.Entries {
			names = append(names, e.Name())
			if !strings.HasPrefix(e.Path, "/a/b/") {
				t.Fatalf("entry path %q", e.Path)
			}
		}
		if l.Remaining == 0 {
			break
		}
		after = l.Entries[len(l.Entries)-1].Name()
	}
	if strings.Join(names, ",") != "f,g,h,i,j" {
		t.Fatalf("listed %v", names)
	}
	if err := c.Rename(ctx, u, "/a/b/f", "/a/b/f2", meta.RenameOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, u, "/a/b/f2", false); err != nil {
		t.Fatal(err)
	}
	if err := c.Echo(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestClientErrorKinds(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	u := meta.User{Name: "bob"}
	c.CreateFile(ctx, u, "/f", nil, 0, false)
	c.Mkdirs(ctx, u, "/d/e", 0)
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"stat missing", func() error { _, err := c.Stat(ctx, u, "/nope"); return err }(), meta.ErrNotFound},
		{"create existing", c.CreateFile(ctx, u, "/f", nil, 0, false), meta.ErrExists},
		{"mkdir under file", c.Mkdirs(ctx, u, "/f/x", 0), meta.ErrNotDir},
		{"rename missing", c.Rename(ctx, u, "/nope", "/x", meta.RenameOptions{}), meta.ErrNotFound},
		{"rename onto existing", c.Rename(ctx, u, "/d", "/f", meta.RenameOptions{}), meta.ErrExists},
		{"delete missing", c.Delete(ctx, u, "/nope", false), meta.ErrNotFound},
		{"unknown op", func() error { _, err := c.ContentSummary(ctx, u, "/"); return err }(), meta.ErrInvalidArgument},
		{"read missing", func() error { _, err := c.Read(ctx, u, "/nope", 0, 1); return err }(), meta.ErrNotFound},
	}
	for _, tc := range cases {
		var oe *meta.OpError
		if !errors.Is(tc.err, tc.want) || !errors.As(tc.err, &oe) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.err, tc.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, cfg := range []webhdfs.Config{
		{Addr: "127.0.0.1:9870", Conns: 1},
		{Addr: "http://", Conns: 1},
		{Addr: "http://h:1", Conns: 0},
	} {
		if _, err := webhdfs.New(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// The bench workloads run unchanged over WebHDFS.
func TestWorkloadsOverWebHDFS(t *testing.T) {
	c, _ := newClient(t)
	env := &bench.Env{FS: c, Target: "webhdfs://fake", System: "fake-webhdfs", User: meta.User{Name: "alice"}, Client: "bench"}
	ctx := context.Background()
	pc := bench.DefaultPrepareConfig()
	pc.Tree.Files, pc.Clients = 200, 4
	if _, err := bench.Prepare(ctx, env, pc, nil); err != nil {
		t.Fatal(err)
	}
	tree, _, err := bench.LoadTree(ctx, env, "/bench")
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range bench.MicroOps {
		cfg := bench.DefaultMicroConfig()
		cfg.Op, cfg.Clients, cfg.Duration, cfg.OpsPerClient = op, []int{2}, 0, 20
		res, err := bench.Micro(ctx, env, cfg, tree, nil)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		if r := res[len(res)-1]; r.Errors != 0 || r.Ops != 40 {
			t.Fatalf("%s: %d ops, %d errors %v", op, r.Ops, r.Errors, r.ErrorSamples)
		}
	}
}
