package linearizability

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/internal/etcdtest"
	"github.com/nimbus-fs/nimbus/internal/linmodel"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/meta"
)

// The tests here run `nimbus serve` processes on one PostgreSQL database
// with an etcd coordinator and metadata caches on: the coherence loop
// (coherence/loop) invalidates every server's cache before a write
// commits, so clients spread over the servers see one linearizable
// namespace.

// startCoherentServers starts n cached servers on one fresh database and
// one etcd prefix, with args added, and returns a client and the process
// of each.
func startCoherentServers(t *testing.T, n int, args ...string) ([]meta.FileSystem, []*testproc.Server) {
	t.Helper()
	return startCoherentServersEach(t, n, nil, args...)
}

// startCoherentServersEach is startCoherentServers with each(i)'s
// arguments added to server i's (each may be nil).
func startCoherentServersEach(t *testing.T, n int, each func(i int) []string, args ...string) ([]meta.FileSystem, []*testproc.Server) {
	t.Helper()
	db := pgtest.DB(t)
	coord := fmt.Sprintf("etcd://%s/lin-%d", strings.Join(etcdtest.Endpoints(t), ","), time.Now().UnixNano())
	var fss []meta.FileSystem
	var procs []*testproc.Server
	for i := range n {
		a := append([]string{"--superuser", linmodel.Superuser, "--store", db,
			"--coordinator", coord, "--cache-bytes", "4m"}, args...)
		if each != nil {
			a = append(a, each(i)...)
		}
		p := testproc.Start(t, binary, "", "", a...)
		c, err := client.Dial(context.Background(), p.URL(), client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fss, procs = append(fss, c), append(procs, p)
	}
	return fss, procs
}

// TestLinearizableCoherentServers: histories of concurrent clients spread
// over two cached NameNodes on one database are linearizable.
func TestLinearizableCoherentServers(t *testing.T) {
	fss, procs := startCoherentServers(t, 2)
	start := time.Now()
	ops, overlapped := 0, 0
	for _, seed := range seeds(t, 8) {
		base := fmt.Sprintf("/s%d", seed)
		h := recordOn(t, fss, base, seed, mix{clients: 6, ops: 25})
		check(t, "coherent-servers", seed, h, linmodel.Initial())
		ops, overlapped = ops+len(h), overlapped+concurrent(h)
	}
	t.Logf("%d operations, %d of them concurrent with another, in %s", ops, overlapped, time.Since(start).Round(time.Millisecond))
	for i, p := range procs {
		m := scrape(t, p.URL())
		t.Logf("server %d: cache hits %v (entry) %v (attrs), INV sent %v, writes committed %v, ack wait p50 %.2f ms p99 %.2f ms",
			i, m.sum("nimbus_cache_hits_total", "kind", "entry"), m.sum("nimbus_cache_hits_total", "kind", "attrs"),
			m.sum("nimbus_coherence_messages_sent_total", "type", "INV"), m.sum("nimbus_coherence_writes_total", "result", "committed"),
			1e3*m.quantile("nimbus_coherence_ack_wait_seconds", 0.5), 1e3*m.quantile("nimbus_coherence_ack_wait_seconds", 0.99))
		if m.sum("nimbus_cache_hits_total", "kind", "entry") == 0 {
			t.Errorf("server %d answered nothing from its cache: the test does not exercise it", i)
		}
	}
}

// TestCoherentFailsWithoutInvalidation: the same servers with the
// invalidations between them switched off (--coherence-disable-invalidation)
// serve stale rows, and the checker sees it.
func TestCoherentFailsWithoutInvalidation(t *testing.T) {
	fss, _ := startCoherentServers(t, 2, "--coherence-disable-invalidation")
	start := time.Now()
	seed := illegalSeed(t, fss, mix{clients: 6, ops: 25}, 30)
	if seed == 0 {
		t.Fatal("every history was linearizable with invalidations between servers off: the test cannot see a stale cache")
	}
	t.Logf("seed %d: not linearizable with invalidations between servers off, as expected (%s)", seed, time.Since(start).Round(time.Millisecond))
}

// TestCoherentServerKilled: three cached servers; one, with a warm cache,
// is killed with SIGKILL; the clients of the other two go on. Their writes
// wait for the dead one's ACKs only until its lease expires (TTL 2 s) and
// it is fenced, and the histories stay linearizable.
func TestCoherentServerKilled(t *testing.T) {
	fss, procs := startCoherentServers(t, 3, "--coordinator-ttl", "2s")
	ctx := context.Background()
	u := meta.User{Name: linmodel.Superuser}
	base := "/k"
	prepare(t, fss[0], base)
	// Warm the victim's cache with what the workload touches.
	for range 3 {
		if _, err := fss[2].List(ctx, u, base, "", 0); err != nil {
			t.Fatal(err)
		}
		if _, err := fss[2].Stat(ctx, u, base); err != nil {
			t.Fatal(err)
		}
	}
	procs[2].Kill()
	killed := time.Now()
	h := recordPrepared(fss[:2], base, 7, mix{clients: 4, ops: 25})
	took := time.Since(killed)
	check(t, "coherent-killed", 7, h, linmodel.Initial())
	if took > 30*time.Second {
		t.Errorf("the survivors' workload took %s after the kill: writes waited too long for the dead server", took)
	}
	for i := range 2 {
		m := scrape(t, procs[i].URL())
		t.Logf("server %d: fences %v, floor raises %v, ack wait p99 %.0f ms, max bucket reached %.1f s",
			i, m.sum("nimbus_coherence_fences_total", "", ""), m.sum("nimbus_coherence_floor_raises_total", "", ""),
			1e3*m.quantile("nimbus_coherence_ack_wait_seconds", 0.99), m.quantile("nimbus_coherence_ack_wait_seconds", 1))
	}
	t.Logf("survivors' workload: %d operations in %s after the kill", len(h), took.Round(time.Millisecond))
	// A history recorded after the fence is quick again.
	start := time.Now()
	h = recordOn(t, fss[:2], "/k2", 8, mix{clients: 4, ops: 25})
	check(t, "coherent-after-kill", 8, h, linmodel.Initial())
	t.Logf("after the fence: %d operations in %s", len(h), time.Since(start).Round(time.Millisecond))
}

// TestCoherenceFigures measures, on two cached servers: INV messages per
// write, the ACK wait of a write (its extra lock hold), and a stat on
// server B of a file just changed on server A (a miss that fills), then
// again (a hit).
func TestCoherenceFigures(t *testing.T) {
	fss, procs := startCoherentServers(t, 2)
	ctx := context.Background()
	u := meta.User{Name: linmodel.Superuser}
	a, b := fss[0], fss[1]
	if err := a.Mkdirs(ctx, u, "/f", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := meta.CreateFile(ctx, a, u, "/f/x", meta.CreateOptions{Client: "figures", Perm: 0o644}, nil); err != nil {
		t.Fatal(err)
	}
	const n = 300
	var afterWrite, cached []time.Duration
	for i := range n {
		if _, err := b.Stat(ctx, u, "/f/x"); err != nil { // cached from the second round on
			t.Fatal(err)
		}
		if err := a.SetPermission(ctx, u, "/f/x", fs(0o600+i%2)); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		st, err := b.Stat(ctx, u, "/f/x")
		if err != nil {
			t.Fatal(err)
		}
		afterWrite = append(afterWrite, time.Since(t0))
		if st.Perm != fs(0o600+i%2) {
			t.Fatalf("round %d: server B says %o after server A set %o", i, st.Perm, 0o600+i%2)
		}
		t0 = time.Now()
		if _, err := b.Stat(ctx, u, "/f/x"); err != nil {
			t.Fatal(err)
		}
		cached = append(cached, time.Since(t0))
	}
	ma, mb := scrape(t, procs[0].URL()), scrape(t, procs[1].URL())
	inv := ma.sum("nimbus_coherence_messages_sent_total", "type", "INV")
	writes := ma.sum("nimbus_coherence_writes_total", "result", "committed")
	t.Logf("server A: %v writes committed, %v INV sent: %.2f INV per write (one peer); ACKs received %v",
		writes, inv, inv/writes, ma.sum("nimbus_coherence_messages_received_total", "type", "ACK"))
	t.Logf("server A: ack wait (lock-hold while waiting for ACKs) p50 %.3f ms, p99 %.3f ms",
		1e3*ma.quantile("nimbus_coherence_ack_wait_seconds", 0.5), 1e3*ma.quantile("nimbus_coherence_ack_wait_seconds", 0.99))
	t.Logf("server B: stat right after a write on A: p50 %s p99 %s; the next stat (cached): p50 %s p99 %s; B's attrs hits %v misses %v",
		pct(afterWrite, 0.5), pct(afterWrite, 0.99), pct(cached, 0.5), pct(cached, 0.99),
		mb.sum("nimbus_cache_hits_total", "kind", "attrs"), mb.sum("nimbus_cache_misses_total", "kind", "attrs"))
}

func fs(p int) meta.Perm { return meta.Perm(p) }

func pct(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))].Round(time.Microsecond)
}

