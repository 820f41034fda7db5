package platform

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Meter records what a serverless platform bills an instance for: its
// active time (wall time while at least one request is being served,
// overlapping requests counted once, reported in whole milliseconds) and
// its invocations.
// Every request an instance serves passes Begin (an HTTP invocation: the
// RPC's POST /rpc/call, WebHDFS) or BeginConn (a request on a multiplexed
// connection: /rpc/conn, a TCP connect-back), then End. Both count as
// active time. Whether a request on a connection is also an invocation is
// SetConnInvocations': on a platform instance it is not (λFS: requests over
// the TCP connection an instance opened to its client ride on an instance
// already billed for its active time; only what the platform's gateway
// invoked is an invocation); on a plain server (the default) it is, since
// nothing fronts it and the meter prices it as a serverless deployment
// without the hybrid RPC would be billed, one invocation per request.
// Safe for concurrent use.
type Meter struct {
	now     func() time.Time
	wall    bool // now is time.Now: the At methods take the caller's reading
	started time.Time

	// The hot path is two atomic adds; only a request that takes the
	// count from 0 to 1 or back takes the mutex, and under it the state is
	// squared with the count as it is then (a stretch a racing pair opens
	// and closes within nanoseconds may go uncounted, and with the At
	// methods a stretch is timed by the clock readings of the requests
	// that open and close it).
	inflight     atomic.Int64
	invocations  atomic.Int64
	connRequests atomic.Int64 // BeginConn's
	connInflight atomic.Int64 // BeginConn's not yet ended (EndConn)
	connFree     atomic.Bool  // !SetConnInvocations

	mu     sync.Mutex
	open   bool      // an active stretch is being timed
	since  time.Time // its start
	active time.Duration

	activeDesc, invDesc, upDesc, connDesc *prometheus.Desc
}

// NewMeter returns a meter started now; now nil means time.Now. With reg,
// it exports nimbus_instance_active_seconds_total,
// nimbus_instance_invocations_total and nimbus_instance_uptime_seconds.
func NewMeter(now func() time.Time, reg prometheus.Registerer) (*Meter, error) {
	wall := now == nil
	if wall {
		now = time.Now
	}
	m := &Meter{now: now, wall: wall, started: now(),
		activeDesc: prometheus.NewDesc("nimbus_instance_active_seconds_total", "Time this instance served at least one request (wall time, whole milliseconds): what a serverless platform bills.", nil, nil),
		invDesc:    prometheus.NewDesc("nimbus_instance_invocations_total", "Requests this instance served as invocations (RPC over HTTP, WebHDFS; on a plain server, requests on connections too): what a serverless platform bills per request.", nil, nil),
		upDesc:     prometheus.NewDesc("nimbus_instance_uptime_seconds", "Time since this instance started: what a serverful deployment bills.", nil, nil),
		connDesc:   prometheus.NewDesc("nimbus_instance_conn_requests_total", "Requests this instance served on multiplexed connections (/rpc/conn, TCP connect-backs): invocations only on a plain server.", nil, nil)}
	if reg != nil {
		if err := reg.Register(m); err != nil {
			return nil, fmt.Errorf("platform: registering the meter: %w", err)
		}
	}
	return m, nil
}

// SetConnInvocations says whether a request on a connection (BeginConn)
// is also an invocation: true (the default) on a plain server, false on an
// instance a platform started. Call it before serving.
func (m *Meter) SetConnInvocations(on bool) { m.connFree.Store(!on) }

// ConnLoad is an instance's load on connections, which the platform's
// gateway does not see: GET /status/load's answer.
type ConnLoad struct {
	InFlight int   `json:"conn_inflight"` // requests on connections being served now
	Requests int64 `json:"conn_requests"` // requests on connections begun since the instance started
}

// Begin records a request that arrived as an HTTP invocation starting.
func (m *Meter) Begin() { m.BeginAt(time.Time{}) }

// BeginAt is Begin for a caller that has just read the wall clock
// (time.Now): now is that reading, which saves the meter its own when the
// request opens an active stretch, unless NewMeter was given another
// clock. The zero time means none. EndAt, BeginConnAt and EndConnAt
// likewise.
func (m *Meter) BeginAt(now time.Time) {
	m.invocations.Add(1)
	if m.inflight.Add(1) == 1 {
		m.settle(now)
	}
}

// BeginConn records a request on a multiplexed connection starting: an
// invocation only when SetConnInvocations says so.
func (m *Meter) BeginConn() { m.BeginConnAt(time.Time{}) }

// BeginConnAt is BeginConn with the caller's reading of the clock (BeginAt).
func (m *Meter) BeginConnAt(now time.Time) {
	m.connRequests.Add(1)
	m.connInflight.Add(1)
	if !m.connFree.Load() {
		m.invocations.Add(1)
	}
	if m.inflight.Add(1) == 1 {
		m.settle(now)
	}
}

// End records a request ending.
func (m *Meter) End() { m.EndAt(time.Time{}) }

// EndAt is End with the caller's reading of the clock (BeginAt).
func (m *Meter) EndAt(now time.Time) {
	if n := m.inflight.Add(-1); n == 0 {
		m.settle(now)
	} else if n < 0 {
		m.inflight.Add(1) // an End without its Begin: ignored
	}
}

