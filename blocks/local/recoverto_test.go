package local

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/nimbus-fs/nimbus/blocks"
)

// RecoverTo: a being-written replica (with an open writer) and a
// finalized one are cut to the length asked under the new stamp and
// verify afterwards; a length beyond the replica is ErrRange; the same
// length only renames; the old ID names nothing; a restart finds the
// result.
func TestRecoverTo(t *testing.T) {
	dir := t.TempDir()
	st := open(t, dir, DefaultConfig())
	data := pattern(5000)
	read := func(st *Store, id blocks.ID) []byte {
		t.Helper()
		rc, err := st.Read(bg, id, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	// Being written, writer open: stopped, cut to 1300 (mid-chunk).
	rbw := blocks.ID{Block: 1, GenStamp: 3}
	w, err := st.Create(bg, rbw)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	if err := w.Sync(bg); err != nil {
		t.Fatal(err)
	}
	if err := st.RecoverTo(bg, rbw, 5, 6000); !errors.Is(err, blocks.ErrRange) {
		t.Fatalf("RecoverTo beyond the replica: %v, want ErrRange", err)
	}
	if err := st.RecoverTo(bg, rbw, 5, 1300); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("x")); err == nil {
		if err := w.Sync(bg); err == nil {
			t.Fatal("the writer still writes after RecoverTo")
		}
	}
	if _, err := st.Stat(bg, rbw); !errors.Is(err, blocks.ErrNotFound) {
		t.Fatalf("old ID after RecoverTo: %v", err)
	}
	if got := read(st, blocks.ID{Block: 1, GenStamp: 5}); !bytes.Equal(got, data[:1300]) {
		t.Fatalf("recovered rbw: %d bytes", len(got))
	}

	// Finalized: cut to 700, then the same length only renames.
	fin := blocks.ID{Block: 2, GenStamp: 1}
	w, err = st.Create(bg, fin)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	if _, err := w.Finalize(bg); err != nil {
		t.Fatal(err)
	}
	if err := st.RecoverTo(bg, fin, 2, 5001); !errors.Is(err, blocks.ErrRange) {
		t.Fatalf("RecoverTo beyond a finalized replica: %v, want ErrRange", err)
	}
	if err := st.RecoverTo(bg, fin, 2, 700); err != nil {
		t.Fatal(err)
	}
	if err := st.RecoverTo(bg, blocks.ID{Block: 2, GenStamp: 2}, 4, 700); err != nil {
		t.Fatal(err)
	}
	if err := st.RecoverTo(bg, blocks.ID{Block: 2, GenStamp: 4}, 4, 700); !errors.Is(err, blocks.ErrBadState) {
		t.Fatalf("RecoverTo to the same stamp: %v, want ErrBadState", err)
	}
	st.Close()

	st = open(t, dir, DefaultConfig())
	for id, want := range map[blocks.ID][]byte{{Block: 1, GenStamp: 5}: data[:1300], {Block: 2, GenStamp: 4}: data[:700]} {
		r, err := st.Stat(bg, id)
		if err != nil || r.State != blocks.Finalized || r.Length != int64(len(want)) {
			t.Fatalf("after restart %v: %+v, %v", id, r, err)
		}
		if got := read(st, id); !bytes.Equal(got, want) {
			t.Fatalf("after restart %v: bytes differ", id)
		}
	}
}
