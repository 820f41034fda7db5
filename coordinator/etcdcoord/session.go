package etcdcoord

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nimbus-fs/nimbus/coordinator"
)

// Session is a member's etcd lease.
type Session struct {
	c         *Coordinator
	member    coordinator.Member
	lease     clientv3.LeaseID
	ttl       time.Duration // as granted
	lost      chan struct{}
	stopRenew chan struct{} // closed when renewals stop (end, StopRenewal)
	stopOnce  sync.Once

	mu struct {
		sync.Mutex
		deadline  time.Time // local; zero once ended
		timer     *time.Timer
		ended     bool
		err       error
		campaigns map[string]*leadership // by election, from the start of a campaign to a completed resign or withdrawal
	}
}

var _ coordinator.Session = (*Session)(nil)

// Member is the session's member.
func (s *Session) Member() coordinator.Member { return s.member }

// Lost is closed when the session ends.
func (s *Session) Lost() <-chan struct{} { return s.lost }

// Err says why the session ended; nil while it lives.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.err
}

// Deadline is the local deadline of the lease (see the package comment).
func (s *Session) Deadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.deadline
}

// Lease is the etcd lease id.
func (s *Session) Lease() clientv3.LeaseID { return s.lease }

// valid reports whether the session may act now: not ended and before its
// deadline (the rule, independent of when the timer fires).
func (s *Session) valid() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.mu.ended && time.Now().Before(s.mu.deadline)
}

// armLocked sets the timer that ends the session at its deadline.
func (s *Session) armLocked(now time.Time) {
	if s.mu.timer != nil {
		s.mu.timer.Stop()
	}
	s.mu.timer = time.AfterFunc(s.mu.deadline.Sub(now), func() {
		s.mu.Lock()
		due := !s.mu.ended && !time.Now().Before(s.mu.deadline)
		s.mu.Unlock()
		if due {
			s.end(coordinator.ErrSessionLost, "its local deadline passed without a renewal")
		}
	})
}

// extend moves the deadline to d if that is later.
func (s *Session) extend(d time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.ended || !d.After(s.mu.deadline) {
		return
	}
	s.mu.deadline = d
	s.armLocked(time.Now())
}

// end ends the session once: Lost closes, leaderships end, renewals stop.
// A lease lost is revoked as well, in case the server still has it (the
// local deadline passes first): peers need not wait for its expiry.
func (s *Session) end(why error, how string) bool {
	s.mu.Lock()
	if s.mu.ended {
		s.mu.Unlock()
		return false
	}
	s.mu.ended, s.mu.err = true, why
	s.mu.deadline = time.Time{}
	if s.mu.timer != nil {
		s.mu.timer.Stop()
	}
	for _, l := range s.mu.campaigns {
		l.finish()
	}
	s.mu.Unlock()
	close(s.lost)
	s.StopRenewal()
	c := s.c
	c.mu.Lock()
	delete(c.mu.sessions, s)
	c.mu.Unlock()
	lost := errors.Is(why, coordinator.ErrSessionLost)
	c.met.SessionEnded(lost)
	if lost {
		c.log.Warn("member's session lost: fenced", "member", s.member.ID, "why", how)
		c.revokeSoon(s.lease)
	}
	return true
}

// StopRenewal stops renewing the lease, as a partition from etcd would: the
// session is lost at its local deadline and the server expires the lease
// after its TTL. For fault tests (and the end of the session).
func (s *Session) StopRenewal() {
	s.stopOnce.Do(func() {
		close(s.stopRenew)
	})
}

// renew renews the lease every quarter TTL until the session ends (see the
// package comment for the deadline it computes).
func (s *Session) renew() {
	c := s.c
	every := s.ttl / 4
	retry := min(every/8, 250*time.Millisecond)
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-s.stopRenew:
			return
		case <-c.life.Done():
			return
		case <-t.C:
		}
		dl := s.Deadline()
		if dl.IsZero() {
			return
		}
		// The deadline counts from when the call began, whatever the
		// client retried inside it; so one call is cut off after an
		// eighth of the TTL and the next one, timed afresh, tried: the
		// renewal that ends an etcd election's wait then counts from its
		// own send, not from the first attempt's.
		sent := time.Now()
		ctx, cancel := context.WithDeadline(c.life, minTime(dl, sent.Add(every/2)))
		resp, err := c.cli.KeepAliveOnce(ctx, s.lease)
		cancel()
		select {
		case <-s.stopRenew: // a renewal that raced StopRenewal does not count
			return
		default:
		}
		switch {
		case err == nil:
			d := sent.Add(localTTL(time.Duration(resp.TTL)*time.Second, c.cfg.Drift, c.cfg.Margin))
			s.extend(d)
			now := time.Now()
			c.met.Renewal(now.Sub(sent), d.Sub(now), nil)
			t.Reset(every)
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			c.met.Renewal(0, 0, err)
			s.end(coordinator.ErrSessionLost, "etcd reports its lease gone")
			return
		default:
			c.met.Renewal(0, 0, err)
			c.log.Debug("lease renewal failed; retrying", "member", s.member.ID, "err", err, "left", time.Until(s.Deadline()))
			t.Reset(retry)
		}
	}
}

// Leave revokes the lease: the member and its candidacies go at once.
func (s *Session) Leave(ctx context.Context) (err error) {
	defer func(t time.Time) { s.c.met.Op("leave", t, err) }(time.Now())
	return s.leave(ctx)
}

func (s *Session) leave(ctx context.Context) error {
	first := s.end(coordinator.ErrClosed, "left")
	if first {
		s.c.log.Info("member left", "member", s.member.ID)
	}
	octx, cancel := s.c.opCtx(ctx)
	defer cancel()
	_, err := s.c.cli.Revoke(octx, s.lease)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		err = nil
	}
	return fail(ctx, "revoke the lease of "+s.member.ID, err)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
