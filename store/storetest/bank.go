package storetest

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nimbus-fs/nimbus/store"
)

// testBank: goroutines move amounts between accounts, locking both
// exclusively in key order; readers lock every account shared (in key
// order) or scan a snapshot. The total never changes, and no reader sees a
// transfer half done.
func testBank(t *testing.T, h *harness) {
	st := h.store()
	const accounts, initial = 10, 1000
	const movers, readers, transfers = 6, 3, 60
	key := func(i int) string { return fmt.Sprintf("acct%02d", i) }
	keys := make([]string, accounts)
	txn := begin(t, st)
	for i := range keys {
		keys[i] = key(i)
		txn.Put([]byte(keys[i]), binary.BigEndian.AppendUint64(nil, initial))
	}
	commit(t, txn)
	const total = accounts * initial

	var wg sync.WaitGroup
	var done atomic.Int32
	var moved atomic.Int64
	for g := range movers {
		wg.Go(func() {
			defer done.Add(1)
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range transfers {
				a, b := rng.IntN(accounts), rng.IntN(accounts-1)
				if b >= a {
					b++
				}
				amount := rng.Uint64N(50)
				for {
					err := transfer(st, keys[a], keys[b], amount)
					if err == nil {
						moved.Add(1)
						break
					}
					if !store.IsRetryable(err) {
						t.Errorf("transfer: %v", err)
						return
					}
				}
			}
		})
	}
	for r := range readers {
		wg.Go(func() {
			for checks := 0; done.Load() < movers || checks < 3; checks++ {
				var sum uint64
				var err error
				if r%2 == 0 {
					sum, err = sumLocked(st, keys)
				} else {
					sum, err = sumScan(st)
				}
				if err != nil {
					t.Errorf("reader: %v", err)
					return
				}
				if sum != total {
					t.Errorf("reader %d saw total %d, want %d", r, sum, total)
					return
				}
			}
		})
	}
	wg.Wait()
	if moved.Load() != movers*transfers {
		t.Fatalf("%d transfers done, want %d", moved.Load(), movers*transfers)
	}
	if sum, err := sumLocked(st, keys); err != nil || sum != total {
		t.Fatalf("final total %d (%v), want %d", sum, err, total)
	}
}

func transfer(st store.Store, from, to string, amount uint64) error {
	txn, err := st.Begin(bg)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	lo, hi := from, to
	if lo > hi {
		lo, hi = hi, lo
	}
	vals, err := txn.Read(bg, reqs(store.Exclusive, false, lo, hi))
	if err != nil {
		return err
	}
	bal := map[string]uint64{lo: binary.BigEndian.Uint64(vals[0]), hi: binary.BigEndian.Uint64(vals[1])}
	if bal[from] < amount {
		amount = bal[from]
	}
	txn.Put([]byte(from), binary.BigEndian.AppendUint64(nil, bal[from]-amount))
	txn.Put([]byte(to), binary.BigEndian.AppendUint64(nil, bal[to]+amount))
	return txn.Commit(bg)
}

func sumLocked(st store.Store, keys []string) (uint64, error) {
	txn, err := st.Begin(bg)
	if err != nil {
		return 0, err
	}
	defer txn.Rollback()
	vals, err := txn.Read(bg, reqs(store.Shared, false, keys...))
	if err != nil {
		return 0, err
	}
	var sum uint64
	for _, v := range vals {
		sum += binary.BigEndian.Uint64(v)
	}
	return sum, nil
}

func sumScan(st store.Store) (uint64, error) {
	txn, err := st.Begin(bg)
	if err != nil {
		return 0, err
	}
	defer txn.Rollback()
	var sum uint64
	err = txn.Scan(bg, []byte("acct"), []byte("acct~"), 0, func(k, v []byte) bool {
		sum += binary.BigEndian.Uint64(v)
		return true
	})
	return sum, err
}
