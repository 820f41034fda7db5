package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// All, given as a deployment to Members and Watch, means every deployment.
const All = -1

// Errors. Each is wrapped with context (`%w`); test with errors.Is.
var (
	// ErrClosed: the coordinator, or the session, was closed.
	ErrClosed = errors.New("coordinator: closed")
	// ErrSessionLost: the session's lease expired, or its local deadline
	// passed without a renewal (see Session.Deadline). Final: join again
	// with a new Member.ID.
	ErrSessionLost = errors.New("coordinator: session lost")
	// ErrMemberExists: a live member already has this ID.
	ErrMemberExists = errors.New("coordinator: member already exists")
	// ErrUnavailable: the coordinator could not be reached or had no quorum
	// in time; the call may be retried (for Join the outcome is unknown:
	// the lease of a half-made member expires by itself).
	ErrUnavailable = errors.New("coordinator: unavailable")
	// ErrCampaigning: this session already campaigns in (or leads) the
	// election.
	ErrCampaigning = errors.New("coordinator: already campaigning")
	// ErrInvalid: a bad argument (member ID, deployment, election name).
	ErrInvalid = errors.New("coordinator: invalid argument")
)

// Member is one NameNode instance as the membership lists it.
type Member struct {
	// ID names this incarnation of the instance, unique among live
	// members; an instance that lost its session joins again under a new
	// ID. Letters, digits and -_.: only (it is part of a key).
	ID string `json:"id"`
	// Deployment is the deployment the instance serves, 0 or more.
	Deployment int `json:"deployment"`
	// Addr is where peers and clients reach the instance (a base URL).
	Addr string `json:"addr"`
	// NoCache: the instance keeps no metadata cache, so writers need not
	// invalidate it (coherence.Member.NoCache). The zero value, a member
	// that caches, is the safe one for a member that does not say.
	NoCache bool `json:"nocache,omitempty"`
}

// Validate reports whether m can join.
func (m Member) Validate() error {
	if err := validName(m.ID); err != nil {
		return fmt.Errorf("%w: member ID %q: %v", ErrInvalid, m.ID, err)
	}
	if m.Deployment < 0 {
		return fmt.Errorf("%w: deployment %d of member %s", ErrInvalid, m.Deployment, m.ID)
	}
	return nil
}

// ValidElection reports whether name can name an election.
func ValidElection(name string) error {
	if err := validName(name); err != nil {
		return fmt.Errorf("%w: election %q: %v", ErrInvalid, name, err)
	}
	return nil
}

func validName(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	if len(s) > 128 {
		return errors.New("longer than 128 bytes")
	}
	if i := strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:", r))
	}); i >= 0 {
		return fmt.Errorf("character %q not allowed", s[i])
	}
	return nil
}

// View is the membership at one revision.
type View struct {
	// Rev is the revision of the membership this view shows: every change
	// of the membership (a join, a leave, an expiry) gets a higher one.
	// Two views with equal Rev are equal. Revisions of the in-process and
	// etcd backends are not comparable with each other.
	Rev int64
	// Members, sorted by (Deployment, ID).
	Members []Member
}

// SortMembers sorts ms by (Deployment, ID), the order of View.Members.
func SortMembers(ms []Member) {
	sort.Slice(ms, func(i, j int) bool {
		if ms[i].Deployment != ms[j].Deployment {
			return ms[i].Deployment < ms[j].Deployment
		}
		return ms[i].ID < ms[j].ID
	})
}

// EventKind says what a watch Event reports.
type EventKind int

const (
	// Snapshot: the whole membership at Rev (Event.Members). The first
	// event of every watch; later ones replace what the watcher knew (the
	// backend lost track of changes, e.g. etcd compacted them away).
	Snapshot EventKind = iota + 1
	// Joined: Event.Member joined at Rev.
	Joined
	// Left: Event.Member left at Rev: it left cleanly, its lease
	// expired, or it was evicted (its process known dead). From then on
	// it is dead to its peers.
	Left
)

