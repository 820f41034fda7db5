package bench_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/bench"
	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/server"
)

// realEnv starts a Nimbus server in the test process (the embedded target's
// setup: its store, RPC and /metrics) and connects to it over the RPC.
func realEnv(t *testing.T) *bench.Env {
	t.Helper()
	ctx := context.Background()
	cfg := server.DefaultConfig()
	cfg.DataDir, cfg.Listen = t.TempDir(), "127.0.0.1:0"
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Stop(sctx); err != nil {
			t.Error(err)
		}
	})
	cl, err := client.Dial(ctx, srv.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return &bench.Env{FS: cl, Target: "embedded", System: "nimbus-rpc", MetricsURL: srv.Addr() + "/metrics",
		User: client.DefaultUser(), Client: cl.ClientName()}
}

// walk calls fn on every inode at and below dir.
func walk(t *testing.T, env *bench.Env, dir string, fn func(path string, st *meta.FileStatus)) {
	t.Helper()
	ctx := context.Background()
	st, err := env.FS.Stat(ctx, env.User, dir)
	if err != nil {
		t.Fatal(err)
	}
	fn(dir, st)
	if !st.IsDir() {
		return
	}
	after := ""
	for {
		l, err := env.FS.List(ctx, env.User, dir, after, 100)
		if err != nil {
			t.Fatal(err)
		}
		for i := range l.Entries {
			walk(t, env, meta.JoinPath(dir, l.Entries[i].Name()), fn)
		}
		if l.Remaining == 0 || len(l.Entries) == 0 {
			return
		}
		after = l.Entries[len(l.Entries)-1].Name()
	}
}

