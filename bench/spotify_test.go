package bench_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/bench"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/metatest"
)

func TestNamedMixes(t *testing.T) {
	paper, err := bench.LookupMix("paper")
	if err != nil {
		t.Fatal(err)
	}
	for op, want := range map[string]float64{"read": 0.6922, "stat": 0.17, "ls": 0.0901, "create": 0.027, "mv": 0.013, "delete": 0.0075, "mkdirs": 0.0002, "stat-dir": 0} {
		if got := paper.Share(op); math.Abs(got-want) > 1e-9 {
			t.Errorf("paper: %s share %v, want %v", op, got, want)
		}
	}
	repo, err := bench.LookupMix("lambdafs-repo")
	if err != nil {
		t.Fatal(err)
	}
	// Its shares sum to 99.3%: taken as weights.
	if got, want := repo.Share("read"), 71.84/99.3; math.Abs(got-want) > 1e-9 {
		t.Errorf("lambdafs-repo: read share %v, want %v", got, want)
	}
	if got := repo.Share("mkdirs"); got != 0 {
		t.Errorf("lambdafs-repo: mkdirs share %v, want 0", got)
	}
	if _, err := bench.LookupMix("/no/such/mix"); err == nil || !strings.Contains(err.Error(), "paper") {
		t.Errorf("unknown mix: %v, want an error listing the named mixes", err)
	}
}

func TestParseMix(t *testing.T) {
	m, err := bench.ParseMix("f", strings.NewReader("# comment\n\nread 3\nstat 0\nls 1%\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Share("read") != 0.75 || m.Share("ls") != 0.25 || m.Share("stat") != 0 {
		t.Fatalf("shares %v %v %v", m.Share("read"), m.Share("ls"), m.Share("stat"))
	}
	for _, bad := range []string{"read", "read 1 2", "frob 1", "read -1", "read x", "read 1\nread 2", "read 0\nls 0", ""} {
		if _, err := bench.ParseMix("bad", strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "mix bad") {
			t.Errorf("%q: %v, want an error naming the mix", bad, err)
		}
	}
}

func TestSpotifyRates(t *testing.T) {
	cfg := bench.DefaultSpotifyConfig()
	a, b := cfg.Rates(10000), cfg.Rates(10000)
	cfg.Seed = 2
	c := cfg.Rates(10000)
	capped, same := 0, 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("rate %d differs between two draws of one seed", i)
		}
		if a[i] == c[i] {
			same++
		}
		if a[i] < cfg.BaseRate || a[i] > cfg.MaxBurst*cfg.BaseRate {
			t.Fatalf("rate %d = %v, outside [%v, %v]", i, a[i], cfg.BaseRate, cfg.MaxBurst*cfg.BaseRate)
		}
		if a[i] == cfg.MaxBurst*cfg.BaseRate {
			capped++
		}
	}
	if same > 10 {
		t.Errorf("%d of 10,000 rates equal under another seed", same)
	}
	// P(X > 7 x_m) = 7^-2 for a Pareto of shape 2: about 204 of 10,000.
	if capped < 150 || capped > 260 {
		t.Errorf("%d of 10,000 draws capped at 7x, want about 204", capped)
	}
}

