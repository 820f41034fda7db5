package memcoord

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/coordinator"
	"github.com/nimbus-fs/nimbus/coordinator/coordtest"
)

func TestConformance(t *testing.T) {
	var mu sync.Mutex
	clocks := map[coordinator.Coordinator]*coordinator.Manual{}
	clock := func(c coordinator.Coordinator) *coordinator.Manual {
		mu.Lock()
		defer mu.Unlock()
		return clocks[c]
	}
	const ttl = 10 * time.Second
	coordtest.Run(t, coordtest.Harness{
		New: func(t *testing.T) coordinator.Coordinator {
			cfg := DefaultConfig()
			cfg.TTL, cfg.Margin = ttl, time.Second
			cfg.Clock = coordinator.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			cfg.Registerer = prometheus.NewRegistry()
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			clocks[c] = cfg.Clock.(*coordinator.Manual)
			mu.Unlock()
			return c
		},
		Cut:    func(t *testing.T, s coordinator.Session) { s.(*Session).Cut() },
		Elapse: func(c coordinator.Coordinator, d time.Duration) { clock(c).Advance(d) },
		Now:    func(c coordinator.Coordinator) time.Time { return clock(c).Now() },
		TTL:    ttl,
		Wait:   5 * time.Second,
	})
}

func TestConfigValidate(t *testing.T) {
	for _, cfg := range []Config{{TTL: 0, Margin: 1}, {TTL: time.Second, Margin: 0}, {TTL: time.Second, Margin: time.Second}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

// The deadline of a cut session stops moving, and passes Margin before its
// lease expires.
func TestCutDeadline(t *testing.T) {
	clk := coordinator.NewManual(time.Unix(0, 0))
	cfg := DefaultConfig()
	cfg.Clock = clk
	c, _ := New(cfg)
	defer c.Close()
	s, err := c.Join(t.Context(), coordinator.Member{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	s.(*Session).Cut()
	want := clk.Now().Add(cfg.TTL - cfg.Margin)
	clk.Advance(cfg.TTL / 2)
	if d := s.Deadline(); !d.Equal(want) {
		t.Fatalf("deadline %v, want %v", d, want)
	}
	clk.Advance(cfg.TTL/2 - cfg.Margin)
	if s.Err() == nil {
		t.Fatal("not lost at its deadline")
	}
	if v, _ := c.Members(t.Context(), coordinator.All); len(v.Members) != 1 {
		t.Fatal("member gone before its lease expired")
	}
	clk.Advance(cfg.Margin)
	if v, _ := c.Members(t.Context(), coordinator.All); len(v.Members) != 0 {
		t.Fatal("member still there after its lease expired")
	}
}
