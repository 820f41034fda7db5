package hashtab

import (
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

// TestTableAgainstModel runs random operations on a small table (so that
// buckets fill and evict) beside a map of what the table may hold: every
// value the table returns must be the last one put for that hash, a hash the
// model says is gone must be gone, and Len must count what Get finds.
func TestTableAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tb := New[uint64](rapid.IntRange(0, 40).Draw(t, "capacity"))
		model := map[uint64]uint64{} // what the table may hold
		// Few distinct hashes, some sharing buckets, 0 and 1 among them.
		hash := rapid.SampledFrom([]uint64{0, 1, 2, 3, 1 << 32, 2 << 32, 3 << 32, 5 << 40, 7 << 50, ^uint64(0), 0xdeadbeef << 20})
		for i := range rapid.IntRange(1, 200).Draw(t, "ops") {
			x := hash.Draw(t, "x")
			x = tag(x) // 0 and 1 share a slot by contract
			switch rapid.IntRange(0, 4).Draw(t, "op") {
			case 0:
				v := uint64(i)
				old, ev := tb.Put(x, v)
				if ev {
					if want, ok := model[x]; ok && want != old {
						t.Fatalf("Put(%#x) replaced %d, model has %d", x, old, want)
					}
					if _, ok := model[x]; !ok {
						delete(model, keyOf(t, model, old))
					}
				}
				model[x] = v
			case 1:
				_, _, put := tb.PutIfRoom(x, uint64(i))
				if put {
					model[x] = uint64(i)
				} else if _, ok := model[x]; ok {
					t.Fatalf("PutIfRoom(%#x) refused a hash the table holds", x)
				}
			case 2:
				old, ok := tb.Delete(x)
				want, had := model[x]
				if ok != had || (ok && old != want) {
					t.Fatalf("Delete(%#x) = %d, %v; model %d, %v", x, old, ok, want, had)
				}
				delete(model, x)
			case 3:
				old, ok := tb.EvictOther(x)
				if ok {
					k := keyOf(t, model, old)
					if k == x {
						t.Fatalf("EvictOther(%#x) evicted %#x itself", x, x)
					}
					delete(model, k)
				} else {
					for k := range model {
						if k != x {
							t.Fatalf("EvictOther(%#x) found nothing; the table holds %#x", x, k)
						}
					}
				}
			case 4:
				v, ok := tb.Get(x)
				want, had := model[x]
				if ok != had || (ok && v != want) {
					t.Fatalf("Get(%#x) = %d, %v; model %d, %v", x, v, ok, want, had)
				}
			}
			if tb.Len() != len(model) {
				t.Fatalf("Len = %d, model holds %d", tb.Len(), len(model))
			}
			if tb.Len() > tb.Cap() {
				t.Fatalf("Len %d > Cap %d", tb.Len(), tb.Cap())
			}
		}
	})
}

// keyOf finds the hash whose value is v (values are unique: the op index).
func keyOf(t *rapid.T, model map[uint64]uint64, v uint64) uint64 {
	for k, w := range model {
		if w == v {
			return k
		}
	}
	t.Fatalf("the table gave back %d, which the model does not hold", v)
	return 0
}

// TestFullTableKeepsWorking fills a table far past its capacity: it never
// holds more than its slots, and the newest hash of each bucket is always
// found.
func TestFullTableKeepsWorking(t *testing.T) {
	tb := New[int](1000)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 100_000 {
		x := r.Uint64()
		tb.Put(x, i)
		if v, ok := tb.Get(x); !ok || v != i {
			t.Fatalf("Get right after Put(%#x, %d) = %d, %v", x, i, v, ok)
		}
	}
	if tb.Len() > tb.Cap() || tb.Cap() < 1000 || tb.Cap() >= 1000+Ways {
		t.Fatalf("Len %d, Cap %d; want Len <= Cap, 1000 <= Cap < %d", tb.Len(), tb.Cap(), 1000+Ways)
	}
	if tb.Len() < tb.Cap()*9/10 {
		t.Fatalf("only %d of %d slots in use after 100,000 puts", tb.Len(), tb.Cap())
	}
}

// The churn benchmarks do what a cache shard does under a stream of
// commits: look up a key that is mostly absent, delete it, and put a new
// one, with the table (or map) kept full. ChurnMap is the Go map the caches
// used before; after its warm-up of 20 rounds of the capacity, it is the map
// a long-running server has.
const churnCap = 1 << 20

func BenchmarkChurnTable(b *testing.B) {
	tb := New[[4]uint64](churnCap)
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 * churnCap {
		tb.Put(r.Uint64(), [4]uint64{})
	}
	b.ResetTimer()
	for b.Loop() {
		x := r.Uint64()
		tb.Get(x)
		tb.Delete(x)
		tb.Put(x, [4]uint64{})
	}
}

func BenchmarkChurnMap(b *testing.B) {
	m := make(map[uint64][4]uint64)
	r := rand.New(rand.NewPCG(1, 2))
	put := func(x uint64) {
		if len(m) >= churnCap {
			for y := range m { // evict an arbitrary entry, as the caches did
				delete(m, y)
				break
			}
		}
		m[x] = [4]uint64{}
	}
	for range 20 * churnCap {
		put(r.Uint64())
	}
	b.ResetTimer()
	for b.Loop() {
		x := r.Uint64()
		_ = m[x]
		delete(m, x)
		put(x)
	}
}
