package blocktest

import (
	"testing"

	"github.com/nimbus-fs/nimbus/blocks"
)

// recovered checks that Recover returned a length in [synced, written] and
// that the replica holds exactly that prefix, finalized under gs.
func recovered(t testing.TB, st blocks.Store, bid blocks.ID, n, synced int64, b []byte) {
	t.Helper()
	if n < synced || n > int64(len(b)) {
		t.Fatalf("Recover = %d, want between the synced %d and the written %d", n, synced, len(b))
	}
	wantReplica(t, st, bid, blocks.Finalized, n)
	mustGet(t, st, bid, 0, -1, b[:n])
	if got, want := mustChecksum(t, st, bid), blocks.ChunkCRCsMD5(b[:n]); got != want {
		t.Fatalf("Checksum after Recover = %+v, want %+v", got, want)
	}
}

func testRecoverAfterClose(t *testing.T, h *harness) {
	st := h.store()
	for i, c := range []struct{ synced, written int }{{0, 0}, {0, 700}, {700, 700}, {700, 1500}, {1024, 5000}, {1<<20 + 3, 3 << 20}} {
		bid := id(uint64(i+1), 1)
		b := data(uint64(i), c.written)
		w, err := st.Create(bg, bid)
		if err != nil {
			t.Fatal(err)
		}
		write(t, w, b[:c.synced], 1)
		if err := w.Sync(bg); err != nil {
			t.Fatal(err)
		}
		write(t, w, b[c.synced:], 2)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		n, err := st.Recover(bg, bid, 2)
		if err != nil {
			t.Fatalf("Recover: %v", err)
		}
		recovered(t, st, id(bid.Block, 2), n, int64(c.synced), b)
		_, err = st.Stat(bg, bid)
		wantErr(t, "Stat under the stamp before recovery", err, blocks.ErrNotFound)
	}
}

// testRecoverAfterCrash: writers sync at various points and keep writing;
// the store is closed under them (no writer finalized or closed) and
// reopened on the same directory, which must find the replicas being
// written with at least their synced bytes. (blocks/local also has a real
// kill -9 test.)
func testRecoverAfterCrash(t *testing.T, h *harness) {
	st := h.open(t, h.dir)
	type rec struct {
		bid    blocks.ID
		b      []byte
		synced int64
	}
	var recs []rec
	for i, c := range []struct{ synced, written int }{{0, 100}, {511, 511}, {513, 2000}, {4096, 4096 + 512}, {1<<20 + 7, 2<<20 + 9}} {
		bid := id(uint64(i+1), 3)
		b := data(uint64(i), c.written)
		w, err := st.Create(bg, bid)
		if err != nil {
			t.Fatal(err)
		}
		write(t, w, b[:c.synced/2], 1)
		if err := w.Sync(bg); err != nil {
			t.Fatal(err)
		}
		write(t, w, b[c.synced/2:c.synced], 2)
		if err := w.Sync(bg); err != nil {
			t.Fatal(err)
		}
		write(t, w, b[c.synced:], 3)
		recs = append(recs, rec{bid, b, int64(c.synced)})
	}
	put(t, st, id(99, 1), data(99, 3000))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st2 := h.store()
	for _, r := range recs {
		rep := stat(t, st2, r.bid)
		if rep.State != blocks.BeingWritten || rep.Length < r.synced {
			t.Fatalf("after reopen, %v = %+v; want being written with >= %d bytes", r.bid, rep, r.synced)
		}
		n, err := st2.Recover(bg, r.bid, 4)
		if err != nil {
			t.Fatalf("Recover %v: %v", r.bid, err)
		}
		recovered(t, st2, id(r.bid.Block, 4), n, r.synced, r.b)
	}
	mustGet(t, st2, id(99, 1), 0, -1, data(99, 3000))
}

func testRecoverStopsWriter(t *testing.T, h *harness) {
	st := h.store()
	b := data(5, 3000)
	w, err := st.Create(bg, id(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	write(t, w, b[:1000], 1)
	if err := w.Sync(bg); err != nil {
		t.Fatal(err)
	}
	write(t, w, b[1000:], 2)
	n, err := st.Recover(bg, id(1, 1), 2)
	if err != nil {
		t.Fatal(err)
	}
	recovered(t, st, id(1, 2), n, 1000, b)
	_, err = w.Write([]byte("late"))
	wantErr(t, "Write of a writer stopped by Recover", err, blocks.ErrBadState)
	_, err = w.Finalize(bg)
	wantErr(t, "Finalize of a writer stopped by Recover", err, blocks.ErrBadState)
	recovered(t, st, id(1, 2), n, 1000, b)
}

func testRecoverFinalized(t *testing.T, h *harness) {
	st := h.store()
	b := data(6, 1234)
	put(t, st, id(1, 1), b)
	n, err := st.Recover(bg, id(1, 1), 2)
	if err != nil || n != 1234 {
		t.Fatalf("Recover of a finalized replica = %d, %v; want 1234", n, err)
	}
	recovered(t, st, id(1, 2), n, 1234, b)
}

func testTruncate(t *testing.T, h *harness) {
	st := h.store()
	b := data(7, 5000)
	bid := id(1, 1)
	put(t, st, bid, b)
	for _, n := range []int64{5000, 4097, 4096, 1500, 513, 512, 511, 1, 0} {
		if err := st.Truncate(bg, bid, n, bid.GenStamp+1); err != nil {
			t.Fatalf("Truncate to %d: %v", n, err)
		}
		_, err := st.Stat(bg, bid)
		wantErr(t, "Stat under the stamp before truncation", err, blocks.ErrNotFound)
		bid.GenStamp++
		wantReplica(t, st, bid, blocks.Finalized, n)
		mustGet(t, st, bid, 0, -1, b[:n])
		if got, want := mustChecksum(t, st, bid), blocks.ChunkCRCsMD5(b[:n]); got != want {
			t.Fatalf("Checksum after truncation to %d = %+v, want %+v", n, got, want)
		}
	}
	err := st.Truncate(bg, bid, 1, bid.GenStamp+1)
	wantErr(t, "Truncate beyond the end", err, blocks.ErrRange)
	// Truncate, then append different bytes: the new bytes read back.
	put(t, st, id(2, 1), b)
	if err := st.Truncate(bg, id(2, 1), 700, 2); err != nil {
		t.Fatal(err)
	}
	w, err := st.OpenAppend(bg, id(2, 2), 3)
	if err != nil {
		t.Fatal(err)
	}
	c := append(append([]byte{}, b[:700]...), data(8, 2000)...)
	write(t, w, c[700:], 1)
	if _, err := w.Finalize(bg); err != nil {
		t.Fatal(err)
	}
	mustGet(t, st, id(2, 3), 0, -1, c)
}
