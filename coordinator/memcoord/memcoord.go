// Package memcoord is the in-process coordinator: the membership, leases
// and elections of NameNode instances that all run in one process (the
// default of `nimbus serve`).
//
// In one process a member cannot be cut off from the coordinator, so a
// session's lease is renewed implicitly for as long as the session lives;
// it ends at Leave or Close. Tests cut a session off (Session.Cut), as a
// partition from a remote coordinator would, and move an injected
// coordinator.Manual clock to expire it deterministically: its local
// deadline passes (Lost, leaderships end) Margin before the lease expires
// (Left, the next leader elected), the same order etcdcoord guarantees.
package memcoord

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/coordinator"
)

// Config configures a Coordinator. Start from DefaultConfig.
type Config struct {
	// TTL is the lease of a session that stopped renewing (Cut): it
	// expires TTL after the cut.
	TTL time.Duration
	// Margin is how much earlier than the expiry the session's own
	// deadline passes (0 < Margin < TTL).
	Margin time.Duration
	// Clock; nil is coordinator.Real.
	Clock coordinator.Clock
	// Logger may be nil (discard).
	Logger *slog.Logger
	// Registerer may be nil (no metrics).
	Registerer prometheus.Registerer
}

// DefaultConfig: a 10 s lease, a 1 s margin, the real clock.
func DefaultConfig() Config {
	return Config{TTL: 10 * time.Second, Margin: time.Second}
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	if c.TTL <= 0 {
		return fmt.Errorf("memcoord: TTL = %v, want > 0", c.TTL)
	}
	if c.Margin <= 0 || c.Margin >= c.TTL {
		return fmt.Errorf("memcoord: Margin = %v, want between 0 and TTL (%v)", c.Margin, c.TTL)
	}
	return nil
}

// Coordinator is the in-process coordinator.Coordinator.
type Coordinator struct {
	cfg    Config
	clock  coordinator.Clock
	log    *slog.Logger
	met    *coordinator.Metrics
	closed chan struct{} // closed by Close: watch pumps end

	mu struct {
		sync.Mutex
		closed    bool
		rev       int64
		members   map[string]*Session // by Member.ID, until the lease expires or Leave
		watchers  map[*watcher]struct{}
		elections map[string][]*candidate // candidates in campaign order; [0] leads
	}
}

var _ coordinator.Coordinator = (*Coordinator)(nil)

// New returns an empty coordinator.
func New(cfg Config) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = coordinator.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &Coordinator{cfg: cfg, clock: cfg.Clock, log: cfg.Logger, met: coordinator.NewMetrics(cfg.Registerer, "inprocess"),
		closed: make(chan struct{})}
	c.mu.members = make(map[string]*Session)
	c.mu.watchers = make(map[*watcher]struct{})
	c.mu.elections = make(map[string][]*candidate)
	return c, nil
}

// Session is a member's lease in a memcoord Coordinator.
type Session struct {
	c      *Coordinator
	member coordinator.Member
	lost   chan struct{}

	// guarded by c.mu
	ended     bool      // lost or left: lost is closed
	err       error     // why it ended
	gone      bool      // out of the membership (expired, left)
	cut       bool      // renewals stopped (Cut)
	cutAt     time.Time // when
	timers    []coordinator.Timer
	campaigns map[string]*candidate
}

var _ coordinator.Session = (*Session)(nil)

type candidate struct {
	s        *Session
	election string
	elected  chan struct{} // closed when it leads
	done     chan struct{} // closed when its leadership (or campaign) ends
	head     bool
	ended    bool
}

func (c *Coordinator) op(name string, start time.Time, err error) error {
	c.met.Op(name, start, err)
	return err
}

// Join adds m to the membership.
func (c *Coordinator) Join(ctx context.Context, m coordinator.Member) (_ coordinator.Session, err error) {
	defer func(t time.Time) { c.op("join", t, err) }(time.Now())
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, coordinator.ErrClosed
	}
	if _, ok := c.mu.members[m.ID]; ok {
		return nil, fmt.Errorf("%w: %s", coordinator.ErrMemberExists, m.ID)
	}
	s := &Session{c: c, member: m, lost: make(chan struct{}), campaigns: make(map[string]*candidate)}
	c.mu.members[m.ID] = s
	c.mu.rev++
	c.emitLocked(coordinator.Event{Kind: coordinator.Joined, Rev: c.mu.rev, Member: m})
	c.met.SessionStarted()
	c.log.Info("member joined", "member", m.ID, "deployment", m.Deployment, "addr", m.Addr)
	return s, nil
}

