package webhdfs_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/bench"
	"github.com/nimbus-fs/nimbus/bench/benchtest"
	"github.com/nimbus-fs/nimbus/bench/webhdfs"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/metatest"
)

func newClient(t *testing.T) (*webhdfs.Client, *benchtest.FakeNameNode) {
	t.Helper()
	nn := benchtest.NewFakeNameNode(metatest.NewMemFS())
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
	if nn.Users.Load() != "bob" {
		t.Fatalf("user.name = %v", nn.Users.Load())
	}
	if err := createFile(c, ctx, u, "/a/b/f", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if nn.DataPuts.Load() != 1 || nn.EarlyData.Load() != 0 {
		t.Fatalf("data went to the DataNode %d times, to the NameNode %d times", nn.DataPuts.Load(), nn.EarlyData.Load())
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
		createFile(c, ctx, u, "/a/b/"+n, nil)
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
	createFile(c, ctx, u, "/f", nil)
	c.Mkdirs(ctx, u, "/d/e", 0)
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"stat missing", func() error { _, err := c.Stat(ctx, u, "/nope"); return err }(), meta.ErrNotFound},
		{"create existing", createFile(c, ctx, u, "/f", nil), meta.ErrExists},
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
		cfg.Op, cfg.Clients, cfg.Duration, cfg.OpsPerClient, cfg.Warmup = op, []int{2}, 0, 20, 0
		res, err := bench.Micro(ctx, env, cfg, tree, nil)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		if r := res[len(res)-1]; r.Errors != 0 || r.Ops != 40 {
			t.Fatalf("%s: %d ops, %d errors %v", op, r.Ops, r.Errors, r.ErrorSamples)
		}
	}
}

// createFile creates a complete file through the client's CREATE with a body.
func createFile(c *webhdfs.Client, ctx context.Context, u meta.User, path string, data []byte) error {
	_, err := c.CreateFile(ctx, u, path, meta.CreateOptions{}, data)
	return err
}