func TestSpotifyRun(t *testing.T) {
	env, fs, tree := prepared(t, 500)
	before := countEntries(t, env, tree.Root())
	cfg := bench.DefaultSpotifyConfig()
	cfg.BaseRate, cfg.Duration, cfg.Interval, cfg.Workers, cfg.PoolSize = 400, 3*time.Second, time.Second, 8, 100
	cfg.HotWriters = 0.25 // two clients creating in one directory throughout
	// Deletes outpace creates: the run must make spares first.
	cfg.Mix, _ = bench.ParseMix("test", strings.NewReader("read 50\nstat 10\nstat-dir 5\nls 10\ncreate 5\nmv 5\ndelete 14\nmkdirs 1\n"))
	res, err := bench.Spotify(context.Background(), env, cfg, tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	sp := res.Spotify
	if sp == nil || len(sp.Seconds) != 3 || len(sp.Rates) != 3 {
		t.Fatalf("spotify stats %+v", sp)
	}
	want := int64(0)
	frac := 0.0
	for _, r := range sp.Rates {
		frac += r
	}
	want = int64(frac)
	if sp.Offered != want || sp.Issued+sp.Unissued != sp.Offered {
		t.Errorf("offered %d (want %d), issued %d, unissued %d", sp.Offered, want, sp.Issued, sp.Unissued)
	}
	if res.Ops+res.Errors != sp.Issued || res.Errors != 0 {
		t.Errorf("ops %d + errors %d, issued %d; errors: %v", res.Ops, res.Errors, sp.Issued, res.ErrorSamples)
	}
	var sum int64
	for op, s := range res.PerOp {
		if op != "create-hot" {
			sum += s.Ops
		}
	}
	if hot := res.PerOp["create-hot"]; hot.Ops == 0 || hot.Errors != 0 {
		t.Errorf("hot writers: %+v", hot)
	}
	if sum != res.Ops {
		t.Errorf("per-op ops sum to %d, want %d", sum, res.Ops)
	}
	if r := float64(res.PerOp["read"].Ops) / float64(res.Ops); r < 0.4 || r > 0.6 {
		t.Errorf("reads were %.2f of the operations, want about 0.5", r)
	}
	if sp.Fallbacks != 0 {
		t.Errorf("%d mv/delete fell back to create despite the spares", sp.Fallbacks)
	}
	if res.Spotify.Response.P50 < res.Latency.P50 {
		t.Errorf("response p50 %v below service p50 %v", res.Spotify.Response.P50, res.Latency.P50)
	}
	// What the run made is gone: the tree is as prepared.
	if after := countEntries(t, env, tree.Root()); after != before {
		t.Errorf("%d entries under the tree after the run, %d before", after, before)
	}
	_ = fs
}

// slowFS answers stats slowly: a server that cannot keep up.
type slowFS struct {
	*metatest.MemFS
	delay time.Duration
}

func (s slowFS) Stat(ctx context.Context, u meta.User, p string) (*meta.FileStatus, error) {
	time.Sleep(s.delay)
	return s.MemFS.Stat(ctx, u, p)
}

func TestSpotifyServerBehind(t *testing.T) {
	env, fs, tree := prepared(t, 200)
	env.FS = slowFS{MemFS: fs, delay: 20 * time.Millisecond}
	cfg := bench.DefaultSpotifyConfig()
	cfg.BaseRate, cfg.Duration, cfg.Interval, cfg.Workers = 500, 2*time.Second, time.Second, 2
	cfg.Mix, _ = bench.ParseMix("stat", strings.NewReader("stat 1\n"))
	res, err := bench.Spotify(context.Background(), env, cfg, tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	sp := res.Spotify
	// Two workers at 20 ms serve about 100 stats a second of the 500+ due.
	if sp.ServerBehindS != 2 || sp.Unissued == 0 || sp.Seconds[0].Carried == 0 || sp.Seconds[0].Behind != "server" {
		t.Fatalf("server behind %d s, unissued %d, seconds %+v", sp.ServerBehindS, sp.Unissued, sp.Seconds)
	}
	// Each second is due its share of the target plus what the one before
	// carried.
	for i := 1; i < len(sp.Seconds); i++ {
		own := float64(sp.Seconds[i].Due - sp.Seconds[i-1].Carried)
		if math.Abs(own-sp.Seconds[i].TargetOpsS) > 1 {
			t.Errorf("second %d: due %d with %d carried in, target %.1f", i+1, sp.Seconds[i].Due, sp.Seconds[i-1].Carried, sp.Seconds[i].TargetOpsS)
		}
	}
	// Waiting for a worker counts in the response time, not the service time.
	if res.Spotify.Response.P90 < 10*res.Latency.P90 {
		t.Errorf("response p90 %v ms, service p90 %v ms: the wait is not counted", res.Spotify.Response.P90, res.Latency.P90)
	}
}

// countEntries counts the entries under dir, recursively.
func countEntries(t *testing.T, env *bench.Env, dir string) int {
	t.Helper()
	n := 0
	after := ""
	for {
		l, err := env.FS.List(context.Background(), env.User, dir, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range l.Entries {
			n++
			if e.IsDir() {
				n += countEntries(t, env, e.Path)
			}
			after = e.Path[strings.LastIndex(e.Path, "/")+1:]
		}
		if l.Remaining == 0 || len(l.Entries) == 0 {
			return n
		}
	}
}

// TestSpotifyIdleSecondsPass: seconds of the schedule with nothing to
// offer still last a second each (bench elastic's idle phase).
func TestSpotifyIdleSecondsPass(t *testing.T) {
	env, _, tree := prepared(t, 100)
	cfg := bench.DefaultSpotifyConfig()
	cfg.Duration, cfg.Interval, cfg.Workers, cfg.PoolSize = 3*time.Second, time.Second, 2, 10
	cfg.Schedule = []float64{20, 0, 0}
	cfg.Mix, _ = bench.ParseMix("stat", strings.NewReader("stat 1\n"))
	begun := time.Now()
	res, err := bench.Spotify(context.Background(), env, cfg, tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begun); took < 2900*time.Millisecond || res.DurationS < 2.9 {
		t.Fatalf("a schedule of 3 s took %v (duration %v s)", took, res.DurationS)
	}
}

// TestSpotifyEchoMix: the echo mix offers no-ops as the others offer
// metadata operations, all of them served.
func TestSpotifyEchoMix(t *testing.T) {
	env, _, tree := prepared(t, 50)
	cfg := bench.DefaultSpotifyConfig()
	cfg.BaseRate, cfg.Duration, cfg.Interval, cfg.Workers, cfg.PoolSize = 300, 2*time.Second, time.Second, 4, 50
	var err error
	if cfg.Mix, err = bench.LookupMix("echo"); err != nil {
		t.Fatal(err)
	}
	res, err := bench.Spotify(context.Background(), env, cfg, tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.Ops == 0 || res.Ops != res.Spotify.Issued || res.PerOp["echo"].Ops != res.Ops {
		t.Errorf("echo mix: ops %d, errors %d, issued %d, per op %+v", res.Ops, res.Errors, res.Spotify.Issued, res.PerOp)
	}
}
