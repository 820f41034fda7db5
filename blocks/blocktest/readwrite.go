package blocktest

import (
	"context"
	"testing"

	"github.com/nimbus-fs/nimbus/blocks"
)

// sizes that sit on and around chunk and 1 MiB buffer boundaries.
var sizes = []int{0, 1, 511, 512, 513, 1000, 4096, 1<<20 - 1, 1 << 20, 1<<20 + 1, 5<<20 + 333}

func testRoundTripSizes(t *testing.T, h *harness) {
	st := h.store()
	for i, n := range sizes {
		bid := id(uint64(100+i), 1)
		b := data(uint64(i), n)
		put(t, st, bid, b)
		wantReplica(t, st, bid, blocks.Finalized, int64(n))
		mustGet(t, st, bid, 0, -1, b)
		mustGet(t, st, bid, 0, int64(n), b)
	}
}

func testRangedReads(t *testing.T, h *harness) {
	st := h.store()
	const n = 3*blocks.ChunkSize + 100 // ends inside a chunk
	b := data(7, n)
	bid := id(1, 1)
	put(t, st, bid, b)
	points := []int64{0, 1, 100, 511, 512, 513, 1023, 1024, 1025, 1535, 1536, 1537, n - 1, n}
	for _, off := range points {
		for _, end := range points {
			if end < off {
				continue
			}
			mustGet(t, st, bid, off, end-off, b[off:end])
		}
		mustGet(t, st, bid, off, -1, b[off:])
	}
	// A larger replica: ranges across buffer-sized units.
	big := data(8, 3<<20+77)
	put(t, st, id(2, 1), big)
	for _, r := range [][2]int64{{0, 1 << 20}, {1<<20 - 1, 2}, {1<<20 - 700, 1<<20 + 1400}, {3 << 20, 77}, {12345, 2<<20 + 999}} {
		mustGet(t, st, id(2, 1), r[0], r[1], big[r[0]:r[0]+r[1]])
	}
}

func testReadOutOfRange(t *testing.T, h *harness) {
	st := h.store()
	bid := id(1, 1)
	put(t, st, bid, data(1, 1000))
	for _, r := range [][2]int64{{1001, 0}, {0, 1001}, {999, 2}, {-1, 1}, {2000, -1}} {
		_, err := get(st, bid, r[0], r[1])
		wantErr(t, "read out of range", err, blocks.ErrRange)
	}
	if got, err := get(st, bid, 1000, 0); err != nil || len(got) != 0 {
		t.Fatalf("empty read at the end = %d bytes, %v", len(got), err)
	}
}