// Members lists the membership of deployment (coordinator.All: all).
func (c *Coordinator) Members(ctx context.Context, deployment int) (_ coordinator.View, err error) {
	defer func(t time.Time) { c.op("members", t, err) }(time.Now())
	if err := ctx.Err(); err != nil {
		return coordinator.View{}, err
	}
	if deployment < coordinator.All {
		return coordinator.View{}, fmt.Errorf("%w: deployment %d", coordinator.ErrInvalid, deployment)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return coordinator.View{}, coordinator.ErrClosed
	}
	return coordinator.View{Rev: c.mu.rev, Members: c.membersLocked(deployment)}, nil
}

func (c *Coordinator) membersLocked(deployment int) []coordinator.Member {
	ms := []coordinator.Member{}
	for _, s := range c.mu.members {
		if deployment == coordinator.All || s.member.Deployment == deployment {
			ms = append(ms, s.member)
		}
	}
	coordinator.SortMembers(ms)
	return ms
}

// Leader reports who leads election.
func (c *Coordinator) Leader(ctx context.Context, election string) (_ coordinator.Member, _ bool, err error) {
	defer func(t time.Time) { c.op("leader", t, err) }(time.Now())
	if err := coordinator.ValidElection(election); err != nil {
		return coordinator.Member{}, false, err
	}
	if err := ctx.Err(); err != nil {
		return coordinator.Member{}, false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return coordinator.Member{}, false, coordinator.ErrClosed
	}
	if q := c.mu.elections[election]; len(q) > 0 {
		return q[0].s.member, true, nil
	}
	return coordinator.Member{}, false, nil
}

// Evict ends member id's lease at once, as an expiry would (the session,
// if it still runs, is lost; the member leaves).
func (c *Coordinator) Evict(ctx context.Context, id string) (err error) {
	defer func(t time.Time) { c.op("evict", t, err) }(time.Now())
	if err := (coordinator.Member{ID: id}).Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return coordinator.ErrClosed
	}
	s := c.mu.members[id]
	if s == nil {
		return nil
	}
	c.log.Warn("member evicted: its process is known dead", "member", id)
	s.endLocked(coordinator.ErrSessionLost)
	s.goneLocked()
	return nil
}

// Close ends every session and watch.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil
	}
	c.mu.closed = true
	for _, s := range c.mu.members {
		s.endLocked(coordinator.ErrClosed)
		s.goneLocked()
	}
	close(c.closed)
	return nil
}

// Member is the session's member.
func (s *Session) Member() coordinator.Member { return s.member }

// Lost is closed when the session ends.
func (s *Session) Lost() <-chan struct{} { return s.lost }

// Err says why the session ended; nil while it lives.
func (s *Session) Err() error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.err
}

// Deadline is the local deadline: TTL - Margin after the cut, or after now
// while the session is not cut off (an in-process member renews
// implicitly).
func (s *Session) Deadline() time.Time {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case s.ended:
		return time.Time{}
	case s.cut:
		return s.cutAt.Add(c.cfg.TTL - c.cfg.Margin)
	}
	return c.clock.Now().Add(c.cfg.TTL - c.cfg.Margin)
}

// Cut stops the session's implicit renewals, as a partition from the
// coordinator (or a process stalled past its lease) would: TTL-Margin later
// on the coordinator's clock the session is lost (Lost, leaderships end),
// TTL later its lease expires (the member leaves, the next leader is
// elected). For fault tests.
func (s *Session) Cut() {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.cut || s.ended {
		return
	}
	s.cut = true
	s.cutAt = c.clock.Now()
	s.timers = append(s.timers,
		c.clock.AfterFunc(c.cfg.TTL-c.cfg.Margin, func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if s.endLocked(coordinator.ErrSessionLost) {
				c.log.Warn("member's lease lost: its deadline passed without a renewal", "member", s.member.ID)
			}
		}),
		c.clock.AfterFunc(c.cfg.TTL, func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			s.endLocked(coordinator.ErrSessionLost)
			if !s.gone {
				c.log.Warn("member's lease expired", "member", s.member.ID)
			}
			s.goneLocked()
		}))
}

