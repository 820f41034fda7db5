package pgstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/store"
)

// TestCoalescedReadsAreFresh: with one statement in flight at a time, many
// concurrent unlocked reads go together, and each still sees every commit
// that returned before it was asked for (its own writes, and no value of
// another key older than one it saw before), and only its own keys' values.
func TestCoalescedReadsAreFresh(t *testing.T) {
	opts := DefaultOptions()
	opts.ReadConcurrency = 1
	opts.Registerer = prometheus.NewRegistry()
	st, err := Open(bg, pgtest.DB(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const workers, rounds = 16, 60
	key := func(w int) []byte { return []byte(fmt.Sprintf("coalesce/%02d", w)) }
	val := func(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen := make([]uint64, workers) // the newest value seen of each key
			for n := uint64(1); n <= rounds; n++ {
				tx, _ := st.Begin(bg)
				tx.Put(key(w), val(n))
				if err := tx.Commit(bg); err != nil {
					errs <- err
					return
				}
				// Read every key, own first, in one unlocked batch.
				reqs := []store.ReadReq{{Key: key(w)}}
				for o := range workers {
					reqs = append(reqs, store.ReadReq{Key: key(o)})
				}
				tx, _ = st.Begin(bg)
				vals, err := tx.Read(context.Background(), reqs)
				tx.Rollback()
				if err != nil {
					errs <- err
					return
				}
				if got := binary.BigEndian.Uint64(vals[0]); got != n {
					errs <- fmt.Errorf("worker %d wrote %d, then read %d", w, n, got)
					return
				}
				for o := range workers {
					if vals[1+o] == nil {
						continue
					}
					got := binary.BigEndian.Uint64(vals[1+o])
					if got < seen[o] {
						errs <- fmt.Errorf("worker %d read key %d = %d after %d", w, o, got, seen[o])
						return
					}
					if got > rounds {
						errs <- fmt.Errorf("worker %d read key %d = %d: not a value written", w, o, got)
						return
					}
					seen[o] = got
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := testutil.ToFloat64(st.metrics.coalesced); n == 0 {
		t.Errorf("no read was coalesced with %d concurrent readers and one statement in flight", workers)
	} else {
		t.Logf("%v of %d reads went with others", n, workers*rounds)
	}
}

// TestCoalescedReadCancelled: a read waiting for a statement slot returns
// when its context ends, and the store stays usable.
func TestCoalescedReadCancelled(t *testing.T) {
	opts := DefaultOptions()
	opts.ReadConcurrency = 1
	st, err := Open(bg, pgtest.DB(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Hold the one slot with a slow statement of the pool's.
	st.reads.mu.Lock()
	st.reads.inflight = 1
	st.reads.mu.Unlock()
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() {
		tx, _ := st.Begin(bg)
		_, err := tx.Read(ctx, []store.ReadReq{{Key: []byte("a")}, {Key: []byte("b")}})
		done <- err
	}()
	cancel()
	if err := <-done; err == nil || ctx.Err() == nil {
		t.Fatalf("read with a cancelled context waiting for a slot: %v", err)
	}
	// Give the slot back: the abandoned read is served and dropped.
	if next := st.reads.next(); next != nil {
		st.reads.serve(next)
	}
	tx, _ := st.Begin(bg)
	defer tx.Rollback()
	if _, err := tx.Read(bg, []store.ReadReq{{Key: []byte("a")}, {Key: []byte("b")}}); err != nil {
		t.Fatal(err)
	}
}

// TestCoalescedReadKeysOwned: a waiting read whose caller gave up, and then
// reused its key buffer for another key (as the engine does), is still
// served with the keys it asked for: the statement it shares with other
// reads answers them, instead of failing them all with rows of keys not
// asked for.
func TestCoalescedReadKeysOwned(t *testing.T) {
	opts := DefaultOptions()
	opts.ReadConcurrency = 1
	st, err := Open(bg, pgtest.DB(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	put := func(k, v string) {
		tx, err := st.Begin(bg)
		if err != nil {
			t.Fatal(err)
		}
		tx.Put([]byte(k), []byte(v))
		if err := tx.Commit(bg); err != nil {
			t.Fatal(err)
		}
	}
	put("k1", "v1")
	put("k2", "v2")
	put("zz", "vz")
	st.reads.mu.Lock()
	st.reads.inflight = 1 // the one slot held: reads queue
	st.reads.mu.Unlock()
	buf := []byte("k1")
	ctx, cancel := context.WithCancel(bg)
	gaveUp := make(chan error, 1)
	go func() {
		tx, _ := st.Begin(bg)
		_, err := tx.Read(ctx, []store.ReadReq{{Key: buf}})
		gaveUp <- err
	}()
	other := make(chan [][]byte, 1)
	go func() {
		tx, _ := st.Begin(bg)
		vals, err := tx.Read(bg, []store.ReadReq{{Key: []byte("k2")}})
		if err != nil {
			t.Error(err)
		}
		other <- vals
	}()
	for {
		st.reads.mu.Lock()
		n := len(st.reads.queue)
		st.reads.mu.Unlock()
		if n == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-gaveUp; err == nil {
		t.Fatal("the cancelled read returned no error")
	}
	copy(buf, "zz") // the caller's buffer, reused for another key
	// The statement that serves the queue must ask for what was asked: a
	// key changed under it made the rows it scans match no key asked for.
	st.reads.mu.Lock()
	for _, w := range st.reads.queue {
		if k := string(w.reqs[0].Key); k != "k1" && k != "k2" {
			t.Errorf("a queued read now asks for %q: its caller's buffer, not its own copy", k)
		}
	}
	st.reads.mu.Unlock()
	if next := st.reads.next(); next != nil {
		st.reads.serve(next)
	}
	if vals := <-other; len(vals) != 1 || string(vals[0]) != "v2" {
		t.Fatalf("the other read of the batch got %q, want v2", vals)
	}
}
