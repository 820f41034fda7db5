// Package coordinator is the seam between Nimbus's NameNodes and the
// service that tells them who else is serving: membership (the instances of
// each deployment and their addresses), liveness by lease, watches of the
// membership, and named leader elections for the duties only one instance
// may run at a time (lease recovery, orphan-block removal, id-range
// hand-out).
//
// Two implementations pass one conformance suite (coordtest.Run):
// memcoord, in process (the default of `nimbus serve`: every instance is in
// one process, so nothing can be cut off), and etcdcoord, over etcd's v3 API
// (`--coordinator etcd://HOST:PORT,...`).
//
// # Leases and fencing
//
// Every member holds a Session: a lease that the coordinator expires when
// the member stops renewing it. A member whose lease expired is removed
// from the membership (watchers see Left) and loses its elections; peers
// take that removal, and nothing else, as "dead" (a failed message is not
// death).
//
// A member must stop acting on what the membership guaranteed it (serving
// reads from its cache, which peers would no longer invalidate; running a
// leader's duty) before peers consider it dead. Session.Deadline is the
// local bound that makes this so: it is computed from the local time at
// which the last successful renewal was *sent*, plus the TTL the server
// granted, shortened for clock-rate drift and a safety margin. The server
// starts its TTL when it receives the renewal, which is after it was sent,
// so the server's expiry (and the removal every peer observes) comes after
// the local deadline in real time. The rule for consumers is therefore:
//
//	act on membership or leadership only while clock.Now() < s.Deadline()
//
// and Session.Lost is the prompt notification that the rule has started to
// refuse (docs/ELASTIC.md, "Coordinator", gives the timing argument in
// full). A lost session is over for good: the instance fences itself, drops
// its cache, and joins again with a new Member.ID.
//
// Coordinator.Evict is the one exception to "removed only after its
// deadline": it removes a member at once, and is for members whose process
// is known to be dead (the local platform reaped it), where death, not the
// deadline, guarantees that the member serves nothing. Peers handle the
// Left as an expiry's (they fence it in the store).
//
// All methods take a context and are safe for concurrent use.
package coordinator
