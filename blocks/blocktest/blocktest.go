package blocktest

import (
	"bytes"
	"context"
	"errors"

	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/nimbus-fs/nimbus/blocks"
)

// Opener opens (creating if needed) a store persisted in dir.
type Opener func(t *testing.T, dir string) blocks.Store

// Run runs every conformance test as a subtest of t.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h *harness)
	}{
		{"RoundTripSizes", testRoundTripSizes},
		{"RangedReads", testRangedReads},
		{"ReadOutOfRange", testReadOutOfRange},
		{"CreateExists", testCreateExists},
		{"NotFoundAndStaleGenStamp", testNotFound},
		{"ReadBeingWritten", testReadBeingWritten},
		{"WriterFinished", testWriterFinished},
		{"Append", testAppend},
		{"ManySmallAppends", testManySmallAppends},
		{"AppendAfterClose", testAppendAfterClose},
		{"AppendStaleGenStamp", testAppendStaleGenStamp},
		{"ReaderSurvivesAppend", testReaderSurvivesAppend},
		{"RecoverAfterClose", testRecoverAfterClose},
		{"RecoverAfterCrash", testRecoverAfterCrash},
		{"RecoverStopsWriter", testRecoverStopsWriter},
		{"RecoverFinalized", testRecoverFinalized},
		{"Truncate", testTruncate},
		{"Corruption", testCorruption},
		{"CorruptTailBlocksAppend", testCorruptTailBlocksAppend},
		{"DeleteAndAbort", testDeleteAndAbort},
		{"Report", testReport},
		{"Persistence", testPersistence},
		{"Checksum", testChecksum},
		{"Context", testContext},
		{"Closed", testClosed},
		{"Concurrent", testConcurrent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, &harness{t: t, open: open, dir: t.TempDir()})
		})
	}
}

var bg = context.Background()

// harness opens stores on one dir and closes them when the test ends.
type harness struct {
	t    *testing.T
	open Opener
	dir  string
}

func (h *harness) store() blocks.Store {
	h.t.Helper()
	st := h.open(h.t, h.dir)
	if st == nil {
		h.t.Fatal("open returned a nil store")
	}
	h.t.Cleanup(func() { _ = st.Close() })
	return st
}

// data returns n pseudo-random bytes, different for each seed.
func data(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, n2u(n)))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func n2u(n int) uint64 { return uint64(n) }

// write writes b in pieces of random size (1 .. 3*chunk+17, or large),
// so that writes straddle chunk and buffer boundaries.
func write(t testing.TB, w blocks.Writer, b []byte, seed uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 99))
	for len(b) > 0 {
		n := 1 + r.IntN(3*blocks.ChunkSize+17)
		if r.IntN(8) == 0 {
			n = 1 + r.IntN(3<<20)
		}
		n = min(n, len(b))
		k, err := w.Write(b[:n])
		if err != nil || k != n {
			t.Fatalf("Write(%d bytes) = %d, %v", n, k, err)
		}
		b = b[n:]
	}
}

// put writes b as a finalized replica named id.
func put(t testing.TB, st blocks.Store, id blocks.ID, b []byte) {
	t.Helper()
	w, err := st.Create(bg, id)
	if err != nil {
		t.Fatalf("Create %v: %v", id, err)
	}
	write(t, w, b, id.Block)
	if w.Len() != int64(len(b)) {
		t.Fatalf("Len = %d, want %d", w.Len(), len(b))
	}
	n, err := w.Finalize(bg)
	if err != nil || n != int64(len(b)) {
		t.Fatalf("Finalize %v = %d, %v; want %d", id, n, err, len(b))
	}
}

// get reads [off, off+n) (n < 0: to the end).
func get(st blocks.Store, id blocks.ID, off, n int64) ([]byte, error) {
	rc, err := st.Read(bg, id, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var buf bytes.Buffer
	// An odd-sized copy buffer exercises reads that end inside chunks.
	_, err = io.CopyBuffer(&buf, struct{ io.Reader }{rc}, make([]byte, 1000))
	return buf.Bytes(), err
}

// mustGet reads and compares with want.
func mustGet(t testing.TB, st blocks.Store, id blocks.ID, off, n int64, want []byte) {
	t.Helper()
	got, err := get(st, id, off, n)
	if err != nil {
		t.Fatalf("Read %v [%d,+%d): %v", id, off, n, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Read %v [%d,+%d): %d bytes differ from the %d written (first difference at %d)",
			id, off, n, len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func wantErr(t testing.TB, what string, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("%s: error %v, want %v", what, err, kind)
	}
}

func stat(t testing.TB, st blocks.Store, id blocks.ID) blocks.Replica {
	t.Helper()
	r, err := st.Stat(bg, id)
	if err != nil {
		t.Fatalf("Stat %v: %v", id, err)
	}
	return r
}

func wantReplica(t testing.TB, st blocks.Store, id blocks.ID, state blocks.State, length int64) {
	t.Helper()
	r := stat(t, st, id)
	if r.ID != id || r.State != state || r.Length != length {
		t.Fatalf("Stat %v = %+v, want %s with %d bytes", id, r, state, length)
	}
}

func report(t testing.TB, st blocks.Store) []blocks.Replica {
	t.Helper()
	var rs []blocks.Replica
	if err := st.Report(bg, func(r blocks.Replica) error { rs = append(rs, r); return nil }); err != nil {
		t.Fatalf("Report: %v", err)
	}
	return rs
}

func corrupter(t testing.TB, st blocks.Store) blocks.Corrupter {
	t.Helper()
	c, ok := st.(blocks.Corrupter)
	if !ok {
		t.Fatalf("%T does not implement blocks.Corrupter, which the suite needs", st)
	}
	return c
}

// parallel runs fn(i) for i in [0, n) on n goroutines.
func parallel(n int, fn func(i int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = fn(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func id(b, gs uint64) blocks.ID { return blocks.ID{Block: b, GenStamp: gs} }
