package dataxfer

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"

	"github.com/nimbus-fs/nimbus/api/hadoop"
	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
)

// TestTokens: with block tokens on, every op needs a token this cluster
// issued, unexpired, for its block and its access mode; a refusal is
// Hadoop's ERROR_ACCESS_TOKEN.
func TestTokens(t *testing.T) {
	var secret [32]byte
	copy(secret[:], "a cluster secret of 32 bytes ...")
	now := time.Unix(1_800_000_000, 0)
	var clockMu sync.Mutex
	clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	mgr := blocktoken.NewManager(secret, 1, clock)
	ns := startNodes(t, 3, func(c *Config) { c.Tokens = mgr })
	c := &Client{Name: "DFSClient_tokens"}
	ctx := context.Background()
	b := Block{Pool: testPool, ID: 500, GenStamp: 1}
	data := randBytes(500, 100_000)
	rw := mgr.IssueFor("alice", testPool, b.ID, time.Hour, blocktoken.Read, blocktoken.Write)
	// The token goes down the pipeline: each DataNode checks it.
	writeBlock(t, c, b, rw, ns, data)
	got, err := readAll(t, c, ns[2].addr, b, rw, 0, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "read with token", got, data)

	readOnly := mgr.IssueFor("alice", testPool, b.ID, time.Hour, blocktoken.Read)
	otherBlock := mgr.IssueFor("alice", testPool, b.ID+1, time.Hour, blocktoken.Read, blocktoken.Write)
	forged := rw
	forged.Password = append([]byte(nil), rw.Password...)
	forged.Password[3] ^= 0x40
	short := mgr.IssueFor("alice", testPool, b.ID, time.Minute, blocktoken.Read, blocktoken.Write)

	refused := func(name string, err error) {
		t.Helper()
		var se *StatusError
		if !errors.Is(err, ErrAccessToken) || !errors.As(err, &se) || se.Status != hadoop.Status_ERROR_ACCESS_TOKEN {
			t.Errorf("%s: %v, want ERROR_ACCESS_TOKEN", name, err)
		}
	}
	for name, tok := range map[string]blocktoken.Token{"missing": {}, "forged": forged, "other block": otherBlock} {
		_, err := readAll(t, c, ns[0].addr, b, tok, 0, 10)
		refused("read, "+name, err)
		_, err = c.BlockChecksum(ctx, ns[0].addr, b, tok)
		refused("checksum, "+name, err)
	}
	b2 := Block{Pool: testPool, ID: b.ID, GenStamp: 2}
	_, err = c.WriteBlock(ctx, b2, readOnly, targets(ns), WriteOptions{Append: true, Offset: int64(len(data)), LatestGenStamp: 2})
	var pe *PipelineError
	if !errors.As(err, &pe) || pe.Index != 0 {
		t.Errorf("append with a read-only token: %v, want a PipelineError at 0", err)
	}
	refused("append with a read-only token", err)
	err = c.TransferBlock(ctx, ns[0].addr, b, rw, []Target{startNode(t, nil).target()})
	refused("transfer without COPY", err)

	clockMu.Lock()
	now = now.Add(2 * time.Minute)
	clockMu.Unlock()
	_, err = readAll(t, c, ns[1].addr, b, short, 0, 10)
	refused("expired", err)
	// The replicas are untouched by the refusals.
	for _, n := range ns {
		mustEqual(t, "replica after refusals", storedBytes(t, n, b.BlockID()), data)
	}
}

