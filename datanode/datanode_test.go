package datanode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/datanode/registry"
	"github.com/nimbus-fs/nimbus/dataxfer"
	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
	"github.com/nimbus-fs/nimbus/internal/clusterauth"
	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
)

func openStore(t *testing.T) store.Store {
	t.Helper()
	opts := pebblestore.DefaultOptions()
	opts.CacheSize, opts.MemTableSize = 8<<20, 4<<20
	st, err := pebblestore.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func testConfig(dir string) Config {
	cfg := DefaultConfig()
	cfg.Dir = dir
	cfg.Zone = "z1"
	cfg.DataAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Liveness.Heartbeat = 10 * time.Millisecond
	cfg.Liveness.StaleAfter = time.Minute // /healthz stays healthy however slow the machine
	cfg.Liveness.DeadAfter = 2 * time.Minute
	cfg.Liveness.Batch = 3
	cfg.Blocks.BufferSize = 4 << 10
	reg := prometheus.NewRegistry()
	cfg.Registerer, cfg.Gatherer = reg, reg
	return cfg
}

// running is a DataNode whose Run goes on until the test stops it.
type running struct {
	*DataNode
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func start(t *testing.T, cfg Config, st store.Store) *running {
	t.Helper()
	d, err := New(context.Background(), cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{DataNode: d, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- d.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

func (r *running) stop() {
	r.once.Do(func() {
		r.cancel()
		if err := <-r.done; err != nil {
			panic(err)
		}
	})
}

// eventually polls cond until it holds, failing the test after a long
// wait (a bound for a hung test, not a measure of speed).
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %s", what, state)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func writeReplica(t *testing.T, bs blocks.Store, id blocks.ID, data []byte) {
	t.Helper()
	ctx := context.Background()
	w, err := bs.Create(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Finalize(ctx); err != nil {
		t.Fatal(err)
	}
}

// rowsOf returns DataNode id's replica rows by block.
func rowsOf(t *testing.T, reg *registry.Registry, id uint64) map[uint64]store.Replica {
	t.Helper()
	reps, err := reg.NodeReplicas(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	m := map[uint64]store.Replica{}
	for _, p := range reps {
		m[p.Block] = p
	}
	return m
}

func TestReportsFollowReplicas(t *testing.T) {
	st := openStore(t)
	reg, err := registry.New(st, registry.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	d := start(t, testConfig(dir), st)
	ctx := context.Background()
	bs := d.Blocks()
	id := d.ID()

	// Created, then finalized: the row follows.
	w, err := bs.Create(ctx, blocks.ID{Block: 100, GenStamp: 1})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "a created replica's row", func() (bool, string) {
		r, ok := rowsOf(t, reg, id)[100]
		return ok && r.State == store.ReplicaBeingWritten, r.State.String()
	})
	if _, err := w.Write(bytes.Repeat([]byte("x"), 1500)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Finalize(ctx); err != nil {
		t.Fatal(err)
	}
	writeReplica(t, bs, blocks.ID{Block: 101, GenStamp: 7}, []byte("hello"))
	eventually(t, "finalized replicas' rows", func() (bool, string) {
		rows := rowsOf(t, reg, id)
		a, b := rows[100], rows[101]
		return a.State == store.ReplicaFinalized && a.Length == 1500 && b.GenStamp == 7 && b.Length == 5, ""
	})
	// Appended under a new stamp, truncated, deleted.
	aw, err := bs.OpenAppend(ctx, blocks.ID{Block: 101, GenStamp: 7}, 8)
	if err != nil {
		t.Fatal(err)
	}
	aw.Write([]byte(" world"))
	if _, err := aw.Finalize(ctx); err != nil {
		t.Fatal(err)
	}
	if err := bs.Truncate(ctx, blocks.ID{Block: 100, GenStamp: 1}, 10, 2); err != nil {
		t.Fatal(err)
	}
	eventually(t, "appended and truncated rows", func() (bool, string) {
		rows := rowsOf(t, reg, id)
		a, b := rows[100], rows[101]
		return a.GenStamp == 2 && a.Length == 10 && b.GenStamp == 8 && b.Length == 11, ""
	})
	// A delete under a stale stamp changes nothing; under the right one, the row goes.
	if err := bs.Delete(ctx, blocks.ID{Block: 101, GenStamp: 7}); err != nil {
		t.Fatal(err)
	}
	if err := bs.Delete(ctx, blocks.ID{Block: 100, GenStamp: 2}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a deleted replica's row gone", func() (bool, string) {
		rows := rowsOf(t, reg, id)
		_, a := rows[100]
		_, b := rows[101]
		return !a && b, ""
	})
	// A read that meets a corrupt chunk marks the replica corrupt.
	if err := bs.(blocks.Corrupter).Corrupt(ctx, blocks.ID{Block: 101, GenStamp: 8}, 3); err != nil {
		t.Fatal(err)
	}
	rc, err := bs.Read(ctx, blocks.ID{Block: 101, GenStamp: 8}, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(rc); !errors.Is(err, blocks.ErrCorrupt) {
		t.Fatalf("read of a corrupt replica: %v", err)
	}
	rc.Close()
	eventually(t, "a corrupt replica's row", func() (bool, string) {
		r := rowsOf(t, reg, id)[101]
		return r.State == store.ReplicaCorrupt, r.State.String()
	})
	// ... and full reports keep saying so.
	reports := testutil.ToFloat64(d.m.fullReports)
	d.TriggerFullReport()
	eventually(t, "a full report", func() (bool, string) { return testutil.ToFloat64(d.m.fullReports) > reports, "" })
	eventually(t, "corrupt after a full report", func() (bool, string) {
		r := rowsOf(t, reg, id)[101]
		return r.State == store.ReplicaCorrupt, r.State.String()
	})

	// Its row beats, with its figures.
	first, err := reg.DataNode(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "beats", func() (bool, string) {
		n, err := reg.DataNode(ctx, id)
		return err == nil && n.Beat > first.Beat+2 && n.Liveness == registry.Live, n.Liveness.String()
	})
	n, _ := reg.DataNode(ctx, id)
	if n.Zone != "z1" || n.Capacity <= 0 || n.Remaining <= 0 || n.Full || n.Failed || n.UUID != d.UUID() ||
		n.DataAddr != d.DataAddr() || !strings.HasPrefix(n.DataAddr, "127.0.0.1:") {
		t.Fatalf("row %+v", n.DataNode)
	}
}

// A restart finds its replicas and its identity, and its first full report
// puts right rows that went missing or that name replicas it lost.
func TestRestartReconciles(t *testing.T) {
	st := openStore(t)
	reg, err := registry.New(st, registry.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := testConfig(dir)
	d := start(t, cfg, st)
	for b := uint64(1); b <= 8; b++ {
		writeReplica(t, d.Blocks(), blocks.ID{Block: b, GenStamp: 1}, bytes.Repeat([]byte{byte(b)}, int(b)*100))
	}
	id, uuid := d.ID(), d.UUID()
	eventually(t, "8 rows", func() (bool, string) { return len(rowsOf(t, reg, id)) == 8, "" })
	d.stop()

	// Rows lost and rows of replicas it never had.
	ctx := context.Background()
	txn, _ := st.Begin(ctx)
	txn.Delete(store.ReplicaKey(3, id))
	txn.Delete(store.NodeReplicaKey(id, 3))
	bogus := store.EncodeReplica(nil, &store.Replica{GenStamp: 9, Length: 1, State: store.ReplicaFinalized})
	txn.Put(store.ReplicaKey(50, id), bogus)
	txn.Put(store.NodeReplicaKey(id, 50), bogus)
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	cfg2 := testConfig(dir)
	d2 := start(t, cfg2, st)
	if d2.ID() != id || d2.UUID() != uuid {
		t.Fatalf("restarted as %d %s, was %d %s", d2.ID(), d2.UUID(), id, uuid)
	}
	eventually(t, "rows reconciled", func() (bool, string) {
		rows := rowsOf(t, reg, id)
		_, lost := rows[3]
		_, bogus := rows[50]
		return len(rows) == 8 && lost && !bogus && rows[8].Length == 800, ""
	})
	n, err := reg.DataNode(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "usage counted", func() (bool, string) {
		n, _ = reg.DataNode(ctx, id)
		return n.Used >= 3600, "" // 100+...+800 bytes of data, plus checksums
	})
}

func TestStorageRefusals(t *testing.T) {
	st := openStore(t)
	dir := t.TempDir()
	d := start(t, testConfig(dir), st)

	// A second DataNode on the same directory.
	if _, err := New(context.Background(), testConfig(dir), st); !errors.Is(err, ErrInUse) {
		t.Fatalf("a second DataNode on %s: %v, want ErrInUse", dir, err)
	}
	d.stop()

	// The directory, offered to another cluster's store.
	other := openStore(t)
	_, err := New(context.Background(), testConfig(dir), other)
	if !errors.Is(err, ErrOtherCluster) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("another cluster's directory: %v, want ErrOtherCluster naming %s", err, dir)
	}
	// Nothing of it was changed: it still starts on its own store.
	d2 := start(t, testConfig(dir), st)
	d2.stop()

	// A VERSION that does not parse, another layout, a current/ without VERSION.
	bad := t.TempDir()
	os.MkdirAll(filepath.Join(bad, "current"), 0o755)
	os.WriteFile(filepath.Join(bad, "current", "VERSION"), []byte("storageType=NAME_NODE\n"), 0o644)
	if _, err := New(context.Background(), testConfig(bad), st); !errors.Is(err, ErrBadStorage) {
		t.Fatalf("a NameNode's VERSION: %v, want ErrBadStorage", err)
	}
	c, err := registry.LoadCluster(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	v := Version{StorageID: "DS-x", ClusterID: c.ID, DataNodeUUID: "x", LayoutVersion: -56}
	os.WriteFile(filepath.Join(bad, "current", "VERSION"), v.Format(time.Now()), 0o644)
	if _, err := New(context.Background(), testConfig(bad), st); !errors.Is(err, ErrBadStorage) || !strings.Contains(err.Error(), "-56") {
		t.Fatalf("layout -56: %v, want ErrBadStorage", err)
	}
	os.Remove(filepath.Join(bad, "current", "VERSION"))
	os.WriteFile(filepath.Join(bad, "current", "blk_1"), []byte("x"), 0o644)
	if _, err := New(context.Background(), testConfig(bad), st); !errors.Is(err, ErrBadStorage) {
		t.Fatalf("current/ without VERSION: %v, want ErrBadStorage", err)
	}
}

func TestVersionFile(t *testing.T) {
	v := Version{StorageID: "DS-1", ClusterID: "CID-2", CTime: 0, DataNodeUUID: "3", LayoutVersion: LayoutVersion}
	b := v.Format(time.Unix(1764000000, 0))
	if !bytes.Contains(b, []byte("storageType=DATA_NODE\n")) || !bytes.HasPrefix(b, []byte("#")) {
		t.Fatalf("VERSION:\n%s", b)
	}
	got, err := ParseVersion(b)
	if err != nil || got != v {
		t.Fatalf("parsed %+v, %v; want %+v", got, err, v)
	}
	// HDFS's own file (Hadoop 3.4's DataNode writes this).
	hdfs := "#Mon Dec 07 23:00:00 UTC 2026\nstorageID=DS-a\nclusterID=CID-b\ncTime=0\ndatanodeUuid=c\nstorageType=DATA_NODE\nlayoutVersion=-57\n"
	if got, err := ParseVersion([]byte(hdfs)); err != nil || got.DataNodeUUID != "c" || got.LayoutVersion != -57 {
		t.Fatalf("HDFS's VERSION: %+v, %v", got, err)
	}
	for _, bad := range []string{"", "storageType=DATA_NODE\n", "junk\n", strings.Replace(hdfs, "cTime=0", "cTime=x", 1),
		strings.Replace(hdfs, "clusterID=CID-b", "clusterID=", 1)} {
		if _, err := ParseVersion([]byte(bad)); err == nil {
			t.Errorf("ParseVersion(%q) accepted it", bad)
		}
	}
}

func FuzzParseVersion(f *testing.F) {
	f.Add(Version{StorageID: "DS-1", ClusterID: "CID-2", DataNodeUUID: "3", LayoutVersion: LayoutVersion}.Format(time.Unix(0, 0)))
	f.Add([]byte("storageType=DATA_NODE\ncTime=1\nlayoutVersion=-57\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseVersion(b)
		if err != nil {
			return
		}
		// What parses formats and parses back the same.
		v2, err := ParseVersion(v.Format(time.Unix(0, 0)))
		if err != nil || v2 != v {
			t.Fatalf("round trip of %+v: %+v, %v", v, v2, err)
		}
	})
}

// The HTTP port answers /healthz and /metrics; the data port serves
// dataxfer with block tokens; a configured data server is given the
// reporting store and counts transfers into heartbeats.
func TestPorts(t *testing.T) {
	st := openStore(t)
	reg, err := registry.New(st, registry.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t.TempDir())
	d := start(t, cfg, st)
	for path, want := range map[string]string{"/healthz": "ok datanode", "/metrics": "nimbus_datanode_heartbeats_total"} {
		resp, err := http.Get("http://" + d.HTTPAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
		}
	}
	// The default data server (dataxfer) checks block tokens: a read
	// without one is refused, a read with one issued under the cluster
	// secret gets the replica.
	id := blocks.ID{Block: 77, GenStamp: 3}
	writeReplica(t, d.Blocks(), id, []byte("served"))
	blk := dataxfer.Block{Pool: d.Cluster().BlockPoolID, ID: id.Block, GenStamp: id.GenStamp}
	var xc dataxfer.Client
	if _, err := xc.ReadBlock(context.Background(), d.DataAddr(), blk, blocktoken.Token{}, 0, -1); !errors.Is(err, dataxfer.ErrAccessToken) {
		t.Fatalf("read without a token: %v, want ErrAccessToken", err)
	}
	secret, err := clusterauth.LoadSecret(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	tok := blocktoken.NewManager([32]byte(secret), 5, nil).IssueFor("u", blk.Pool, blk.ID, time.Minute, blocktoken.Read)
	br, err := xc.ReadBlock(context.Background(), d.DataAddr(), blk, tok, 0, 6)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(br)
	br.Close()
	if err != nil || string(got) != "served" {
		t.Fatalf("read with a token: %q, %v", got, err)
	}
	d.stop()

	// With a data server of the test's.
	fs := &fakeServer{stop: make(chan struct{})}
	cfg = testConfig(t.TempDir())
	cfg.NewDataServer = func(env DataServerEnv) (DataServer, error) { fs.env = env; return fs, nil }
	d = start(t, cfg, st)
	done := fs.env.TransferStarted()
	fs.env.TransferStarted()
	eventually(t, "transfers in the heartbeat", func() (bool, string) {
		n, err := reg.DataNode(context.Background(), d.ID())
		return err == nil && n.Transfers == 2, ""
	})
	done()
	done() // a second call does not count twice
	eventually(t, "a transfer done", func() (bool, string) {
		n, err := reg.DataNode(context.Background(), d.ID())
		return err == nil && n.Transfers == 1, ""
	})
	writeReplica(t, fs.env.Store, blocks.ID{Block: 5, GenStamp: 1}, []byte("abc"))
	eventually(t, "the server's replica reported", func() (bool, string) {
		r, ok := rowsOf(t, reg, d.ID())[5]
		return ok && r.State == store.ReplicaFinalized && r.Length == 3, ""
	})
	d.stop()
	if !fs.closed() {
		t.Fatal("the data server was not closed")
	}
}

type fakeServer struct {
	env  DataServerEnv
	stop chan struct{}
	mu   sync.Mutex
	c    bool
}

func (s *fakeServer) Serve(l net.Listener) error {
	<-s.stop
	return net.ErrClosed
}

func (s *fakeServer) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.c {
		close(s.stop)
	}
	s.c = true
	return nil
}

func (s *fakeServer) closed() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.c }

// A volume with less free space than the reserve is full.
func TestFullVolume(t *testing.T) {
	st := openStore(t)
	reg, err := registry.New(st, registry.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t.TempDir())
	cfg.Reserved = 1 << 62
	d := start(t, cfg, st)
	n, err := reg.DataNode(context.Background(), d.ID())
	if err != nil {
		t.Fatal(err)
	}
	if !n.Full || n.Remaining != 0 || n.Capacity != 0 {
		t.Fatalf("a volume under its reserve: %+v", n.DataNode)
	}
}

// A storage directory whose VERSION is removed marks the DataNode failed
// in its heartbeats and unhealthy on /healthz; put back, it recovers.
func TestFailedStorage(t *testing.T) {
	st := openStore(t)
	reg, err := registry.New(st, registry.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	d := start(t, testConfig(dir), st)
	version := filepath.Join(dir, "current", "VERSION")
	saved, err := os.ReadFile(version)
	if err != nil {
		t.Fatal(err)
	}
	healthz := func() int {
		resp, err := http.Get("http://" + d.HTTPAddr() + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	hidden := version + ".hidden"
	if err := os.Rename(version, hidden); err != nil {
		t.Fatal(err)
	}
	eventually(t, "failed in the row", func() (bool, string) {
		n, err := reg.DataNode(context.Background(), d.ID())
		return err == nil && n.Failed, ""
	})
	if code := healthz(); code != http.StatusServiceUnavailable {
		t.Fatalf("/healthz with the VERSION gone: %d", code)
	}
	// The same file back (a rename keeps its identity): healthy again.
	if err := os.Rename(hidden, version); err != nil {
		t.Fatal(err)
	}
	eventually(t, "not failed in the row", func() (bool, string) {
		n, err := reg.DataNode(context.Background(), d.ID())
		return err == nil && !n.Failed, ""
	})
	if code := healthz(); code != http.StatusOK {
		t.Fatalf("/healthz with the VERSION back: %d", code)
	}
	// A copy is another file: the directory was replaced. (Written before
	// the old one goes, so that it cannot take the old one's inode.)
	if err := os.WriteFile(version+".copy", saved, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(version+".copy", version); err != nil {
		t.Fatal(err)
	}
	eventually(t, "failed after a replacement", func() (bool, string) {
		n, err := reg.DataNode(context.Background(), d.ID())
		return err == nil && n.Failed, ""
	})
}

// Writers change replicas while full reports run one after another; then
// the full reports stop and the writers go on: the incremental reports
// alone must bring the rows to what is on disk, including the changes
// queued across the full reports (applied after them, so that the last
// word on each block is its latest change).
func TestRowsConvergeUnderChurn(t *testing.T) {
	st := openStore(t)
	reg, err := registry.New(st, registry.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t.TempDir())
	cfg.FullReportInterval = time.Hour // only the ones this test asks for
	d := start(t, cfg, st)
	ctx := context.Background()
	bs := d.Blocks()

	// churn runs 4 writers, each n random changes of its own 20 blocks.
	churn := func(seed uint64, n int) {
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				rng := mrand.New(mrand.NewPCG(seed, uint64(g)))
				for range n {
					if err := change(ctx, d, bs, uint64(g*1000)+rng.Uint64N(20), rng); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}

	stop := make(chan struct{})
	var trigger sync.WaitGroup
	trigger.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				d.TriggerFullReport()
			}
		}
	})
	churn(1, 150)
	close(stop)
	trigger.Wait()
	if t.Failed() {
		return
	}
	eventually(t, "the full reports asked for", func() (bool, string) {
		return d.fullAsked.Load() == d.fullAnswered.Load(), ""
	})
	reports := testutil.ToFloat64(d.m.fullReports)
	if reports < 2 {
		t.Fatalf("%v full reports during the churn; the test needs several", reports)
	}
	churn(2, 100)
	if t.Failed() {
		return
	}
	disk := map[uint64]blocks.Replica{}
	if err := d.local.Report(ctx, func(r blocks.Replica) error { disk[r.ID.Block] = r; return nil }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "rows equal to the disk", func() (bool, string) {
		rows := rowsOf(t, reg, d.ID())
		if len(rows) != len(disk) {
			return false, fmt.Sprintf("%d rows, %d replicas", len(rows), len(disk))
		}
		for b, r := range disk {
			row, ok := rows[b]
			want := store.ReplicaFinalized
			if r.State == blocks.BeingWritten {
				want = store.ReplicaBeingWritten
			}
			// (A replica left being written is reported at its creation
			// and reopening, not at each write: its row's length is
			// compared only once finalized.)
			if !ok || row.GenStamp != r.ID.GenStamp || row.State != want || (want == store.ReplicaFinalized && row.Length != r.Length) {
				return false, fmt.Sprintf("blk_%d: row %+v, replica %+v", b, row, r)
			}
		}
		return true, ""
	})
	if n := testutil.ToFloat64(d.m.fullReports); n != reports {
		t.Fatalf("a full report ran after the churn (%v, then %v): the incremental reports were not tested alone", reports, n)
	}
}

// change makes one random change to block b through bs: create it (left
// being written or finalized) when it is not there, else delete it,
// append to it (finalized) or recover it (being written).
func change(ctx context.Context, d *running, bs blocks.Store, b uint64, rng *mrand.Rand) error {
	var rep blocks.Replica
	found := false
	if err := d.local.Report(ctx, func(r blocks.Replica) error {
		if r.ID.Block == b {
			rep, found = r, true
		}
		return nil
	}); err != nil {
		return err
	}
	if !found {
		w, err := bs.Create(ctx, blocks.ID{Block: b, GenStamp: 1})
		if err != nil {
			return err
		}
		w.Write(make([]byte, rng.IntN(2000)))
		if rng.IntN(4) == 0 {
			return w.Close() // left being written
		}
		_, err = w.Finalize(ctx)
		return err
	}
	switch {
	case rng.IntN(2) == 0:
		return bs.Delete(ctx, rep.ID)
	case rep.State == blocks.Finalized:
		w, err := bs.OpenAppend(ctx, rep.ID, rep.ID.GenStamp+1)
		if err != nil {
			return err
		}
		w.Write(make([]byte, rng.IntN(700)))
		_, err = w.Finalize(ctx)
		return err
	default:
		_, err := bs.Recover(ctx, rep.ID, rep.ID.GenStamp+1)
		return err
	}
}
