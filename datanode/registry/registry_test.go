package registry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/placement"
	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
	"github.com/nimbus-fs/nimbus/store/pgstore"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// eachStore runs fn on a fresh embedded Pebble store and on a fresh
// PostgreSQL database.
func eachStore(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Run("pebble", func(t *testing.T) {
		opts := pebblestore.DefaultOptions()
		opts.CacheSize, opts.MemTableSize = 8<<20, 4<<20
		st, err := pebblestore.Open(t.TempDir(), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		opts := pgstore.DefaultOptions()
		opts.PoolSize = 8
		opts.ScanPage = 7 // scans cross pages
		st, err := pgstore.Open(context.Background(), pgtest.DB(t), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
}

// clock is a reader's clock the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newRegistry(t *testing.T, st store.Store, batch int, clk *clock) *Registry {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Batch = batch
	if clk != nil {
		cfg.Now = clk.now
	}
	r, err := New(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func hb(uuid, zone string) Heartbeat {
	return Heartbeat{UUID: uuid, StorageID: "DS-" + uuid, Host: "host-" + uuid, DataAddr: "127.0.0.1:9866",
		HTTPAddr: "127.0.0.1:9864", Zone: zone, Version: "test", Started: time.UnixMilli(1764000000000),
		Capacity: 1000, Used: 10, Remaining: 990}
}

func TestRegisterAndHeartbeat(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		r := newRegistry(t, st, 10, nil)
		a, err := r.Register(ctx, hb("a", "z1"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := r.Register(ctx, hb("b", "z2"))
		if err != nil {
			t.Fatal(err)
		}
		if a == b || a == 0 || b == 0 {
			t.Fatalf("ids %d and %d", a, b)
		}
		// A second registration of a UUID (a restart) keeps its id and
		// moves its Beat; the admin state set meanwhile stays.
		if err := r.SetAdminState(ctx, a, store.AdminDecommissioning); err != nil {
			t.Fatal(err)
		}
		before, err := r.DataNode(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		again := hb("a", "z3")
		again.Remaining = 5
		again.Full = true
		if id, err := r.Register(ctx, again); err != nil || id != a {
			t.Fatalf("re-registration: id %d, %v; want %d", id, err, a)
		}
		after, err := r.DataNode(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if after.Beat != before.Beat+1 || after.Zone != "z3" || after.Remaining != 5 || !after.Full || after.Admin != store.AdminDecommissioning {
			t.Fatalf("after re-registration: %+v (before %+v)", after.DataNode, before.DataNode)
		}
		// Heartbeats move the Beat and carry the figures.
		h := hb("b", "z2")
		h.Transfers, h.Failed = 7, true
		for range 3 {
			if err := r.Heartbeat(ctx, b, h); err != nil {
				t.Fatal(err)
			}
		}
		got, err := r.DataNode(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if got.Beat != 4 || got.Transfers != 7 || !got.Failed || got.UUID != "b" || got.DataAddr != h.DataAddr {
			t.Fatalf("after 3 heartbeats: %+v", got.DataNode)
		}
		// Heartbeats of an unknown id, or under another UUID, are refused.
		if err := r.Heartbeat(ctx, b+100, h); !errors.Is(err, ErrUnknownDataNode) {
			t.Errorf("heartbeat of an unknown id: %v", err)
		}
		if err := r.Heartbeat(ctx, a, h); !errors.Is(err, ErrUnknownDataNode) {
			t.Errorf("heartbeat of b under a's id: %v", err)
		}
		if _, err := r.DataNode(ctx, b+100); !errors.Is(err, ErrUnknownDataNode) {
			t.Errorf("DataNode of an unknown id: %v", err)
		}
		bad := hb("", "z")
		if _, err := r.Register(ctx, bad); !errors.Is(err, ErrBadHeartbeat) {
			t.Errorf("register without a UUID: %v", err)
		}
		bad = hb("c", string(make([]byte, store.MaxDataNodeString+1)))
		if _, err := r.Register(ctx, bad); !errors.Is(err, ErrBadHeartbeat) {
			t.Errorf("register with a long zone: %v", err)
		}
		nodes, err := r.DataNodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes) != 2 || nodes[0].ID != min(a, b) || nodes[1].ID != max(a, b) {
			t.Fatalf("DataNodes: %+v", nodes)
		}
	})
}

// Many registrations of one UUID at once give one id.
func TestRegisterRace(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		r := newRegistry(t, st, 10, nil)
		ids := make([]uint64, 8)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Go(func() {
				var err error
				if ids[i], err = r.Register(ctx, hb("same", "z")); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for _, id := range ids {
			if id != ids[0] {
				t.Fatalf("one UUID got ids %v", ids)
			}
		}
		dn, err := r.DataNode(ctx, ids[0])
		if err != nil || dn.Beat != uint64(len(ids)) {
			t.Fatalf("beat %d after %d registrations, %v", dn.Beat, len(ids), err)
		}
	})
}

func TestLiveness(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		clk := &clock{t: time.Unix(1000, 0)}
		w := newRegistry(t, st, 10, nil) // the DataNode's side
		r := newRegistry(t, st, 10, clk) // a NameNode's, on its own clock
		id, err := w.Register(ctx, hb("a", "z"))
		if err != nil {
			t.Fatal(err)
		}
		want := func(l Liveness) {
			t.Helper()
			n, err := r.DataNode(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if n.Liveness != l {
				t.Fatalf("at +%v: %v (silent %v), want %v", clk.now().Sub(time.Unix(1000, 0)), n.Liveness, n.Silent, l)
			}
		}
		want(Stale) // first sight: not seen moving
		clk.add(time.Second)
		want(Stale)
		if err := w.Heartbeat(ctx, id, hb("a", "z")); err != nil {
			t.Fatal(err)
		}
		want(Live)
		clk.add(r.cfg.StaleAfter - time.Millisecond)
		want(Live)
		clk.add(time.Millisecond)
		want(Stale)
		clk.add(r.cfg.DeadAfter - r.cfg.StaleAfter)
		want(Dead)
		c, err := r.Counts(ctx)
		if err != nil || c.Dead != 1 || c.Live != 0 {
			t.Fatalf("counts %+v, %v", c, err)
		}
		if err := w.Heartbeat(ctx, id, hb("a", "z")); err != nil {
			t.Fatal(err)
		}
		want(Live)
		c, err = r.Counts(ctx)
		if err != nil || c.Live != 1 || c.Capacity != 1000 || c.Remaining != 990 {
			t.Fatalf("counts %+v, %v", c, err)
		}
	})
}

// model is what a DataNode's replica rows must be: block -> replica.
type model map[uint64]Reported

func randomReplicas(rng *rand.Rand, n int, maxBlock uint64) model {
	m := model{}
	for range n {
		b := rng.Uint64N(maxBlock) + 1
		m[b] = Reported{Block: b, GenStamp: rng.Uint64N(3) + 1000, Length: rng.Int64N(1 << 20), State: store.ReplicaState(rng.IntN(3) + 1)}
	}
	return m
}

func (m model) sorted() []Reported {
	out := make([]Reported, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Reported) int {
		switch {
		case a.Block < b.Block:
			return -1
		case a.Block > b.Block:
			return 1
		}
		return 0
	})
	return out
}

func fullReport(ctx context.Context, r *Registry, id uint64, m model) (ReportStats, error) {
	f := r.FullReport(id)
	for _, p := range m.sorted() {
		if err := f.Add(ctx, p); err != nil {
			return ReportStats{}, err
		}
	}
	return f.Finish(ctx)
}

// checkRows compares DataNode id's rows, by both indexes, with m.
func checkRows(t *testing.T, r *Registry, id uint64, m model) {
	t.Helper()
	ctx := context.Background()
	got, err := r.NodeReplicas(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := m.sorted()
	if len(got) != len(want) {
		t.Fatalf("DataNode %d: %d replica rows, want %d", id, len(got), len(want))
	}
	for i, p := range got {
		w := want[i]
		if p.Block != w.Block || p.Node != id || p.GenStamp != w.GenStamp || p.Length != w.Length || p.State != w.State {
			t.Fatalf("DataNode %d row %d: %+v, want %+v", id, i, p, w)
		}
	}
	// The by-block table holds the same rows: checked for a sample.
	for i, w := range want {
		if i%7 != 0 {
			continue
		}
		locs, err := r.Replicas(ctx, w.Block)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, l := range locs {
			if l.Node.ID == id {
				found = l.Replica.GenStamp == w.GenStamp && l.Replica.Length == w.Length && l.Replica.State == w.State
			}
		}
		if !found {
			t.Fatalf("blk_%d: DataNode %d's replica missing or different by block: %+v", w.Block, id, locs)
		}
	}
}

func TestFullReportReconciles(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		r := newRegistry(t, st, 4, nil) // small batches: every report is many transactions
		id, err := r.Register(ctx, hb("a", "z"))
		if err != nil {
			t.Fatal(err)
		}
		other, err := r.Register(ctx, hb("b", "z"))
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		otherModel := randomReplicas(rng, 30, 100)
		if _, err := fullReport(ctx, r, other, otherModel); err != nil {
			t.Fatal(err)
		}
		for round, size := range []int{0, 50, 50, 3, 0, 80, 1} {
			m := randomReplicas(rng, size, 120)
			s, err := fullReport(ctx, r, id, m)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			checkRows(t, r, id, m)
			// The same report again changes nothing.
			s2, err := fullReport(ctx, r, id, m)
			if err != nil {
				t.Fatal(err)
			}
			if s2.Written != 0 || s2.Deleted != 0 || s2.Txns != 0 || s2.Replicas != len(m) {
				t.Fatalf("round %d: a repeated report: %+v (first %+v)", round, s2, s)
			}
		}
		// Recorded rows far past the report, and far before: every
		// transaction stays within its bound.
		big := model{}
		for b := uint64(1000); b < 1040; b++ {
			big[b] = Reported{Block: b, GenStamp: 1, State: store.ReplicaFinalized}
		}
		if _, err := fullReport(ctx, r, id, big); err != nil {
			t.Fatal(err)
		}
		small := model{5000: {Block: 5000, GenStamp: 1, State: store.ReplicaBeingWritten}}
		s, err := fullReport(ctx, r, id, small)
		if err != nil {
			t.Fatal(err)
		}
		if s.Deleted != 40 || s.Written != 1 || s.Txns != 11 { // 10 rounds of 4 deletes, then the write
			t.Fatalf("replacing 40 rows by 1 in batches of 4: %+v", s)
		}
		checkRows(t, r, id, small)
		checkRows(t, r, other, otherModel) // another DataNode's rows are untouched

		// Order and domain are checked.
		f := r.FullReport(id)
		if err := f.Add(ctx, Reported{Block: 9, GenStamp: 1, State: store.ReplicaFinalized}); err != nil {
			t.Fatal(err)
		}
		if err := f.Add(ctx, Reported{Block: 9, GenStamp: 1, State: store.ReplicaFinalized}); !errors.Is(err, ErrBadReport) {
			t.Errorf("a block twice: %v", err)
		}
		if err := r.FullReport(id).Add(ctx, Reported{Block: 1, State: 9}); !errors.Is(err, ErrBadReport) {
			t.Errorf("unknown state: %v", err)
		}
		if _, err := fullReport(ctx, r, id+1000, small); !errors.Is(err, ErrUnknownDataNode) {
			t.Errorf("report of an unknown DataNode: %v", err)
		}
	})
}

func TestIncrementalReport(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		r := newRegistry(t, st, 3, nil)
		id, err := r.Register(ctx, hb("a", "z"))
		if err != nil {
			t.Fatal(err)
		}
		m := model{}
		rng := rand.New(rand.NewPCG(3, 4))
		for range 10 {
			var changes []Change
			for range rng.IntN(10) {
				b := rng.Uint64N(20)
				if rng.IntN(3) == 0 {
					changes = append(changes, Change{Reported: Reported{Block: b}, Deleted: true})
					delete(m, b)
					continue
				}
				p := Reported{Block: b, GenStamp: rng.Uint64N(5), Length: rng.Int64N(100), State: store.ReplicaState(rng.IntN(3) + 1)}
				changes = append(changes, Change{Reported: p})
				m[b] = p
			}
			if err := r.IncrementalReport(ctx, id, changes); err != nil {
				t.Fatal(err)
			}
			checkRows(t, r, id, m)
		}
		if err := r.IncrementalReport(ctx, id, []Change{{Reported: Reported{Block: 1, Length: -1, State: store.ReplicaFinalized}}}); !errors.Is(err, ErrBadReport) {
			t.Errorf("negative length: %v", err)
		}
	})
}

// Several DataNodes report at once, each its full and incremental reports
// in turn, while readers list and look up: every DataNode's rows end as
// its last reports say.
func TestConcurrentReporters(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		r := newRegistry(t, st, 5, nil)
		const nodes = 4
		models := make([]model, nodes)
		ids := make([]uint64, nodes)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		var readers sync.WaitGroup
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := r.DataNodes(ctx); err != nil {
					t.Error(err)
					return
				}
				if _, err := r.Replicas(ctx, 7); err != nil {
					t.Error(err)
					return
				}
			}
		})
		for n := range nodes {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(n), 9))
				id, err := r.Register(ctx, hb(fmt.Sprintf("dn-%d", n), fmt.Sprintf("z%d", n%2)))
				if err != nil {
					t.Error(err)
					return
				}
				ids[n] = id
				m := model{}
				for step := range 12 {
					if step%4 == 0 {
						m = randomReplicas(rng, rng.IntN(40), 60)
						if _, err := fullReport(ctx, r, id, m); err != nil {
							t.Error(err)
							return
						}
						continue
					}
					var changes []Change
					for range rng.IntN(8) + 1 {
						b := rng.Uint64N(60) + 1
						if rng.IntN(2) == 0 {
							changes = append(changes, Change{Reported: Reported{Block: b}, Deleted: true})
							delete(m, b)
						} else {
							p := Reported{Block: b, GenStamp: 2000, Length: int64(step), State: store.ReplicaFinalized}
							changes = append(changes, Change{Reported: p})
							m[b] = p
						}
					}
					if err := r.IncrementalReport(ctx, id, changes); err != nil {
						t.Error(err)
						return
					}
					if err := r.Heartbeat(ctx, id, hb(fmt.Sprintf("dn-%d", n), "z")); err != nil {
						t.Error(err)
						return
					}
				}
				models[n] = m
			})
		}
		wg.Wait()
		close(stop)
		readers.Wait()
		if t.Failed() {
			return
		}
		for n := range nodes {
			checkRows(t, r, ids[n], models[n])
		}
	})
}