// scraped is one scrape of a server's /metrics.
type scraped struct {
	fams map[string]*dto.MetricFamily
}

func scrape(t *testing.T, url string) scraped {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return scraped{fams: fams}
}

// sum adds the values of the family's series whose label has value (label
// "": all series).
func (s scraped) sum(name, label, value string) float64 {
	f := s.fams[name]
	if f == nil {
		return 0
	}
	total := 0.0
	for _, m := range f.Metric {
		if label != "" && !hasLabel(m, label, value) {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		}
	}
	return total
}

func hasLabel(m *dto.Metric, label, value string) bool {
	for _, l := range m.Label {
		if l.GetName() == label && l.GetValue() == value {
			return true
		}
	}
	return false
}

// quantile estimates quantile q of a histogram family's first series: the
// upper bound of the bucket it falls in.
func (s scraped) quantile(name string, q float64) float64 {
	f := s.fams[name]
	if f == nil || len(f.Metric) == 0 || f.Metric[0].Histogram == nil {
		return math.NaN()
	}
	h := f.Metric[0].Histogram
	want := q * float64(h.GetSampleCount())
	for _, b := range h.Bucket {
		if float64(b.GetCumulativeCount()) >= want {
			return b.GetUpperBound()
		}
	}
	return math.Inf(1)
}