func testCreateExists(t *testing.T, h *harness) {
	st := h.store()
	w, err := st.Create(bg, id(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Create(bg, id(1, 1))
	wantErr(t, "Create of a being-written block", err, blocks.ErrExists)
	_, err = st.Create(bg, id(1, 2))
	wantErr(t, "Create of a being-written block under another stamp", err, blocks.ErrExists)
	if _, err := w.Finalize(bg); err != nil {
		t.Fatal(err)
	}
	_, err = st.Create(bg, id(1, 3))
	wantErr(t, "Create of a finalized block", err, blocks.ErrExists)
}

func testNotFound(t *testing.T, h *harness) {
	st := h.store()
	put(t, st, id(1, 5), data(1, 10))
	for _, bid := range []blocks.ID{id(2, 5), id(1, 4), id(1, 6)} {
		_, err := st.Stat(bg, bid)
		wantErr(t, "Stat", err, blocks.ErrNotFound)
		_, err = st.Read(bg, bid, 0, -1)
		wantErr(t, "Read", err, blocks.ErrNotFound)
		_, err = st.Checksum(bg, bid)
		wantErr(t, "Checksum", err, blocks.ErrNotFound)
		_, err = st.OpenAppend(bg, bid, 9)
		wantErr(t, "OpenAppend", err, blocks.ErrNotFound)
		_, err = st.Recover(bg, bid, 9)
		wantErr(t, "Recover", err, blocks.ErrNotFound)
		err = st.Truncate(bg, bid, 0, 9)
		wantErr(t, "Truncate", err, blocks.ErrNotFound)
	}
	mustGet(t, st, id(1, 5), 0, -1, data(1, 10))
}

func testReadBeingWritten(t *testing.T, h *harness) {
	st := h.store()
	bid := id(1, 1)
	w, err := st.Create(bg, bid)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	b := data(3, 10000)
	wantReplica(t, st, bid, blocks.BeingWritten, 0)
	write(t, w, b[:3000], 1)
	if err := w.Sync(bg); err != nil {
		t.Fatal(err)
	}
	wantReplica(t, st, bid, blocks.BeingWritten, 3000)
	write(t, w, b[3000:7000], 2) // not synced: not readable
	mustGet(t, st, bid, 0, 3000, b[:3000])
	mustGet(t, st, bid, 0, -1, b[:3000])
	mustGet(t, st, bid, 2999, 1, b[2999:3000])
	_, err = get(st, bid, 0, 3001)
	wantErr(t, "read beyond the synced length", err, blocks.ErrBadState)
	_, err = st.Checksum(bg, bid)
	wantErr(t, "Checksum of a being-written replica", err, blocks.ErrBadState)
	err = st.Truncate(bg, bid, 10, 2)
	wantErr(t, "Truncate of a being-written replica", err, blocks.ErrBadState)
	_, err = st.OpenAppend(bg, bid, 2)
	wantErr(t, "OpenAppend of a replica with a writer", err, blocks.ErrBadState)
	// The chunk that was partial at the last Sync grows: the synced prefix
	// still reads back, and so does the longer one after the next Sync.
	write(t, w, b[7000:], 3)
	mustGet(t, st, bid, 2048, 952, b[2048:3000])
	if err := w.Sync(bg); err != nil {
		t.Fatal(err)
	}
	mustGet(t, st, bid, 0, -1, b)
	if n, err := w.Finalize(bg); err != nil || n != 10000 {
		t.Fatalf("Finalize = %d, %v", n, err)
	}
	mustGet(t, st, bid, 0, -1, b)
}

func testWriterFinished(t *testing.T, h *harness) {
	st := h.store()
	w, err := st.Create(bg, id(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Finalize(bg); err != nil {
		t.Fatal(err)
	}
	_, err = w.Write([]byte("x"))
	wantErr(t, "Write after Finalize", err, blocks.ErrClosed)
	wantErr(t, "Sync after Finalize", w.Sync(bg), blocks.ErrClosed)
	_, err = w.Finalize(bg)
	wantErr(t, "second Finalize", err, blocks.ErrClosed)
	if err := w.Close(); err != nil {
		t.Fatalf("Close after Finalize: %v", err)
	}
	if err := w.Abort(); err != nil {
		t.Fatalf("Abort after Finalize: %v", err)
	}
	wantReplica(t, st, id(1, 1), blocks.Finalized, 0) // Abort after Finalize drops nothing
}

func testChecksum(t *testing.T, h *harness) {
	st := h.store()
	for i, n := range sizes {
		bid := id(uint64(i+1), 1)
		b := data(uint64(i), n)
		put(t, st, bid, b)
		got, err := st.Checksum(bg, bid)
		if err != nil {
			t.Fatalf("Checksum: %v", err)
		}
		if want := blocks.ChunkCRCsMD5(b); got != want {
			t.Fatalf("Checksum of %d bytes = %+v, want %+v", n, got, want)
		}
	}
}

func testContext(t *testing.T, h *harness) {
	st := h.store()
	put(t, st, id(1, 1), data(1, 3<<20))
	ctx, cancel := context.WithCancel(bg)
	rc, err := st.Read(ctx, id(1, 1), 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := rc.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	cancel()
	buf := make([]byte, 1<<20)
	for err == nil {
		_, err = rc.Read(buf)
	}
	wantErr(t, "Read of a stream after cancel", err, context.Canceled)
	_, err = st.Create(ctx, id(2, 1))
	wantErr(t, "Create with a cancelled context", err, context.Canceled)
	if _, err := st.Stat(bg, id(2, 1)); err == nil {
		t.Fatal("Create with a cancelled context created a replica")
	}
}

func testClosed(t *testing.T, h *harness) {
	st := h.store()
	put(t, st, id(1, 1), data(1, 100))
	w, err := st.Create(bg, id(2, 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err = w.Write([]byte("x"))
	wantErr(t, "Write after store Close", err, blocks.ErrClosed)
	_, err = st.Create(bg, id(3, 1))
	wantErr(t, "Create after Close", err, blocks.ErrClosed)
	_, err = st.Read(bg, id(1, 1), 0, -1)
	wantErr(t, "Read after Close", err, blocks.ErrClosed)
	_, err = st.Stat(bg, id(1, 1))
	wantErr(t, "Stat after Close", err, blocks.ErrClosed)
	err = st.Report(bg, func(blocks.Replica) error { return nil })
	wantErr(t, "Report after Close", err, blocks.ErrClosed)
}
