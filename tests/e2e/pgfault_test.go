package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/meta"
)

// The fault tests of a server on PostgreSQL: the
// database restarted or failed over under a write load, and the server
// itself killed. A client's operation during a database outage must fail
// with a retryable error (meta.ErrBusy: it did not happen) or with an
// outcome-unknown error (meta.ErrOutcomeUnknown: a commit whose connection
// broke after COMMIT was sent and that the server could not settle from the
// write's request record, or a write whose reply the client lost and could
// not get by resubmitting it), or wait; never hang, never succeed without
// being durable. Busy is trusted to mean "not done": a busy write that had
// happened shows as a name in the wrong state.

// nameState is what the test knows of a name after the operations on it.
type nameState uint8

const (
	absent  nameState = iota // never made, deleted, or its making failed retryably
	present                  // made (acknowledged), or its deletion failed retryably
	maybe                    // the outcome of the last operation on it is unknown
)

// faultLoad is a write load of several clients, each in its own directory,
// making and deleting fresh names, so that every name's expected state
// follows from the outcomes of the operations on it alone.
type faultLoad struct {
	root    meta.User
	clients int
	maxOp   time.Duration // an operation taking longer hung

	mu         sync.Mutex
	names      []map[string]nameState // per client
	acked      []int                  // acknowledged operations per client
	busy       int                    // retryable failures
	unknown    int                    // outcome-unknown failures
	unexpected []string               // any other failure
	slowest    time.Duration
}

func newFaultLoad(clients int) *faultLoad {
	l := &faultLoad{root: meta.User{Name: "root"}, clients: clients, maxOp: 20 * time.Second,
		names: make([]map[string]nameState, clients), acked: make([]int, clients)}
	for c := range l.names {
		l.names[c] = map[string]nameState{}
	}
	return l
}

func (l *faultLoad) dir(c int) string { return fmt.Sprintf("/pgfault/c%d", c) }

// start makes the clients' directories, then runs the clients until ctx ends;
// wait waits for them.
func (l *faultLoad) start(t *testing.T, ctx context.Context, url string) (wait func()) {
	t.Helper()
	setup, err := client.Dial(ctx, url, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for c := 0; c < l.clients; c++ {
		if err := setup.Mkdirs(ctx, l.root, l.dir(c), 0); err != nil {
			t.Fatal(err)
		}
	}
	setup.Close()
	var wg sync.WaitGroup
	for c := 0; c < l.clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := client.Dial(ctx, url, client.Options{Conns: 1})
			if err != nil {
				t.Error(err)
				return
			}
			defer cl.Close()
			l.client(ctx, cl, c)
		}()
	}
	return wg.Wait
}

// client runs client c's steps: mkdir d<i>, create (and complete) f<i>,
// delete d<i-1> when it is known to exist.
func (l *faultLoad) client(ctx context.Context, cl *client.Client, c int) {
	dir := l.dir(c)
	lease := fmt.Sprintf("lease-pgfault-%d", c)
	for i := 0; ctx.Err() == nil; i++ {
		d, f, prev := fmt.Sprintf("d%05d", i), fmt.Sprintf("f%05d", i), fmt.Sprintf("d%05d", i-1)
		l.op(ctx, c, d, present, func(ctx context.Context) error {
			return cl.Mkdirs(ctx, l.root, dir+"/"+d, 0)
		})
		if l.op(ctx, c, f, present, func(ctx context.Context) error {
			_, err := cl.Create(ctx, l.root, dir+"/"+f, meta.CreateOptions{Client: lease})
			return err
		}) {
			// The name exists whatever becomes of the completion.
			l.op(ctx, c, "", present, func(ctx context.Context) error {
				_, err := cl.Complete(ctx, l.root, dir+"/"+f, lease)
				return err
			})
		}
		l.mu.Lock()
		prevThere := l.names[c][prev] == present
		l.mu.Unlock()
		if prevThere {
			l.op(ctx, c, prev, absent, func(ctx context.Context) error {
				return cl.Delete(ctx, l.root, dir+"/"+prev, false)
			})
		}
	}
}

