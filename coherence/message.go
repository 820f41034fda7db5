package coherence

import (
	"fmt"

	"github.com/nimbus-fs/nimbus/cache"
)

// NodeID names one incarnation of a NameNode instance: its coordinator
// member ID. An instance that restarts, or lost its session, comes back
// under a new NodeID with an empty cache, so a NodeID's history ends once.
type NodeID string

// OpID names one write: its writer and a sequence number the writer's Node
// gives out in increasing order. Unique across incarnations because the
// NodeID is.
type OpID struct {
	Writer NodeID
	Seq    uint64
}

func (o OpID) String() string { return fmt.Sprintf("%s/%d", o.Writer, o.Seq) }

// less orders OpIDs for deterministic iteration.
func (o OpID) less(p OpID) bool {
	if o.Writer != p.Writer {
		return o.Writer < p.Writer
	}
	return o.Seq < p.Seq
}

// MsgType is what a Message asks.
type MsgType uint8

const (
	// MsgInv, writer → holder: hold Targets until the writer's RELEASE (or
	// its fencing) and answer MsgAck. Re-sent until answered.
	MsgInv MsgType = iota + 1
	// MsgAck, holder → writer: the hold is in place. Re-sent by the holder
	// while it holds, as a question: a writer that has finished Op answers
	// MsgRelease.
	MsgAck
	// MsgRelease, writer → holder: Op committed or aborted; release.
	MsgRelease
)

func (t MsgType) String() string {
	switch t {
	case MsgInv:
		return "INV"
	case MsgAck:
		return "ACK"
	case MsgRelease:
		return "RELEASE"
	}
	return fmt.Sprintf("MsgType(%d)", uint8(t))
}

// Message is one peer message. Messages may be lost, duplicated, delayed
// and reordered: every one is idempotent, and the sender repeats what it
// needs answered.
type Message struct {
	Type     MsgType
	From, To NodeID
	// Since is the sender's join version (the version of the first view
	// that listed it; 0 before it has one) and Deployment its deployment:
	// with them a receiver learns of a peer it has not seen in a view yet,
	// and can tell when a later view says that peer is gone.
	Since      int64
	Deployment int
	Op         OpID           // MsgInv, MsgAck, MsgRelease
	Targets    []cache.Target // MsgInv: what the receiver holds (its share of the write's targets)
}

func (m Message) String() string {
	s := fmt.Sprintf("%s %s→%s", m.Type, m.From, m.To)
	switch m.Type {
	case MsgInv:
		s += fmt.Sprintf(" %s %v", m.Op, m.Targets)
	case MsgAck, MsgRelease:
		s += " " + m.Op.String()
	}
	return s
}

// Member is one live instance in a membership view.
type Member struct {
	ID         NodeID
	Deployment int
	// NoCache: the instance has no metadata cache, so it never answers
	// from one and no write need invalidate it: writers send it no INV.
	// It is a member all the same: its own writes invalidate the others,
	// it holds and ACKs an INV that reaches it anyway (from a writer that
	// met it in a message before a view said NoCache), and its departure
	// fences it. An instance met only in a message is taken to cache.
	NoCache bool
}

// View is the membership at one version, as the coordinator's watch
// delivers it (coordinator.View: Rev and Members).
type View struct {
	Version int64
	Members []Member
}

// Target is one cache target of a write, with its reach: Everywhere
// targets go to every live instance (a directory's resolution row, subtree
// and inode targets), the others only to the instances of the deployment
// that owns their routing key Route (Config.Owner): a file's row
// (cache.Key(parent, name), routed by the parent id), a directory's
// listing (cache.ListingOf(dir), routed by dir: its entries are rows with
// parent dir) and an inode's hot attributes (cache.AttrsOf(id), routed by
// the id of the inode's parent, which the target itself does not name).
// Which instance may cache which entry is the engine's rule
// (namespace/ownership.go); a Local target is sound only where instances
// fill nothing they do not own.
type Target struct {
	cache.Target
	Everywhere bool
	Route      uint64 // the routing key, when not Everywhere
}

// Local is a target sent only to the owner of the key that names it: the
// parent id of a cache.Key, the directory of a cache.ListingOf. Other
// kinds do not name their routing key: Local gives them Everywhere (use
// LocalTo).
func Local(t cache.Target) Target {
	switch t.Kind {
	case cache.KindKey:
		return LocalTo(t, t.Parent)
	case cache.KindListing:
		return LocalTo(t, t.ID)
	}
	return Everywhere(t)
}

// LocalTo is a target sent only to the owner of routing key route.
func LocalTo(t cache.Target, route uint64) Target { return Target{Target: t, Route: route} }

// Everywhere is a target sent to every live instance.
func Everywhere(t cache.Target) Target { return Target{Target: t, Everywhere: true} }

// Commit asks the I/O loop to commit write Op's transaction, refused by the
// store if the writer is fenced or the store's floor is above View (the
// view the write's targets were computed from).
type Commit struct {
	Op   OpID
	View int64
}

// Ready is what the core asks of its I/O loop after some Step, Tick or
// event: send Messages (best effort, any order); commit the transactions of
// Commits in the store and report each with Committed; fence the instances
// of Fences in the store (retrying until done) and report each with
// Fenced; raise the store's write floor to Floor if it is not 0 (retrying
// until done) and report it with FloorRaised. Holds and releases on the
// cache have already been applied when Ready returns, so an ACK is never
// sent before its hold is in place.
type Ready struct {
	Messages []Message
	Commits  []Commit
	Fences   []NodeID
	Floor    int64
}

// Empty reports whether there is nothing to do.
func (r *Ready) Empty() bool {
	return len(r.Messages) == 0 && len(r.Commits) == 0 && len(r.Fences) == 0 && r.Floor == 0
}
