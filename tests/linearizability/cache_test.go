package linearizability

import (
	"fmt"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/internal/linmodel"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
)

// The engine with its metadata cache (namespace.Config.Cache): stats and
// listings answered from it must keep the histories linearizable, and the
// checker must see it when the cache is let go stale, by writes that do not
// invalidate or by fills that ignore the writes that overtook them.

// withCache gives the engine a cache of maxBytes, its Config changed by
// edit.
func withCache(t *testing.T, maxBytes int64, edit func(*cache.Config)) func(*namespace.Config) {
	return withCacheOn(t, maxBytes, nil, edit)
}

// withCacheOn is withCache with the cache's metrics on reg.
func withCacheOn(t *testing.T, maxBytes int64, reg prometheus.Registerer, edit func(*cache.Config)) func(*namespace.Config) {
	return func(cfg *namespace.Config) {
		cc := cache.Config{MaxBytes: maxBytes, Registerer: reg}
		if edit != nil {
			edit(&cc)
		}
		c, err := cache.New(cc)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Cache = c
	}
}

// TestLinearizableEngineCached is TestLinearizableEngine with a metadata
// cache small enough to evict.
func TestLinearizableEngineCached(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := openEngineCfg(t, nil, false, withCacheOn(t, 256<<10, reg, nil))
	ops, overlapped := 0, 0
	for _, seed := range seeds(t, 150) {
		base := fmt.Sprintf("/s%d", seed)
		h := record(t, e, base, seed, mix{clients: 5, ops: 30})
		check(t, "engine-cached", seed, h, linmodel.Initial())
		ops, overlapped = ops+len(h), overlapped+concurrent(h)
	}
	if overlapped < ops/5 {
		t.Errorf("only %d of %d operations ran concurrently with another", overlapped, ops)
	}
	// Answers from the cache are what this test is about; the workload
	// writes a few names all the time, so most reads find them invalidated
	// (about 1 in 80 operations was answered from the cache when written).
	hits := metricSum(t, reg, "nimbus_cache_hits_total", "listing") + metricSum(t, reg, "nimbus_cache_hits_total", "attrs")
	t.Logf("%d operations; %.0f stats and listings answered from the cache", ops, hits)
	if hits < float64(ops)/400 {
		t.Errorf("only %.0f answers from the cache in %d operations", hits, ops)
	}
}

// metricSum returns the value of counter name with label kind in reg.
func metricSum(t *testing.T, reg *prometheus.Registry, name, kind string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// TestLinearizableServerCached is TestLinearizableServer against a server
// started with --cache-bytes.
func TestLinearizableServerCached(t *testing.T) {
	c := startServer(t, "--cache-bytes", "1m")
	for _, seed := range seeds(t, 40) {
		base := fmt.Sprintf("/s%d", seed)
		h := record(t, c, base, seed, mix{clients: 5, ops: 30})
		check(t, "server-cached", seed, h, linmodel.Initial())
	}
}

// staleFound records histories of seeds on an engine configured by edit
// until one is not linearizable, and returns the seed (0: none in seeds).
func staleFound(t *testing.T, edit func(*namespace.Config), n int) uint64 {
	t.Helper()
	e := openEngineCfg(t, nil, false, edit)
	return illegalSeed(t, []meta.FileSystem{e}, mix{clients: 5, ops: 30}, n)
}

// illegalSeed records histories of seeds 1..n with m's clients spread over
// fss until one is not linearizable, and returns that seed (0: none was):
// the tests that show the checker sees what a switched-off mechanism lets
// through.
func illegalSeed(t *testing.T, fss []meta.FileSystem, m mix, n int) uint64 {
	t.Helper()
	for seed := uint64(1); seed <= uint64(n); seed++ {
		h := recordOn(t, fss, fmt.Sprintf("/s%d", seed), seed, m)
		res, err := linmodel.Check(linmodel.Initial(), h, checkTimeout, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict == porcupine.Illegal {
			return seed
		}
	}
	return 0
}

// TestLinearizableFailsWithoutInvalidation shows that the checker catches
// a cache that writes do not invalidate (namespace.Config.DisableInvalidation).
func TestLinearizableFailsWithoutInvalidation(t *testing.T) {
	start := time.Now()
	edit := func(cfg *namespace.Config) {
		withCache(t, 256<<10, nil)(cfg)
		cfg.DisableInvalidation = true
	}
	seed := staleFound(t, edit, 40)
	if seed == 0 {
		t.Fatal("every history was linearizable with invalidations off: the check cannot see a stale cache")
	}
	t.Logf("seed %d: not linearizable with invalidations off, as expected (%s)", seed, time.Since(start).Round(time.Millisecond))
}

// TestLinearizableFailsWithoutFillCheck shows that the checker catches a
// cache that installs fills overtaken by a write (cache.Config.DisableFillCheck).
func TestLinearizableFailsWithoutFillCheck(t *testing.T) {
	start := time.Now()
	edit := withCache(t, 256<<10, func(c *cache.Config) { c.DisableFillCheck = true })
	seed := staleFound(t, edit, 150)
	if seed == 0 {
		t.Fatal("every history was linearizable with the fill check off: the check cannot see a stale fill")
	}
	t.Logf("seed %d: not linearizable with the fill check off, as expected (%s)", seed, time.Since(start).Round(time.Millisecond))
}
