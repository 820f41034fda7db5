package coherence

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nimbus-fs/nimbus/cache"
)

// Errors of the core; test with errors.Is.
var (
	// ErrNoView: a write was begun before the first membership view, when
	// the core cannot know whom to invalidate. Abort the transaction.
	ErrNoView = errors.New("coherence: no membership view yet")
	// ErrLost: this incarnation's session is over (its deadline passed, or
	// a view no longer lists it). Final: start a new Node under a new ID
	// with an empty cache.
	ErrLost = errors.New("coherence: session lost")
	// ErrInvalid: a bad Config.
	ErrInvalid = errors.New("coherence: invalid config")
)

// Holder is the cache the core holds and releases targets on: a
// *cache.Cache. Its calls do no I/O, so the core calls it directly, and a
// hold is in place before the ACK that reports it leaves.
type Holder interface {
	Hold(targets ...cache.Target) *cache.Hold
}

// Config configures a Node.
type Config struct {
	ID         NodeID // this incarnation's member ID
	Deployment int
	Cache      Holder
	// Owner returns the deployment that owns routing key k (routing.Owner):
	// the deployment operations on entries of directory k route to, and
	// the only one whose instances cache them. Non-Everywhere targets go
	// only to the instances of Owner(Target.Route).
	Owner func(k uint64) int
	// Retry is how long the core waits for an answer before it sends a
	// message again (INV, the ACK that asks for a lost RELEASE, JOIN). A
	// round trip or a few: too short only costs messages.
	Retry time.Duration

	// For the tests that show each part is needed (coherence/sim's negative
	// tests); never set in production.
	//
	// DisableInvalidation: writers send no INV and commit at once.
	DisableInvalidation bool
	// DisableFencing: a departed writer's holds are released as soon as a
	// view says it left, not after the store has fenced it; joiners likewise
	// stop waiting at the departure; no Fence effects are emitted.
	DisableFencing bool
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	switch {
	case c.ID == "":
		return fmt.Errorf("%w: empty ID", ErrInvalid)
	case c.Cache == nil:
		return fmt.Errorf("%w: no Cache", ErrInvalid)
	case c.Owner == nil:
		return fmt.Errorf("%w: no Owner function", ErrInvalid)
	case c.Retry <= 0:
		return fmt.Errorf("%w: Retry %v is not positive", ErrInvalid, c.Retry)
	}
	return nil
}

// Node is the coherence core of one instance incarnation, both writer and
// holder. Not safe for concurrent use: one I/O loop owns it (package doc).
// Deterministic: the same calls in the same order give the same Ready
// batches.
type Node struct {
	cfg      Config
	now      time.Time
	deadline time.Time
	lost     bool

	view    View
	since   int64              // my join version: the first view that listed me; 0 before
	members map[NodeID]peer    // live as far as I know: the view's members and joiners it does not list yet
	gone    map[NodeID]*goneAt // departed peers, until and after their fencing

	seq    uint64
	writes []*write // pending, by seq
	holds  map[OpID]*hold

	floorAsked bool // Ready.Floor has been given for since
	joined     bool // FloorRaised(since): fills may install

	rd Ready
}

// peer is a live instance as the core knows it.
type peer struct {
	deployment int
	since      int64 // its join version, 0 if not known
	noCache    bool  // as its latest view said (Member.NoCache)
}

// goneAt is a departed peer: its writes may still commit until it is
// fenced in the store.
type goneAt struct {
	fenced bool
}

// New returns the core of a new incarnation: no view, no session deadline
// (it serves nothing until both arrive and its join handshake completes).
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Node{
		cfg:     cfg,
		members: make(map[NodeID]peer),
		gone:    make(map[NodeID]*goneAt),
		holds:   make(map[OpID]*hold),
	}, nil
}

// ID returns the incarnation's ID.
func (n *Node) ID() NodeID { return n.cfg.ID }

// Ready returns what the I/O loop must do now and forgets it.
func (n *Node) Ready() Ready {
	r := n.rd
	n.rd = Ready{}
	return r
}

// HasReady reports whether Ready has anything.
func (n *Node) HasReady() bool { return !n.rd.Empty() }

// Renewed records the session deadline after a lease renewal: the
// coordinator session's Deadline() (renewal send time + TTL·(1−drift) −
// margin, docs/ELASTIC.md). It never moves back.
func (n *Node) Renewed(deadline time.Time) {
	if deadline.After(n.deadline) {
		n.deadline = deadline
	}
}

// Serving reports whether this instance may answer a read from its cache,
// or install a fill, at local time now: the store's floor has reached its
// join version (FloorRaised) and now is before its session deadline. Check
// it at the lookup, and at both ends of a fill (before Begin and before
// Put): a fill begun before the floor was raised may have read a value that
// a write which never invalidated this instance then changed.
func (n *Node) Serving(now time.Time) bool {
	if !n.joined || n.lost || !now.Before(n.deadline) {
		return false
	}
	return true
}

// Err returns ErrLost once the incarnation is over, else nil.
func (n *Node) Err() error {
	if n.lost {
		return ErrLost
	}
	return nil
}

// Tick moves the core's clock to now (local, monotonic) and re-sends what
// is unanswered for Config.Retry. Call it every Retry/2 or so.
func (n *Node) Tick(now time.Time) {
	if now.After(n.now) {
		n.now = now
	}
	if !n.lost && !n.deadline.IsZero() && !n.now.Before(n.deadline) {
		n.lost = true
	}
	n.retryWrites()
	n.retryHolds()
}

