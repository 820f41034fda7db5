// Package tenant counts who loads the namespace, and throttles a tenant
// that passes its limit.
//
// A tenant is the calling user, or the user and a job id when the caller
// names one (the RPC's job field, WebHDFS's job parameter, `nimbus fs
// --job`): "alice", "alice/etl-42". HDFS operators find the job that floods
// a NameNode in its audit log after the fact; a Tracker shows it while it
// happens, on /metrics and `nimbus status --tenants`.
//
// Cardinality is bounded: at most Config.Top tenants are counted by name,
// and everyone else as "other". Which tenants have a name is decided by a
// decayed rate of operations (half-life Config.HalfLife): a tenant without
// one takes the place of the slowest named tenant once its own decayed rate
// passes that tenant's, and the one it replaces is folded into "other". So
// the named series are the heavy hitters of the last minute or so, counted
// exactly from the moment they were named (a renamed tenant's counters
// start again at 0, which Prometheus's rate() reads as a reset).
//
// Busy time is the wall time the server spent on a tenant's requests, from
// the request's decoding to its answer: Go keeps no CPU time per
// goroutine, and for a request that does not wait on I/O (the embedded
// store) the two are close.
package tenant

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Other names everyone not counted by name.
const Other = "other"

// Anonymous is the tenant of calls that name no user (an RPC echo).
const Anonymous = "(anonymous)"

// ID returns the tenant of a call: the user, or user/job.
func ID(user, job string) string {
	if user == "" {
		user = Anonymous
	}
	if job == "" {
		return user
	}
	return user + "/" + job
}

// userOf returns the user part of a tenant id.
func userOf(id string) string {
	if i := strings.IndexByte(id, '/'); i >= 0 {
		return id[:i]
	}
	return id
}

// Config configures a Tracker.
type Config struct {
	// Top is how many tenants are counted by name (default 20).
	Top int
	// HalfLife of the decayed rate that ranks tenants (default 15 s).
	HalfLife time.Duration
	// Limits are operations per second by tenant: a user (which bounds all
	// its jobs together) or user/job. A call over its limit fails with a
	// retryable busy error (ErrThrottled); a burst of one second's worth
	// is allowed.
	Limits map[string]float64
	// Registerer receives the metrics; nil registers none.
	Registerer prometheus.Registerer
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// ErrThrottled is wrapped by Admit's error: the tenant is over its limit.
var ErrThrottled = errors.New("tenant: over its limit")

// ThrottledError is Admit's refusal: which limit, and when the tenant may
// send again (its next token).
type ThrottledError struct {
	Limited    string  // the user or user/job whose limit refused
	Limit      float64 // requests per second
	RetryAfter time.Duration
}

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("%s is limited to %g requests/s; retry after %v", e.Limited, e.Limit, e.RetryAfter.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrThrottled) true.
func (e *ThrottledError) Is(target error) bool { return target == ErrThrottled }

// ParseLimit parses "TENANT=OPS/S" (the /s is optional): a user or
// user/job and a positive rate.
func ParseLimit(s string) (string, float64, error) {
	id, r, ok := strings.Cut(s, "=")
	if !ok || id == "" {
		return "", 0, fmt.Errorf("tenant limit %q: want USER=OPS/S or USER/JOB=OPS/S", s)
	}
	v, err := strconv.ParseFloat(strings.TrimSuffix(r, "/s"), 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return "", 0, fmt.Errorf("tenant limit %q: %q is not a positive number of operations per second", s, r)
	}
	if strings.Count(id, "/") > 1 || strings.HasPrefix(id, "/") || strings.HasSuffix(id, "/") {
		return "", 0, fmt.Errorf("tenant limit %q: %q is neither a user nor user/job", s, id)
	}
	return id, v, nil
}

// Stat is one tenant's counts.
type Stat struct {
	Tenant    string  `json:"tenant"`
	Ops       int64   `json:"ops"`        // requests answered (errors included)
	Errors    int64   `json:"errors"`     // requests answered with an error (throttled ones included)
	Throttled int64   `json:"throttled"`  // requests refused for the tenant's limit
	BusyS     float64 `json:"busy_s"`     // server wall time on its requests
	RateOpsS  float64 `json:"rate_ops_s"` // decayed rate, the ranking (0 for other)
	Limit     float64 `json:"limit_ops_s,omitempty"`
}

// entry is one tenant's counts. The counters are atomic: a named tenant's
// request updates them under the tracker's read lock. The decayed rate
// moves once a second (roll), not per request: the requests of the
// current second are in win, and the rate is that of the seconds before.
type entry struct {
	ops, errs, throttled atomic.Int64
	busy                 atomic.Int64 // nanoseconds
	win                  atomic.Int64 // requests in the current second
	rate                 float64      // decayed count of the seconds before; under the write lock
}

// Tracker counts operations per tenant. Safe for concurrent use: a named
// tenant's request takes the read lock and atomic adds; the write lock is
// for the others (other, and the candidates for a name) and for the turn
// of each second.
type Tracker struct {
	cfg      Config
	wall     bool    // cfg.Now is time.Now (DoneAt takes the caller's reading)
	tau      float64 // seconds: HalfLife / ln 2
	limiters map[string]*rate.Limiter

	sec atomic.Int64 // the second the windows count (Unix seconds)

	mu      sync.RWMutex
	named   map[string]*entry
	pending map[string]*entry // candidates: their rate only
	other   entry

	opsDesc, busyDesc, errDesc, thrDesc *prometheus.Desc
}

// New returns a Tracker.
func New(cfg Config) (*Tracker, error) {
	if cfg.Top <= 0 {
		cfg.Top = 20
	}
	if cfg.HalfLife <= 0 {
		cfg.HalfLife = 15 * time.Second
	}
	wall := cfg.Now == nil
	if wall {
		cfg.Now = time.Now
	}
	t := &Tracker{cfg: cfg, wall: wall, tau: cfg.HalfLife.Seconds() / math.Ln2, limiters: map[string]*rate.Limiter{},
		named: map[string]*entry{}, pending: map[string]*entry{}}
	t.sec.Store(cfg.Now().Unix())
	for id, r := range cfg.Limits {
		if !(r > 0) {
			return nil, fmt.Errorf("tenant: limit of %s is %v ops/s, want more than 0", id, r)
		}
		t.limiters[id] = rate.NewLimiter(rate.Limit(r), int(math.Max(1, math.Ceil(r))))
	}
	labels := []string{"tenant"}
	t.opsDesc = prometheus.NewDesc("nimbus_tenant_requests_total", "Requests answered per tenant (user or user/job), the heaviest named and the rest as \"other\"; a tenant's count starts at 0 when it is named.", labels, nil)
	t.errDesc = prometheus.NewDesc("nimbus_tenant_errors_total", "Requests per tenant answered with an error, throttled ones included.", labels, nil)
	t.thrDesc = prometheus.NewDesc("nimbus_tenant_throttled_total", "Requests per tenant refused, retryably, for the tenant's limit (--tenant-limit).", labels, nil)
	t.busyDesc = prometheus.NewDesc("nimbus_tenant_busy_seconds_total", "Server wall time spent on each tenant's requests, from decoding to answer.", labels, nil)
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(t); err != nil {
			return nil, fmt.Errorf("tenant: registering metrics: %w", err)
		}
	}
	return t, nil
}

