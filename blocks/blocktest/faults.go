package blocktest

import (
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/nimbus-fs/nimbus/blocks"
)

// testCorruption: a flipped byte fails every read that touches its chunk
// with a CorruptError naming the block and the chunk, after returning only
// bytes of earlier chunks, all correct; reads around it still work.
func testCorruption(t *testing.T, h *harness) {
	st := h.store()
	c := corrupter(t, st)
	b := data(21, 3<<20+1000)
	bid := id(7, 3)
	put(t, st, bid, b)
	for _, off := range []int64{0, 1500, 1<<20 + 511, 3<<20 + 999} {
		if err := c.Corrupt(bg, bid, off); err != nil {
			t.Fatalf("Corrupt: %v", err)
		}
		chunk := off &^ (blocks.ChunkSize - 1)
		for _, r := range [][2]int64{{0, -1}, {chunk, 1}, {off, 1}, {max(0, chunk-1000), min(2000, int64(len(b))-max(0, chunk-1000))}} {
			got, err := get(st, bid, r[0], r[1])
			var ce *blocks.CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, blocks.ErrCorrupt) {
				t.Fatalf("read [%d,+%d) over a flipped byte at %d: error %v, want a CorruptError", r[0], r[1], off, err)
			}
			if ce.ID != bid || ce.Offset != chunk {
				t.Fatalf("CorruptError names %v at %d, want %v at %d", ce.ID, ce.Offset, bid, chunk)
			}
			if int64(len(got)) > max(0, chunk-r[0]) || string(got) != string(b[r[0]:r[0]+int64(len(got))]) {
				t.Fatalf("read [%d,+%d) returned %d bytes before the error; want only correct bytes before the bad chunk at %d",
					r[0], r[1], len(got), chunk)
			}
		}
		if chunk > 0 {
			mustGet(t, st, bid, 0, chunk, b[:chunk])
		}
		if end := chunk + blocks.ChunkSize; end < int64(len(b)) {
			mustGet(t, st, bid, end, -1, b[end:])
		}
		if err := c.Corrupt(bg, bid, off); err != nil { // flip it back
			t.Fatal(err)
		}
		mustGet(t, st, bid, 0, -1, b)
	}
}

// testCorruptTailBlocksAppend: an append must not continue the checksum of
// a corrupt partial chunk (that would make bad bytes verify).
func testCorruptTailBlocksAppend(t *testing.T, h *harness) {
	st := h.store()
	b := data(22, 1300)
	put(t, st, id(1, 1), b)
	if err := corrupter(t, st).Corrupt(bg, id(1, 1), 1290); err != nil {
		t.Fatal(err)
	}
	w, err := st.OpenAppend(bg, id(1, 1), 2)
	if err == nil {
		write(t, w, data(23, 100), 1)
		w.Finalize(bg)
		_, err = get(st, id(1, 2), 0, -1)
	}
	wantErr(t, "append to a replica with a corrupt last chunk", err, blocks.ErrCorrupt)
}

func testDeleteAndAbort(t *testing.T, h *harness) {
	st := h.store()
	put(t, st, id(1, 1), data(1, 2000))
	if err := st.Delete(bg, id(1, 2)); err != nil {
		t.Fatalf("Delete under another stamp: %v", err)
	}
	wantReplica(t, st, id(1, 1), blocks.Finalized, 2000) // untouched
	for range 2 {
		if err := st.Delete(bg, id(1, 1)); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		_, err := st.Stat(bg, id(1, 1))
		wantErr(t, "Stat after Delete", err, blocks.ErrNotFound)
	}
	if err := st.Delete(bg, id(42, 1)); err != nil {
		t.Fatalf("Delete of a missing replica: %v", err)
	}
	put(t, st, id(1, 1), data(2, 10)) // the id can be used again
	mustGet(t, st, id(1, 1), 0, -1, data(2, 10))

	w, err := st.Create(bg, id(2, 1))
	if err != nil {
		t.Fatal(err)
	}
	write(t, w, data(3, 5000), 1)
	if err := st.Delete(bg, id(2, 1)); err != nil {
		t.Fatal(err)
	}
	_, err = w.Write([]byte("x"))
	wantErr(t, "Write after the replica was deleted", err, blocks.ErrBadState)

	w, err = st.Create(bg, id(3, 1))
	if err != nil {
		t.Fatal(err)
	}
	write(t, w, data(4, 5000), 1)
	if err := w.Sync(bg); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	_, err = st.Stat(bg, id(3, 1))
	wantErr(t, "Stat after Abort", err, blocks.ErrNotFound)
	if rs := report(t, st); len(rs) != 1 || rs[0].ID != id(1, 1) {
		t.Fatalf("Report after deletes = %+v, want only blk_1_1", rs)
	}
}

