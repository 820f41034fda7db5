// Package etcdcoord is the coordinator over etcd's v3 API
// (go.etcd.io/etcd/client/v3), for NameNodes on several machines:
// `nimbus serve --coordinator etcd://HOST:PORT,...`.
//
// # Keys
//
// Under Config.Prefix (default /nimbus/coordinator/):
//
//	members/<deployment>/<member id>  -> JSON coordinator.Member, attached to the member's lease
//	ids/<member id>                   -> "", the same lease (IDs are unique across deployments)
//	elections/<name>/<lease id, hex>  -> JSON coordinator.Member, the member's candidacy, on its lease
//
// A member's key and its candidacies live and die with its lease, so an
// expiry removes the member (watchers see the delete) and hands its
// elections on in one step of the server.
//
// # Lease renewal and the local deadline
//
// Each session renews its lease itself with KeepAliveOnce every quarter of
// the TTL (more often after a failure; each call cut off after an eighth),
// timing each renewal from the moment it was sent: the server restarts the
// TTL when it receives the renewal, later in real time, so sent + TTL is a
// lower bound on the server's expiry, which is what fencing needs. The
// local deadline is sent + TTL×(1-Drift) - Margin (Drift bounds how much
// faster the server's clock may run than ours; Margin covers the time
// between the deadline and the instance actually refusing). etcd only ever
// lengthens a lease behind the client's back (a new etcd leader renews
// every lease for a full TTL), never shortens it, so the bound survives
// etcd failovers. docs/ELASTIC.md, "Coordinator", has the argument in full.
//
// # Elections
//
// The layout and the rule of etcd's concurrency.Election (the oldest
// candidacy by create revision leads; each candidate waits for the delete
// of the one just older), written here rather than used from the
// concurrency package, for two reasons met under an etcd leader kill:
// its Resign forgets the candidacy even when the delete failed, so that a
// retried Resign returns nil and leaves a ghost leader behind that blocks
// the election until the session ends; and its Campaign cannot bound its
// first write apart from its wait, so a write stranded on a follower whose
// leader died (etcd holds it for its request timeout, about 7 s) stalls
// the campaign. Here every write is bounded by OpTimeout and retried, a
// withdrawal or resignation is retried until the key is gone, and waiting
// is a watch.
package etcdcoord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/nimbus-fs/nimbus/coordinator"
)

// Config configures a Coordinator. Start from DefaultConfig.
type Config struct {
	// Endpoints are the etcd members' client addresses (host:port, or
	// http://host:port).
	Endpoints []string
	// Prefix of every key; coordinators with different prefixes share
	// nothing. Ends with "/".
	Prefix string
	// TTL of a session's lease, in whole seconds (etcd's unit; the server
	// may raise a TTL below its minimum, 1.5 election timeouts).
	TTL time.Duration
	// Drift bounds the relative rate difference between this machine's
	// clock and the etcd leader's (0.01: 1%).
	Drift float64
	// Margin is subtracted from each local deadline on top of Drift.
	Margin time.Duration
	// DialTimeout bounds connecting at New.
	DialTimeout time.Duration
	// OpTimeout bounds each non-blocking call (Join, Members, Leader,
	// Leave, Resign) unless the caller's context ends first; when it
	// passes, the call fails with coordinator.ErrUnavailable.
	OpTimeout time.Duration
	// Logger may be nil (discard).
	Logger *slog.Logger
	// Registerer may be nil (no metrics).
	Registerer prometheus.Registerer
}

// DefaultConfig: a 10 s lease, 1% drift, 500 ms margin.
func DefaultConfig() Config {
	return Config{Prefix: "/nimbus/coordinator/", TTL: 10 * time.Second, Drift: 0.01, Margin: 500 * time.Millisecond,
		DialTimeout: 5 * time.Second, OpTimeout: 5 * time.Second}
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	if len(c.Endpoints) == 0 {
		return errors.New("etcdcoord: no endpoints")
	}
	if !strings.HasPrefix(c.Prefix, "/") || !strings.HasSuffix(c.Prefix, "/") {
		return fmt.Errorf("etcdcoord: Prefix %q must begin and end with /", c.Prefix)
	}
	if c.TTL < time.Second || c.TTL%time.Second != 0 {
		return fmt.Errorf("etcdcoord: TTL = %v, want whole seconds, at least 1 s", c.TTL)
	}
	if c.Drift < 0 || c.Drift >= 0.5 {
		return fmt.Errorf("etcdcoord: Drift = %v, want in [0, 0.5)", c.Drift)
	}
	if c.Margin < 0 || localTTL(c.TTL, c.Drift, c.Margin) < c.TTL/2 {
		return fmt.Errorf("etcdcoord: Margin = %v: the local deadline must leave at least half the TTL (%v)", c.Margin, c.TTL)
	}
	if c.DialTimeout <= 0 || c.OpTimeout <= 0 {
		return fmt.Errorf("etcdcoord: DialTimeout %v and OpTimeout %v must be > 0", c.DialTimeout, c.OpTimeout)
	}
	return nil
}

