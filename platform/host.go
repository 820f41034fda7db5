package platform

import (
	"context"
	"errors"
)

// The hosting seam (docs/ELASTIC.md, "The local platform and its
// hosting"): the policy decides when an instance starts and stops; a Host
// carries it out. The local platform has two (ProcessHost, child
// processes; server.InProcessHost, servers in the gateway's process); a
// Knative or OpenWhisk adapter would implement the same interface over its
// own API (a revision scaled up, an action's container warmed), and its
// Instance's Addr would be the service's URL.

// Spec is what an instance is started as: instance ID of the policy,
// serving deployment Deployment of Deployments.
type Spec struct {
	ID                      InstanceID
	Deployment, Deployments int
}

// Instance is one running NameNode instance. Its methods are safe for
// concurrent use.
type Instance interface {
	// Addr is the base URL, http://host:port, serving the RPC (/rpc/conn,
	// /rpc/call), WebHDFS, /metrics and /status/instance.
	Addr() string
	// Stop stops it gracefully (a reclaim): no new requests, those in
	// flight finish, bounded by ctx; it returns once the instance has
	// exited.
	Stop(ctx context.Context) error
	// Kill stops it abruptly (a crash): SIGKILL for a process, the closest
	// in-process equivalent otherwise. It does not wait for the exit
	// (Done does).
	Kill() error
	// Done is closed once the instance has exited, for any reason.
	Done() <-chan struct{}
}

// Member is implemented by an Instance that knows its coordinator member
// ID: the ID its server joined the membership under (its first
// incarnation's; a later incarnation, after its session was lost, is
// ID.N). "" when it did not say. The platform evicts that member once it
// has seen the instance exit (LocalOptions.Exited).
type Member interface {
	MemberID() string
}

// MemberID is inst's member ID, "" when it does not report one.
func MemberID(inst Instance) string {
	if m, ok := inst.(Member); ok {
		return m.MemberID()
	}
	return ""
}

// Host starts instances. Start returns once the instance serves (answers
// /readyz with 200), or fails; ctx bounds the start, not the instance's
// life.
type Host interface {
	Start(ctx context.Context, spec Spec) (Instance, error)
}

// Errors of the local platform.
var (
	// ErrBusy: the platform cannot take the invocation now (its queue is
	// full, or the wait for an instance ran out); the caller may retry.
	ErrBusy = errors.New("platform: busy")
	// ErrClosed: the platform was closed.
	ErrClosed = errors.New("platform: closed")
	// ErrPermanent: an instance failed to start for a cause that starting
	// it again will not change (its configuration disagrees with the
	// cluster's: --deployments differs from the one the store records).
	// A Host wraps it in the error of such a start, with the instance's
	// own message; the platform then fails invocations at once with that
	// error and its gateway reports not ready, until a start succeeds
	// (tried again after a backoff, up to a minute apart).
	ErrPermanent = errors.New("platform: instances cannot start")
)

// ExitConfig is the exit status of a `nimbus namenode` that failed to start
// for a cause that starting it again will not change (ErrPermanent): 78,
// EX_CONFIG of BSD's sysexits.h, "something was found in an unconfigured
// or misconfigured state". Any other failure exits with 1.
const ExitConfig = 78