func TestLoadCluster(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		got := make([]Cluster, 6)
		var wg sync.WaitGroup
		for i := range got {
			wg.Go(func() {
				var err error
				if got[i], err = LoadCluster(ctx, st); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for _, c := range got {
			if c != got[0] || len(c.ID) != len("CID-")+36 || len(c.BlockPoolID) < 10 {
				t.Fatalf("processes starting together got %+v", got)
			}
		}
		again, err := LoadCluster(ctx, st)
		if err != nil || again != got[0] {
			t.Fatalf("read again: %+v, %v; want %+v", again, err, got[0])
		}
	})
}

// The enums of placement and of the registry and store agree, so that
// PlacementNode converts by value.
func TestPlacementNode(t *testing.T) {
	for _, tc := range []struct {
		l  Liveness
		pl placement.Liveness
	}{{Live, placement.Live}, {Stale, placement.Stale}, {Dead, placement.Dead}} {
		if got := (Info{Liveness: tc.l}).PlacementNode().Liveness; got != tc.pl {
			t.Errorf("%v -> %v, want %v", tc.l, got, tc.pl)
		}
	}
	for _, tc := range []struct {
		a  store.AdminState
		pa placement.Admin
	}{{store.AdminNormal, placement.InService}, {store.AdminDecommissioning, placement.Decommissioning}, {store.AdminDecommissioned, placement.Decommissioned}} {
		if got := (Info{DataNode: store.DataNode{Admin: tc.a}}).PlacementNode().Admin; got != tc.pa {
			t.Errorf("%v -> %v, want %v", tc.a, got, tc.pa)
		}
	}
	n := Info{DataNode: store.DataNode{ID: 3, Host: "h", Zone: "z", Remaining: 9, Transfers: 2, Full: true, Failed: true}}.PlacementNode()
	if n != (placement.Node{ID: 3, Host: "h", Zone: "z", Remaining: 9, Transfers: 2, Full: true, Failed: true}) {
		t.Errorf("converted %+v", n)
	}
}

func TestReplicasOf(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		r := newRegistry(t, st, 10, nil)
		a, err := r.Register(ctx, hb("a", "z1"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := r.Register(ctx, hb("b", "z2"))
		if err != nil {
			t.Fatal(err)
		}
		fin := func(block uint64) Change {
			return Change{Reported: Reported{Block: block, GenStamp: 5, Length: 10, State: store.ReplicaFinalized}}
		}
		if err := r.IncrementalReport(ctx, a, []Change{fin(1), fin(2)}); err != nil {
			t.Fatal(err)
		}
		if err := r.IncrementalReport(ctx, b, []Change{fin(1)}); err != nil {
			t.Fatal(err)
		}
		got, err := r.ReplicasOf(ctx, []uint64{1, 2, 3, 1})
		if err != nil {
			t.Fatal(err)
		}
		lens := []int{len(got[0]), len(got[1]), len(got[2]), len(got[3])}
		if !slices.Equal(lens, []int{2, 1, 0, 2}) {
			t.Fatalf("replica counts %v, want [2 1 0 2]", lens)
		}
		one, err := r.Replicas(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range got[0] {
			if l.Replica != one[i].Replica || l.Node.ID != one[i].Node.ID || l.Node.Zone != one[i].Node.Zone {
				t.Fatalf("ReplicasOf %+v, Replicas %+v", got[0], one)
			}
		}
		if got[1][0].Node.ID != a || got[1][0].Replica.Block != 2 || got[1][0].Replica.Node != a {
			t.Fatalf("blk_2: %+v", got[1])
		}
	})
}

func TestForget(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		r := newRegistry(t, st, 4, nil)
		a, err := r.Register(ctx, hb("a", "z1"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := r.Register(ctx, hb("b", "z1"))
		if err != nil {
			t.Fatal(err)
		}
		ma := randomReplicas(rand.New(rand.NewPCG(5, 5)), 30, 100)
		mb := randomReplicas(rand.New(rand.NewPCG(6, 6)), 30, 100)
		if _, err := fullReport(ctx, r, a, ma); err != nil {
			t.Fatal(err)
		}
		if _, err := fullReport(ctx, r, b, mb); err != nil {
			t.Fatal(err)
		}
		if err := r.Forget(ctx, a); err != nil {
			t.Fatal(err)
		}
		checkRows(t, r, a, model{})
		checkRows(t, r, b, mb)
		if _, err := r.DataNode(ctx, a); !errors.Is(err, ErrUnknownDataNode) {
			t.Fatalf("a forgotten DataNode: %v", err)
		}
		start, end := store.AllReplicasRange()
		txn, _ := st.Begin(ctx)
		defer txn.Rollback()
		txn.Scan(ctx, start, end, 0, func(k, _ []byte) bool {
			if _, n, _ := store.DecodeReplicaKey(k); n == a {
				t.Errorf("row %s left", store.FormatKey(k))
			}
			return true
		})
		// Its heartbeat finds it gone; registering again gives a new id.
		if err := r.Heartbeat(ctx, a, hb("a", "z1")); !errors.Is(err, ErrUnknownDataNode) {
			t.Fatalf("heartbeat of a forgotten DataNode: %v", err)
		}
		if id, err := r.Register(ctx, hb("a", "z1")); err != nil || id == a || id == b {
			t.Fatalf("registered again as %d (%v); was %d", id, err, a)
		}
		if err := r.Forget(ctx, a); err != nil {
			t.Fatalf("forgetting twice: %v", err)
		}
	})
}