// op runs one operation that, done, leaves name in state done ("" : no
// name to track), records its outcome, and reports whether it was
// acknowledged.
func (l *faultLoad) op(ctx context.Context, c int, name string, done nameState, fn func(context.Context) error) bool {
	if ctx.Err() != nil {
		return false
	}
	before := l.names[c][name] // only this client's goroutine writes its map
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.maxOp)
	start := time.Now()
	err := fn(octx)
	took := time.Since(start)
	cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.slowest = max(l.slowest, took)
	state := before
	switch kind := faultKind(err); kind {
	case "ok":
		l.acked[c]++
		state = done
	case "busy":
		l.busy++ // not done: the name keeps its state
	case "unknown":
		l.unknown++
		state = maybe
	default:
		l.unexpected = append(l.unexpected, fmt.Sprintf("client %d, %s after %v: %v", c, name, took.Round(time.Millisecond), err))
		state = maybe
	}
	if name != "" {
		l.names[c][name] = state
	}
	return err == nil
}

// faultKind classes an operation's error: "ok", "busy" (retryable: it was
// not done), "unknown" (it may or may not have been done), or "unexpected".
func faultKind(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, meta.ErrOutcomeUnknown):
		return "unknown" // the store lost the answer to COMMIT, or the client the server's
	case errors.Is(err, context.DeadlineExceeded):
		return "hung"
	case errors.Is(err, meta.ErrBusy):
		return "busy"
	}
	return "unexpected"
}

func (l *faultLoad) ackedTotal() (n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range l.acked {
		n += a
	}
	return n
}

// waitEachAcked waits until every client has had n more operations
// acknowledged than in base (from ackedNow), or fails t after timeout.
func (l *faultLoad) waitEachAcked(t *testing.T, base []int, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		l.mu.Lock()
		ok := true
		for c := range l.acked {
			ok = ok && l.acked[c] >= base[c]+n
		}
		acked := slices.Clone(l.acked)
		l.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("operations did not resume within %v: acknowledged per client %v, before %v; unexpected errors: %v", timeout, acked, base, l.unexpected)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (l *faultLoad) ackedNow() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.acked)
}

// check compares every client's directory, read through the server at url,
// with what the outcomes say, and runs an online fsck.
func (l *faultLoad) check(t *testing.T, s *server) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("%d operations acknowledged, %d failed retryably, %d with an unknown outcome; slowest %v",
		sumInts(l.acked), l.busy, l.unknown, l.slowest.Round(time.Millisecond))
	if n := len(l.unexpected); n > 0 {
		t.Errorf("%d operations failed with neither a retryable nor an outcome-unknown error (or hung past %v), the first:\n%s",
			n, l.maxOp, strings.Join(l.unexpected[:min(n, 10)], "\n"))
	}
	ctx := context.Background()
	cl, err := client.Dial(ctx, s.url(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for c := range l.names {
		got := map[string]bool{}
		after := ""
		for {
			ls, err := cl.List(ctx, l.root, l.dir(c), after, 0)
			if err != nil {
				t.Fatalf("list %s: %v", l.dir(c), err)
			}
			for _, e := range ls.Entries {
				got[e.Name()] = true
			}
			if ls.Remaining == 0 || len(ls.Entries) == 0 {
				break
			}
			after = ls.Entries[len(ls.Entries)-1].Name()
		}
		for name, st := range l.names[c] {
			switch {
			case st == present && !got[name]:
				t.Errorf("%s/%s: acknowledged (or its deletion failed retryably) but missing", l.dir(c), name)
			case st == absent && got[name]:
				t.Errorf("%s/%s: never acknowledged (its making failed retryably, or it was deleted) but there", l.dir(c), name)
			}
		}
		for name := range got {
			if _, known := l.names[c][name]; !known {
				t.Errorf("%s/%s: there, but never made", l.dir(c), name)
			}
		}
	}
	if out := s.ok("fsck"); !strings.Contains(out, "HEALTHY") {
		t.Errorf("fsck after the fault:\n%s", out)
	}
}

// sawOutage fails t unless the load met the outage: some operation failed,
// or waited at least wait (the server retries a lost database for a while
// before it answers busy).
func (l *faultLoad) sawOutage(t *testing.T, wait time.Duration) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.busy+l.unknown+len(l.unexpected) == 0 && l.slowest < wait {
		t.Errorf("the load did not notice the outage: no operation failed, the slowest took %v", l.slowest)
	}
}

