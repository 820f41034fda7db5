package namespace

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/blocks/local"
	"github.com/nimbus-fs/nimbus/coordinator"
	"github.com/nimbus-fs/nimbus/coordinator/memcoord"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// electedMonitors runs the lease monitor of each engine as the duty of one
// election in an in-process coordinator, the first engine campaigning
// first (it leads), the way `nimbus serve` runs it.
func electedMonitors(t *testing.T, es ...*Engine) []coordinator.Session {
	t.Helper()
	c, err := memcoord.New(memcoord.DefaultConfig())
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		c.Close()
	})
	var out []coordinator.Session
	for i, e := range es {
		s, err := c.Join(ctx, coordinator.Member{ID: string(rune('a' + i))})
		must(t, err)
		out = append(out, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			coordinator.RunDuty(ctx, s, coordinator.Duty{Election: "lease-monitor", Run: e.RunLeaseMonitor})
		}()
		if i == 0 {
			for { // the first leads before the others campaign
				m, ok, err := c.Leader(ctx, "lease-monitor")
				must(t, err)
				if ok && m.ID == "a" {
					break
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
	return out
}

// TestElectedMonitorJudgesRenewalsThroughAnother: the writer renews through
// NameNode a; the lease monitor runs on NameNode b alone (it leads the
// election; a runs none). b does not recover the live lease, since a writes
// the renewals to the store's renewal rows; once the writer goes silent, b
// recovers the file after the hard limit, and a never recovered anything.
func TestElectedMonitorJudgesRenewalsThroughAnother(t *testing.T) {
	a, b, _ := twoEnginesWith(t, func(c *Config) {
		c.LeaseSoftLimit = 200 * time.Millisecond
		c.LeaseHardLimit = 600 * time.Millisecond
		c.LeaseCheckInterval = 50 * time.Millisecond
		c.LeaseMonitor = false
	})
	electedMonitors(t, b, a)
	ctx := context.Background()
	must(t, a.Mkdirs(ctx, root, "/w", 0o777))
	alice := meta.User{Name: "alice"}
	_, err := a.Create(ctx, alice, "/w/f", meta.CreateOptions{Client: "writer"})
	must(t, err)
	must(t, a.Write(ctx, alice, "/w/f", "writer", 0, []byte("durable")))
	until := time.Now().Add(3 * a.cfg.LeaseHardLimit)
	for time.Now().Before(until) {
		must(t, a.RenewLease(ctx, alice, "writer"))
		st, err := b.Stat(ctx, root, "/w/f")
		must(t, err)
		if !st.UnderConstruction {
			t.Fatal("the elected monitor (b) recovered a file whose writer renews through a")
		}
		time.Sleep(30 * time.Millisecond)
	}
	if testutil.ToFloat64(b.metrics.monitorLeader) != 1 || testutil.ToFloat64(a.metrics.monitorLeader) != 0 {
		t.Fatalf("lease_monitor_leader: b %v, a %v; want 1, 0",
			testutil.ToFloat64(b.metrics.monitorLeader), testutil.ToFloat64(a.metrics.monitorLeader))
	}
	// The writer goes silent.
	for {
		st, err := a.Stat(ctx, root, "/w/f")
		must(t, err)
		if !st.UnderConstruction {
			if st.Length != 7 {
				t.Fatalf("recovered at length %d, want 7", st.Length)
			}
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := testutil.ToFloat64(b.metrics.recovered); got != 1 {
		t.Fatalf("b recovered %v files, want 1", got)
	}
	if got := testutil.ToFloat64(a.metrics.recovered); got != 0 {
		t.Fatalf("a, which does not lead, recovered %v files", got)
	}
	fsckClean(t, a)
}

// TestStaleMonitorRecoveryIsHarmless: a monitor lists a lease as expired,
// then pauses (its leadership may end meanwhile); the writer renews through
// another NameNode; the paused monitor's recovery then runs, judges the
// lease again in its transaction, and leaves the file open.
func TestStaleMonitorRecoveryIsHarmless(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Unix(1_000_000, 0).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	a, b, _ := twoEnginesWith(t, func(c *Config) {
		c.LeaseMonitor = false
		c.Now = clock
	})
	ctx := context.Background()
	alice := meta.User{Name: "alice"}
	must(t, a.Mkdirs(ctx, root, "/w", 0o777))
	_, err := a.Create(ctx, root, "/w/f", meta.CreateOptions{Client: "writer"})
	must(t, err)
	_, err = a.Create(ctx, alice, "/w/g", meta.CreateOptions{Client: "writer"})
	must(t, err)
	now.Add(int64(a.cfg.LeaseHardLimit + time.Second))

	// b's monitor makes its list: both expired.
	txn, err := b.st.Begin(ctx)
	must(t, err)
	ls, err := scanLeases(ctx, txn, "")
	txn.Rollback()
	must(t, err)
	if len(ls) != 2 {
		t.Fatalf("%d leases, want 2", len(ls))
	}
	// alice's writer renews through a while b is paused.
	must(t, a.RenewLease(ctx, alice, "writer"))
	for _, l := range ls {
		must(t, b.recoverLease(ctx, l))
	}
	g, err := b.Stat(ctx, root, "/w/g")
	must(t, err)
	if !g.UnderConstruction {
		t.Fatal("a stale monitor's recovery closed a file whose writer renewed after the list was made")
	}
	f, err := b.Stat(ctx, root, "/w/f")
	must(t, err)
	if f.UnderConstruction {
		t.Fatal("the silent writer's file was not recovered")
	}
	// A second monitor (the new leader) recovering the same list does
	// nothing more.
	for _, l := range ls {
		must(t, a.recoverLease(ctx, l))
	}
	if got := testutil.ToFloat64(a.metrics.recovered) + testutil.ToFloat64(b.metrics.recovered); got != 1 {
		t.Fatalf("%v recoveries, want 1", got)
	}
	fsckClean(t, a)
}

// twoBlockEngines is twoEngines with a DataNode (blocks/local) of each
// engine's own, as each `nimbus serve` on a shared store has under --data.
func twoBlockEngines(t *testing.T, set func(*Config)) (a, b *Engine, abs, bbs *local.Store) {
	t.Helper()
	var dns []*local.Store
	for range 2 {
		bs, err := local.Open(filepath.Join(t.TempDir(), "blocks"), local.DefaultConfig())
		must(t, err)
		dns = append(dns, bs)
	}
	n := 0
	a, b, _ = twoEnginesWith(t, func(c *Config) {
		c.InlineThreshold = 1000
		c.SyncEvery = 3000
		c.MinBlockSize = 0
		c.Blocks = dns[n]
		n++
		set(c)
	})
	t.Cleanup(func() {
		for _, bs := range dns {
			bs.Close()
		}
	})
	return a, b, dns[0], dns[1]
}

// TestBlockStreamStaysWithItsNameNode: a block file written through a is
// written only through a: a write or a complete through b fails with a
// lease error saying where the stream is, changes nothing, and a's stream
// goes on; recovery through b (its lease monitor) cannot reach a's replica
// and leaves the file open rather than closing it short; recovery where
// the replica is closes it at its durable length.
func TestBlockStreamStaysWithItsNameNode(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Unix(1_000_000, 0).UnixNano())
	a, b, _, _ := twoBlockEngines(t, func(c *Config) {
		c.LeaseMonitor = false
		c.Now = func() time.Time { return time.Unix(0, now.Load()) }
	})
	ctx := context.Background()
	_, err := a.Create(ctx, root, "/f", meta.CreateOptions{Client: "w", BlockSize: 4096})
	must(t, err)
	data := randomBytes(6000, 1)
	writeChunks(t, a, "/f", "w", 0, data[:5000], 1000)

	err = b.Write(ctx, root, "/f", "w", 5000, data[5000:])
	wantKind(t, err, meta.ErrLease)
	if !strings.Contains(err.Error(), "holds no block stream") {
		t.Fatalf("a write through the other NameNode: %v", err)
	}
	_, err = b.Complete(ctx, root, "/f", "w")
	wantKind(t, err, meta.ErrLease)
	if !strings.Contains(err.Error(), "no replica on this NameNode's DataNode") {
		t.Fatalf("a complete through the other NameNode: %v", err)
	}
	writeChunks(t, a, "/f", "w", 5000, data[5000:], 1000)

	// The writer goes silent; b leads the monitor: it cannot recover.
	now.Add(int64(a.cfg.LeaseHardLimit + time.Second))
	if err := b.RecoverExpiredLeases(ctx); err == nil || !strings.Contains(err.Error(), "no replica on this NameNode's DataNode") {
		t.Fatalf("recovery away from the replica: %v", err)
	}
	st, err := b.Stat(ctx, root, "/f")
	must(t, err)
	if !st.UnderConstruction {
		t.Fatalf("recovery away from the replica closed the file at %d bytes", st.Length)
	}
	// Where the replica is, recovery keeps what was synced: SyncEvery is
	// 3000, the first block (4096) was finalized, the second holds 1904
	// bytes of which 0 or more were synced; at least the first block's.
	must(t, a.RecoverExpiredLeases(ctx))
	st, err = a.Stat(ctx, root, "/f")
	must(t, err)
	if st.UnderConstruction || st.Length < 4096 || st.Length > 6000 {
		t.Fatalf("after recovery where the replica is: %+v", st)
	}
	if got := readAll(t, a, "/f"); string(got) != string(data[:st.Length]) {
		t.Fatalf("recovered bytes differ from the ones written")
	}
	fsckClean(t, a)
}

// TestRemoveOrphanBlocksWaitsForPendingRows: on a shared store a replica
// without a row goes only if it still has none after settle: one whose row
// commits meanwhile (a transaction still pending at the listing) stays, as
// does one created after the listing; a replica of the other NameNode's
// DataNode is never looked at.
func TestRemoveOrphanBlocksWaitsForPendingRows(t *testing.T) {
	a, _, abs, bbs := twoBlockEngines(t, func(*Config) {})
	ctx := context.Background()
	mk := func(bs *local.Store, id uint64) blocks.ID {
		bid := blocks.ID{Block: id, GenStamp: 1}
		w, err := bs.Create(ctx, bid)
		must(t, err)
		_, err = w.Finalize(ctx)
		must(t, err)
		return bid
	}
	orphan := mk(abs, 1<<40)
	pending := mk(abs, 1<<40+1)
	elsewhere := mk(bbs, 1<<40+2)
	var late blocks.ID
	settle := func(ctx context.Context) error {
		// The pending transaction commits its row (for a file that does
		// not exist: only the block id matters here) ...
		txn, err := a.st.Begin(ctx)
		must(t, err)
		txn.Put(store.BlockKey(1<<50, 0), store.EncodeBlock(nil, &store.Block{File: 1 << 50, ID: pending.Block, GenStamp: 1}))
		must(t, txn.Commit(ctx))
		// ... and a block is started after the listing.
		late = mk(abs, 1<<40+3)
		return nil
	}
	n, err := a.RemoveOrphanBlocks(ctx, settle)
	must(t, err)
	if n != 1 {
		t.Fatalf("removed %d replicas, want 1", n)
	}
	for _, c := range []struct {
		bs   *local.Store
		id   blocks.ID
		want bool
	}{{abs, orphan, false}, {abs, pending, true}, {abs, late, true}, {bbs, elsewhere, true}} {
		_, err := c.bs.Stat(ctx, c.id)
		if got := err == nil; got != c.want {
			t.Errorf("replica %v present %v, want %v (%v)", c.id, got, c.want, err)
		}
	}
}

// fakeLiveness is a membership that a test sets.
type fakeLiveness struct {
	mu      sync.Mutex
	members map[uint64]bool
	asked   int
}

func (f *fakeLiveness) Alive(_ context.Context, id uint64) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	return f.members[id], nil
}

func (f *fakeLiveness) set(id uint64, alive bool) {
	f.mu.Lock()
	f.members[id] = alive
	f.mu.Unlock()
}

// TestMemberKeepsStalledNameNodeAlive: with a Liveness (the coordinator), a
// NameNode whose instance row stopped moving is still alive while it is a
// member: its flag stays, and an operation below waits and gives up busy;
// once it is no member either, the flag is cleared and the operation goes
// on.
func TestMemberKeepsStalledNameNodeAlive(t *testing.T) {
	a, b, st := twoEngines(t)
	live := &fakeLiveness{members: map[uint64]bool{a.instance: true, b.instance: true}}
	b.SetLiveness(live)
	ctx := context.Background()
	must(t, a.Mkdirs(ctx, root, "/d/e", 0o755))
	id := plantFlag(t, a, st, "/d", a.instance)
	crash(a) // its row stands still, as if its beats stalled on the store
	b.cfg.SubtreeWait = 3 * b.cfg.GoneAfter
	_, err := b.Create(ctx, root, "/d/e/f", meta.CreateOptions{Client: "c"})
	wantKind(t, err, meta.ErrBusy)
	if flag, row := flagOf(t, st, store.RootID, "d", id); flag != a.instance || !row {
		t.Fatalf("a member's flag became %x (row %v): b cleared it by the instance table alone", flag, row)
	}
	live.mu.Lock()
	asked := live.asked
	live.mu.Unlock()
	if asked == 0 {
		t.Fatal("the Liveness was never asked")
	}
	live.set(a.instance, false) // a's coordinator lease expires
	b.cfg.SubtreeWait = 30 * time.Second
	if _, err := b.Create(ctx, root, "/d/e/f", meta.CreateOptions{Client: "c"}); err != nil {
		t.Fatalf("create below the flag of a NameNode that is no member: %v", err)
	}
	if flag, row := flagOf(t, st, store.RootID, "d", id); flag != 0 || row {
		t.Fatalf("the dead NameNode's flag %x (row %v) is still there", flag, row)
	}
	fsckClean(t, b)
}
