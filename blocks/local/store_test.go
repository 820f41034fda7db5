package local

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

var bg = context.Background()

func open(t *testing.T, dir string, cfg Config) *Store {
	t.Helper()
	st, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>9)
	}
	return b
}

func TestConfigValidate(t *testing.T) {
	for _, n := range []int{0, 4095, 4097, 1000 * 512 * 1024} {
		c := DefaultConfig()
		c.BufferSize = n
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("BufferSize %d: Validate = %v, want ErrConfig", n, err)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(t.TempDir(), Config{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("Open with a zero Config: %v", err)
	}
}

func TestDirLocked(t *testing.T) {
	dir := t.TempDir()
	st := open(t, dir, DefaultConfig())
	if _, err := Open(dir, DefaultConfig()); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open of a directory in use: %v, want ErrLocked", err)
	}
	st.Close()
	st2, err := Open(dir, DefaultConfig())
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	st2.Close()
}

// TestLayout: files sit where HDFS puts them, and the meta file is HDFS's
// format: header 00 01 02 00 00 02 00, then big-endian CRC32C per chunk.
func TestLayout(t *testing.T) {
	dir := t.TempDir()
	st := open(t, dir, DefaultConfig())
	id := blocks.ID{Block: 0x12345, GenStamp: 1001}
	w, err := st.Create(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	b := pattern(1300)
	w.Write(b)
	if err := w.Sync(bg); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"rbw/blk_74565", "rbw/blk_74565_1001.meta"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Fatalf("while being written: %v", err)
		}
	}
	if _, err := w.Finalize(bg); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "finalized", "subdir1", "subdir3") // (0x12345>>16)&31 = 1, (0x12345>>8)&31 = 3
	if got, err := os.ReadFile(filepath.Join(sub, "blk_74565")); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("finalized data file: %d bytes, %v", len(got), err)
	}
	meta, err := os.ReadFile(filepath.Join(sub, "blk_74565_1001.meta"))
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0, 1, 2, 0, 0, 2, 0}
	for off := 0; off < len(b); off += 512 {
		want = binary.BigEndian.AppendUint32(want, crc32.Checksum(b[off:min(off+512, len(b))], crc32.MakeTable(crc32.Castagnoli)))
	}
	if !bytes.Equal(meta, want) {
		t.Fatalf("meta file %x, want %x", meta, want)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "rbw")); len(ents) != 0 {
		t.Fatalf("rbw not empty after Finalize: %v", ents)
	}
}