func testReport(t *testing.T, h *harness) {
	st := h.store()
	if rs := report(t, st); len(rs) != 0 {
		t.Fatalf("Report of an empty store = %+v", rs)
	}
	want := map[blocks.ID]blocks.Replica{}
	for i := range 20 {
		bid := id(uint64(1000-i*37), uint64(i+1))
		n := i * 300
		if i%3 == 0 {
			w, err := st.Create(bg, bid)
			if err != nil {
				t.Fatal(err)
			}
			write(t, w, data(uint64(i), n), 1)
			if err := w.Sync(bg); err != nil {
				t.Fatal(err)
			}
			if i%2 == 0 {
				defer w.Close()
			} else if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			want[bid] = blocks.Replica{ID: bid, State: blocks.BeingWritten, Length: int64(n)}
		} else {
			put(t, st, bid, data(uint64(i), n))
			want[bid] = blocks.Replica{ID: bid, State: blocks.Finalized, Length: int64(n)}
		}
	}
	check := func(rs []blocks.Replica) {
		t.Helper()
		if len(rs) != len(want) {
			t.Fatalf("Report lists %d replicas, want %d", len(rs), len(want))
		}
		if !slices.IsSortedFunc(rs, func(a, b blocks.Replica) int { return int(a.ID.Block) - int(b.ID.Block) }) {
			t.Fatalf("Report not in block id order")
		}
		for _, r := range rs {
			w, ok := want[r.ID]
			if !ok || r.State != w.State || r.Length != w.Length {
				t.Fatalf("Report has %+v, want %+v", r, w)
			}
			if r.DiskBytes < r.Length {
				t.Fatalf("Report: %v takes %d bytes on disk, less than its %d bytes", r.ID, r.DiskBytes, r.Length)
			}
		}
	}
	check(report(t, st))
	stop := errors.New("stop")
	calls := 0
	err := st.Report(bg, func(blocks.Replica) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("Report with a failing callback: %d calls, %v", calls, err)
	}
	// The callback may call the store.
	err = st.Report(bg, func(r blocks.Replica) error {
		_, err := st.Stat(bg, r.ID)
		return err
	})
	if err != nil {
		t.Fatalf("Report calling Stat: %v", err)
	}
}

func testPersistence(t *testing.T, h *harness) {
	st := h.store()
	var want [][]byte
	for i, n := range sizes {
		b := data(uint64(i), n)
		put(t, st, id(uint64(i+1), uint64(i+5)), b)
		want = append(want, b)
	}
	// An appended and a truncated replica, to check renamed meta files.
	w, err := st.OpenAppend(bg, id(3, 7), 8)
	if err != nil {
		t.Fatal(err)
	}
	write(t, w, data(50, 999), 1)
	if _, err := w.Finalize(bg); err != nil {
		t.Fatal(err)
	}
	want[2] = append(want[2], data(50, 999)...)
	if err := st.Truncate(bg, id(5, 9), 300, 10); err != nil {
		t.Fatal(err)
	}
	want[4] = want[4][:300]
	if err := st.Delete(bg, id(1, 5)); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = h.store()
	gs := func(i int) uint64 {
		switch i {
		case 2:
			return 8
		case 4:
			return 10
		}
		return uint64(i + 5)
	}
	rs := report(t, st)
	if len(rs) != len(sizes)-1 {
		t.Fatalf("after reopen Report lists %d replicas, want %d", len(rs), len(sizes)-1)
	}
	for i := 1; i < len(sizes); i++ {
		bid := id(uint64(i+1), gs(i))
		wantReplica(t, st, bid, blocks.Finalized, int64(len(want[i])))
		mustGet(t, st, bid, 0, -1, want[i])
	}
	_, err = st.Stat(bg, id(1, 5))
	wantErr(t, "Stat of a deleted replica after reopen", err, blocks.ErrNotFound)
	var _ io.Reader
}
