package linearizability

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/internal/linmodel"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/meta"
)

// lossyProxy forwards TCP connections to a server and breaks them in two
// ways, each on a chunk after the connection's first (its upgrade):
//
//   - with probability drop for each chunk the server sends, it closes the
//     connection instead of passing the chunk on: the replies in it are
//     lost after the server executed their requests, and the client
//     resubmits them on a new connection with their request ids
//     (docs/NAMESPACE.md, "Exactly once");
//   - with probability hold for each chunk the client sends, it closes the
//     client's side at once and holds the chunk back, then passes it on
//     (on the server's side of the connection, still open) 20-150 ms
//     later: the client resubmits the requests in it, which the server
//     applies, and goes on with its next calls; the held first
//     submissions reach the server after all that, as frames that waited
//     in a server for a request slot, or in a network, do.
type lossyProxy struct {
	ln      net.Listener
	backend string
	drop    float64
	hold    float64
	mu      sync.Mutex
	rnd     *rand.Rand
	dropped int
	held    int
}

func newLossyProxy(t *testing.T, backend string, drop, hold float64, seed uint64) *lossyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lossyProxy{ln: ln, backend: backend, drop: drop, hold: hold, rnd: rand.New(rand.NewPCG(seed, 28))}
	go p.accept()
	t.Cleanup(func() { ln.Close() })
	return p
}