// EndConn records a request on a connection (BeginConn) ending.
func (m *Meter) EndConn() { m.EndConnAt(time.Time{}) }

// EndConnAt is EndConn with the caller's reading of the clock (BeginAt).
func (m *Meter) EndConnAt(now time.Time) {
	if m.connInflight.Add(-1) < 0 {
		m.connInflight.Add(1) // an EndConn without its BeginConn: ignored
	}
	m.EndAt(now)
}

// ConnLoad returns the requests on connections being served now and those
// served so far: what the platform polls (GET /status/load) to see the
// load that bypasses it (docs/ELASTIC.md, "The local platform and its
// hosting"). Two atomic loads.
func (m *Meter) ConnLoad() ConnLoad {
	return ConnLoad{InFlight: int(max(m.connInflight.Load(), 0)), Requests: m.connRequests.Load()}
}

// InFlight returns the requests being served now.
func (m *Meter) InFlight() int { return int(max(m.inflight.Load(), 0)) }

// settle opens or closes the active stretch to match the count of
// requests in flight now; now is the caller's reading of the wall clock,
// or zero.
func (m *Meter) settle(now time.Time) {
	if !m.wall || now.IsZero() {
		now = m.now()
	}
	m.mu.Lock()
	busy := m.inflight.Load() > 0
	switch {
	case busy && !m.open:
		m.open, m.since = true, now
	case !busy && m.open:
		m.open = false
		m.active += max(now.Sub(m.since), 0)
	}
	m.mu.Unlock()
}

// Usage is what the meter recorded.
type Usage struct {
	ActiveS     float64 `json:"active_s"`
	Invocations int64   `json:"invocations"`
	UptimeS     float64 `json:"uptime_s"`
	// ConnRequests are the requests served on connections (counted in
	// Invocations too, unless SetConnInvocations(false)); ConnInvocations
	// says which.
	ConnRequests    int64 `json:"conn_requests"`
	ConnInvocations bool  `json:"conn_invocations"`
}

// Usage returns the active time (the stretch under way counted to now),
// invocations and uptime.
func (m *Meter) Usage() Usage {
	now := m.now()
	m.mu.Lock()
	active := m.active
	if m.open {
		active += now.Sub(m.since)
	}
	m.mu.Unlock()
	return Usage{ActiveS: active.Truncate(time.Millisecond).Seconds(), Invocations: m.invocations.Load(), UptimeS: now.Sub(m.started).Seconds(),
		ConnRequests: m.connRequests.Load(), ConnInvocations: !m.connFree.Load()}
}

// Describe implements prometheus.Collector.
func (m *Meter) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.activeDesc
	ch <- m.invDesc
	ch <- m.upDesc
	ch <- m.connDesc
}

// Collect implements prometheus.Collector.
func (m *Meter) Collect(ch chan<- prometheus.Metric) {
	u := m.Usage()
	ch <- prometheus.MustNewConstMetric(m.activeDesc, prometheus.CounterValue, u.ActiveS)
	ch <- prometheus.MustNewConstMetric(m.invDesc, prometheus.CounterValue, float64(u.Invocations))
	ch <- prometheus.MustNewConstMetric(m.upDesc, prometheus.GaugeValue, u.UptimeS)
	ch <- prometheus.MustNewConstMetric(m.connDesc, prometheus.CounterValue, float64(u.ConnRequests))
}

// Prices are a platform's prices; the defaults are those the λFS paper
// used (AWS Lambda's): $0.0000166667 per GB-second of active instance
// time and $0.20 per million invocations. `nimbus serve` takes them as
// flags.
type Prices struct {
	PerGBSecond          float64 `json:"per_gb_second_usd"`
	PerMillionInvocation float64 `json:"per_million_invocations_usd"`
	MemoryGB             float64 `json:"memory_gb"` // an instance's memory, what a GB-second counts
}

// DefaultPrices returns the paper's prices for an instance of 2 GB.
func DefaultPrices() Prices {
	return Prices{PerGBSecond: 0.0000166667, PerMillionInvocation: 0.20, MemoryGB: 2}
}

// Validate reports a negative price or memory.
func (p Prices) Validate() error {
	if p.PerGBSecond < 0 || p.PerMillionInvocation < 0 || !(p.MemoryGB > 0) {
		return fmt.Errorf("platform: prices %+v: want non-negative prices and a positive memory size", p)
	}
	return nil
}

// Cost is what usage costs: Serverless bills active time and invocations;
// Serverful bills the instance for its whole uptime (provisioned, as a
// fixed pool of NameNodes is), with no invocation charge.
type Cost struct {
	ServerlessUSD float64 `json:"serverless_usd"`
	ServerfulUSD  float64 `json:"serverful_usd"`
}

// CostOf prices usage.
func (p Prices) CostOf(u Usage) Cost {
	return Cost{
		ServerlessUSD: u.ActiveS*p.MemoryGB*p.PerGBSecond + float64(u.Invocations)*p.PerMillionInvocation/1e6,
		ServerfulUSD:  u.UptimeS * p.MemoryGB * p.PerGBSecond,
	}
}
