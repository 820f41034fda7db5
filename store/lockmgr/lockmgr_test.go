package lockmgr

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/nimbus-fs/nimbus/store"
)

func newManager(t testing.TB, maxWait time.Duration) *Manager {
	t.Helper()
	cfg := DefaultConfig()
	cfg.MaxWait = maxWait
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var ctx = context.Background()

func mustLock(t *testing.T, o *Owner, key string, mode store.Mode) {
	t.Helper()
	if err := o.Lock(ctx, []byte(key), mode, false); err != nil {
		t.Fatalf("lock %q %s: %v", key, mode, err)
	}
}

// lockAsync starts a waiting Lock and returns the channel of its result.
func lockAsync(o *Owner, key string, mode store.Mode) chan error {
	ch := make(chan error, 1)
	go func() { ch <- o.Lock(ctx, []byte(key), mode, false) }()
	return ch
}

// waitQueued waits until n waiters are queued on key, so that tests order
// their requests without sleeping.
func waitQueued(t *testing.T, m *Manager, key string, n int) {
	t.Helper()
	s, h := m.shardOf([]byte(key))
	for range 10000 {
		s.mu.Lock()
		c := 0
		if e := s.find(h, []byte(key)); e != nil {
			for w := e.head; w != nil; w = w.next {
				c++
			}
		}
		s.mu.Unlock()
		if c == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%d waiters never queued on %q", n, key)
}

func notDone(t *testing.T, ch chan error) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("lock granted while it should wait (err %v)", err)
	default:
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{Shards: 3, MaxWait: time.Second}, {Shards: 0, MaxWait: time.Second}, {Shards: 4}} {
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("Validate(%+v) = %v, want ErrConfig", c, err)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestModes(t *testing.T) {
	m := newManager(t, time.Minute)
	a, b, c := m.Owner(), m.Owner(), m.Owner()
	mustLock(t, a, "k", store.Shared)
	mustLock(t, b, "k", store.Shared) // shared admits shared
	if err := c.Lock(ctx, []byte("k"), store.Exclusive, true); !errors.Is(err, store.ErrLockBusy) {
		t.Fatalf("exclusive over shared, NoWait: %v, want ErrLockBusy", err)
	}
	a.Release()
	b.Release()
	mustLock(t, c, "k", store.Exclusive)
	for _, mode := range []store.Mode{store.Shared, store.Exclusive} {
		d := m.Owner()
		if err := d.Lock(ctx, []byte("k"), mode, true); !errors.Is(err, store.ErrLockBusy) {
			t.Fatalf("%s over exclusive, NoWait: %v, want ErrLockBusy", mode, err)
		}
		d.Release()
	}
	if err := m.Owner().Lock(ctx, []byte("k"), store.ReadCommitted, true); err != nil {
		t.Fatalf("read-committed takes no lock: %v", err)
	}
	c.Release()
	mustLock(t, m.Owner(), "k", store.Exclusive) // released on Release
}

func TestRelockAndUpgrade(t *testing.T) {
	m := newManager(t, time.Minute)
	a := m.Owner()
	mustLock(t, a, "x", store.Exclusive)
	mustLock(t, a, "x", store.Shared) // weaker: no-op
	mustLock(t, a, "x", store.Exclusive)
	mustLock(t, a, "s", store.Shared)
	mustLock(t, a, "s", store.Shared)
	if a.Held() != 2 {
		t.Fatalf("Held = %d, want 2", a.Held())
	}
	mustLock(t, a, "s", store.Exclusive) // sole holder: upgrade at once
	b := m.Owner()
	if err := b.Lock(ctx, []byte("s"), store.Shared, true); !errors.Is(err, store.ErrLockBusy) {
		t.Fatalf("shared after upgrade: %v, want ErrLockBusy", err)
	}
	a.Release()
	mustLock(t, b, "s", store.Shared)
	mustLock(t, b, "x", store.Shared)
	b.Release()

	// Upgrade with another shared holder waits for it, ahead of queued writers.
	a, b, c := m.Owner(), m.Owner(), m.Owner()
	mustLock(t, a, "u", store.Shared)
	mustLock(t, b, "u", store.Shared)
	if err := a.Lock(ctx, []byte("u"), store.Exclusive, true); !errors.Is(err, store.ErrLockBusy) {
		t.Fatalf("upgrade with another holder, NoWait: %v", err)
	}
	cw := lockAsync(c, "u", store.Exclusive)
	waitQueued(t, m, "u", 1)
	aw := lockAsync(a, "u", store.Exclusive)
	waitQueued(t, m, "u", 2)
	notDone(t, aw)
	b.Release()
	if err := <-aw; err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	notDone(t, cw)
	a.Release()
	if err := <-cw; err != nil {
		t.Fatal(err)
	}
	c.Release()
}

func TestUpgradeTimesOut(t *testing.T) {
	m := newManager(t, 20*time.Millisecond)
	a, b := m.Owner(), m.Owner()
	mustLock(t, a, "u", store.Shared)
	mustLock(t, b, "u", store.Shared)
	if err := a.Lock(ctx, []byte("u"), store.Exclusive, false); !errors.Is(err, store.ErrLockTimeout) {
		t.Fatalf("upgrade against a second holder: %v, want ErrLockTimeout", err)
	}
	// a still holds its shared lock; b can still read, c cannot write.
	c := m.Owner()
	if err := c.Lock(ctx, []byte("u"), store.Exclusive, true); !errors.Is(err, store.ErrLockBusy) {
		t.Fatalf("%v", err)
	}
	a.Release()
	b.Release()
	mustLock(t, c, "u", store.Exclusive)
	c.Release()
}

func TestFIFONoWriterStarvation(t *testing.T) {
	m := newManager(t, time.Minute)
	r1, w, r2 := m.Owner(), m.Owner(), m.Owner()
	mustLock(t, r1, "d", store.Shared)
	ww := lockAsync(w, "d", store.Exclusive)
	waitQueued(t, m, "d", 1)
	// A reader arriving after the writer must not overtake it.
	if err := r2.Lock(ctx, []byte("d"), store.Shared, true); !errors.Is(err, store.ErrLockBusy) {
		t.Fatalf("reader overtook a queued writer: %v", err)
	}
	rw := lockAsync(r2, "d", store.Shared)
	waitQueued(t, m, "d", 2)
	r1.Release()
	if err := <-ww; err != nil {
		t.Fatal(err)
	}
	notDone(t, rw)
	w.Release()
	if err := <-rw; err != nil {
		t.Fatal(err)
	}
	r2.Release()
}

func TestGrantsRunOfReaders(t *testing.T) {
	m := newManager(t, time.Minute)
	w := m.Owner()
	mustLock(t, w, "d", store.Exclusive)
	var chans []chan error
	for i := range 5 {
		chans = append(chans, lockAsync(m.Owner(), "d", store.Shared))
		waitQueued(t, m, "d", i+1)
	}
	w2 := lockAsync(m.Owner(), "d", store.Exclusive)
	waitQueued(t, m, "d", 6)
	w.Release()
	for _, ch := range chans {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	notDone(t, w2)
}

func TestCancelWakesWaitersBehind(t *testing.T) {
	m := newManager(t, time.Minute)
	r, w, r2 := m.Owner(), m.Owner(), m.Owner()
	mustLock(t, r, "k", store.Shared)
	cctx, cancel := context.WithCancel(ctx)
	ww := make(chan error, 1)
	go func() { ww <- w.Lock(cctx, []byte("k"), store.Exclusive, false) }()
	waitQueued(t, m, "k", 1)
	rw := lockAsync(r2, "k", store.Shared)
	waitQueued(t, m, "k", 2)
	notDone(t, rw)
	cancel()
	if err := <-ww; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v, want context.Canceled", err)
	}
	// The reader was only blocked by the writer's place in the queue.
	if err := <-rw; err != nil {
		t.Fatal(err)
	}
	w.Release()
	r.Release()
	r2.Release()
	o := m.Owner()
	mustLock(t, o, "k", store.Exclusive)
	o.Release()
}

func TestTimeoutAndMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := DefaultConfig()
	cfg.MaxWait = 10 * time.Millisecond
	cfg.Registerer = reg
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, b := m.Owner(), m.Owner()
	mustLock(t, a, "k", store.Exclusive)
	if err := b.Lock(ctx, []byte("k"), store.Shared, false); !errors.Is(err, store.ErrLockTimeout) {
		t.Fatalf("got %v, want ErrLockTimeout", err)
	}
	if !store.IsRetryable(err) && err != nil {
		t.Fatal("timeout must be retryable")
	}
	if err := b.Lock(ctx, []byte("k"), store.Shared, true); !errors.Is(err, store.ErrLockBusy) {
		t.Fatal(err)
	}
	if got := counterValue(t, m.metrics.timeouts); got != 1 {
		t.Errorf("timeouts = %v, want 1", got)
	}
	if got := counterValue(t, m.metrics.waits); got != 1 {
		t.Errorf("waits = %v, want 1", got)
	}
	if got := counterValue(t, m.metrics.busy); got != 1 {
		t.Errorf("busy = %v, want 1", got)
	}
	var h dto.Metric
	if err := m.metrics.waitSeconds.Write(&h); err != nil || h.GetHistogram().GetSampleCount() != 1 {
		t.Errorf("wait_seconds count = %d, %v; want 1", h.GetHistogram().GetSampleCount(), err)
	}
	if mfs, err := reg.Gather(); err != nil || len(mfs) != 4 {
		t.Errorf("registry holds %d families (%v), want 4", len(mfs), err)
	}
	a.Release()
	b.Release()
	if _, err := New(cfg); err == nil {
		t.Error("registering twice on one registry must fail")
	}
}

// TestManyKeysIndex exercises the map index of long transactions and the
// hash chains of the table.
func TestManyKeysIndex(t *testing.T) {
	m := newManager(t, time.Minute)
	a := m.Owner()
	for i := range 1000 {
		mustLock(t, a, fmt.Sprint(i), store.Shared)
	}
	for i := range 1000 {
		mustLock(t, a, fmt.Sprint(i), store.Exclusive) // upgrades, sole holder
	}
	if a.Held() != 1000 {
		t.Fatalf("Held = %d", a.Held())
	}
	b := m.Owner()
	for i := range 1000 {
		if err := b.Lock(ctx, []byte(fmt.Sprint(i)), store.Shared, true); !errors.Is(err, store.ErrLockBusy) {
			t.Fatalf("key %d: %v", i, err)
		}
	}
	a.Release()
	for i := range 1000 {
		mustLock(t, b, fmt.Sprint(i), store.Exclusive)
	}
	b.Release()
	for i := range m.shards {
		if n := len(m.shards[i].table); n != 0 {
			t.Fatalf("shard %d keeps %d entries after every release", i, n)
		}
	}
}

// TestStressCounters: goroutines increment unprotected counters under
// exclusive locks (taken in key order) while readers check, under shared
// locks, that a pair of counters is never seen mid-update. The race detector
// flags any access the locks fail to order.
func TestStressCounters(t *testing.T) {
	m := newManager(t, time.Minute)
	keys := []string{"a", "b", "c", "d"}
	counters := map[string]*int{}
	for _, k := range keys {
		counters[k] = new(int)
	}
	var wg sync.WaitGroup
	var bad atomic.Int64
	const writers, readers, rounds = 6, 4, 300
	for g := range writers {
		wg.Go(func() {
			for i := range rounds {
				k1, k2 := keys[(g+i)%4], keys[(g+i+1)%4]
				if k1 > k2 {
					k1, k2 = k2, k1
				}
				o := m.Owner()
				mustLock(t, o, k1, store.Exclusive)
				mustLock(t, o, k2, store.Exclusive)
				*counters[k1]++
				*counters[k2]--
				o.Release()
			}
		})
	}
	for range readers {
		wg.Go(func() {
			for range rounds {
				o := m.Owner()
				sum := 0
				for _, k := range keys {
					mustLock(t, o, k, store.Shared)
					sum += *counters[k]
				}
				if sum != 0 {
					bad.Add(1)
				}
				o.Release()
			}
		})
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d reads saw a torn update", bad.Load())
	}
	total := 0
	for _, k := range keys {
		total += *counters[k]
	}
	if total != 0 {
		t.Fatalf("sum = %d, want 0", total)
	}
}

func TestUncontendedAllocs(t *testing.T) {
	if raceEnabled {
		t.Log("allocation count not asserted under -race (sync.Pool drops items)")
		return
	}
	m := newManager(t, time.Minute)
	root, dir, file := []byte("root"), []byte("dir"), []byte("file")
	allocs := testing.AllocsPerRun(1000, func() {
		o := m.Owner()
		_ = o.Lock(ctx, root, store.Shared, false)
		_ = o.Lock(ctx, dir, store.Exclusive, false)
		_ = o.Lock(ctx, file, store.Exclusive, false)
		o.Release()
	})
	if allocs > 0.1 {
		t.Fatalf("uncontended create pattern: %.2f allocs/op, want ~0", allocs)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
