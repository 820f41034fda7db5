package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/bench"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/metatest"
)

func memEnv(t *testing.T) (*bench.Env, *metatest.MemFS) {
	t.Helper()
	fs := metatest.NewMemFS()
	return &bench.Env{FS: fs, Target: "mem", System: "memfs", User: meta.User{Name: "tester"}, Client: "bench-test"}, fs
}

func prepared(t *testing.T, files int) (*bench.Env, *metatest.MemFS, *bench.Tree) {
	t.Helper()
	env, fs := memEnv(t)
	cfg := bench.DefaultPrepareConfig()
	cfg.Tree.Files = files
	cfg.Clients = 4
	res, err := bench.Prepare(context.Background(), env, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != files || res.Result.Ops != int64(files) {
		t.Fatalf("prepare created %d files (result %d), want %d", res.Files, res.Result.Ops, files)
	}
	tree, man, err := bench.LoadTree(context.Background(), env, "/bench")
	if err != nil {
		t.Fatal(err)
	}
	if !man.Complete || tree.NumFiles() != files {
		t.Fatalf("manifest %+v", man)
	}
	return env, fs, tree
}

func TestPrepareBuildsTheTree(t *testing.T) {
	env, _, tree := prepared(t, 500)
	for _, k := range []int{0, 17, 499} {
		b, err := env.FS.Read(context.Background(), env.User, tree.FilePath(k), 0, 100)
		if err != nil || len(b) != 16 {
			t.Fatalf("file %d: %q, %v", k, b, err)
		}
	}
	for i := 0; i < tree.NumDirs(); i++ {
		st, err := env.FS.Stat(context.Background(), env.User, tree.DirPath(i))
		if err != nil || !st.IsDir() {
			t.Fatalf("dir %d: %v", i, err)
		}
	}
	// Running it again finds everything there and succeeds.
	cfg := bench.DefaultPrepareConfig()
	cfg.Tree.Files = 500
	res, err := bench.Prepare(context.Background(), env, cfg, nil)
	if err != nil || res.Existing != 500 {
		t.Fatalf("second prepare: existing %d, %v", res.Existing, err)
	}
}

func TestLoadTreeWithoutPrepare(t *testing.T) {
	env, _ := memEnv(t)
	_, _, err := bench.LoadTree(context.Background(), env, "/nothing")
	if !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("got %v, want not found", err)
	}
}

func TestMicroEveryOp(t *testing.T) {
	env, fs, tree := prepared(t, 300)
	ctx := context.Background()
	for _, op := range bench.MicroOps {
		for _, hot := range []bool{false, true} {
			if hot && op != "create" && op != "mkdir" {
				continue
			}
			cfg := bench.DefaultMicroConfig()
			cfg.Op, cfg.HotDir, cfg.Warmup = op, hot, 0
			cfg.Clients = []int{1, 3}
			cfg.Duration = 0
			cfg.OpsPerClient = 40
			results, err := bench.Micro(ctx, env, cfg, tree, nil)
			if err != nil {
				t.Fatalf("%s: %v", op, err)
			}
			if len(results) != 4 {
				t.Fatalf("%s: %d results, want echo+op at two counts", op, len(results))
			}
			for i, r := range results {
				wantOp := op
				if i%2 == 0 {
					wantOp = "echo"
				}
				if r.Op != wantOp || r.Clients != cfg.Clients[i/2] {
					t.Fatalf("%s: result %d is %s at %d clients", op, i, r.Op, r.Clients)
				}
				if r.Errors != 0 || r.Ops != int64(40*r.Clients) {
					t.Fatalf("%s: %d ops %d errors %v", op, r.Ops, r.Errors, r.ErrorSamples)
				}
				if wantOp != "echo" && (r.EchoFraction <= 0 || r.EchoOpsS != results[i-1].ThroughputOpsS) {
					t.Fatalf("%s: echo fraction %v of %v", op, r.EchoFraction, r.EchoOpsS)
				}
			}
		}
		// Delete and rename put the tree back; create and mkdir clean up.
		for k := 0; k < tree.NumFiles(); k++ {
			if _, err := fs.Stat(ctx, env.User, tree.FilePath(k)); err != nil {
				t.Fatalf("after %s: file %d: %v", op, k, err)
			}
		}
		if l, err := fs.List(ctx, env.User, "/bench/.runs", "", 1000); err != nil || len(l.Entries) != 0 {
			t.Fatalf("after %s: run directories left: %v %v", op, l, err)
		}
	}
	if fs.Echoes() == 0 {
		t.Fatal("echo never reached the target")
	}
}

