// Package placement decides where a block's replicas go and which replica
// a reader reads, over a list of DataNodes: pure functions, no I/O, the
// randomness from the caller's source (so a seeded run repeats).
//
// The policy is HopsFS-CL's zone-aware placement: the first replica of a
// new block goes to the writer's own host when a DataNode there can take
// it, else to the writer's zone; every next replica goes to the zone that
// holds the fewest replicas so far, so that the replicas span as many
// zones as there are (at least two wherever two zones have DataNodes that
// can take one): a block survives the loss of a zone. HDFS's default
// policy, with zones as racks, puts the second and third replicas in one
// other rack to save cross-rack traffic; across availability zones the
// loss of a zone is the failure to survive, so the replicas are spread
// instead. Within a zone a DataNode is chosen by two random choices, the
// one with more free space and not busier than twice the average winning
// (balance without herding on the emptiest DataNode). Only live DataNodes
// in service, not full, not failed, with room for the block, not excluded
// and not holding a replica already are chosen; two replicas share a host
// only when nothing else is left.
//
// Readers are sent to the replica on their host, then in their zone, then
// anywhere; stale DataNodes after live ones, decommissioned and failed
// ones last, dead ones not at all. Re-replication copies from a replica
// chosen by ChooseSource to targets chosen by ChooseTargets with the
// existing replicas as Request.Chosen, and ChooseExcess picks the replicas
// to delete from an over-replicated block without losing a zone.
package placement

import (
	"cmp"
	"math/rand/v2"
	"slices"
)

// Liveness is how the NameNode judges a DataNode (registry.Liveness).
type Liveness uint8

const (
	Live  Liveness = iota // beating: may take replicas and serve reads
	Stale                 // silent for a while: serves reads last, takes no replicas
	Dead                  // silent too long: its replicas do not count
)

// Admin is a DataNode's admin state (store.AdminState).
type Admin uint8

const (
	InService       Admin = iota // in service
	Decommissioning              // its replicas are being copied away: serves reads, takes no replicas
	Decommissioned               // every replica it held has enough copies elsewhere
)

// Node is a DataNode as placement sees it.
type Node struct {
	ID        uint64
	Host      string
	Zone      string
	Remaining int64 // free bytes for blocks
	Transfers int   // data transfers in flight
	Liveness  Liveness
	Admin     Admin
	Full      bool // free space below its reserve
	Failed    bool // its storage failed a check
}

// Location is where a client (a writer or a reader) runs; a zero field
// matches nothing.
type Location struct {
	Host string
	Zone string
}

// Request asks for targets for one block.
type Request struct {
	// Writer is where the client writing the block runs (zero for
	// re-replication: no local replica).
	Writer Location
	// Replicas is how many targets to choose.
	Replicas int
	// BlockSize is the room a target needs (HDFS checks the block size).
	BlockSize int64
	// Chosen are DataNodes that hold a replica already (pipeline recovery,
	// re-replication): counted in the zone spread and never chosen again.
	// The first-replica rule applies only when Chosen is empty.
	Chosen []Node
	// Exclude are DataNodes not to choose (the client could not reach them).
	Exclude []uint64
}

// Eligible reports whether n may receive a new replica of size blockSize.
func Eligible(n Node, blockSize int64) bool {
	return n.Liveness == Live && n.Admin == InService && !n.Full && !n.Failed && n.Remaining >= blockSize
}

