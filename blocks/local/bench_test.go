package local

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/nimbus-fs/nimbus/blocks"
)

// The three benchmarks run in one `go test -bench` so that the block store's
// throughput can be put beside the disk's own:
//
//	go test ./blocks/local -run '^$' -bench . -benchtime 3x
//
// BenchmarkDiskSeqWrite is dd with one fsync at the end (1 MiB writes);
// BenchmarkWrite256MB creates, writes in 1 MiB pieces and finalizes (which
// fsyncs data, meta and two directories); BenchmarkRead256MB reads a
// finalized replica whole, verifying every chunk (from the page cache, like
// a second read of a file; the disk's own read is not measured here).

const benchBlock = 256 << 20

func benchBuf() []byte {
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = byte(i * 31)
	}
	return b
}

func BenchmarkDiskSeqWrite(b *testing.B) {
	dir := b.TempDir()
	buf := benchBuf()
	b.SetBytes(benchBlock)
	for i := 0; b.Loop(); i++ {
		p := filepath.Join(dir, "dd")
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		for off := 0; off < benchBlock; off += len(buf) {
			if _, err := f.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		f.Close()
		os.Remove(p)
	}
}

func BenchmarkWrite256MB(b *testing.B) {
	st, err := Open(b.TempDir(), DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	buf := benchBuf()
	b.SetBytes(benchBlock)
	for i := uint64(1); b.Loop(); i++ {
		id := blocks.ID{Block: i, GenStamp: 1}
		w, err := st.Create(bg, id)
		if err != nil {
			b.Fatal(err)
		}
		for off := 0; off < benchBlock; off += len(buf) {
			if _, err := w.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := w.Finalize(bg); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		st.Delete(bg, id)
		b.StartTimer()
	}
}

func BenchmarkRead256MB(b *testing.B) {
	st, err := Open(b.TempDir(), DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	buf := benchBuf()
	id := blocks.ID{Block: 1, GenStamp: 1}
	w, err := st.Create(bg, id)
	if err != nil {
		b.Fatal(err)
	}
	for off := 0; off < benchBlock; off += len(buf) {
		w.Write(buf)
	}
	if _, err := w.Finalize(bg); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchBlock)
	b.ReportAllocs()
	for b.Loop() {
		rc, err := st.Read(bg, id, 0, -1)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, struct{ io.Reader }{rc}, buf)
		rc.Close()
		if err != nil || n != benchBlock {
			b.Fatalf("read %d bytes, %v", n, err)
		}
	}
}