// localTTL is how long after sending a renewal that the server granted ttl
// this process may count on the lease.
func localTTL(ttl time.Duration, drift float64, margin time.Duration) time.Duration {
	return time.Duration(float64(ttl)*(1-drift)) - margin
}

// ParseURL reads a --coordinator value, etcd://HOST:PORT[,HOST:PORT...][/PREFIX],
// into a DefaultConfig with its endpoints (and its prefix, if given).
func ParseURL(s string) (Config, error) {
	rest, ok := strings.CutPrefix(s, "etcd://")
	if !ok {
		return Config{}, fmt.Errorf("etcdcoord: %q: want etcd://HOST:PORT,...", s)
	}
	cfg := DefaultConfig()
	hosts, path, _ := strings.Cut(rest, "/")
	for _, h := range strings.Split(hosts, ",") {
		host, port, ok := strings.Cut(h, ":")
		if _, err := strconv.Atoi(port); !ok || host == "" || err != nil {
			return Config{}, fmt.Errorf("etcdcoord: %q: endpoint %q is not HOST:PORT", s, h)
		}
		cfg.Endpoints = append(cfg.Endpoints, h)
	}
	if path = strings.Trim(path, "/"); path != "" {
		cfg.Prefix = "/" + path + "/"
	}
	return cfg, cfg.Validate()
}

// Coordinator is the etcd coordinator.Coordinator.
type Coordinator struct {
	cfg  Config
	cli  *clientv3.Client
	log  *slog.Logger
	met  *coordinator.Metrics
	life context.Context // cancelled by Close: renewals and watches end
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu struct {
		sync.Mutex
		closed   bool // Close began: no new sessions or watches
		draining bool // Close waits for wg: no new goroutines
		sessions map[*Session]struct{}
	}
}

var _ coordinator.Coordinator = (*Coordinator)(nil)

// New connects to etcd (within DialTimeout).
func New(ctx context.Context, cfg Config) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		Context:     context.WithoutCancel(ctx),
		Logger:      zap.NewNop(), // errors reach slog through the calls that meet them
		// Detect a dead connection (a member killed or cut off) in
		// seconds, not at TCP's pace.
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: etcd %s: %v", coordinator.ErrUnavailable, strings.Join(cfg.Endpoints, ","), err)
	}
	// clientv3.New does not wait for a member; ask one, so that a wrong
	// address fails here rather than at the first Join.
	sctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	_, err = cli.Get(sctx, cfg.Prefix+"members/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	cancel()
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("%w: etcd %s: %v", coordinator.ErrUnavailable, strings.Join(cfg.Endpoints, ","), err)
	}
	c := &Coordinator{cfg: cfg, cli: cli, log: cfg.Logger, met: coordinator.NewMetrics(cfg.Registerer, "etcd")}
	c.life, c.stop = context.WithCancel(context.Background())
	c.mu.sessions = make(map[*Session]struct{})
	return c, nil
}

// Client is the etcd client (for tests and tools).
func (c *Coordinator) Client() *clientv3.Client { return c.cli }

func (c *Coordinator) membersPrefix(deployment int) string {
	if deployment == coordinator.All {
		return c.cfg.Prefix + "members/"
	}
	return c.cfg.Prefix + "members/" + strconv.Itoa(deployment) + "/"
}

func (c *Coordinator) memberKey(m coordinator.Member) string {
	return c.membersPrefix(m.Deployment) + m.ID
}

// electionPrefix is the prefix of election name's candidacies.
func (c *Coordinator) electionPrefix(name string) string {
	return c.cfg.Prefix + "elections/" + name + "/"
}

