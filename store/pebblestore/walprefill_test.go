package pebblestore

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestPrefillKeepsWritesIntact writes a log in writes of random sizes while
// the filler runs with a small lead (so that it races the writer at every
// chunk), then checks that the file is exactly the bytes written followed
// by zeros, and that the filler kept ahead.
func TestPrefillKeepsWritesIntact(t *testing.T) {
	for _, size := range []int64{0, 10 << 10} { // a new log, a recycled one
		name := filepath.Join(t.TempDir(), "000001.log")
		if size > 0 {
			if err := os.WriteFile(name, bytes.Repeat([]byte{0xee}, int(size)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		f, err := vfs.Default.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		const ahead = 16 << 10
		p := newPrefillFile(f, size, ahead)
		var want []byte
		rng := rand.New(rand.NewPCG(1, uint64(size)))
		for len(want) < 200<<10 {
			b := make([]byte, 1+rng.IntN(3000))
			for i := range b {
				b[i] = byte(1 + rng.IntN(255)) // never 0: a zero in the data is a zero written over it
			}
			if _, err := p.Write(b); err != nil {
				t.Fatal(err)
			}
			want = append(want, b...)
			if rng.IntN(8) == 0 {
				if err := p.SyncData(); err != nil {
					t.Fatal(err)
				}
			}
		}
		p.mu.Lock()
		lead := p.filled - p.written
		p.mu.Unlock()
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) < len(want) || !bytes.Equal(got[:len(want)], want) {
			i := 0
			for i < min(len(got), len(want)) && got[i] == want[i] {
				i++
			}
			t.Fatalf("size %d: written bytes differ from byte %d (file %d bytes, wrote %d)", size, i, len(got), len(want))
		}
		if i := bytes.IndexFunc(got[len(want):], func(r rune) bool { return r != 0 }); i >= 0 {
			t.Fatalf("size %d: non-zero byte %d past the log's end", size, i)
		}
		if lead < 0 || lead > ahead+p.chunk {
			t.Fatalf("size %d: filler lead %d at the end, want within [0, %d]", size, lead, ahead+p.chunk)
		}
		t.Logf("log of %d bytes, file of %d, lead %d at close", len(want), len(got), lead)
	}
}
