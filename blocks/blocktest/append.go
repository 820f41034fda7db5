package blocktest

import (
	"io"
	"testing"

	"github.com/nimbus-fs/nimbus/blocks"
)

func testAppend(t *testing.T, h *harness) {
	st := h.store()
	for i, first := range []int{0, 1, 511, 512, 513, 1<<20 + 5} {
		b := data(uint64(i), first+3000+i)
		bid := id(uint64(i+1), 1)
		put(t, st, bid, b[:first])
		w, err := st.OpenAppend(bg, bid, 2)
		if err != nil {
			t.Fatalf("OpenAppend after %d bytes: %v", first, err)
		}
		nid := id(bid.Block, 2)
		wantReplica(t, st, nid, blocks.BeingWritten, int64(first))
		if w.Len() != int64(first) {
			t.Fatalf("Len after OpenAppend = %d, want %d", w.Len(), first)
		}
		write(t, w, b[first:], 5)
		if n, err := w.Finalize(bg); err != nil || n != int64(len(b)) {
			t.Fatalf("Finalize after append = %d, %v; want %d", n, err, len(b))
		}
		_, err = st.Read(bg, bid, 0, -1)
		wantErr(t, "Read under the old stamp", err, blocks.ErrNotFound)
		mustGet(t, st, nid, 0, -1, b)
		mustGet(t, st, nid, int64(first)-min(int64(first), 7), -1, b[first-min(first, 7):])
		if got, want := mustChecksum(t, st, nid), blocks.ChunkCRCsMD5(b); got != want {
			t.Fatalf("Checksum after append = %+v, want %+v", got, want)
		}
	}
}

func mustChecksum(t testing.TB, st blocks.Store, bid blocks.ID) blocks.BlockChecksum {
	t.Helper()
	c, err := st.Checksum(bg, bid)
	if err != nil {
		t.Fatalf("Checksum %v: %v", bid, err)
	}
	return c
}

// testManySmallAppends: a file written as CREATE then many small APPENDs
// (what WebHDFS clients do), each ending inside a chunk.
func testManySmallAppends(t *testing.T, h *harness) {
	st := h.store()
	b := data(11, 40000)
	bid := id(1, 1)
	put(t, st, bid, b[:100])
	at := 100
	for i := 0; at < len(b); i++ {
		n := min(len(b)-at, 1+(i*379)%1300)
		w, err := st.OpenAppend(bg, bid, bid.GenStamp+1)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		bid.GenStamp++
		write(t, w, b[at:at+n], uint64(i))
		if _, err := w.Finalize(bg); err != nil {
			t.Fatal(err)
		}
		at += n
		if i%10 == 0 {
			mustGet(t, st, bid, 0, -1, b[:at])
		}
	}
	mustGet(t, st, bid, 0, -1, b)
	if got, want := mustChecksum(t, st, bid), blocks.ChunkCRCsMD5(b); got != want {
		t.Fatalf("Checksum = %+v, want %+v", got, want)
	}
}

func testAppendAfterClose(t *testing.T, h *harness) {
	st := h.store()
	b := data(12, 5000)
	bid := id(1, 1)
	w, err := st.Create(bg, bid)
	if err != nil {
		t.Fatal(err)
	}
	write(t, w, b[:1700], 1)
	if err := w.Sync(bg); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	wantReplica(t, st, bid, blocks.BeingWritten, 1700)
	w, err = st.OpenAppend(bg, bid, 2)
	if err != nil {
		t.Fatalf("OpenAppend of a closed being-written replica: %v", err)
	}
	n := w.Len()
	if n < 1700 || n > 1700 {
		t.Fatalf("append resumes at %d, want 1700 (all that was written and synced)", n)
	}
	write(t, w, b[n:], 2)
	if _, err := w.Finalize(bg); err != nil {
		t.Fatal(err)
	}
	mustGet(t, st, id(1, 2), 0, -1, b)
}

func testAppendStaleGenStamp(t *testing.T, h *harness) {
	st := h.store()
	put(t, st, id(1, 5), data(1, 100))
	for _, gs := range []uint64{5, 4} {
		_, err := st.OpenAppend(bg, id(1, 5), gs)
		wantErr(t, "OpenAppend without a larger stamp", err, blocks.ErrBadState)
		_, err = st.Recover(bg, id(1, 5), gs)
		wantErr(t, "Recover without a larger stamp", err, blocks.ErrBadState)
		err = st.Truncate(bg, id(1, 5), 1, gs)
		wantErr(t, "Truncate without a larger stamp", err, blocks.ErrBadState)
	}
	wantReplica(t, st, id(1, 5), blocks.Finalized, 100)
}

// testReaderSurvivesAppend: a stream opened before an append returns the
// bytes as they were, verified, although the partial last chunk's checksum
// changed under it.
func testReaderSurvivesAppend(t *testing.T, h *harness) {
	st := h.store()
	b := data(13, 2<<20+300)
	put(t, st, id(1, 1), b[:1<<20+100])
	rc, err := st.Read(bg, id(1, 1), 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	head := make([]byte, 1000)
	if _, err := io.ReadFull(rc, head); err != nil {
		t.Fatal(err)
	}
	w, err := st.OpenAppend(bg, id(1, 1), 2)
	if err != nil {
		t.Fatal(err)
	}
	write(t, w, b[1<<20+100:], 1)
	if _, err := w.Finalize(bg); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("stream opened before the append: %v", err)
	}
	got := append(head, rest...)
	if len(got) != 1<<20+100 || string(got) != string(b[:1<<20+100]) {
		t.Fatalf("stream opened before the append returned %d bytes (differ at %d), want the %d bytes of then",
			len(got), firstDiff(got, b), 1<<20+100)
	}
	mustGet(t, st, id(1, 2), 0, -1, b)
}
