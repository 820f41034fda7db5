package etcdcoord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nimbus-fs/nimbus/coordinator"
	"github.com/nimbus-fs/nimbus/internal/backoff"
)

// leadership is a candidacy, then a won election. The candidacy is the
// key electionPrefix(election)+<lease, hex>, on the session's lease: one
// session has at most one in an election.
type leadership struct {
	s        *Session
	election string
	key      string
	rev      int64 // create revision of the key, once put
	done     chan struct{}
	once     sync.Once
	// withdrawn is closed once the key is gone after a failed campaign
	// or a resignation (or the session ended); guarded by s.mu until set.
	withdrawn chan struct{}
}

func (l *leadership) finish()               { l.once.Do(func() { close(l.done) }) }
func (l *leadership) Election() string      { return l.election }
func (l *leadership) Done() <-chan struct{} { return l.done }

// Campaign puts s's candidacy and waits until every older one is gone.
// Transient etcd errors are retried (it waits), so it returns only when
// elected, when ctx is done, or when the session or the coordinator ends.
func (s *Session) Campaign(ctx context.Context, election string) (_ coordinator.Leadership, err error) {
	c := s.c
	defer func(t time.Time) { c.met.Op("campaign", t, err) }(time.Now())
	if err := coordinator.ValidElection(election); err != nil {
		return nil, err
	}
	l := &leadership{s: s, election: election, done: make(chan struct{}),
		key: fmt.Sprintf("%s%x", c.electionPrefix(election), int64(s.lease))}
	for {
		s.mu.Lock()
		if s.mu.ended {
			s.mu.Unlock()
			return nil, s.mu.err
		}
		prev := s.mu.campaigns[election]
		if prev == nil {
			s.mu.campaigns[election] = l
			s.mu.Unlock()
			break
		}
		withdrawn := prev.withdrawn
		s.mu.Unlock()
		if withdrawn == nil {
			return nil, fmt.Errorf("%w: %s in %s", coordinator.ErrCampaigning, s.member.ID, election)
		}
		// The previous candidacy is being withdrawn: the key is the same.
		select {
		case <-withdrawn:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.lost:
		}
	}

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.life, cancel)()
	go func() {
		select {
		case <-s.lost:
			cancel()
		case <-cctx.Done():
		}
	}()
	err = s.putCandidacy(cctx, l)
	if err == nil {
		err = s.waitTurn(cctx, l)
	}
	if err == nil && !s.valid() {
		// Elected by the server's account, but its deadline passed
		// meanwhile: the lease may be gone already.
		err = coordinator.ErrSessionLost
	}
	if err != nil {
		l.finish()
		s.withdraw(l)
		switch {
		case s.Err() != nil:
			return nil, s.Err()
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case c.life.Err() != nil:
			return nil, coordinator.ErrClosed
		}
		return nil, err
	}
	c.met.Won()
	c.log.Info("elected", "election", election, "member", s.member.ID)
	return l, nil
}

// retryPolicy is the backoff between the attempts of a campaign's steps:
// from 50 ms, doubling to at most a second.
var retryPolicy = backoff.Policy{Initial: 50 * time.Millisecond, Max: time.Second}

// putCandidacy writes l's key if it is not there (a retried write that
// committed although its reply was lost finds it) and learns its create
// revision.
func (s *Session) putCandidacy(ctx context.Context, l *leadership) error {
	c := s.c
	val, _ := json.Marshal(s.member)
	wait := backoff.New(retryPolicy)
	for {
		octx, cancel := c.opCtx(ctx)
		resp, err := c.cli.Txn(octx).If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", 0)).
			Then(clientv3.OpPut(l.key, string(val), clientv3.WithLease(s.lease))).
			Else(clientv3.OpGet(l.key)).Commit()
		cancel()
		switch {
		case err == nil && resp.Succeeded:
			l.rev = resp.Header.Revision
			return nil
		case err == nil:
			if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
				l.rev = kvs[0].CreateRevision
				return nil
			}
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			return coordinator.ErrSessionLost
		default:
			c.log.Debug("campaign: put candidacy; retrying", "election", l.election, "member", s.member.ID, "err", err)
		}
		if err := wait.Wait(ctx); err != nil {
			return err
		}
	}
}

// waitTurn waits until no candidacy older than l's is left: it watches the
// delete of the one just older, then looks again.
func (s *Session) waitTurn(ctx context.Context, l *leadership) error {
	c := s.c
	wait := backoff.New(retryPolicy)
	opts := append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(l.rev-1))
	for {
		octx, cancel := c.opCtx(ctx)
		resp, err := c.cli.Get(octx, c.electionPrefix(l.election), opts...)
		cancel()
		if err != nil {
			c.log.Debug("campaign: read candidacies; retrying", "election", l.election, "err", err)
			if err := wait.Wait(ctx); err != nil {
				return err
			}
			continue
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		// WithRequireLeader: a member cut off from its cluster cancels the
		// watch rather than leave it silent; then look again.
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := c.cli.Watch(wctx, string(resp.Kvs[0].Key), clientv3.WithRev(resp.Header.Revision+1))
	watch:
		for wr := range wch {
			if wr.Err() != nil || wr.Canceled {
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					break watch
				}
			}
		}
		wcancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait.Reset()
	}
}

// withdraw deletes l's key in the background, retrying until it is gone
// or the session ends (its lease takes the key with it); a new campaign of
// the session in the same election waits for it. A candidacy left behind
// would lead the election, or hold up its queue, for as long as the session
// lives.
func (s *Session) withdraw(l *leadership) <-chan struct{} {
	c := s.c
	s.mu.Lock()
	if l.withdrawn != nil {
		s.mu.Unlock()
		return l.withdrawn
	}
	l.withdrawn = make(chan struct{})
	s.mu.Unlock()
	finished := func() {
		s.mu.Lock()
		if s.mu.campaigns[l.election] == l {
			delete(s.mu.campaigns, l.election)
		}
		s.mu.Unlock()
		close(l.withdrawn)
	}
	if !c.track(func() {
		defer finished()
		wait := backoff.New(retryPolicy)
		for s.Err() == nil {
			ctx, cancel := context.WithTimeout(c.life, c.cfg.OpTimeout)
			_, err := c.cli.Delete(ctx, l.key)
			cancel()
			if err == nil {
				return
			}
			c.log.Debug("withdrawing a candidacy; retrying", "election", l.election, "member", s.member.ID, "err", err)
			select {
			case <-time.After(wait.Next()):
			case <-c.life.Done():
				return
			case <-s.lost:
				return
			}
		}
	}) {
		finished() // closing: the session's lease is revoked or expires
	}
	return l.withdrawn
}

// Resign ends the leadership and deletes the candidacy. If etcd does not
// confirm the delete within the context (or OpTimeout) it returns
// ErrUnavailable and keeps trying in the background; the next leader is
// elected when the delete lands, or when this session ends.
func (l *leadership) Resign(ctx context.Context) (err error) {
	s := l.s
	defer func(t time.Time) { s.c.met.Op("resign", t, err) }(time.Now())
	l.finish()
	gone := s.withdraw(l)
	octx, cancel := s.c.opCtx(ctx)
	defer cancel()
	select {
	case <-gone:
		return nil
	case <-octx.Done():
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: etcdcoord: resign %s: the delete is not confirmed yet; retrying in the background",
			coordinator.ErrUnavailable, l.election)
	}
}