func TestMicroDurationAndSeries(t *testing.T) {
	env, _, tree := prepared(t, 100)
	cfg := bench.DefaultMicroConfig()
	cfg.Duration = 1200 * time.Millisecond
	cfg.Echo = false
	results, err := bench.Micro(context.Background(), env, cfg, tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := results[0]
	if r.DurationS < 1.2 || r.DurationS > 3 || len(r.Series) < 2 || r.Ops == 0 {
		t.Fatalf("duration %v, series %v, ops %d", r.DurationS, r.Series, r.Ops)
	}
	if r.Latency.P50 <= 0 || r.Latency.Max < r.Latency.P999 || len(r.CDF) == 0 {
		t.Fatalf("latency %+v", r.Latency)
	}
	doc := bench.NewDocument([]string{"micro"})
	doc.Results = results
	if err := doc.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestMicroConfigValidate(t *testing.T) {
	for name, f := range map[string]func(*bench.MicroConfig){
		"unknown op":   func(c *bench.MicroConfig) { c.Op = "fly" },
		"no bound":     func(c *bench.MicroConfig) { c.Duration, c.OpsPerClient = 0, 0 },
		"zero clients": func(c *bench.MicroConfig) { c.Clients = []int{4, 0} },
		"hot stat":     func(c *bench.MicroConfig) { c.HotDir = true },
	} {
		c := bench.DefaultMicroConfig()
		f(&c)
		if c.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestBigdirListsEveryPageAndSamplesMemory(t *testing.T) {
	env, _ := memEnv(t)
	samples := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		samples++
		w.Write([]byte("# HELP x\nprocess_resident_memory_bytes 1.2345e+07\n"))
	}))
	defer srv.Close()
	env.MetricsURL = srv.URL + "/metrics"
	cfg := bench.DefaultBigdirConfig()
	cfg.Entries, cfg.PageSize, cfg.Clients = 250, 100, 4
	r, err := bench.Bigdir(context.Background(), env, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := r.Bigdir
	if b.Entries != 250 || b.Pages != 3 || r.Ops != 3 || b.FillS == 0 {
		t.Fatalf("bigdir %+v", b)
	}
	if b.MemBytesBefore != 12345000 || b.MemBytesMax != 12345000 || samples < 2 {
		t.Fatalf("memory %d/%d after %d samples (%s)", b.MemBytesBefore, b.MemBytesMax, samples, b.MemError)
	}
	// A second run reuses the directory.
	r, err = bench.Bigdir(context.Background(), env, cfg, nil)
	if err != nil || r.Bigdir.FillS != 0 {
		t.Fatalf("second run refilled (%v, %v)", r.Bigdir.FillS, err)
	}
}

func TestEchoAndJSONShape(t *testing.T) {
	env, fs := memEnv(t)
	results, err := bench.Echo(context.Background(), env, bench.RunConfig{OpsPerClient: 100}, []int{1, 2}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || fs.Echoes() != 300 {
		t.Fatalf("%d results, %d echoes", len(results), fs.Echoes())
	}
	doc := bench.NewDocument([]string{"echo"})
	doc.Results = results
	path := filepath.Join(t.TempDir(), "r.json")
	if err := doc.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	back, err := bench.ReadDocumentFile(path)
	if err != nil || len(back.Results) != 2 || back.Results[1].Ops != 200 {
		t.Fatalf("read back %+v, %v", back, err)
	}
	// The field names are a contract with scripts and docs.
	var raw map[string]any
	b, _ := json.Marshal(results[0])
	json.Unmarshal(b, &raw)
	for _, k := range []string{"workload", "op", "target", "system", "clients", "throughput_ops_s", "latency_ms", "ops", "errors", "duration_s", "series"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, b)
		}
	}
	lat := raw["latency_ms"].(map[string]any)
	for _, k := range []string{"p50", "p90", "p99", "p999", "max"} {
		if _, ok := lat[k]; !ok {
			t.Errorf("latency_ms lacks %q", k)
		}
	}
	var table bytes.Buffer
	if err := bench.WriteTable(&table, results); err != nil || !strings.Contains(table.String(), "echo") || strings.Count(table.String(), "\n") != 3 {
		t.Fatalf("table:\n%s", table.String())
	}
	// Check catches a broken document.
	doc.Results[0].Ops++
	if doc.Check() == nil {
		t.Fatal("Check accepted a series that does not sum to ops")
	}
}