// TestHostileClients: garbage, a packet that lies about its length, a
// header that lies about its data, and a writer that stalls each lose only
// their own connection (the stalled one when the server's timeout passes),
// while a pipeline write and reads go on through the same DataNodes.
func TestHostileClients(t *testing.T) {
	ns := startNodes(t, 3, func(c *Config) { c.Timeout = 2 * time.Second })
	c := &Client{Name: "DFSClient_good"}
	ctx := context.Background()

	opBytes := func(id uint64) []byte {
		var buf []byte
		w := &sliceWriter{&buf}
		writeOp(w, OpWriteBlock, &hadoop.OpWriteBlockProto{
			Header: c.header(Block{Pool: testPool, ID: id, GenStamp: 1}, blocktoken.Token{}),
			Stage:  StageCreate.Enum(), PipelineSize: proto.Uint32(1), MinBytesRcvd: proto.Uint64(0), MaxBytesRcvd: proto.Uint64(0),
			LatestGenerationStamp: proto.Uint64(1), RequestedChecksum: CRC32C.proto(),
		})
		return buf
	}
	lyingLen := AppendPacket(nil, PacketHeader{Seqno: 0}, randBytes(1, 100), true)
	binary.BigEndian.PutUint32(lyingLen, 1<<30)
	lyingData := AppendPacket(nil, PacketHeader{Seqno: 0}, randBytes(2, 1000), true)
	lyingData[6+25-3] = 0x7f // dataLen far beyond the payload
	stalled := AppendPacket(nil, PacketHeader{Seqno: 0}, randBytes(3, 60_000), true)

	hostile := map[string][]byte{
		"garbage":       []byte("GET / HTTP/1.1\r\nHost: datanode\r\n\r\n"),
		"bad version":   {0, 27, 81, 0},
		"huge message":  {0, 28, 81, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"lying length":  append(opBytes(901), lyingLen...),
		"lying header":  append(opBytes(902), lyingData...),
		"stalled write": append(opBytes(903), stalled[:30_000]...),
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(hostile)+1)
	for name, in := range hostile {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("tcp", ns[0].addr)
			if err != nil {
				errs <- err
				return
			}
			defer nc.Close()
			nc.Write(in)
			// The server answers what it answers, then closes: the read ends
			// with EOF or a reset, not with this side's deadline.
			nc.SetReadDeadline(time.Now().Add(time.Minute))
			_, err = io.Copy(io.Discard, nc)
			if err != nil && isTimeout(err) {
				errs <- errors.New(name + ": the server did not close the connection")
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		b := Block{Pool: testPool, ID: 904, GenStamp: 1}
		data := randBytes(904, 1<<20)
		bw, err := c.WriteBlock(ctx, b, blocktoken.Token{}, targets(ns), WriteOptions{})
		if err == nil {
			_, err = bw.Write(data)
		}
		if err == nil {
			_, err = bw.Close(ctx)
		}
		if err != nil {
			errs <- err
			return
		}
		br, err := c.ReadBlock(ctx, ns[0].addr, b, blocktoken.Token{}, 0, int64(len(data)))
		if err != nil {
			errs <- err
			return
		}
		got, err := io.ReadAll(br)
		br.Close()
		if err != nil || len(got) != len(data) {
			errs <- errors.New("good read failed beside hostile clients")
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestConnectionLimit: a connection over MaxConns is closed at once; the
// ones within the limit are served.
func TestConnectionLimit(t *testing.T) {
	n := startNode(t, func(c *Config) { c.MaxConns = 2 })
	var held []net.Conn
	for range 2 {
		nc, err := net.Dial("tcp", n.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		held = append(held, nc)
	}
	// The two held connections occupy both slots once accepted; a third is
	// refused. Wait until the server counts them.
	for n.srv.Active() < 2 {
		time.Sleep(time.Millisecond)
	}
	over, err := net.Dial("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	over.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := bufio.NewReader(over).ReadByte(); err != io.EOF {
		t.Fatalf("connection over the limit: %v, want EOF", err)
	}
	held[0].Close()
	for n.srv.Active() >= 2 {
		time.Sleep(time.Millisecond)
	}
	c := &Client{Name: "DFSClient_limit"}
	writeBlock(t, c, Block{Pool: testPool, ID: 1, GenStamp: 1}, blocktoken.Token{}, []*node{n}, []byte("within the limit"))
}

type sliceWriter struct{ b *[]byte }

func (w *sliceWriter) Write(p []byte) (int, error) { *w.b = append(*w.b, p...); return len(p), nil }

// TestMetrics: ops and bytes are counted on the injected registerer and
// unregistered by Close.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	n := startNode(t, func(c *Config) { c.Registerer = reg })
	c := &Client{Name: "DFSClient_metrics"}
	b := Block{Pool: testPool, ID: 3, GenStamp: 1}
	writeBlock(t, c, b, blocktoken.Token{}, []*node{n}, randBytes(3, 5000))
	if _, err := readAll(t, c, n.addr, b, blocktoken.Token{}, 0, 5000); err != nil {
		t.Fatal(err)
	}
	n.kill() // the op counters are complete once the connections are done
	if got := testutil.ToFloat64(n.srv.met.ops.WithLabelValues("WRITE_BLOCK", "ok")); got != 1 {
		t.Errorf("WRITE_BLOCK ok = %v", got)
	}
	if got := testutil.ToFloat64(n.srv.met.bytesIn); got != 5000 {
		t.Errorf("bytes received %v", got)
	}
	if got := testutil.ToFloat64(n.srv.met.bytesOut); got != 5000 {
		t.Errorf("bytes sent %v", got)
	}
	if mfs, _ := reg.Gather(); len(mfs) != 0 {
		t.Errorf("%d metric families left registered after Close", len(mfs))
	}
}

// TestCorruptPacketAck: a packet whose data does not match its checksum is
// answered ERROR_CHECKSUM at the index of the DataNode that found it, and
// nothing of it is stored.
func TestCorruptPacketAck(t *testing.T) {
	n := startNode(t, nil)
	c := &Client{Name: "DFSClient_raw"}
	b := Block{Pool: testPool, ID: 12, GenStamp: 1}
	nc, err := net.Dial("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(time.Minute))
	var out []byte
	writeOp(&sliceWriter{&out}, OpWriteBlock, &hadoop.OpWriteBlockProto{
		Header: c.header(b, blocktoken.Token{}), Stage: StageCreate.Enum(), PipelineSize: proto.Uint32(1),
		MinBytesRcvd: proto.Uint64(0), MaxBytesRcvd: proto.Uint64(0), LatestGenerationStamp: proto.Uint64(1), RequestedChecksum: CRC32C.proto(),
	})
	good := AppendPacket(nil, PacketHeader{Seqno: 0}, randBytes(12, 1024), true)
	bad := AppendPacket(nil, PacketHeader{Seqno: 1, Offset: 1024}, randBytes(13, 1024), true)
	bad[len(bad)-1] ^= 0xff
	out = append(append(out, good...), bad...)
	nc.Write(out)
	r := bufio.NewReader(nc)
	var resp hadoop.BlockOpResponseProto
	if err := ReadDelimited(r, &resp); err != nil || resp.GetStatus() != hadoop.Status_SUCCESS {
		t.Fatalf("setup: %v %v", resp.GetStatus(), err)
	}
	a, err := ReadAck(r)
	if err != nil || a.Seqno != 0 || !a.ok() {
		t.Fatalf("ack of the good packet: %+v %v", a, err)
	}
	a, err = ReadAck(r)
	if err != nil || a.Seqno != 1 || len(a.Status) != 1 || a.Status[0] != hadoop.Status_ERROR_CHECKSUM {
		t.Fatalf("ack of the corrupt packet: %+v %v", a, err)
	}
	n.kill()
	if got := storedBytes(t, n, b.BlockID()); len(got) != 1024 {
		t.Fatalf("%d bytes stored, want the good packet's 1024", len(got))
	}
}

// TestMaxPacket: a packet over the configured bound ends the write with an
// error before its bytes are read; packets within it are stored.
func TestMaxPacket(t *testing.T) {
	n := startNode(t, func(c *Config) { c.MaxPacket = 64 << 10 })
	c := &Client{Name: "DFSClient_big"}
	ctx := context.Background()
	data := randBytes(5, 200_000)
	b := Block{Pool: testPool, ID: 5, GenStamp: 1}
	writeBlock(t, c, b, blocktoken.Token{}, []*node{n}, data) // 64 KiB packets pass
	bw, err := c.WriteBlock(ctx, Block{Pool: testPool, ID: 6, GenStamp: 1}, blocktoken.Token{}, []Target{n.target()}, WriteOptions{PacketSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	bw.Write(data)
	_, err = bw.Close(ctx)
	var pe *PipelineError
	if !errors.As(err, &pe) || pe.Index != 0 {
		t.Fatalf("a 1 MiB packet to a DataNode that takes 64 KiB: %v, want a PipelineError at 0", err)
	}
	mustEqual(t, "block of 64 KiB packets", storedBytes(t, n, b.BlockID()), data)
}
