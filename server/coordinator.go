package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nimbus-fs/nimbus/coordinator"
	"github.com/nimbus-fs/nimbus/coordinator/etcdcoord"
	"github.com/nimbus-fs/nimbus/coordinator/memcoord"
	"github.com/nimbus-fs/nimbus/internal/backoff"
)

// The server registers itself with the coordinator as a member of
// deployment 0 under its engine's instance id, with its address. The
// elected duties (duties.go) campaign through that membership; with etcd,
// subtree-flag liveness also asks it (memberLiveness): a NameNode is dead
// only when its instance row and its membership both say so
// (namespace.Liveness). Routing and cache coherence will consume it next
// (docs/ELASTIC.md, "Coordinator").

// CoordinatorInProcess is Config.Coordinator's default.
const CoordinatorInProcess = "inprocess"

// ValidateCoordinator checks Config.Coordinator and CoordinatorTTL.
func (c *Config) ValidateCoordinator() error {
	switch {
	case c.Coordinator == "" || c.Coordinator == CoordinatorInProcess:
		return nil
	case strings.HasPrefix(c.Coordinator, "etcd://"):
		_, err := etcdcoord.ParseURL(c.Coordinator)
		if err != nil {
			return fmt.Errorf("server: coordinator: %w", err)
		}
		if c.CoordinatorTTL != 0 && (c.CoordinatorTTL < time.Second || c.CoordinatorTTL%time.Second != 0) {
			return fmt.Errorf("server: coordinator TTL %v: want whole seconds, at least 1 s", c.CoordinatorTTL)
		}
		return nil
	}
	return fmt.Errorf("server: coordinator %q: want %s or etcd://HOST:PORT,...", c.Coordinator, CoordinatorInProcess)
}

// openCoordinator builds the coordinator Config.Coordinator names.
func (s *Server) openCoordinator(ctx context.Context) (coordinator.Coordinator, error) {
	log := s.log.With("component", "coordinator")
	if s.cfg.Coordinator == "" || s.cfg.Coordinator == CoordinatorInProcess {
		mc := memcoord.DefaultConfig()
		mc.Logger, mc.Registerer = log, s.reg
		return memcoord.New(mc)
	}
	ec, err := etcdcoord.ParseURL(s.cfg.Coordinator)
	if err != nil {
		return nil, err
	}
	if s.cfg.CoordinatorTTL != 0 {
		ec.TTL = s.cfg.CoordinatorTTL
	}
	ec.Logger, ec.Registerer = log, s.reg
	c, err := etcdcoord.New(ctx, ec)
	if err != nil {
		return nil, fmt.Errorf("server: coordinator %s: %w", s.cfg.Coordinator, err)
	}
	return c, nil
}

// memberLiveness answers namespace.Liveness from the membership: the engine
// with instance id i is alive while a member's ID is i in %016x, or an
// incarnation of it (%016x.N: the server joined again after losing its
// session; its engine is the same).
type memberLiveness struct{ c coordinator.Coordinator }

func (l memberLiveness) Alive(ctx context.Context, instance uint64) (bool, error) {
	v, err := l.c.Members(ctx, coordinator.All)
	if err != nil {
		return false, err
	}
	id := fmt.Sprintf("%016x", instance)
	for _, m := range v.Members {
		if m.ID == id || strings.HasPrefix(m.ID, id+".") {
			return true, nil
		}
	}
	return false, nil
}

// sharedCoordinator reports whether the coordinator is one that other
// servers share (etcd): an in-process one knows no peer, and must not be
// asked whether one is alive.
func (c *Config) sharedCoordinator() bool { return strings.HasPrefix(c.Coordinator, "etcd://") }

// membership keeps this server a member: it joins at Start and, should
// its session be lost (its lease expired: cut off from etcd for longer
// than the TTL), joins again as a new incarnation.
type membership struct {
	c    coordinator.Coordinator
	base coordinator.Member
	stop chan struct{}
	done chan struct{}

	mu struct {
		sync.Mutex
		s           coordinator.Session
		changed     chan struct{} // closed when s is replaced
		incarnation int
	}
}

// current is the session now and a channel closed when it is replaced.
func (m *membership) current() (coordinator.Session, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.s, m.mu.changed
}

// join registers the server (Start).
func (s *Server) join(ctx context.Context) error {
	m := &membership{c: s.coord, stop: make(chan struct{}), done: make(chan struct{}),
		base: coordinator.Member{ID: s.memberID(), Deployment: s.cfg.Deployment, Addr: s.advertise(), NoCache: s.cfg.CacheBytes == 0}}
	sess, err := m.c.Join(ctx, m.base)
	if err != nil {
		return fmt.Errorf("server: join the coordinator: %w", err)
	}
	m.mu.s = sess
	m.mu.changed = make(chan struct{})
	m.mu.incarnation = 1
	s.member = m
	go s.keepMember(m)
	return nil
}

// memberID is this server's member id: its namespace instance id in hex.
func (s *Server) memberID() string { return fmt.Sprintf("%016x", s.ns.Instance()) }

// advertise is the base URL this server gives its peers and clients:
// Config.Advertise, else its listener's (after Start has bound it).
func (s *Server) advertise() string {
	if s.cfg.Advertise != "" {
		return s.cfg.Advertise
	}
	return s.Addr()
}

// Member is this server's membership session (nil before Start).
func (s *Server) Member() coordinator.Session {
	if s.member == nil {
		return nil
	}
	s.member.mu.Lock()
	defer s.member.mu.Unlock()
	return s.member.mu.s
}

// keepMember joins again when the session is lost, until leave.
func (s *Server) keepMember(m *membership) {
	defer close(m.done)
	for {
		m.mu.Lock()
		sess := m.mu.s
		m.mu.Unlock()
		select {
		case <-m.stop:
			return
		case <-sess.Lost():
		}
		if !errors.Is(sess.Err(), coordinator.ErrSessionLost) {
			return
		}
		s.log.Error("this server's coordinator session was lost (cut off from the coordinator longer than its lease); joining again",
			"member", sess.Member().ID)
		retry := backoff.New(backoff.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second})
		for {
			m.mu.Lock()
			m.mu.incarnation++
			next := m.base
			next.ID = fmt.Sprintf("%s.%d", m.base.ID, m.mu.incarnation)
			m.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			ns, err := m.c.Join(ctx, next)
			cancel()
			if err == nil {
				m.mu.Lock()
				m.mu.s = ns
				close(m.mu.changed)
				m.mu.changed = make(chan struct{})
				m.mu.Unlock()
				s.log.Info("joined the coordinator again", "member", next.ID)
				break
			}
			s.log.Warn("joining the coordinator again", "member", next.ID, "err", err)
			select {
			case <-m.stop:
				return
			case <-time.After(retry.Next()):
			}
		}
	}
}

// leave ends the membership (Stop): peers see this server leave before it
// stops answering.
func (s *Server) leave(ctx context.Context) error {
	if s.member == nil {
		return nil
	}
	close(s.member.stop)
	<-s.member.done
	return s.Member().Leave(ctx)
}

// coordinatorName is Config.Coordinator for logs and the status page.
func (s *Server) coordinatorName() string {
	if s.cfg.Coordinator == "" {
		return CoordinatorInProcess
	}
	return s.cfg.Coordinator
}
