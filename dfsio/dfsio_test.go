package dfsio

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/dataxfer"
)

const testBlockSize = 4096

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func mustEqual(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: %d bytes, want %d; first difference at %d", what, len(got), len(want), i)
	}
}

func testClient() *dataxfer.Client { return &dataxfer.Client{Name: "DFSClient_test"} }

func create(t *testing.T, nn *fakeNN, path string, tune func(*WriterConfig)) *OutputStream {
	t.Helper()
	nn.create(path)
	cfg := WriterConfig{NameNode: nn, Data: testClient(), Path: path, Client: "DFSClient_test",
		BlockSize: testBlockSize, Replication: nn.replication, PacketSize: 1100}
	if tune != nil {
		tune(&cfg)
	}
	w, err := Create(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// writeUneven writes data in pieces of varied sizes, to cut packets and
// blocks at every kind of boundary.
func writeUneven(t *testing.T, w io.Writer, data []byte) {
	t.Helper()
	for rest, i := data, 0; len(rest) > 0; i++ {
		k := min(len(rest), 1+(i*7919)%3000)
		if _, err := w.Write(rest[:k]); err != nil {
			t.Fatalf("write: %v", err)
		}
		rest = rest[k:]
	}
}

func open(t *testing.T, nn *fakeNN, path string) *InputStream {
	t.Helper()
	r, err := Open(context.Background(), ReaderConfig{NameNode: nn, Data: testClient(), Path: path, Prefetch: 2 * testBlockSize})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func readFile(t *testing.T, nn *fakeNN, path string) []byte {
	t.Helper()
	r := open(t, nn, path)
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return got
}

func TestWriteRead(t *testing.T) {
	nn := newCluster(t, 3, 3)
	for _, size := range []int{0, 1, 513, testBlockSize, 3*testBlockSize + 700} {
		path := "/f" + strings.Repeat("x", size%7)
		path = path + "-" + string(rune('a'+size%26))
		data := randBytes(uint64(size)+1, size)
		w := create(t, nn, path, nil)
		writeUneven(t, w, data)
		if err := w.Close(); err != nil {
			t.Fatalf("size %d: close: %v", size, err)
		}
		mustEqual(t, path, readFile(t, nn, path), data)
		wantBlocks := (size + testBlockSize - 1) / testBlockSize
		if got := len(nn.files[path].blocks); got != wantBlocks {
			t.Fatalf("size %d: %d blocks, want %d", size, got, wantBlocks)
		}
		// Random positional reads, across block boundaries.
		r := open(t, nn, path)
		rnd := rand.New(rand.NewPCG(uint64(size), 7))
		for range 20 {
			if size == 0 {
				break
			}
			off := rnd.IntN(size)
			n := 1 + rnd.IntN(size-off)
			buf := make([]byte, n)
			if _, err := r.ReadAt(buf, int64(off)); err != nil {
				t.Fatalf("size %d: ReadAt(%d, %d): %v", size, off, n, err)
			}
			mustEqual(t, "ReadAt", buf, data[off:off+n])
		}
		if size > 10 {
			if _, err := r.Seek(int64(size-10), io.SeekStart); err != nil {
				t.Fatal(err)
			}
			tail, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			mustEqual(t, "after Seek", tail, data[size-10:])
		}
	}
	// Every block committed with its length, and the window prefetch:
	// the 4-block file was located in more than one call.
	if n := len(nn.callsOf("locate")); n < 2 {
		t.Fatalf("%d GetBlockLocations calls", n)
	}
}

func TestPipelineRecoveryAddsDataNode(t *testing.T) {
	for _, killed := range []int{0, 1, 2} {
		nn := newCluster(t, 4, 3)
		path := "/recover"
		data := randBytes(uint64(killed)+10, 3*testBlockSize-100)
		reg := prometheus.NewRegistry()
		m, err := NewMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		w := create(t, nn, path, func(c *WriterConfig) { c.Metrics = m })
		half := testBlockSize / 2
		writeUneven(t, w, data[:half])
		if err := w.Hflush(context.Background()); err != nil {
			t.Fatal(err)
		}
		pipeline := w.nodes
		var dead *tnode
		for _, n := range nn.nodes {
			if n.id == pipeline[killed].ID {
				dead = n
			}
		}
		dead.kill()
		writeUneven(t, w, data[half:])
		if err := w.Close(); err != nil {
			t.Fatalf("killed node %d of the pipeline: close: %v", killed, err)
		}
		mustEqual(t, "file after recovery", readFile(t, nn, path), data)
		if len(nn.callsOf("updatepipeline")) == 0 {
			t.Fatalf("killed node %d: no UpdatePipeline", killed)
		}
		if len(nn.callsOf("additional")) == 0 {
			t.Fatalf("killed node %d: hflushed stream with 2 of 3 DataNodes left added none", killed)
		}
		if r, a, b := testutil.ToFloat64(m.recoveries), testutil.ToFloat64(m.replaced), testutil.ToFloat64(m.bytesWritten); r < 1 || a < 1 || b != float64(len(data)) {
			t.Fatalf("killed node %d: metrics: %v recoveries, %v replaced, %v bytes written of %d", killed, r, a, b, len(data))
		}
		b0 := nn.files[path].blocks[0]
		if b0.gs < 2 {
			t.Fatalf("block 0 kept stamp %d after a recovery", b0.gs)
		}
		// The first block's replicas: under the new stamp, complete, on
		// three DataNodes (two survivors and the added one), none on the
		// dead one.
		holders := 0
		for _, n := range nn.nodes {
			if n == dead {
				continue
			}
			id := blocks.ID{Block: b0.id, GenStamp: b0.gs}
			if _, err := n.store.Stat(context.Background(), id); err != nil {
				continue
			}
			holders++
			mustEqual(t, "replica on a DataNode", storedBytes(t, n, id), data[:testBlockSize])
		}
		if holders != 3 {
			t.Fatalf("killed node %d: %d replicas of blk_%d_%d, want 3", killed, holders, b0.id, b0.gs)
		}
	}
}

func TestRecoveryNeverPolicyNarrows(t *testing.T) {
	nn := newCluster(t, 4, 3)
	path := "/narrow"
	data := randBytes(3, 2*testBlockSize)
	w := create(t, nn, path, func(c *WriterConfig) { c.Policy = ReplaceNever })
	writeUneven(t, w, data[:1000])
	if err := w.Hflush(context.Background()); err != nil {
		t.Fatal(err)
	}
	nn.nodes[1].kill()
	writeUneven(t, w, data[1000:])
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "file", readFile(t, nn, path), data)
	if n := len(nn.callsOf("additional")); n != 0 {
		t.Fatalf("policy Never asked %d times for a DataNode", n)
	}
	if got := nn.files[path].blocks[0].nodes; len(got) != 2 {
		t.Fatalf("pipeline after recovery: %v", got)
	}
}

func TestPipelineSetupFailureExcludes(t *testing.T) {
	nn := newCluster(t, 4, 3)
	nn.nodes[0].kill()
	path := "/setup"
	data := randBytes(4, 5000)
	w := create(t, nn, path, nil)
	writeUneven(t, w, data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if len(nn.callsOf("abandon")) == 0 {
		t.Fatal("no AbandonBlock after a failed pipeline setup")
	}
	if c := nn.callsOf("add"); len(c) < 2 || !strings.Contains(c[1], "exclude [1]") {
		t.Fatalf("AddBlock calls: %v", c)
	}
	mustEqual(t, "file", readFile(t, nn, path), data)
}

func TestReadFailsOverDeadDataNode(t *testing.T) {
	nn := newCluster(t, 3, 3)
	path := "/failover"
	data := randBytes(5, 2*testBlockSize+10)
	w := create(t, nn, path, nil)
	writeUneven(t, w, data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := open(t, nn, path)
	first := r.loc.Blocks[0].Targets[0].DataAddr
	for _, n := range nn.nodes {
		if n.addr == first {
			n.kill()
		}
	}
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "read with the first location dead", got, data)
	if !r.isDead(first) {
		t.Fatal("the dead DataNode is not remembered")
	}
	buf := make([]byte, 100)
	if _, err := r.ReadAt(buf, testBlockSize-50); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "ReadAt", buf, data[testBlockSize-50:testBlockSize+50])
}

func TestReadAllDeadFails(t *testing.T) {
	nn := newCluster(t, 2, 2)
	path := "/alldead"
	w := create(t, nn, path, nil)
	writeUneven(t, w, randBytes(6, 100))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := open(t, nn, path)
	for _, n := range nn.nodes {
		n.kill()
	}
	_, err := io.ReadAll(r)
	if err == nil || !strings.Contains(err.Error(), "/alldead") {
		t.Fatalf("read with every DataNode dead: %v", err)
	}
	if n := len(nn.callsOf("locate")); n != 1+r.cfg.Refetches {
		t.Fatalf("%d GetBlockLocations calls, want %d", n, 1+r.cfg.Refetches)
	}
}

func TestCorruptReplicaFailsOver(t *testing.T) {
	nn := newCluster(t, 3, 3)
	path := "/corrupt"
	data := randBytes(7, testBlockSize)
	w := create(t, nn, path, nil)
	writeUneven(t, w, data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := open(t, nn, path)
	lb := r.loc.Blocks[0]
	for _, n := range nn.nodes {
		if n.addr == lb.Targets[0].DataAddr {
			if err := n.store.Corrupt(context.Background(), blocks.ID{Block: lb.ID, GenStamp: lb.GenStamp}, 3000); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "read past a corrupt replica", got, data)
	if !r.isDead(lb.Targets[0].DataAddr) {
		t.Fatal("the DataNode with the corrupt replica was not failed over")
	}
}

// flipProxy relays connections to addr, flipping the byte at position at
// of every answer: a DataNode whose bytes go bad on the way.
func flipProxy(t *testing.T, addr string, at int) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(up, c); up.Close() }()
			go func() {
				defer wg.Done()
				defer c.Close()
				buf := make([]byte, 4096)
				pos := 0
				for {
					n, err := up.Read(buf)
					if at >= pos && at < pos+n {
						buf[at-pos] ^= 0xff
					}
					pos += n
					if n > 0 {
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func TestChecksumErrorReported(t *testing.T) {
	nn := newCluster(t, 3, 3)
	path := "/badbytes"
	data := randBytes(8, testBlockSize)
	w := create(t, nn, path, nil)
	writeUneven(t, w, data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	nn.nodes[0].readAddr = flipProxy(t, nn.nodes[0].addr, 2000)
	m, err := NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(context.Background(), ReaderConfig{NameNode: nn, Data: testClient(), Path: path, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "read past bad bytes", got, data)
	if f, b := testutil.ToFloat64(m.failovers), testutil.ToFloat64(m.bytesRead); f != 1 || b != float64(len(data)) {
		t.Fatalf("metrics: %v failovers, %v bytes read", f, b)
	}
	nn.mu.Lock()
	defer nn.mu.Unlock()
	if len(nn.bad) != 1 || len(nn.bad[0].Targets) != 1 || nn.bad[0].Targets[0].ID != 1 {
		t.Fatalf("bad blocks reported: %+v", nn.bad)
	}
}

// TestHsyncVisible: a reader sees the bytes of a block being written up
// to the writer's last Hsync (DataNodes serve a replica being written up
// to its last sync, so Hflush alone does not make them readable).
func TestHsyncVisible(t *testing.T) {
	nn := newCluster(t, 3, 3)
	path := "/sync"
	data := randBytes(9, testBlockSize+1500)
	w := create(t, nn, path, nil)
	writeUneven(t, w, data)
	if err := w.Hsync(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := open(t, nn, path)
	if r.Len() != int64(len(data)) {
		t.Fatalf("length while being written: %d, want %d", r.Len(), len(data))
	}
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "read after hsync", got, data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "read after close", readFile(t, nn, path), data)
}

func TestInlineThenBlocks(t *testing.T) {
	nn := newCluster(t, 3, 3)
	path := "/inline"
	data := randBytes(10, 3000)
	w := create(t, nn, path, func(c *WriterConfig) {
		c.Inline = &InlineConfig{Limit: 1000, Write: nn.inlineWrite(path)}
	})
	if _, err := w.Write(data[:600]); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), ReaderConfig{NameNode: nn, Data: testClient(), Path: path}); !errors.Is(err, ErrInline) {
		t.Fatalf("open of an inline file: %v", err)
	}
	if len(nn.callsOf("add")) != 0 {
		t.Fatal("a block added below the inline threshold")
	}
	if _, err := w.Write(data[600:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "file grown past the inline threshold", readFile(t, nn, path), data)
}

func TestInlineSmallFile(t *testing.T) {
	nn := newCluster(t, 1, 1)
	path := "/small"
	w := create(t, nn, path, func(c *WriterConfig) {
		c.Inline = &InlineConfig{Limit: 1000, Write: nn.inlineWrite(path)}
	})
	if _, err := w.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := string(nn.files[path].inline); got != "hello" || len(nn.callsOf("add")) != 0 {
		t.Fatalf("inline file: %q, %v", got, nn.callsOf("add"))
	}
}

func TestAppend(t *testing.T) {
	for _, first := range []int{testBlockSize + 904, testBlockSize, 0} {
		nn := newCluster(t, 3, 3)
		path := "/append"
		data := randBytes(uint64(first), first+5000)
		w := create(t, nn, path, nil)
		writeUneven(t, w, data[:first])
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		ac := nn.appendFile(path)
		cfg := WriterConfig{NameNode: nn, Data: testClient(), Path: path, Client: "DFSClient_test",
			BlockSize: testBlockSize, Replication: 3, PacketSize: 1100, Append: ac}
		w, err := Create(context.Background(), cfg)
		if err != nil {
			t.Fatalf("append after %d bytes: %v", first, err)
		}
		writeUneven(t, w, data[first:])
		if err := w.Close(); err != nil {
			t.Fatalf("append after %d bytes: close: %v", first, err)
		}
		mustEqual(t, "appended file", readFile(t, nn, path), data)
		if want := (len(data) + testBlockSize - 1) / testBlockSize; len(nn.files[path].blocks) != want {
			t.Fatalf("append after %d bytes: %d blocks, want %d", first, len(nn.files[path].blocks), want)
		}
	}
}

// TestRecoveryTwoLostAndAtClose: two of three DataNodes die together, and
// (separately) one dies just before Close: the recovery drops each, adds
// replacements, and the file completes with its bytes.
func TestRecoveryTwoLostAndAtClose(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kill  []int // pipeline positions
		after int   // bytes written after the kill
	}{
		{"two lost", []int{0, 2}, 3000},
		{"lost before close", []int{1}, 0},
	} {
		nn := newCluster(t, 5, 3)
		path := "/two"
		data := randBytes(11, testBlockSize+500+tc.after)
		w := create(t, nn, path, nil)
		cut := len(data) - tc.after
		writeUneven(t, w, data[:cut])
		if err := w.Hflush(context.Background()); err != nil {
			t.Fatal(err)
		}
		var dead []uint64
		for _, k := range tc.kill {
			dead = append(dead, w.nodes[k].ID)
			nn.nodes[w.nodes[k].ID-1].kill()
		}
		writeUneven(t, w, data[cut:])
		if err := w.Close(); err != nil {
			t.Fatalf("%s: close: %v", tc.name, err)
		}
		mustEqual(t, tc.name, readFile(t, nn, path), data)
		last := nn.files[path].blocks[len(nn.files[path].blocks)-1]
		if last.gs < 2 {
			t.Fatalf("%s: last block kept stamp %d", tc.name, last.gs)
		}
		for _, id := range last.nodes {
			for _, d := range dead {
				if id == d {
					t.Fatalf("%s: dead DataNode %d in the recorded pipeline %v", tc.name, d, last.nodes)
				}
			}
		}
		if len(last.nodes) != 3 {
			t.Fatalf("%s: recorded pipeline %v, want 3 DataNodes", tc.name, last.nodes)
		}
	}
}

func TestConcurrentReadAt(t *testing.T) {
	nn := newCluster(t, 3, 3)
	path := "/concurrent"
	data := randBytes(12, 4*testBlockSize+123)
	w := create(t, nn, path, nil)
	writeUneven(t, w, data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := open(t, nn, path)
	nn.nodes[0].kill()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			off := (g * 2011) % len(data)
			n := min(3000, len(data)-off)
			buf := make([]byte, n)
			if _, err := r.ReadAt(buf, int64(off)); err != nil {
				errs <- err
				return
			}
			if !bytes.Equal(buf, data[off:off+n]) {
				errs <- errors.New("ReadAt returned wrong bytes")
			}
		}()
	}
	got, err := io.ReadAll(r)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "Read alongside ReadAt", got, data)
}

// TestHsyncAtBlockBoundary: a sync right after a block filled records that
// block's length, so a reader sees the whole block.
func TestHsyncAtBlockBoundary(t *testing.T) {
	nn := newCluster(t, 3, 3)
	path := "/boundary"
	data := randBytes(13, testBlockSize)
	w := create(t, nn, path, nil)
	writeUneven(t, w, data)
	if err := w.Hsync(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "read at a block boundary", readFile(t, nn, path), data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