// Admit reports whether tenant id may make a call now; a tenant over its
// limit (its user's, or its own as user/job) gets an error wrapping
// ErrThrottled, counted as throttled.
func (t *Tracker) Admit(id string) error {
	if len(t.limiters) == 0 {
		return nil
	}
	now := t.cfg.Now()
	for _, key := range [2]string{userOf(id), id} {
		if l := t.limiters[key]; l != nil {
			r := l.ReserveN(now, 1)
			if d := r.DelayFrom(now); d > 0 {
				r.CancelAt(now)
				t.record(id, 0, true, true, now)
				return &ThrottledError{Limited: key, Limit: float64(l.Limit()), RetryAfter: d}
			}
		}
		if key == id {
			break
		}
	}
	return nil
}

// Done records a call of tenant id that took busy and failed or not.
func (t *Tracker) Done(id string, busy time.Duration, failed bool) {
	t.record(id, busy, failed, false, t.cfg.Now())
}

// DoneAt is Done for a caller that has just read the wall clock (time.Now):
// now is that reading, which saves the tracker its own on every request
// unless Config.Now gave it another clock.
func (t *Tracker) DoneAt(id string, busy time.Duration, failed bool, now time.Time) {
	if !t.wall {
		now = t.cfg.Now()
	}
	t.record(id, busy, failed, false, now)
}

func (t *Tracker) record(id string, busy time.Duration, failed, throttled bool, now time.Time) {
	if now.Unix() != t.sec.Load() {
		t.roll(now)
	}
	t.mu.RLock()
	e := t.named[id]
	if e != nil {
		e.win.Add(1)
		count(e, busy, failed, throttled)
		t.mu.RUnlock()
		return
	}
	t.mu.RUnlock()
	t.mu.Lock()
	count(t.entryFor(id), busy, failed, throttled)
	t.mu.Unlock()
}

func count(e *entry, busy time.Duration, failed, throttled bool) {
	e.ops.Add(1)
	if failed {
		e.errs.Add(1)
	}
	if throttled {
		e.throttled.Add(1)
	}
	e.busy.Add(int64(busy))
}

// roll turns the second: each entry's window goes into its decayed rate.
func (t *Tracker) roll(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sec := now.Unix()
	last := t.sec.Load()
	if sec <= last {
		return
	}
	f := math.Exp(-float64(sec-last) / t.tau)
	for _, m := range [2]map[string]*entry{t.named, t.pending} {
		for _, e := range m {
			e.rate = (e.rate + float64(e.win.Swap(0))) * f
		}
	}
	t.sec.Store(sec)
}