// TestDurablePartialChecksumKept: after a Sync that ends inside a chunk,
// writing on (even past a buffer flush) must not overwrite that chunk's
// durable checksum on disk until the next Sync; see writer.go.
func TestDurablePartialChecksumKept(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.BufferSize = 4096
	st := open(t, dir, cfg)
	id := blocks.ID{Block: 1, GenStamp: 1}
	w, err := st.Create(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	b := pattern(20000)
	w.Write(b[:1100])
	if err := w.Sync(bg); err != nil {
		t.Fatal(err)
	}
	w.Write(b[1100:]) // several buffer flushes
	entry := func() uint32 {
		meta, err := os.ReadFile(filepath.Join(dir, "rbw", "blk_1_1.meta"))
		if err != nil {
			t.Fatal(err)
		}
		return binary.BigEndian.Uint32(meta[7+4*2:])
	}
	tab := crc32.MakeTable(crc32.Castagnoli)
	if got, want := entry(), crc32.Checksum(b[1024:1100], tab); got != want {
		t.Fatalf("chunk 2's checksum on disk = %08x before the next Sync, want the synced %08x", got, want)
	}
	if err := w.Sync(bg); err != nil {
		t.Fatal(err)
	}
	if got, want := entry(), crc32.Checksum(b[1024:1536], tab); got != want {
		t.Fatalf("chunk 2's checksum after Sync = %08x, want %08x", got, want)
	}
	w.Close()
}

// TestOpenRepairs: Open finishes or undoes moves cut by a crash and removes
// debris.
func TestOpenRepairs(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	b := pattern(3000)
	for _, blk := range []uint64{1, 2} {
		w, _ := st.Create(bg, blocks.ID{Block: blk, GenStamp: 1})
		w.Write(b)
		if _, err := w.Finalize(bg); err != nil {
			t.Fatal(err)
		}
	}
	w, _ := st.Create(bg, blocks.ID{Block: 5, GenStamp: 1})
	w.Write(b)
	w.Sync(bg)
	w.Close()
	st.Close()
	sub := subdirs(0)
	mv := func(from, to string) {
		if err := os.Rename(filepath.Join(dir, from), filepath.Join(dir, to)); err != nil {
			t.Fatal(err)
		}
	}
	mv(filepath.Join(sub, "blk_1_1.meta"), "rbw/blk_1_1.meta") // finalize cut after the data rename
	mv(filepath.Join(sub, "blk_2"), "rbw/blk_2")               // move to rbw cut after the data rename
	debris := []string{"rbw/blk_3", "rbw/blk_4_9.meta", "rbw/x.tmp"}
	for _, p := range debris {
		os.WriteFile(filepath.Join(dir, p), []byte("junk"), 0o644)
	}
	os.WriteFile(filepath.Join(dir, "rbw/blk_6"), nil, 0o644) // Create cut before the header
	os.WriteFile(filepath.Join(dir, "rbw/blk_6_1.meta"), []byte{0, 1}, 0o644)

	st = open(t, dir, DefaultConfig())
	for _, blk := range []uint64{1, 2} {
		id := blocks.ID{Block: blk, GenStamp: 1}
		rep, err := st.Stat(bg, id)
		if err != nil || rep.State != blocks.Finalized || rep.Length != 3000 {
			t.Fatalf("blk %d after repair: %+v, %v", blk, rep, err)
		}
		rc, err := st.Read(bg, id, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("blk %d after repair: %d bytes, %v", blk, len(got), err)
		}
	}
	if rep, err := st.Stat(bg, blocks.ID{Block: 5, GenStamp: 1}); err != nil || rep.State != blocks.BeingWritten || rep.Length != 3000 {
		t.Fatalf("being-written replica after reopen: %+v, %v", rep, err)
	}
	if rep, err := st.Stat(bg, blocks.ID{Block: 6, GenStamp: 1}); err != nil || rep.Length != 0 {
		t.Fatalf("replica cut inside its header: %+v, %v", rep, err)
	}
	for _, p := range debris {
		if _, err := os.Stat(filepath.Join(dir, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived Open: %v", p, err)
		}
	}
	n := 0
	st.Report(bg, func(blocks.Replica) error { n++; return nil })
	if n != 4 {
		t.Fatalf("Report lists %d replicas, want 4", n)
	}
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func gathered(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return len(mfs)
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := DefaultConfig()
	cfg.Registerer = reg
	st := open(t, t.TempDir(), cfg)
	id := blocks.ID{Block: 1, GenStamp: 1}
	w, _ := st.Create(bg, id)
	w.Write(pattern(5000))
	if _, err := w.Finalize(bg); err != nil {
		t.Fatal(err)
	}
	rc, _ := st.Read(bg, id, 0, -1)
	io.Copy(io.Discard, rc)
	rc.Close()
	st.Corrupt(bg, id, 10)
	rc, _ = st.Read(bg, id, 0, -1)
	io.Copy(io.Discard, rc)
	rc.Close()
	for name, want := range map[string]float64{
		"bytes_written_total": 5000, "bytes_read_total": 5000, "checksum_failures_total": 1,
	} {
		var c prometheus.Counter
		switch name {
		case "bytes_written_total":
			c = st.m.bytesWritten
		case "bytes_read_total":
			c = st.m.bytesRead
		default:
			c = st.m.checksumFailures
		}
		if got := counter(t, c); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if counter(t, st.m.fsyncs) < 3 {
		t.Errorf("fsyncs_total = %v, want at least data, meta and directory", counter(t, st.m.fsyncs))
	}
	if n := gathered(t, reg); n != 5 {
		t.Errorf("registry has %d metrics, want 5", n)
	}
	st.Close()
	if n := gathered(t, reg); n != 0 {
		t.Errorf("Close left %d metrics registered", n)
	}
}

// TestReadOnlyOpen: a read-only Open is refused beside a writer, reads what
// was written, and creates or removes nothing, not even LOCK or a leftover
// temporary file.
func TestReadOnlyOpen(t *testing.T) {
	dir := t.TempDir()
	st := open(t, dir, DefaultConfig())
	id := blocks.ID{Block: 7, GenStamp: 1}
	w, err := st.Create(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Finalize(context.Background()); err != nil {
		t.Fatal(err)
	}
	ro := DefaultConfig()
	ro.ReadOnly = true
	if _, err := Open(dir, ro); !errors.Is(err, ErrLocked) {
		t.Fatalf("read-only Open beside a writer: %v, want ErrLocked", err)
	}
	st.Close()
	os.Remove(filepath.Join(dir, "LOCK"))
	tmp := filepath.Join(dir, rbwDir, "x.tmp")
	if err := os.WriteFile(tmp, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rs, err := Open(dir, ro)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	rc, err := rs.Read(context.Background(), id, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(b) != "hello" {
		t.Fatalf("read %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "LOCK")); !os.IsNotExist(err) {
		t.Errorf("read-only Open created LOCK: %v", err)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Errorf("read-only Open removed a temporary file: %v", err)
	}
}