// Leave removes the member at once.
func (s *Session) Leave(ctx context.Context) (err error) {
	c := s.c
	defer func(t time.Time) { c.op("leave", t, err) }(time.Now())
	c.mu.Lock()
	defer c.mu.Unlock()
	s.endLocked(coordinator.ErrClosed)
	s.goneLocked()
	return nil
}

// endLocked ends the session (Lost, leaderships), once; it reports whether
// this call ended it.
func (s *Session) endLocked(why error) bool {
	if s.ended {
		return false
	}
	s.ended, s.err = true, why
	close(s.lost)
	for _, cd := range s.campaigns {
		cd.endLocked()
	}
	s.c.met.SessionEnded(errors.Is(why, coordinator.ErrSessionLost))
	return true
}

// goneLocked takes the member out of the membership and its elections.
func (s *Session) goneLocked() {
	c := s.c
	if s.gone {
		return
	}
	s.gone = true
	for _, t := range s.timers {
		t.Stop()
	}
	for _, cd := range s.campaigns {
		c.dropCandidateLocked(cd)
	}
	s.campaigns = nil
	if c.mu.members[s.member.ID] == s {
		delete(c.mu.members, s.member.ID)
		c.mu.rev++
		c.emitLocked(coordinator.Event{Kind: coordinator.Left, Rev: c.mu.rev, Member: s.member})
		c.log.Info("member left", "member", s.member.ID, "why", s.err)
	}
}

func (cd *candidate) endLocked() {
	if !cd.ended {
		cd.ended = true
		close(cd.done)
	}
}

// dropCandidateLocked removes cd from its election's queue; the next one
// leads if cd did.
func (c *Coordinator) dropCandidateLocked(cd *candidate) {
	q := c.mu.elections[cd.election]
	i := slices.Index(q, cd)
	if i < 0 {
		return
	}
	q = slices.Delete(q, i, i+1)
	if len(q) == 0 {
		delete(c.mu.elections, cd.election)
		return
	}
	c.mu.elections[cd.election] = q
	if i == 0 {
		q[0].head = true
		close(q[0].elected)
	}
}

// Campaign blocks until s leads election.
func (s *Session) Campaign(ctx context.Context, election string) (_ coordinator.Leadership, err error) {
	c := s.c
	defer func(t time.Time) { c.op("campaign", t, err) }(time.Now())
	if err := coordinator.ValidElection(election); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if s.ended {
		c.mu.Unlock()
		return nil, s.err
	}
	if _, ok := s.campaigns[election]; ok {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %s in %s", coordinator.ErrCampaigning, s.member.ID, election)
	}
	cd := &candidate{s: s, election: election, elected: make(chan struct{}), done: make(chan struct{})}
	s.campaigns[election] = cd
	q := append(c.mu.elections[election], cd)
	c.mu.elections[election] = q
	if len(q) == 1 {
		cd.head = true
		close(cd.elected)
	}
	c.mu.Unlock()

	select {
	case <-cd.elected:
	case <-ctx.Done():
	case <-s.lost:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case s.ended:
		return nil, s.err
	case !cd.head:
		c.dropCandidateLocked(cd)
		delete(s.campaigns, election)
		return nil, ctx.Err()
	}
	c.met.Won()
	c.log.Info("elected", "election", election, "member", s.member.ID)
	return &leadership{cd: cd}, nil
}

type leadership struct{ cd *candidate }

func (l *leadership) Election() string      { return l.cd.election }
func (l *leadership) Done() <-chan struct{} { return l.cd.done }

func (l *leadership) Resign(ctx context.Context) (err error) {
	s := l.cd.s
	c := s.c
	defer func(t time.Time) { c.op("resign", t, err) }(time.Now())
	c.mu.Lock()
	defer c.mu.Unlock()
	l.cd.endLocked()
	c.dropCandidateLocked(l.cd)
	if s.campaigns[l.cd.election] == l.cd {
		delete(s.campaigns, l.cd.election)
	}
	return nil
}
