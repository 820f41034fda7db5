package tenant

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// clock is a manual clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newTracker(t *testing.T, cfg Config) (*Tracker, *clock) {
	t.Helper()
	c := &clock{t: time.Unix(1_000_000, 0)}
	cfg.Now = c.now
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr, c
}

func total(s []Stat) (ops int64) {
	for _, x := range s {
		ops += x.Ops
	}
	return ops
}

func find(s []Stat, id string) *Stat {
	for i := range s {
		if s[i].Tenant == id {
			return &s[i]
		}
	}
	return nil
}

// Many tenants: only Top are named, every operation is counted once, and a
// tenant that becomes heavy takes the place of a light one.
func TestTopTenants(t *testing.T) {
	tr, c := newTracker(t, Config{Top: 3, HalfLife: 10 * time.Second})
	calls := int64(0)
	for i := 0; i < 50; i++ { // 50 light tenants, one call each
		tr.Done(fmt.Sprintf("u%d", i), time.Millisecond, false)
		calls++
		c.advance(100 * time.Millisecond)
	}
	s := tr.Snapshot()
	if len(s) != 4 || s[3].Tenant != Other || total(s) != calls {
		t.Fatalf("after 50 light tenants: %+v (%d calls)", s, calls)
	}
	// A heavy job arrives: within its first seconds it is named.
	for i := 0; i < 200; i++ {
		tr.Done(ID("mallory", "flood"), time.Millisecond, i%10 == 0)
		calls++
		c.advance(10 * time.Millisecond)
	}
	s = tr.Snapshot()
	if len(s) != 4 || s[0].Tenant != "mallory/flood" || total(s) != calls {
		t.Fatalf("after the heavy job: %+v", s)
	}
	m := s[0]
	if m.Ops < 150 || m.Errors != 20 || m.RateOpsS < 10 {
		t.Fatalf("heavy job counted %+v", m)
	}
	if busy := s[0].BusyS + s[1].BusyS + s[2].BusyS + s[3].BusyS; busy < float64(calls)*0.001-1e-9 || busy > float64(calls)*0.001+1e-9 {
		t.Fatalf("busy %v s for %d calls of 1 ms", busy, calls)
	}
	// It stops: others overtake it as its rate decays.
	c.advance(5 * time.Minute)
	for i := 0; i < 30; i++ {
		for _, u := range []string{"a", "b", "c"} {
			tr.Done(u, 0, false)
			calls++
		}
		c.advance(100 * time.Millisecond)
	}
	s = tr.Snapshot()
	if find(s, "mallory/flood") != nil || find(s, "a") == nil || total(s) != calls {
		t.Fatalf("after the job stopped: %+v", s)
	}
}

func TestLimits(t *testing.T) {
	tr, c := newTracker(t, Config{Limits: map[string]float64{"bob": 10, "carol/etl": 5}})
	admitted := func(id string, n int) (ok int) {
		for i := 0; i < n; i++ {
			err := tr.Admit(id)
			switch {
			case err == nil:
				ok++
				tr.Done(id, 0, false)
			case !errors.Is(err, ErrThrottled):
				t.Fatalf("%s: %v", id, err)
			}
		}
		return ok
	}
	// A burst of one second's worth, then the rate.
	if got := admitted("bob", 30); got != 10 {
		t.Errorf("bob: %d of 30 admitted at once, want 10", got)
	}
	c.advance(500 * time.Millisecond)
	// The user's limit covers its jobs.
	if got := admitted("bob/job1", 10) + admitted("bob/job2", 10); got != 5 {
		t.Errorf("bob's jobs: %d admitted after 0.5 s, want 5", got)
	}
	// A job's limit is its own; the user's other calls are free.
	if got := admitted("carol/etl", 20); got != 5 {
		t.Errorf("carol/etl: %d admitted, want 5", got)
	}
	if got := admitted("carol/other", 20) + admitted("carol", 20); got != 40 {
		t.Errorf("carol's unlimited calls: %d admitted, want 40", got)
	}
	if got := admitted("dave", 100); got != 100 {
		t.Errorf("dave, no limit: %d admitted", got)
	}
	s := tr.Snapshot()
	if b := find(s, "bob"); b == nil || b.Throttled != 20 || b.Limit != 10 || b.Ops != 30 {
		t.Errorf("bob's counts %+v", b)
	}
}

func TestParseLimit(t *testing.T) {
	for in, want := range map[string]struct {
		id string
		r  float64
	}{"bob=10": {"bob", 10}, "bob/etl=2.5/s": {"bob/etl", 2.5}} {
		id, r, err := ParseLimit(in)
		if err != nil || id != want.id || r != want.r {
			t.Errorf("%q: %q %v %v", in, id, r, err)
		}
	}
	for _, bad := range []string{"bob", "=5", "bob=0", "bob=-1", "bob=x", "a/b/c=1", "/x=1", "bob=Inf"} {
		if _, _, err := ParseLimit(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The metrics carry at most Top tenants and other.
func TestMetricsBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	tr, c := newTracker(t, Config{Top: 5, Registerer: reg})
	for i := 0; i < 1000; i++ {
		tr.Done(fmt.Sprintf("user%d", i%300), time.Microsecond, false)
		c.advance(time.Millisecond)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if n := len(mf.GetMetric()); n > 6 {
			t.Errorf("%s has %d series, want at most 6", mf.GetName(), n)
		}
		if mf.GetName() == "nimbus_tenant_requests_total" {
			sum := 0.0
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			if sum != 1000 {
				t.Errorf("requests sum to %v, want 1000", sum)
			}
		}
	}
}