// opCtx bounds a non-blocking call by OpTimeout.
func (c *Coordinator) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.OpTimeout)
}

// fail maps an etcd error: the caller's context error as it is; a lease
// gone to ErrSessionLost; anything else (no leader, connection lost,
// OpTimeout passed) to ErrUnavailable, which the caller may retry.
func fail(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("%w: etcdcoord: %s: %v", coordinator.ErrSessionLost, op, err)
	}
	return fmt.Errorf("%w: etcdcoord: %s: %v", coordinator.ErrUnavailable, op, err)
}

func (c *Coordinator) checkOpen() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return coordinator.ErrClosed
	}
	return nil
}

// Join grants a lease and puts the member's key under it, if no live
// member has its ID.
func (c *Coordinator) Join(ctx context.Context, m coordinator.Member) (_ coordinator.Session, err error) {
	defer func(t time.Time) { c.met.Op("join", t, err) }(time.Now())
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	val, _ := json.Marshal(m)
	octx, cancel := c.opCtx(ctx)
	defer cancel()
	sent := time.Now()
	g, err := c.cli.Grant(octx, int64(c.cfg.TTL/time.Second))
	if err != nil {
		return nil, fail(ctx, "grant a lease", err)
	}
	deadline := sent.Add(localTTL(time.Duration(g.TTL)*time.Second, c.cfg.Drift, c.cfg.Margin))
	key, idKey := c.memberKey(m), c.cfg.Prefix+"ids/"+m.ID
	resp, err := c.cli.Txn(octx).If(clientv3.Compare(clientv3.CreateRevision(idKey), "=", 0)).
		Then(clientv3.OpPut(idKey, "", clientv3.WithLease(g.ID)), clientv3.OpPut(key, string(val), clientv3.WithLease(g.ID))).Commit()
	if err == nil && !resp.Succeeded {
		err = fmt.Errorf("%w: %s", coordinator.ErrMemberExists, m.ID)
	}
	if err != nil {
		c.revokeSoon(g.ID)
		if errors.Is(err, coordinator.ErrMemberExists) {
			return nil, err
		}
		return nil, fail(ctx, "put member "+m.ID, err)
	}
	s := &Session{c: c, member: m, lease: g.ID, ttl: time.Duration(g.TTL) * time.Second,
		lost: make(chan struct{}), stopRenew: make(chan struct{})}
	s.mu.deadline = deadline
	s.mu.campaigns = make(map[string]*leadership)
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		c.revokeSoon(g.ID)
		return nil, coordinator.ErrClosed
	}
	c.mu.sessions[s] = struct{}{}
	c.mu.Unlock()
	s.mu.Lock()
	s.armLocked(time.Now())
	s.mu.Unlock()
	c.met.SessionStarted()
	c.track(s.renew)
	c.log.Info("member joined", "member", m.ID, "deployment", m.Deployment, "addr", m.Addr,
		"lease", fmt.Sprintf("%x", int64(g.ID)), "ttl", s.ttl)
	return s, nil
}

// revokeSoon revokes a lease in the background, bounded by OpTimeout (the
// lease expires by itself if this fails).
func (c *Coordinator) revokeSoon(id clientv3.LeaseID) {
	c.track(func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.OpTimeout)
		defer cancel()
		_, _ = c.cli.Revoke(ctx, id)
	})
}

