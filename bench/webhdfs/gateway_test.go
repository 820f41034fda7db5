package webhdfs_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/nimbus-fs/nimbus/bench"
	"github.com/nimbus-fs/nimbus/bench/webhdfs"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/metatest"
	gateway "github.com/nimbus-fs/nimbus/webhdfs"
)

// The client against Nimbus's own WebHDFS gateway (over an in-memory file
// system): the same workloads, and errors that keep their kind end to end.
func TestAgainstNimbusGateway(t *testing.T) {
	h, err := gateway.New(metatest.NewMemFS(), gateway.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	c, err := webhdfs.New(webhdfs.Config{Addr: srv.URL, User: "alice", Conns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	u := meta.User{Name: "alice"}
	if err := createFile(c, ctx, u, "/x/f", []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if b, err := c.Read(ctx, u, "/x/f", 0, 10); err != nil || string(b) != "abc" {
		t.Fatalf("read %q %v", b, err)
	}
	if _, err := c.Stat(ctx, u, "/x/nope"); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("stat missing: %v", err)
	}
	if err := createFile(c, ctx, u, "/x/f", nil); !errors.Is(err, meta.ErrExists) {
		t.Fatalf("create existing: %v", err)
	}
	env := &bench.Env{FS: c, Target: "webhdfs://gw", System: "gw", User: u, Client: "bench"}
	pc := bench.DefaultPrepareConfig()
	pc.Tree.Files, pc.Clients = 100, 2
	if _, err := bench.Prepare(ctx, env, pc, nil); err != nil {
		t.Fatal(err)
	}
	tree, _, err := bench.LoadTree(ctx, env, "/bench")
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range bench.MicroOps {
		cfg := bench.DefaultMicroConfig()
		cfg.Op, cfg.Clients, cfg.Duration, cfg.OpsPerClient, cfg.Echo, cfg.Warmup = op, []int{2}, 0, 10, false, 0
		res, err := bench.Micro(ctx, env, cfg, tree, nil)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		if r := res[0]; r.Errors != 0 || r.Ops != 20 {
			t.Fatalf("%s: %d ops, %d errors %v", op, r.Ops, r.Errors, r.ErrorSamples)
		}
	}
}