func (k EventKind) String() string {
	switch k {
	case Snapshot:
		return "snapshot"
	case Joined:
		return "joined"
	case Left:
		return "left"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one change of the membership a Watch reports.
type Event struct {
	Kind EventKind
	// Rev of the change (of the snapshot). Strictly increasing along one
	// watch's events.
	Rev int64
	// Member that joined or left (Joined, Left).
	Member Member
	// Members at Rev, sorted as in View (Snapshot).
	Members []Member
}

// Coordinator is the membership, liveness and election service. Its methods
// are safe for concurrent use; Close ends every session it made.
type Coordinator interface {
	// Join adds m to the membership under a new lease, kept alive until
	// the session ends. ErrMemberExists if a live member has m.ID.
	Join(ctx context.Context, m Member) (Session, error)
	// Members is the membership of deployment (All: of every deployment)
	// as of one revision.
	Members(ctx context.Context, deployment int) (View, error)
	// Watch reports the membership of deployment (All: every deployment):
	// first a Snapshot, then every change after it in revision order,
	// with no gaps (after a gap it cannot fill, a new Snapshot). The
	// channel is closed when ctx is done or the coordinator closed; a
	// slow reader holds back only its own watch.
	Watch(ctx context.Context, deployment int) (<-chan Event, error)
	// Leader reports the member that leads election now; ok false when
	// none does.
	Leader(ctx context.Context, election string) (m Member, ok bool, err error)
	// Evict ends member id's lease at once, as if it had expired: the
	// member leaves (watchers see Left), its leaderships pass on, and its
	// own session, if it still runs, is lost. nil when no live member has
	// id (already gone: evicting is idempotent).
	//
	// Only for a member whose process is known to be dead (the platform
	// reaped it): expiry is safe because the member's own deadline passed
	// before it, so it serves nothing any more; an evicted member's
	// deadline has not passed, and it is its death that stops it serving.
	// Peers handle the Left exactly as an expiry: they fence it in the
	// store and stop waiting for it (docs/ELASTIC.md, "Leases and
	// fencing").
	Evict(ctx context.Context, id string) error
	// Close ends every session (their members leave, their leaderships
	// end), closes every watch, and releases the backend.
	Close() error
}

// Session is one member's lease. Its methods are safe for concurrent use.
type Session interface {
	// Member is the member this session keeps in the membership.
	Member() Member
	// Deadline is the local time (on the coordinator's clock) until which
	// peers cannot consider this member dead: it is conservative with
	// respect to the server's lease expiry (see the package comment). It
	// moves forward with each renewal; zero once the session is lost or
	// ended. Act on membership or leadership only while now < Deadline.
	Deadline() time.Time
	// Lost is closed when the session ends: the deadline passed without a
	// renewal, the server reported the lease gone, Leave, or Close. Err
	// says which.
	Lost() <-chan struct{}
	// Err is nil while the session lives, then ErrSessionLost (lease
	// lost) or ErrClosed (Leave, Close).
	Err() error
	// Campaign blocks until this member leads election, ctx is done, or
	// the session ends. Elections are first come, first served: leaders
	// follow in the order they began to campaign.
	Campaign(ctx context.Context, election string) (Leadership, error)
	// Leave removes the member and revokes its lease: its leaderships end
	// at once, and peers see Left.
	Leave(ctx context.Context) error
}

// Leadership is a won election, held until Resign or the session's end.
type Leadership interface {
	// Election is the name of the election won.
	Election() string
	// Done is closed when the leadership ends (Resign, or the session
	// ended). A leader acts only while Done is open and now is before
	// the session's Deadline: the next leader is elected only after the
	// server expired this one's lease, which is after that deadline.
	Done() <-chan struct{}
	// Resign gives up the leadership; the next candidate may lead once it
	// returns. Stop leader duties before calling it.
	Resign(ctx context.Context) error
}