// track runs f in a goroutine that Close waits for; once Close waits, it
// runs nothing and returns false.
func (c *Coordinator) track(f func()) bool {
	c.mu.Lock()
	if c.mu.draining {
		c.mu.Unlock()
		return false
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

// Members lists the membership of deployment at one revision.
func (c *Coordinator) Members(ctx context.Context, deployment int) (_ coordinator.View, err error) {
	defer func(t time.Time) { c.met.Op("members", t, err) }(time.Now())
	if deployment < coordinator.All {
		return coordinator.View{}, fmt.Errorf("%w: deployment %d", coordinator.ErrInvalid, deployment)
	}
	if err := ctx.Err(); err != nil {
		return coordinator.View{}, err
	}
	if err := c.checkOpen(); err != nil {
		return coordinator.View{}, err
	}
	octx, cancel := c.opCtx(ctx)
	defer cancel()
	resp, err := c.cli.Get(octx, c.membersPrefix(deployment), clientv3.WithPrefix())
	if err != nil {
		return coordinator.View{}, fail(ctx, "list members", err)
	}
	v := coordinator.View{Rev: resp.Header.Revision, Members: []coordinator.Member{}}
	for _, kv := range resp.Kvs {
		m, err := decodeMember(kv.Key, kv.Value, c.cfg.Prefix)
		if err != nil {
			c.log.Warn("skipping a malformed member key", "key", string(kv.Key), "err", err)
			continue
		}
		v.Members = append(v.Members, m)
	}
	coordinator.SortMembers(v.Members)
	return v, nil
}

// decodeMember reads a member from its value, or (value lost: a delete
// without its previous value) from its key.
func decodeMember(key, val []byte, prefix string) (coordinator.Member, error) {
	var m coordinator.Member
	if len(val) > 0 {
		err := json.Unmarshal(val, &m)
		return m, err
	}
	rest, ok := strings.CutPrefix(string(key), prefix+"members/")
	dep, id, ok2 := strings.Cut(rest, "/")
	d, err := strconv.Atoi(dep)
	if !ok || !ok2 || err != nil {
		return m, fmt.Errorf("etcdcoord: not a member key: %q", key)
	}
	return coordinator.Member{ID: id, Deployment: d}, nil
}

// Leader reports the member whose candidacy is the oldest in election.
func (c *Coordinator) Leader(ctx context.Context, election string) (_ coordinator.Member, _ bool, err error) {
	defer func(t time.Time) { c.met.Op("leader", t, err) }(time.Now())
	if err := coordinator.ValidElection(election); err != nil {
		return coordinator.Member{}, false, err
	}
	if err := ctx.Err(); err != nil {
		return coordinator.Member{}, false, err
	}
	if err := c.checkOpen(); err != nil {
		return coordinator.Member{}, false, err
	}
	octx, cancel := c.opCtx(ctx)
	defer cancel()
	resp, err := c.cli.Get(octx, c.electionPrefix(election), clientv3.WithFirstCreate()...)
	if err != nil {
		return coordinator.Member{}, false, fail(ctx, "leader of "+election, err)
	}
	if len(resp.Kvs) == 0 {
		return coordinator.Member{}, false, nil
	}
	var m coordinator.Member
	if err := json.Unmarshal(resp.Kvs[0].Value, &m); err != nil {
		return coordinator.Member{}, false, fmt.Errorf("etcdcoord: leader of %s: %w", election, err)
	}
	return m, true, nil
}

// Evict revokes the lease of member id (the one its ids/ key is on): the
// member's keys and candidacies go in one step, as at an expiry, and its
// session, should it still run, is lost at its next renewal.
func (c *Coordinator) Evict(ctx context.Context, id string) (err error) {
	defer func(t time.Time) { c.met.Op("evict", t, err) }(time.Now())
	if err := validID(id); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.checkOpen(); err != nil {
		return err
	}
	octx, cancel := c.opCtx(ctx)
	defer cancel()
	resp, err := c.cli.Get(octx, c.cfg.Prefix+"ids/"+id)
	if err != nil {
		return fail(ctx, "find the lease of "+id, err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].Lease == 0 {
		return nil // not a member (any more)
	}
	lease := clientv3.LeaseID(resp.Kvs[0].Lease)
	_, err = c.cli.Revoke(octx, lease)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil // expired or left meanwhile
	}
	if err != nil {
		return fail(ctx, "revoke the lease of "+id, err)
	}
	c.log.Warn("member evicted: its process is known dead", "member", id, "lease", fmt.Sprintf("%x", int64(lease)))
	return nil
}

func validID(id string) error {
	return coordinator.Member{ID: id}.Validate()
}

// Close ends every session (revoking its lease: its member leaves at
// once), ends the watches and closes the client.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return nil
	}
	c.mu.closed = true
	var ss []*Session
	for s := range c.mu.sessions {
		ss = append(ss, s)
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), c.cfg.OpTimeout)
			defer cancel()
			_ = s.leave(ctx)
		}()
	}
	wg.Wait()
	c.stop()
	c.mu.Lock()
	c.mu.draining = true
	c.mu.Unlock()
	c.wg.Wait()
	return c.cli.Close()
}