func TestSubtreeEveryOp(t *testing.T) {
	env := realEnv(t)
	ctx := context.Background()
	for _, op := range bench.SubtreeOps {
		t.Run(op, func(t *testing.T) {
			cfg := bench.DefaultSubtreeConfig()
			cfg.Files, cfg.Op, cfg.Clients, cfg.Window, cfg.BackgroundSet = 300, op, 4, 300*time.Millisecond, 16
			r, err := bench.Subtree(ctx, env, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			// The JSON has the fields the issue names, at the top of the result.
			path := filepath.Join(t.TempDir(), "subtree.json")
			doc := &bench.SubtreeDocument{Document: bench.NewDocument([]string{"subtree"}), Results: []bench.SubtreeResult{*r}}
			if err := doc.WriteFile(path); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Results []map[string]any `json:"results"`
			}
			if err := json.Unmarshal(b, &got); err != nil || len(got.Results) != 1 {
				t.Fatalf("%s: %v", b, err)
			}
			res := got.Results[0]
			num := func(k string) float64 {
				v, ok := res[k].(float64)
				if !ok {
					t.Fatalf("field %q missing or not a number: %v", k, res[k])
				}
				return v
			}
			if res["op"] != op || num("files") != 300 || res["workload"] != "subtree" {
				t.Fatalf("op %v files %v workload %v", res["op"], res["files"], res["workload"])
			}
			if num("seconds") <= 0 || num("errors") != 0 || num("ops") != 1 {
				t.Fatalf("seconds %v errors %v ops %v", res["seconds"], res["errors"], res["ops"])
			}
			if before, most := num("server_rss_mb_before"), num("server_rss_mb_max"); before <= 0 || most <= 0 {
				t.Fatalf("server RSS %v before, %v max (%v)", before, most, res["mem_error"])
			}
			// A Nimbus server's memory in parts: its Go heap and Pebble's
			// memtable (the block cache may be empty on so small a tree).
			if num("server_go_heap_mb_before") <= 0 || num("server_go_heap_mb_max") <= 0 || num("server_memtable_mb_max") <= 0 {
				t.Fatalf("Go heap %v before, %v max; memtables %v max", res["server_go_heap_mb_before"], res["server_go_heap_mb_max"], res["server_memtable_mb_max"])
			}
			if num("background_ops_s_before") <= 0 || num("background_p99_ms_before") <= 0 {
				t.Fatalf("no background load before: %v", res["background_ops_s_before"])
			}
			num("background_ops_s_during")
			num("background_p99_ms_during")
			if num("background_errors_during") != 0 {
				t.Fatalf("background errors during the operation")
			}
			if res["client_side"] != false { // chmod too: the client has a recursive chmod
				t.Fatalf("client_side %v", res["client_side"])
			}
			// ReadDocument still reads it as an ordinary result file.
			if d, err := bench.ReadDocumentFile(path); err != nil || d.Results[0].Op != op {
				t.Fatalf("ReadDocumentFile: %v", err)
			}

			// The operation really happened.
			_, statErr := env.FS.Stat(ctx, env.User, r.Dir)
			switch op {
			case "delete":
				if !errors.Is(statErr, meta.ErrNotFound) {
					t.Fatalf("%s after delete: %v", r.Dir, statErr)
				}
			case "mv":
				if !errors.Is(statErr, meta.ErrNotFound) || r.MovedTo == "" {
					t.Fatalf("%s after mv to %q: %v", r.Dir, r.MovedTo, statErr)
				}
				files := 0
				walk(t, env, r.MovedTo, func(_ string, st *meta.FileStatus) {
					if !st.IsDir() {
						files++
					}
				})
				if files != 300+1 { // + prepare's manifest
					t.Fatalf("%d files under %s, want 301", files, r.MovedTo)
				}
			case "chmod":
				n := 0
				walk(t, env, r.Dir, func(p string, st *meta.FileStatus) {
					n++
					if st.Perm != bench.SubtreeChmodPerm {
						t.Fatalf("%s: mode %o, want %o", p, st.Perm, bench.SubtreeChmodPerm)
					}
				})
				if int64(n) != r.Inodes || n != r.Dirs+300+1 { // + the manifest
					t.Fatalf("%d inodes under %s, chmod changed %d, tree has %d dirs", n, r.Dir, r.Inodes, r.Dirs)
				}
			}
		})
	}
	// The background creates went, the stat files stay for the next run.
	l, err := env.FS.List(ctx, env.User, "/bench/.subtree-bg", "", 100)
	if err != nil || len(l.Entries) != 1 || l.Entries[0].Name() != "stat" {
		t.Fatalf("left under /bench/.subtree-bg: %+v, %v", l, err)
	}
}

func TestSubtreeConfigValidate(t *testing.T) {
	for name, mod := range map[string]func(*bench.SubtreeConfig){
		"op":     func(c *bench.SubtreeConfig) { c.Op = "chown" },
		"files":  func(c *bench.SubtreeConfig) { c.Files = 0 },
		"root":   func(c *bench.SubtreeConfig) { c.Root = "rel" },
		"window": func(c *bench.SubtreeConfig) { c.Window = 0 },
	} {
		c := bench.DefaultSubtreeConfig()
		mod(&c)
		if c.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := bench.DefaultSubtreeConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// walkOnly hides the target's optional capabilities: a chmod of the
// subtree workload is then the driver's walk, as against WebHDFS.
type walkOnly struct{ bench.Target }

func TestSubtreeChmodWalksWithoutRecursiveAttrs(t *testing.T) {
	env := realEnv(t)
	env.FS = walkOnly{env.FS}
	cfg := bench.DefaultSubtreeConfig()
	cfg.Files, cfg.Op, cfg.Clients, cfg.Background = 100, "chmod", 4, 0
	r, err := bench.Subtree(context.Background(), env, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	walk(t, env, r.Dir, func(p string, st *meta.FileStatus) {
		n++
		if st.Perm != bench.SubtreeChmodPerm {
			t.Fatalf("%s: mode %o, want %o", p, st.Perm, bench.SubtreeChmodPerm)
		}
	})
	if !r.ClientSide || int64(n) != r.Inodes {
		t.Fatalf("client side %v, %d inodes changed, %d in the tree", r.ClientSide, r.Inodes, n)
	}
}
