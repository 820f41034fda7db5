package namespace

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/nimbus-fs/nimbus/internal/cost"
	"github.com/nimbus-fs/nimbus/meta"
)

// TestWrongHintsAreHarmless: the hint cache keeps no keys, so two keys with
// one hash read each other's ids. Here every directory of two look-alike
// trees is given the other tree's id (the worst case: the wrong id names a
// real directory whose children have the same names), and every operation
// must still see the truth and change only what it names.
func TestWrongHintsAreHarmless(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	for _, top := range []string{"/a", "/x"} {
		must(t, e.Mkdirs(ctx, root, top+"/b/c", 0o755))
		writeFile(t, e, root, top+"/b/c/file", []byte(top))
	}
	ids := func(top string) []uint64 {
		var out []uint64
		for _, p := range []string{top, top + "/b", top + "/b/c"} {
			st, err := e.Stat(ctx, root, p)
			must(t, err)
			out = append(out, st.FileID)
		}
		return out
	}
	a, x := ids("/a"), ids("/x")
	cross := func() { // each of /a's directories hinted with /x's id, and back
		names := []string{"a", "b", "c"}
		parentA, parentX := uint64(1), uint64(1) // the root's id
		for i := range names {
			nameA, nameX := names[i], names[i]
			if i == 0 {
				nameX = "x"
			}
			e.hints.put(parentA, nameA, x[i])
			e.hints.put(parentX, nameX, a[i])
			parentA, parentX = a[i], x[i]
		}
	}

	cross()
	data := string(readAll(t, e, "/a/b/c/file"))
	if data != "/a" {
		t.Fatalf("read /a/b/c/file with crossed hints: %q", data)
	}
	cross()
	l, err := e.List(ctx, root, "/x/b/c", "", 10)
	must(t, err)
	if len(l.Entries) != 1 || l.Entries[0].Path != "/x/b/c/file" {
		t.Fatalf("list /x/b/c with crossed hints: %+v", l.Entries)
	}
	cross()
	must(t, e.Rename(ctx, root, "/a/b/c/file", "/a/b/c/moved", meta.RenameOptions{}))
	cross()
	if _, err := e.Stat(ctx, root, "/x/b/c/file"); err != nil {
		t.Fatalf("the rename under /a touched /x: %v", err)
	}
	if _, err := e.Stat(ctx, root, "/a/b/c/moved"); err != nil {
		t.Fatalf("the rename under /a is not there: %v", err)
	}
	cross()
	must(t, e.Delete(ctx, root, "/x/b/c/file", false))
	cross()
	if _, err := e.Stat(ctx, root, "/a/b/c/moved"); err != nil {
		t.Fatalf("the delete under /x touched /a: %v", err)
	}
	cross()
	must(t, e.Mkdirs(ctx, root, "/a/b/c/new", 0o755))
	l, err = e.List(ctx, root, "/x/b/c", "", 10)
	must(t, err)
	if len(l.Entries) != 0 {
		t.Fatalf("/x/b/c after the mkdir under /a: %+v", l.Entries)
	}
	var m dto.Metric
	must(t, e.metrics.retries.WithLabelValues("mkdirs").Write(&m))
	if m.GetCounter().GetValue() == 0 {
		t.Fatal("no operation retried: the crossed hints were not used")
	}
}

// BenchmarkHintsGet1M looks up random hints in a full cache of a million
// directories, from GOMAXPROCS goroutines: one probe per path component.
func BenchmarkHintsGet1M(b *testing.B) {
	const n = 1 << 20
	h := newHints(2 * n) // room to spare: shards fill unevenly
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("dir-%07d-3f2a9c1e-77b4", i)
		h.put(uint64(i/2+2), names[i], uint64(i+100))
	}
	// What a full collection costs with the cache full: the collector
	// follows every pointer the cache holds.
	gcMS := float64(cost.FullGC().Microseconds()) / 1000
	defer func() { b.ReportMetric(gcMS, "gc-ms") }() // after ResetTimer, which drops metrics
	var seed, gets, misses atomic.Uint64
	defer func() { // a few hints lost to full buckets; none may be wrong
		b.ReportMetric(100*float64(misses.Load())/float64(max(gets.Load(), 1)), "miss-%")
	}()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(seed.Add(1), 0))
		var n1, m1 uint64
		for pb.Next() {
			i := r.IntN(n)
			id, ok := h.get(uint64(i/2+2), names[i])
			if ok && id != uint64(i+100) {
				b.Fatal("wrong hint in a full cache")
			}
			n1++
			if !ok {
				m1++
			}
		}
		gets.Add(n1)
		misses.Add(m1)
	})
}
