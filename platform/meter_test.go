package platform

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type manual struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manual) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *manual) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Active time counts overlapping requests once and idle gaps not at all,
// in whole milliseconds.
func TestMeterActiveTime(t *testing.T) {
	c := &manual{t: t0}
	reg := prometheus.NewRegistry()
	m, err := NewMeter(c.now, reg)
	if err != nil {
		t.Fatal(err)
	}
	m.Begin() // stretch 1: 10 ms, two requests overlapping
	c.add(4 * time.Millisecond)
	m.Begin()
	c.add(6 * time.Millisecond)
	m.End()
	m.End()
	c.add(time.Second) // idle
	m.Begin()          // stretch 2: 0.3 ms
	c.add(300 * time.Microsecond)
	m.End()
	c.add(time.Second)
	m.Begin() // stretch 3, still going: 2 ms so far
	c.add(2 * time.Millisecond)
	u := m.Usage()
	if math.Abs(u.ActiveS-0.012) > 1e-9 || u.Invocations != 4 || math.Abs(u.UptimeS-2.0123) > 1e-9 {
		t.Fatalf("usage %+v, want 12 ms active (12.3 truncated), 4 invocations, 2.0123 s up", u)
	}
	if got := gathered(t, reg, "nimbus_instance_invocations_total"); got != 4 {
		t.Errorf("invocations metric %v", got)
	}
	if got := gathered(t, reg, "nimbus_instance_active_seconds_total"); math.Abs(got-0.012) > 1e-9 {
		t.Errorf("active seconds metric %v", got)
	}
	m.End()
	m.End() // an extra End does not go negative
	if u := m.Usage(); math.Abs(u.ActiveS-0.012) > 1e-9 {
		t.Errorf("after the last end: %+v", u)
	}
}

// gathered returns the value of the metric named name in reg.
func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// The paper's prices: a million invocations and 2 GB for 1000 active
// seconds, against the same instance provisioned for an hour.
func TestCost(t *testing.T) {
	p := DefaultPrices()
	c := p.CostOf(Usage{ActiveS: 1000, Invocations: 1_000_000, UptimeS: 3600})
	if math.Abs(c.ServerlessUSD-(1000*2*0.0000166667+0.20)) > 1e-12 || math.Abs(c.ServerfulUSD-3600*2*0.0000166667) > 1e-12 {
		t.Fatalf("cost %+v", c)
	}
	if (Prices{PerGBSecond: -1, MemoryGB: 1}).Validate() == nil || (Prices{}).Validate() == nil {
		t.Error("bad prices accepted")
	}
}

// Concurrent requests: every invocation counted, the active time never
// more than the wall time, and nothing left open once all have ended.
func TestMeterConcurrent(t *testing.T) {
	m, err := NewMeter(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				m.Begin()
				if i%100 == 0 {
					time.Sleep(10 * time.Microsecond)
				}
				m.End()
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start).Seconds()
	u := m.Usage()
	if u.Invocations != 16000 || u.ActiveS > wall || m.inflight.Load() != 0 || m.open {
		t.Fatalf("usage %+v after %.3f s, in flight %d, open %v", u, wall, m.inflight.Load(), m.open)
	}
}

// A request on a connection (BeginConn) is active time either way, and an
// invocation only when SetConnInvocations says so (a plain server, the
// default); on a platform instance only HTTP requests (Begin) are.
func TestMeterConnRequests(t *testing.T) {
	for _, connInv := range []bool{true, false} {
		c := &manual{t: t0}
		reg := prometheus.NewRegistry()
		m, err := NewMeter(c.now, reg)
		if err != nil {
			t.Fatal(err)
		}
		m.SetConnInvocations(connInv)
		m.Begin() // an invocation, overlapped by two requests on a connection
		m.BeginConn()
		c.add(3 * time.Millisecond)
		m.End()
		m.BeginConn()
		if got := m.ConnLoad(); got != (ConnLoad{InFlight: 2, Requests: 2}) {
			t.Fatalf("conn load with two on connections and the invocation ended: %+v", got)
		}
		c.add(2 * time.Millisecond)
		m.EndConn()
		m.EndConn()
		if got := m.ConnLoad(); got != (ConnLoad{InFlight: 0, Requests: 2}) {
			t.Fatalf("conn load after the ends: %+v", got)
		}
		want := int64(1)
		if connInv {
			want = 3
		}
		u := m.Usage()
		if u.Invocations != want || u.ConnRequests != 2 || u.ConnInvocations != connInv || math.Abs(u.ActiveS-0.005) > 1e-9 {
			t.Fatalf("conn invocations %v: usage %+v, want %d invocations, 2 conn requests, 5 ms active", connInv, u, want)
		}
		if got := gathered(t, reg, "nimbus_instance_conn_requests_total"); got != 2 {
			t.Errorf("conn requests metric %v", got)
		}
	}
}