// ChooseTargets returns up to req.Replicas DataNodes from nodes for a new
// replica each, fewer when fewer are eligible, in pipeline order: the
// writer-local one first, then the writer's zone, then the others zone by
// zone (a pipeline crosses each zone boundary once).
func ChooseTargets(nodes []Node, req Request, rnd *rand.Rand) []Node {
	if req.Replicas <= 0 {
		return nil
	}
	taken := map[uint64]bool{}
	for _, id := range req.Exclude {
		taken[id] = true
	}
	hosts := map[string]bool{}
	zones := map[string]int{}
	for _, c := range req.Chosen {
		taken[c.ID] = true
		hosts[c.Host] = true
		zones[c.Zone]++
	}
	var cands []Node
	for _, n := range nodes {
		if Eligible(n, req.BlockSize) && !taken[n.ID] {
			cands = append(cands, n)
			taken[n.ID] = true // one entry per id, even if listed twice
		}
	}
	avg := averageTransfers(cands)
	var out []Node
	take := func(i int) {
		n := cands[i]
		out = append(out, n)
		hosts[n.Host] = true
		zones[n.Zone]++
		cands = slices.Delete(cands, i, i+1)
	}
	if len(req.Chosen) == 0 && (req.Writer.Host != "" || req.Writer.Zone != "") {
		if i := pick(cands, avg, rnd, func(n Node) bool { return req.Writer.Host != "" && n.Host == req.Writer.Host }); i >= 0 {
			take(i)
		} else if i := pick(cands, avg, rnd, func(n Node) bool { return req.Writer.Zone != "" && n.Zone == req.Writer.Zone }); i >= 0 {
			take(i)
		}
	}
	for len(out) < req.Replicas && len(cands) > 0 {
		// A host of its own where there is one; within those, the zone
		// with the fewest replicas (ties broken at random).
		freshHost := slices.ContainsFunc(cands, func(n Node) bool { return !hosts[n.Host] })
		ok := func(n Node) bool { return !freshHost || !hosts[n.Host] }
		best, ties := -1, 0
		var zone string
		for _, n := range cands {
			if !ok(n) {
				continue
			}
			c := zones[n.Zone]
			switch {
			case best < 0 || c < best:
				best, zone, ties = c, n.Zone, 1
			case c == best && n.Zone != zone:
				ties++
				if rnd.IntN(ties) == 0 {
					zone = n.Zone
				}
			}
		}
		take(pick(cands, avg, rnd, func(n Node) bool { return ok(n) && n.Zone == zone }))
	}
	return pipelineOrder(out, req.Writer)
}

// pick returns the index of a candidate that matches, by two random
// choices (-1 when none matches).
func pick(cands []Node, avg float64, rnd *rand.Rand, match func(Node) bool) int {
	var idx []int
	for i, n := range cands {
		if match(n) {
			idx = append(idx, i)
		}
	}
	switch len(idx) {
	case 0:
		return -1
	case 1:
		return idx[0]
	}
	a := idx[rnd.IntN(len(idx))]
	b := idx[rnd.IntN(len(idx)-1)]
	if b == a {
		b = idx[len(idx)-1]
	}
	if better(cands[b], cands[a], avg) {
		return b
	}
	return a
}

// better reports whether x is the better target of the two: not busier
// than twice the average first, then more free space.
func better(x, y Node, avg float64) bool {
	bx, by := float64(x.Transfers) > 2*avg, float64(y.Transfers) > 2*avg
	if bx != by {
		return by
	}
	return x.Remaining > y.Remaining
}

func averageTransfers(nodes []Node) float64 {
	if len(nodes) == 0 {
		return 0
	}
	sum := 0
	for _, n := range nodes {
		sum += n.Transfers
	}
	return float64(sum) / float64(len(nodes))
}

// pipelineOrder keeps the first target (the writer-local one, when there
// is one) and groups the rest by zone, the writer's zone first, in the
// order the zones were first chosen.
func pipelineOrder(out []Node, w Location) []Node {
	if len(out) < 3 {
		return out
	}
	rank := map[string]int{}
	if w.Zone != "" {
		rank[w.Zone] = -1
	}
	for i, n := range out {
		if _, ok := rank[n.Zone]; !ok {
			rank[n.Zone] = i
		}
	}
	rest := slices.Clone(out[1:])
	slices.SortStableFunc(rest, func(a, b Node) int { return cmp.Compare(rank[a.Zone], rank[b.Zone]) })
	return append(out[:1:1], rest...)
}

