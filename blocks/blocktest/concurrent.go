package blocktest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/nimbus-fs/nimbus/blocks"
)

// testConcurrent: goroutines write, sync, read while writing, finalize,
// append, read, checksum and delete their own blocks, while others read a
// shared set of finalized blocks and report; run it under -race.
func testConcurrent(t *testing.T, h *harness) {
	st := h.store()
	const shared, workers, rounds = 8, 8, 6
	sharedData := make([][]byte, shared)
	for i := range shared {
		sharedData[i] = data(uint64(i), 100_000+i*513)
		put(t, st, id(uint64(1+i), 1), sharedData[i])
	}
	err := parallel(workers+3, func(g int) error {
		r := rand.New(rand.NewPCG(uint64(g), 3))
		if g >= workers { // readers of the shared blocks and reporters
			for range rounds * 4 {
				i := r.IntN(shared)
				off := r.Int64N(int64(len(sharedData[i])))
				n := r.Int64N(int64(len(sharedData[i])) - off + 1)
				got, err := get(st, id(uint64(1+i), 1), off, n)
				if err != nil {
					return fmt.Errorf("shared read: %w", err)
				}
				if !bytes.Equal(got, sharedData[i][off:off+n]) {
					return fmt.Errorf("shared read of blk %d [%d,+%d): wrong bytes", i+1, off, n)
				}
				if err := st.Report(bg, func(blocks.Replica) error { return nil }); err != nil {
					return err
				}
			}
			return nil
		}
		for round := range rounds {
			bid := id(uint64(1000+g*100+round), 1)
			b := data(uint64(g*100+round), 1+r.IntN(300_000))
			w, err := st.Create(bg, bid)
			if err != nil {
				return err
			}
			half := len(b) / 2
			if _, err := w.Write(b[:half]); err != nil {
				return err
			}
			if err := w.Sync(bg); err != nil {
				return err
			}
			got, err := get(st, bid, 0, -1)
			if err != nil || !bytes.Equal(got, b[:half]) {
				return fmt.Errorf("read of %v while being written: %d bytes, %v", bid, len(got), err)
			}
			if _, err := w.Write(b[half:]); err != nil {
				return err
			}
			if _, err := w.Finalize(bg); err != nil {
				return err
			}
			extra := data(uint64(g), 1+r.IntN(2000))
			aw, err := st.OpenAppend(bg, bid, 2)
			if err != nil {
				return err
			}
			if _, err := aw.Write(extra); err != nil {
				return err
			}
			if _, err := aw.Finalize(bg); err != nil {
				return err
			}
			b = append(b, extra...)
			nid := id(bid.Block, 2)
			got, err = get(st, nid, 0, -1)
			if err != nil || !bytes.Equal(got, b) {
				return fmt.Errorf("read of %v: %d bytes, %v", nid, len(got), err)
			}
			c, err := st.Checksum(bg, nid)
			if err != nil || c != blocks.ChunkCRCsMD5(b) {
				return fmt.Errorf("checksum of %v: %+v, %v", nid, c, err)
			}
			if round%2 == 0 {
				if err := st.Delete(bg, nid); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rs := report(t, st)
	if want := shared + workers*rounds/2; len(rs) != want {
		t.Fatalf("Report lists %d replicas, want %d", len(rs), want)
	}
}