// TestCoherentServerPaused: three cached servers (TTL 2 s); the third, its
// cache warmed, is stopped with SIGSTOP for longer than its lease while
// another server changes every row it cached (those writes wait for its
// lease to expire and fence it). Resumed, it must answer nothing from its
// old cache, from the first request on (its session deadline has passed);
// it joins again under a new member ID with an empty cache, and a history
// with clients on all three servers is linearizable.
func TestCoherentServerPaused(t *testing.T) {
	fss, procs := startCoherentServers(t, 3, "--coordinator-ttl", "2s")
	ctx := context.Background()
	u := meta.User{Name: linmodel.Superuser}
	base := "/p"
	prepare(t, fss[0], base)
	var paths []string
	var walk func(dir string)
	walk = func(dir string) {
		l, err := fss[2].List(ctx, u, dir, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range l.Entries {
			paths = append(paths, e.Path)
			if e.Type == meta.TypeDir {
				walk(e.Path)
			}
		}
	}
	walk(base)
	warm := func(fs meta.FileSystem) {
		t.Helper()
		for range 2 {
			for _, p := range paths {
				if _, err := fs.Stat(ctx, u, p); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	warm(fss[2])
	before := scrape(t, procs[2].URL()).sum("nimbus_cache_hits_total", "", "")
	if err := procs[2].Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	for _, p := range paths {
		if err := fss[0].SetPermission(ctx, u, p, 0o701); err != nil {
			t.Fatal(err)
		}
	}
	changed := time.Since(paused)
	if d := 4*time.Second - time.Since(paused); d > 0 {
		time.Sleep(d) // past the lease, whatever the writes took
	}
	if err := procs[2].Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Straight after the resume, before the server has noticed anything:
	// every answer must be the current one.
	for _, p := range paths {
		st, err := fss[2].Stat(ctx, u, p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Perm != 0o701 {
			t.Errorf("%s on the resumed server: %o, want 0701 (a stale cached row)", p, st.Perm)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(procs[2].Log.String(), "joined the coordinator again") {
		if time.Now().After(deadline) {
			t.Fatal("the paused server did not join again under a new member ID")
		}
		time.Sleep(100 * time.Millisecond)
	}
	h := recordOn(t, fss, "/p2", 13, mix{clients: 6, ops: 25})
	check(t, "coherent-rejoined", 13, h, linmodel.Initial())
	warm(fss[2])
	after := scrape(t, procs[2].URL()).sum("nimbus_cache_hits_total", "", "")
	t.Logf("%d rows changed on server 0 in %s while server 2 was stopped (waiting for its lease); server 2: cache hits %v before the pause, %v at the end",
		len(paths), changed.Round(time.Millisecond), before, after)
	if after <= before {
		t.Errorf("the resumed server answers nothing from its cache any more")
	}
}