// SortForReader orders the DataNodes holding a block's replicas for a
// reader at r: live ones in service first, then stale ones, then
// decommissioned or failed ones; within each, the reader's host, then its
// zone, then the rest, ties in random order (readers spread over equal
// replicas). Dead DataNodes are left out. The caller leaves out replicas
// known to be corrupt.
func SortForReader(r Location, replicas []Node, rnd *rand.Rand) []Node {
	out := make([]Node, 0, len(replicas))
	for _, n := range replicas {
		if n.Liveness != Dead {
			out = append(out, n)
		}
	}
	rnd.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	class := func(n Node) int {
		switch {
		case n.Admin == Decommissioned || n.Failed:
			return 2
		case n.Liveness == Stale:
			return 1
		}
		return 0
	}
	slices.SortStableFunc(out, func(a, b Node) int {
		return cmp.Or(cmp.Compare(class(a), class(b)), cmp.Compare(distance(r, a), distance(r, b)))
	})
	return out
}

// distance is 0 on the reader's host, 1 in its zone, 2 elsewhere.
func distance(r Location, n Node) int {
	switch {
	case r.Host != "" && n.Host == r.Host:
		return 0
	case r.Zone != "" && n.Zone == r.Zone:
		return 1
	}
	return 2
}

// ChooseSource picks the replica to copy a block from for re-replication:
// not dead, not failed, with fewer than maxStreams transfers in flight
// (maxStreams <= 0: no limit); decommissioning DataNodes first (they take
// no writes, so they have the bandwidth, as in HDFS), then live before
// stale, then the least busy, ties at random. ok is false when no replica
// can serve.
func ChooseSource(replicas []Node, maxStreams int, rnd *rand.Rand) (src Node, ok bool) {
	key := func(n Node) [3]int {
		dec := 1
		if n.Admin == Decommissioning || n.Admin == Decommissioned {
			dec = 0
		}
		return [3]int{dec, int(n.Liveness), n.Transfers}
	}
	ties := 0
	for _, n := range replicas {
		if n.Liveness == Dead || n.Failed || (maxStreams > 0 && n.Transfers >= maxStreams) {
			continue
		}
		if !ok {
			src, ok, ties = n, true, 1
			continue
		}
		kn, ks := key(n), key(src)
		switch c := slices.Compare(kn[:], ks[:]); {
		case c < 0:
			src, ties = n, 1
		case c == 0:
			ties++
			if rnd.IntN(ties) == 0 {
				src = n
			}
		}
	}
	return src, ok
}

// ChooseExcess picks n replicas to delete from an over-replicated block,
// keeping the zone spread: each comes from a zone holding the most
// replicas, preferring a replica on a DataNode that is failed,
// decommissioned, stale or dead, then the one with the least free space
// (HDFS's choice). Fewer than n when there are fewer replicas.
func ChooseExcess(replicas []Node, n int) []Node {
	left := slices.Clone(replicas)
	var out []Node
	for ; n > 0 && len(left) > 0; n-- {
		zones := map[string]int{}
		for _, r := range left {
			zones[r.Zone]++
		}
		most := 0
		for _, c := range zones {
			most = max(most, c)
		}
		worse := func(a, b Node) bool { // a is the better one to delete
			wa, wb := a.Failed || a.Admin != InService || a.Liveness != Live, b.Failed || b.Admin != InService || b.Liveness != Live
			if wa != wb {
				return wa
			}
			if a.Remaining != b.Remaining {
				return a.Remaining < b.Remaining
			}
			return a.ID < b.ID
		}
		at := -1
		for i, r := range left {
			if zones[r.Zone] == most && (at < 0 || worse(r, left[at])) {
				at = i
			}
		}
		out = append(out, left[at])
		left = slices.Delete(left, at, at+1)
	}
	return out
}