func (p *lossyProxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.backend)
		if err != nil {
			in.Close()
			continue
		}
		go p.forward(in, out)
		go func() {
			defer in.Close() // and so forward ends, closing out
			buf := make([]byte, 32<<10)
			for first := true; ; first = false {
				n, err := out.Read(buf)
				if n > 0 {
					if !first && p.lose() { // never the upgrade's answer
						return
					}
					if _, werr := in.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// forward passes what the client sends on to the server, holding a chunk
// back now and then (see lossyProxy), and closes the server's side when
// the client's ends.
func (p *lossyProxy) forward(in, out net.Conn) {
	defer out.Close()
	buf := make([]byte, 32<<10)
	for first := true; ; first = false {
		n, err := in.Read(buf)
		if n > 0 {
			if d, ok := p.holdFor(); ok && !first {
				in.Close() // the client sees the connection break, and resubmits
				time.Sleep(d)
				if _, err := out.Write(buf[:n]); err != nil {
					return
				}
				// The server reads the stale frames and runs them on a
				// connection it has no reason to think dead.
				time.Sleep(300 * time.Millisecond)
				return
			}
			if _, werr := out.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// holdFor decides whether the next chunk from the client is held back,
// and for how long.
func (p *lossyProxy) holdFor() (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rnd.Float64() >= p.hold {
		return 0, false
	}
	p.held++
	return time.Duration(20+p.rnd.IntN(131)) * time.Millisecond, true
}

// lose decides whether the next chunk from the server is lost.
func (p *lossyProxy) lose() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rnd.Float64() >= p.drop {
		return false
	}
	p.dropped++
	return true
}

func (p *lossyProxy) lost() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

func (p *lossyProxy) heldBack() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// lostReplyRun records seeds' histories of clients whose replies a
// lossyProxy drops and whose requests it holds back, against one `nimbus
// serve` started with args, and returns how many histories were
// linearizable and how many chunks of replies were lost and of requests
// held back. A history with a call that failed outside the contract (an
// outcome unknown: all of its resubmissions lost too, or the connections it
// was sent again on found closed) is left unchecked; more than a quarter of
// them fails the test.
func lostReplyRun(t *testing.T, ss []uint64, args ...string) (ok, bad, lost, held int) {
	t.Helper()
	skipped := 0
	defer func() {
		if skipped > len(ss)/4 {
			t.Errorf("%d of %d histories had calls that failed outside the contract: too few were checked", skipped, len(ss))
		}
	}()
	dump := os.Getenv("NIMBUS_LIN_DUMP") // a directory: debug logs and failing histories go there
	var clog *slog.Logger
	if dump != "" {
		args = append(args, "--log-level", "debug")
		f, err := os.Create(filepath.Join(dump, "client.log"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		clog = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv := testproc.Start(t, binary, "", "", append([]string{"--superuser", linmodel.Superuser}, args...)...)
	if dump != "" {
		defer func() {
			if err := os.WriteFile(filepath.Join(dump, "server.log"), []byte(srv.Log.String()), 0o644); err != nil {
				t.Errorf("writing the server's log: %v", err)
			}
		}()
	}
	addr := srv.Addr
	direct, err := client.Dial(context.Background(), "http://"+addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	for _, seed := range ss {
		base := fmt.Sprintf("/lost%d", seed)
		prepare(t, direct, base) // without losses: the workload's are what counts
		p := newLossyProxy(t, addr, 0.02, 0.02, seed)
		// Resubmits: enough that a call whose replies are lost again and
		// again still gets one (a loss takes every reply of a chunk).
		c, err := client.Dial(context.Background(), "http://"+p.ln.Addr().String(), client.Options{Conns: 2, Resubmits: 8, Logger: clog})
		if err != nil {
			t.Fatal(err)
		}
		h := recordPrepared([]meta.FileSystem{c}, base, seed, mix{clients: 6, ops: 40})
		c.Close()
		lost += p.lost()
		held += p.heldBack()
		if f := linmodel.Faults(h); len(f) > 0 {
			for _, fault := range f {
				if !strings.Contains(fault, "outcome unknown") {
					t.Fatalf("seed %d: %d calls failed outside the contract, one of them: %s", seed, len(f), fault)
				}
			}
			// An outcome unknown is the client's true answer when every
			// copy of a call was lost, but the model cannot place a write
			// that may or may not have happened: such a history is not
			// checked, and too many of them fail the test below.
			t.Logf("seed %d: not checked: %d calls failed outside the contract, first: %s", seed, len(f), f[0])
			skipped++
			continue
		}
		res, err := linmodel.Check(linmodel.Initial(), h, checkTimeout, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict == porcupine.Ok {
			ok++
		} else {
			bad++
			if dump != "" {
				dumpHistory(t, dump, seed, h, res.Viz)
			}
			if bad == 1 {
				t.Logf("seed %d: history of %d operations is %s (the first such seed)\n%s", seed, len(h), res.Verdict, describe(h))
			} else {
				t.Logf("seed %d: history of %d operations is %s", seed, len(h), res.Verdict)
			}
		}
	}
	return ok, bad, lost, held
}

// TestLinearizableWithLostReplies: clients whose replies are lost now and
// then (2% of the chunks the server sends, after it executed the
// requests), or whose requests are held back past their resubmission (2%
// of the chunks they send), resubmit them, and every history is
// linearizable: a resubmitted write is answered from its record, not
// applied again, and a first submission that arrives after its
// resubmission finds the record too, and changes nothing.
func TestLinearizableWithLostReplies(t *testing.T) {
	ss := seeds(t, 6)
	ok, bad, lost, held := lostReplyRun(t, ss)
	t.Logf("%d chunks of replies lost, %d of requests held back, over %d seeds", lost, held, len(ss))
	if bad > 0 {
		t.Errorf("%d of %d histories with lost replies are not linearizable (replay one with NIMBUS_LIN_SEED)", bad, ok+bad)
	}
	if lost == 0 || held == 0 {
		t.Errorf("%d replies lost, %d requests held back: the test tested less than it says", lost, held)
	}
}

// TestLinearizableWithLostRepliesOnPostgres is TestLinearizableWithLostReplies
// on PostgreSQL, where every submission reads its record (no marks).
func TestLinearizableWithLostRepliesOnPostgres(t *testing.T) {
	ss := seeds(t, 6)
	ok, bad, lost, held := lostReplyRun(t, ss, "--store", pgtest.DB(t))
	t.Logf("%d chunks of replies lost, %d of requests held back, over %d seeds", lost, held, len(ss))
	if bad > 0 {
		t.Errorf("%d of %d histories with lost replies are not linearizable (replay one with NIMBUS_LIN_SEED)", bad, ok+bad)
	}
	if lost == 0 || held == 0 {
		t.Errorf("%d replies lost, %d requests held back: the test tested less than it says", lost, held)
	}
}

// TestLostRepliesWithoutDuplicateDetection: the same runs against a server
// with duplicate detection switched off (--request-ttl 0), where a
// resubmitted write is applied again: some history must not be
// linearizable, or the test above proves nothing.
func TestLostRepliesWithoutDuplicateDetection(t *testing.T) {
	ss := seeds(t, 6)
	ok, bad, lost, held := lostReplyRun(t, ss, "--request-ttl", "0")
	t.Logf("%d chunks of replies lost, %d of requests held back, over %d seeds; %d histories linearizable, %d not", lost, held, len(ss), ok, bad)
	if bad == 0 {
		t.Error("every history was linearizable with duplicate detection off: the lost replies did not make the resubmissions matter")
	}
}

// dumpHistory writes the illegal history h of seed into dir as JSON
// (hist-<seed>.json: each call's client, call and return times in ns, Input
// and Output) and logs the last call of its shortest illegal prefix.
func dumpHistory(t *testing.T, dir string, seed uint64, h []porcupine.Operation, viz string) {
	t.Helper()
	type call struct {
		Client       int
		Call, Return int64
		In           linmodel.Input
		Out          linmodel.Output
	}
	cs := make([]call, 0, len(h))
	for _, op := range h {
		cs = append(cs, call{op.ClientId, op.Call, op.Return, op.Input.(linmodel.Input), op.Output.(linmodel.Output)})
	}
	b, err := json.Marshal(cs)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("hist-%d.json", seed)), b, 0o644)
	}
	if err != nil {
		t.Errorf("writing the history of seed %d: %v", seed, err)
	}
	p := illegalPrefix(h)
	t.Logf("seed %d: visualization %s; the shortest illegal prefix by call time ends with\n%s", seed, viz, describe(p[len(p)-1:]))
}

// illegalPrefix returns a short illegal prefix of the illegal history h,
// its calls in the order they started, found by bisection: its last call
// is usually one whose result no order of the calls before it explains,
// next to the write that went wrong. A heuristic: a prefix can also be
// illegal because it leaves out a later call that a call in it saw.
func illegalPrefix(h []porcupine.Operation) []porcupine.Operation {
	h = slices.Clone(h)
	slices.SortFunc(h, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	m := linmodel.Model(linmodel.Initial())
	lo, hi := 1, len(h) // h[:hi] is illegal
	for lo < hi {
		if mid := (lo + hi) / 2; porcupine.CheckOperations(m, h[:mid]) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return h[:hi]
}