// Step consumes one peer message. Messages to another incarnation (an old
// one at the same address) are dropped.
func (n *Node) Step(m Message) {
	if m.To != n.cfg.ID || m.From == n.cfg.ID {
		return
	}
	n.learn(m.From, m.Deployment, m.Since)
	switch m.Type {
	case MsgInv:
		n.stepInv(m)
	case MsgAck:
		n.stepAck(m)
	case MsgRelease:
		n.stepRelease(m)
	}
}

// send queues a message stamped with what the receiver needs to know of us.
func (n *Node) send(m Message) {
	m.From, m.Since, m.Deployment = n.cfg.ID, n.since, n.cfg.Deployment
	n.rd.Messages = append(n.rd.Messages, m)
}

// learn records a peer met in a message. A peer whose join version the
// current view has reached but which it does not list has left: the
// message is late, and the peer is treated as departed.
func (n *Node) learn(id NodeID, dep int, since int64) {
	if since == 0 {
		return // it has no view yet: nothing to learn from its message
	}
	if _, ok := n.gone[id]; ok {
		return
	}
	if _, ok := n.members[id]; ok {
		return
	}
	if n.view.Version >= since {
		n.depart(id)
		return
	}
	n.members[id] = peer{deployment: dep, since: since}
}

// ViewChanged consumes a membership view from the coordinator's watch
// (older or equal versions are ignored). Peers it no longer lists, and
// whose join it covers, have left: the writer stops waiting for their
// ACKs (their sessions ended before the coordinator expired them, so they
// serve no cache any more) and the core asks for them to be fenced. The
// first view that lists this instance fixes its join version and asks for
// the store's floor to be raised to it (Ready.Floor); a later view that
// does not list it ends the incarnation.
func (n *Node) ViewChanged(v View) {
	if v.Version <= n.view.Version {
		return
	}
	n.view = View{Version: v.Version, Members: slices.Clone(v.Members)}
	listed := make(map[NodeID]int, len(v.Members))
	for _, m := range v.Members {
		listed[m.ID] = m.Deployment
	}
	if _, ok := listed[n.cfg.ID]; ok {
		if n.since == 0 {
			n.since = v.Version
		}
	} else if n.since != 0 {
		n.lost = true
	}
	var left []NodeID
	for id, p := range n.members {
		if _, ok := listed[id]; !ok && p.since <= v.Version {
			left = append(left, id)
		}
	}
	slices.Sort(left)
	for _, id := range left {
		n.depart(id)
	}
	for _, m := range v.Members {
		if m.ID == n.cfg.ID {
			continue
		}
		if _, ok := n.gone[m.ID]; ok {
			continue
		}
		p := n.members[m.ID]
		p.deployment, p.noCache = m.Deployment, m.NoCache
		if p.since == 0 || p.since > v.Version {
			p.since = v.Version // at the latest
		}
		n.members[m.ID] = p
	}
	if n.since != 0 && !n.floorAsked && !n.lost {
		n.floorAsked = true
		n.rd.Floor = n.since
	}
	n.maybeCommitAll()
}

// depart records that peer id left the membership.
func (n *Node) depart(id NodeID) {
	if id == n.cfg.ID {
		return
	}
	if _, ok := n.gone[id]; ok {
		return
	}
	delete(n.members, id)
	n.gone[id] = &goneAt{}
	for _, w := range n.writes {
		w.departed(id)
	}
	if n.cfg.DisableFencing {
		n.Fenced(id)
		return
	}
	n.rd.Fences = append(n.rd.Fences, id)
}

// Fenced reports that the store now refuses every commit of instance id
// and has none in flight: its holds can go, and a joiner need not wait for
// it.
func (n *Node) Fenced(id NodeID) {
	g, ok := n.gone[id]
	if !ok {
		g = &goneAt{}
		n.gone[id] = g
		delete(n.members, id)
	}
	if g.fenced {
		return
	}
	g.fenced = true
	n.releaseWriter(id)
}

// FloorRaised reports that the store's write floor is at least v: it
// refuses the commit of every write begun under a view older than v. Once v
// reaches this incarnation's join version, every write that may commit
// from now on was begun under a view that lists it, so invalidates it: its
// fills may install.
func (n *Node) FloorRaised(v int64) {
	if n.since != 0 && v >= n.since {
		n.joined = true
	}
}

// livePeers returns the peers a write begun now must reach, sorted.
func (n *Node) livePeers() []NodeID {
	ids := make([]NodeID, 0, len(n.members))
	for id := range n.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Close ends the incarnation for good (the server's session was replaced,
// or the server stops): it releases every hold the Node placed on the
// cache, its own writes' and its peers', and marks it lost. A server must
// not serve from the cache again until a new incarnation's FloorRaised:
// every write that may still commit under an old hold was begun under a
// view that does not list the new incarnation, and the floor refuses it or
// waits for it. Its pending writes get no Commit from now on; report them
// with Committed or drop the Node.
func (n *Node) Close() {
	n.lost = true
	for _, w := range n.writes {
		w.local.Release()
	}
	n.writes = nil
	for _, op := range n.holdOps() {
		n.holds[op].h.Release()
		delete(n.holds, op)
	}
	n.rd = Ready{}
}
