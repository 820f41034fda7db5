package linearizability

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/internal/linmodel"
	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/meta"
)

// lossyProxy forwards TCP connections to a server and, with probability
// drop for each chunk the server sends after the first (the answer to the
// connection's upgrade), closes the connection instead of
// passing the chunk on: the replies in it are lost after the server
// executed their requests, and the client resubmits them on a new
// connection with their request ids (issue 28, "Exactly once").
type lossyProxy struct {
	ln      net.Listener
	backend string
	drop    float64
	mu      sync.Mutex
	rnd     *rand.Rand
	dropped int
}

func newLossyProxy(t *testing.T, backend string, drop float64, seed uint64) *lossyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lossyProxy{ln: ln, backend: backend, drop: drop, rnd: rand.New(rand.NewPCG(seed, 28))}
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
		go func() { io.Copy(out, in); out.Close() }()
		go func() {
			defer in.Close()
			defer out.Close()
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

// lostReplyRun records seeds' histories of clients whose replies a
// lossyProxy drops, against one `nimbus serve` started with args, and
// returns how many histories were linearizable and how many replies were
// lost. A call that failed outside the contract (an outcome unknown: all
// of its resubmissions lost too) fails the test.
func lostReplyRun(t *testing.T, ss []uint64, args ...string) (ok, bad, lost int) {
	t.Helper()
	addr := testproc.Start(t, binary, "", "", append([]string{"--superuser", linmodel.Superuser}, args...)...).Addr
	direct, err := client.Dial(context.Background(), "http://"+addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	for _, seed := range ss {
		base := fmt.Sprintf("/lost%d", seed)
		prepare(t, direct, base) // without losses: the workload's are what counts
		p := newLossyProxy(t, addr, 0.02, seed)
		// Resubmits: enough that a call whose replies are lost again and
		// again still gets one (a loss takes every reply of a chunk).
		c, err := client.Dial(context.Background(), "http://"+p.ln.Addr().String(), client.Options{Conns: 2, Resubmits: 8})
		if err != nil {
			t.Fatal(err)
		}
		h := recordPrepared([]meta.FileSystem{c}, base, seed, mix{clients: 6, ops: 40})
		c.Close()
		lost += p.lost()
		if f := linmodel.Faults(h); len(f) > 0 {
			t.Fatalf("seed %d: %d calls failed outside the contract, first: %s", seed, len(f), f[0])
		}
		res, err := linmodel.Check(linmodel.Initial(), h, checkTimeout, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict == porcupine.Ok {
			ok++
		} else {
			bad++
		}
	}
	return ok, bad, lost
}

// TestLinearizableWithLostReplies: clients whose replies are lost now and
// then (3% of what the server sends, after it executed the requests)
// resubmit them, and every history is linearizable: a resubmitted write is
// answered from its record, not applied again.
func TestLinearizableWithLostReplies(t *testing.T) {
	ss := seeds(t, 6)
	ok, bad, lost := lostReplyRun(t, ss)
	t.Logf("%d replies lost over %d seeds", lost, len(ss))
	if bad > 0 {
		t.Errorf("%d of %d histories with lost replies are not linearizable (replay one with NIMBUS_LIN_SEED)", bad, ok+bad)
	}
	if lost == 0 {
		t.Error("no reply was lost: the test tested nothing")
	}
}

// TestLostRepliesWithoutDuplicateDetection: the same runs against a server
// with duplicate detection switched off (--request-ttl 0), where a
// resubmitted write is applied again: some history must not be
// linearizable, or the test above proves nothing.
func TestLostRepliesWithoutDuplicateDetection(t *testing.T) {
	ss := seeds(t, 6)
	ok, bad, lost := lostReplyRun(t, ss, "--request-ttl", "0")
	t.Logf("%d replies lost over %d seeds; %d histories linearizable, %d not", lost, len(ss), ok, bad)
	if bad == 0 {
		t.Error("every history was linearizable with duplicate detection off: the lost replies did not make the resubmissions matter")
	}
}