// decayed is e's decayed count now: the rate of the seconds before and
// the requests of this one. t.mu is held (either way).
func (t *Tracker) decayed(e *entry) float64 { return e.rate + float64(e.win.Load()) }

// entryFor counts a request of unnamed tenant id in its decayed rate and
// returns the entry its counts go to: its own, once it is named (there is
// room, or its rate passed the slowest named tenant's, which is then
// folded into other), else other. t.mu is held for writing.
func (t *Tracker) entryFor(id string) *entry {
	if e := t.named[id]; e != nil { // named since the read lock was let go
		e.win.Add(1)
		return e
	}
	if len(t.named) < t.cfg.Top {
		e := &entry{}
		e.win.Add(1)
		t.named[id] = e
		return e
	}
	p := t.pending[id]
	if p == nil {
		if len(t.pending) >= 4*t.cfg.Top {
			t.dropSlowestPending()
		}
		p = &entry{}
		t.pending[id] = p
	}
	p.win.Add(1)
	sid, slow := t.slowestNamed()
	if t.decayed(p) <= slow {
		return &t.other
	}
	old := t.named[sid]
	t.other.ops.Add(old.ops.Load())
	t.other.errs.Add(old.errs.Load())
	t.other.throttled.Add(old.throttled.Load())
	t.other.busy.Add(old.busy.Load())
	delete(t.named, sid)
	demoted := &entry{rate: old.rate}
	demoted.win.Store(old.win.Load())
	t.pending[sid] = demoted
	delete(t.pending, id)
	t.named[id] = p // its counts start now; its rate comes with it
	return p
}

// slowestNamed returns the named tenant with the lowest decayed rate, and
// that rate (ties: the greater id, so that the choice is stable).
func (t *Tracker) slowestNamed() (string, float64) {
	var sid string
	low := math.Inf(1)
	for id, e := range t.named {
		if d := t.decayed(e); d < low || (d == low && id > sid) {
			sid, low = id, d
		}
	}
	return sid, low
}

func (t *Tracker) dropSlowestPending() {
	var sid string
	low := math.Inf(1)
	for id, e := range t.pending {
		if d := t.decayed(e); d < low || (d == low && id < sid) {
			sid, low = id, d
		}
	}
	delete(t.pending, sid)
}

// Snapshot returns the named tenants, heaviest first by decayed rate, then
// other.
func (t *Tracker) Snapshot() []Stat {
	if now := t.cfg.Now(); now.Unix() != t.sec.Load() {
		t.roll(now)
	}
	stat := func(id string, e *entry, rate float64) Stat {
		return Stat{Tenant: id, Ops: e.ops.Load(), Errors: e.errs.Load(), Throttled: e.throttled.Load(),
			BusyS: time.Duration(e.busy.Load()).Seconds(), RateOpsS: rate, Limit: t.limitOf(id)}
	}
	t.mu.RLock()
	out := make([]Stat, 0, len(t.named)+1)
	for id, e := range t.named {
		out = append(out, stat(id, e, t.decayed(e)/t.tau))
	}
	o := stat(Other, &t.other, 0)
	t.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].RateOpsS != out[j].RateOpsS {
			return out[i].RateOpsS > out[j].RateOpsS
		}
		return out[i].Tenant < out[j].Tenant
	})
	o.Limit = 0
	return append(out, o)
}

func (t *Tracker) limitOf(id string) float64 {
	if l := t.limiters[id]; l != nil {
		return float64(l.Limit())
	}
	return 0
}

// Limited lists the tenants with a limit, sorted.
func (t *Tracker) Limited() []string {
	ids := make([]string, 0, len(t.limiters))
	for id := range t.limiters {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Describe implements prometheus.Collector.
func (t *Tracker) Describe(ch chan<- *prometheus.Desc) {
	ch <- t.opsDesc
	ch <- t.errDesc
	ch <- t.thrDesc
	ch <- t.busyDesc
}

// Collect implements prometheus.Collector.
func (t *Tracker) Collect(ch chan<- prometheus.Metric) {
	for _, s := range t.Snapshot() {
		ch <- prometheus.MustNewConstMetric(t.opsDesc, prometheus.CounterValue, float64(s.Ops), s.Tenant)
		ch <- prometheus.MustNewConstMetric(t.errDesc, prometheus.CounterValue, float64(s.Errors), s.Tenant)
		ch <- prometheus.MustNewConstMetric(t.thrDesc, prometheus.CounterValue, float64(s.Throttled), s.Tenant)
		ch <- prometheus.MustNewConstMetric(t.busyDesc, prometheus.CounterValue, s.BusyS, s.Tenant)
	}
}
