package linearizability

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/internal/etcdtest"
	"github.com/nimbus-fs/nimbus/internal/linmodel"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/meta"
)

// Linearizability under churn: cached
// NameNode processes of two deployments on one PostgreSQL database and one
// etcd prefix, while instances are started, stopped and killed with
// SIGKILL under the clients. A client reaches the cluster through a
// failover proxy: each new connection goes to a live instance, so a call
// in flight on an instance that dies is resubmitted (same request id) on
// a new connection to another one, where the request record answers it if
// the first attempt committed (exactly once).

// cluster is the churning set of instances.
type cluster struct {
	t           *testing.T
	args        []string // every instance's flags but its deployment
	deployments int
	mu          sync.Mutex
	live        []*member
	next        int // instances started, for deployment assignment
	started     int
	killed      int
	stopped     int
}

type member struct {
	proc       *testproc.Server
	deployment int
}

func newCluster(t *testing.T, deployments, instances int, args ...string) *cluster {
	t.Helper()
	db := pgtest.DB(t)
	coord := fmt.Sprintf("etcd://%s/churn-%d", strings.Join(etcdtest.Endpoints(t), ","), time.Now().UnixNano())
	c := &cluster{t: t, deployments: deployments,
		args: append([]string{"--superuser", linmodel.Superuser, "--store", db, "--coordinator", coord,
			"--cache-bytes", "4m", "--coordinator-ttl", "2s", "--deployments", strconv.Itoa(deployments)}, args...)}
	for range instances {
		c.add()
	}
	return c
}

// add starts one instance, in the deployments round robin, and waits until
// it serves.
func (c *cluster) add() {
	c.mu.Lock()
	d := c.next % c.deployments
	c.next++
	c.mu.Unlock()
	p := testproc.Start(c.t, binary, "", "", append(c.args, "--deployment", strconv.Itoa(d))...)
	c.mu.Lock()
	c.live = append(c.live, &member{proc: p, deployment: d})
	c.started++
	c.mu.Unlock()
}

// remove takes a random live instance out of the set (never the last
// two), kills it with SIGKILL when kill is set, else stops it with
// SIGTERM (in-flight requests finish, it leaves the membership).
func (c *cluster) remove(rng *rand.Rand, kill bool) {
	c.mu.Lock()
	if len(c.live) <= 2 {
		c.mu.Unlock()
		return
	}
	i := rng.IntN(len(c.live))
	m := c.live[i]
	c.live = append(c.live[:i], c.live[i+1:]...)
	if kill {
		c.killed++
	} else {
		c.stopped++
	}
	c.mu.Unlock()
	if kill {
		m.proc.Kill()
	} else {
		_ = m.proc.Stop()
	}
}

// pick returns the address of a live instance.
func (c *cluster) pick(rng *rand.Rand) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live[rng.IntN(len(c.live))].proc.Addr
}

// churn changes the set every interval until stop closes: kill, start,
// stop, start, in turn from a seeded generator.
func (c *cluster) churn(seed uint64, every time.Duration, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(seed, 0xc4))
	var wg sync.WaitGroup
	defer wg.Wait()
	for step := 0; ; step++ {
		if step > 0 { // the first change at once: a history may be short
			select {
			case <-stop:
				return
			case <-time.After(every):
			}
		}
		switch step % 4 {
		case 0:
			c.remove(rng, true)
		case 2:
			c.remove(rng, false)
		default:
			wg.Add(1) // a start takes a while; the churn goes on meanwhile
			go func() { defer wg.Done(); c.add() }()
		}
	}
}

// failoverProxy forwards each TCP connection to a live instance of c,
// chosen when the connection is accepted; a connection whose instance
// dies breaks, and the client's next one goes elsewhere.
type failoverProxy struct {
	ln  net.Listener
	c   *cluster
	mu  sync.Mutex
	rng *rand.Rand
}

func newFailoverProxy(t *testing.T, c *cluster, seed uint64) *failoverProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &failoverProxy{ln: ln, c: c, rng: rand.New(rand.NewPCG(seed, 0xf0))}
	go p.accept()
	t.Cleanup(func() { ln.Close() })
	return p
}

func (p *failoverProxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(in)
	}
}

func (p *failoverProxy) forward(in net.Conn) {
	var out net.Conn
	for range 10 { // an instance may die between the pick and the dial
		p.mu.Lock()
		addr := p.c.pick(p.rng)
		p.mu.Unlock()
		var err error
		if out, err = net.DialTimeout("tcp", addr, time.Second); err == nil {
			break
		}
	}
	if out == nil {
		in.Close()
		return
	}
	go func() { io.Copy(out, in); out.Close() }()
	io.Copy(in, out)
	in.Close()
}

// TestLinearizableUnderChurn: four cached instances of two deployments at
// the start; while each seed's clients run, an instance is killed
// (SIGKILL), started, stopped (SIGTERM) and started again, every 300 ms.
// Every history is linearizable, and no call ends outside the contract
// (a write whose instance died is resubmitted elsewhere and answered once).
func TestLinearizableUnderChurn(t *testing.T) {
	c := newCluster(t, 2, 4)
	ss := seeds(t, 3)
	ops := 0
	start := time.Now()
	for _, seed := range ss {
		base := fmt.Sprintf("/churn%d", seed)
		direct, err := client.Dial(context.Background(), "http://"+c.pick(rand.New(rand.NewPCG(seed, 1))), client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		prepare(t, direct, base)
		direct.Close()
		p := newFailoverProxy(t, c, seed)
		// Resubmits: a call may meet more than one dying instance.
		fs, err := client.Dial(context.Background(), "http://"+p.ln.Addr().String(), client.Options{Conns: 3, Resubmits: 8})
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { defer close(done); c.churn(seed, 300*time.Millisecond, stop) }()
		h := recordPrepared([]meta.FileSystem{fs}, base, seed, mix{clients: 6, ops: 40})
		close(stop)
		<-done
		fs.Close()
		check(t, "churn", seed, h, linmodel.Initial())
		ops += len(h)
	}
	c.mu.Lock()
	t.Logf("%d operations over %d seeds in %s; instances started %d, killed %d, stopped %d, live at the end %d",
		ops, len(ss), time.Since(start).Round(time.Millisecond), c.started, c.killed, c.stopped, len(c.live))
	if c.killed == 0 || c.started <= 4 {
		t.Errorf("no instance was killed or added (%d killed, %d started): the test saw no churn", c.killed, c.started)
	}
	c.mu.Unlock()
}