func sumInts(xs []int) (n int) {
	for _, x := range xs {
		n += x
	}
	return n
}

// TestPostgresRestartUnderLoad: the database's postmaster and backends are
// SIGKILLed under a write load and restarted (crash recovery). Meanwhile the
// server's operations fail retryably (or with an unknown outcome where
// COMMIT was in flight); afterwards they resume without a restart of the
// server, and every acknowledged operation is in the namespace, every one
// that failed retryably is not, and fsck is clean.
func TestPostgresRestartUnderLoad(t *testing.T) {
	pg := pgtest.NewCluster(t)
	db := pg.CreateDB("nimbus")
	outageUnderLoad(t, db, time.Second, func() string {
		pg.Kill()
		killed := time.Now()
		time.Sleep(2 * time.Second)
		pg.Start()
		return fmt.Sprintf("database down for %v", time.Since(killed).Round(time.Millisecond))
	})
}

// outageUnderLoad serves from the database at url under a write load of 4
// clients, runs outage once each has 20 operations acknowledged, then
// waits for 20 more each, and checks that the clients met an outage of at
// least minOutage, that every acknowledged operation is there and none that
// failed retryably, that fsck is clean, and that the server stops cleanly:
// it survived the outage without a restart. outage says what it did.
func outageUnderLoad(t *testing.T, url string, minOutage time.Duration, outage func() string) {
	t.Helper()
	s := startServer(t, t.TempDir(), "", "--store", url)
	l := newFaultLoad(4)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	wait := l.start(t, ctx, s.url())

	l.waitEachAcked(t, make([]int, l.clients), 20, 20*time.Second)
	before := l.ackedTotal()
	what := outage()
	t.Logf("%s; %d operations acknowledged before", what, before)
	l.waitEachAcked(t, l.ackedNow(), 20, 30*time.Second)
	stop()
	wait()
	l.sawOutage(t, minOutage)
	l.check(t, s)
	s.stop()
}

// TestCrashPostgresKeepsAcknowledgedOperations is the crash test
// (crash_test.go) on PostgreSQL: concurrent clients write, the server is
// SIGKILLed mid-stream and started again on the same database, and every
// client's directory holds exactly the effect of its acknowledged
// operations (plus, possibly, the one in flight), completed files have
// their bytes, and fsck is clean.
func TestCrashPostgresKeepsAcknowledgedOperations(t *testing.T) {
	crashKeepsAcknowledged(t, "--store", pgtest.DB(t))
}

// TestPostgresStandbyFailover: the server runs on a primary with a
// synchronous standby, through a multi-host URL that asks for the
// read-write one. Under a write load the primary is SIGKILLed and the
// standby promoted: the server's operations fail retryably until it
// reaches the promoted standby, then succeed, without a restart of the
// server; every operation it acknowledged is on the promoted standby (the
// old primary is gone, so every read is served from there).
func TestPostgresStandbyFailover(t *testing.T) {
	primary := pgtest.NewCluster(t)
	primary.CreateDB("nimbus")
	standby := primary.NewStandby()
	url := fmt.Sprintf("postgres://postgres@%s,%s/nimbus?sslmode=disable&target_session_attrs=read-write", primary.Addr(), standby.Addr())
	outageUnderLoad(t, url, 500*time.Millisecond, func() string {
		primary.Kill()
		killed := time.Now()
		// The time a failover manager takes to decide; longer than the
		// server retries a lost database (about 2 s), so that some
		// operations fail busy before others succeed on the promoted
		// standby.
		time.Sleep(2500 * time.Millisecond)
		standby.Promote()
		return fmt.Sprintf("primary killed, standby promoted %v later", time.Since(killed).Round(time.Millisecond))
	})
}
