// Package maintain keeps the replicas of blocks where they should be: the
// NameNode's replication duty (HDFS's BlockManager and ReplicationMonitor,
// with HopsFS-CL's zones). A round scans every block of the files that are
// complete (their block rows, their replicas as the DataNodes reported
// them to the registry, the replication of their inode), classifies each
// block, plans bounded work with package placement (Plan: pure, no I/O),
// and runs it through the DataNodes' commands: copy a replica to new
// DataNodes, delete excess and corrupt replicas, delete replicas no block
// row names once they have been seen so for a grace period, and finish the
// decommissioning of DataNodes none of whose replicas is still needed.
//
// The bandwidth of the copies is the DataNodes' own (their
// --replication-bandwidth); a round bounds the blocks it acts on and the
// copies each DataNode takes part in.
package maintain

import (
	"math/rand/v2"
	"slices"

	"github.com/nimbus-fs/nimbus/placement"
	"github.com/nimbus-fs/nimbus/store"
)

// Class is a block's condition.
type Class uint8

const (
	Healthy         Class = iota
	UnderReplicated       // fewer counted replicas than the file's replication
	OverReplicated        // more counted replicas than the replication
	MisReplicated         // enough replicas, but in one zone while two zones have room
	Missing               // no good replica on a DataNode that is not dead
)

func (c Class) String() string {
	return [...]string{"healthy", "under-replicated", "over-replicated", "mis-replicated", "missing"}[c]
}

// Replica is one reported replica of a block with its DataNode.
type Replica struct {
	Node     placement.Node
	GenStamp uint64
	Length   int64
	State    store.ReplicaState
}

// Block is a block of a complete file with its replicas.
type Block struct {
	Row         store.Block
	Replication int
	Replicas    []Replica
}

// good reports whether r holds the block's bytes as its row names them.
func (b *Block) good(r Replica) bool {
	return r.State == store.ReplicaFinalized && r.GenStamp == b.Row.GenStamp && r.Length == b.Row.Length
}

// Judged is a block's classification.
type Judged struct {
	Class Class
	// Counted: good replicas on DataNodes not dead and in service (they
	// count towards the replication). Readable adds the good replicas on
	// decommissioning and decommissioned DataNodes (sources, not counted).
	Counted, Readable []placement.Node
	// Corrupt: replicas that are not good (reported corrupt, another
	// stamp, another length) on DataNodes not dead.
	Corrupt []placement.Node
	// Priority of an under-replicated or mis-replicated block: 0 first
	// (one replica left or none counted), then 1, then 2 (mis-replicated).
	Priority int
}

// Classify judges b among nodes (every DataNode, for the zone test).
func Classify(b *Block, nodes []placement.Node) Judged {
	var j Judged
	for _, r := range b.Replicas {
		n := r.Node
		if n.Liveness == placement.Dead {
			continue
		}
		if !b.good(r) {
			j.Corrupt = append(j.Corrupt, n)
			continue
		}
		if n.Failed {
			continue
		}
		if n.Admin == placement.InService {
			j.Counted = append(j.Counted, n)
		} else {
			j.Readable = append(j.Readable, n)
		}
	}
	want := max(b.Replication, 1)
	switch {
	case len(j.Counted)+len(j.Readable) == 0:
		j.Class = Missing
	case len(j.Counted) < want:
		j.Class = UnderReplicated
		if len(j.Counted) <= 1 {
			j.Priority = 0
		} else {
			j.Priority = 1
		}
	case len(j.Counted) > want:
		j.Class = OverReplicated
	case want >= 2 && zones(j.Counted) < 2 && otherZoneHasRoom(j.Counted, nodes, b.Row.Length):
		j.Class = MisReplicated
		j.Priority = 2
	}
	return j
}

func zones(ns []placement.Node) int {
	z := map[string]bool{}
	for _, n := range ns {
		z[n.Zone] = true
	}
	return len(z)
}

// otherZoneHasRoom: some DataNode outside the zones of have may take a
// replica of size.
func otherZoneHasRoom(have, nodes []placement.Node, size int64) bool {
	z := map[string]bool{}
	for _, n := range have {
		z[n.Zone] = true
	}
	for _, n := range nodes {
		if !z[n.Zone] && placement.Eligible(n, size) {
			return true
		}
	}
	return false
}

// Kind is what an action does.
type Kind uint8

const (
	Replicate Kind = iota // copy the block from Source to Targets
	Delete                // delete the replicas on Nodes
)

// Action is one step of a round.
type Action struct {
	Kind     Kind
	Block    uint64
	GenStamp uint64 // the replica's stamp (Delete: of each node's replica, in Stamps)
	Length   int64
	Source   placement.Node
	Targets  []placement.Node
	Nodes    []placement.Node
	Stamps   []uint64 // Delete: the stamp of the replica on Nodes[i]
	Why      Class
}

// Limits bound a round.
type Limits struct {
	// BlocksPerRound: the most blocks a round acts on (HDFS's
	// dfs.namenode.replication.work.multiplier.per.iteration × DataNodes).
	BlocksPerRound int
	// StreamsPerNode: the most copies a DataNode takes part in at once,
	// counting its transfers in flight (HDFS's
	// dfs.namenode.replication.max-streams).
	StreamsPerNode int
}

// Report counts blocks by class, corrupt replicas and the round's work.
type Report struct {
	Blocks          int
	Healthy         int
	UnderReplicated int
	OverReplicated  int
	MisReplicated   int
	Missing         int
	CorruptReplicas int
	// Work done by the executor in the round.
	Replicated, Deleted, OrphansDeleted int
	BytesMoved                          int64
	Failed                              int
	Decommissioned                      int
}

func (r *Report) add(c Class) {
	r.Blocks++
	switch c {
	case Healthy:
		r.Healthy++
	case UnderReplicated:
		r.UnderReplicated++
	case OverReplicated:
		r.OverReplicated++
	case MisReplicated:
		r.MisReplicated++
	case Missing:
		r.Missing++
	}
}

// Plan classifies blocks and returns a round's actions within lim: copies
// of under-replicated blocks (priority 0 first) and mis-replicated ones,
// then deletions of excess replicas (placement.ChooseExcess) and of
// corrupt ones once the block has its replication in good replicas.
// Targets come from placement.ChooseTargets over nodes with the block's
// good replicas as already chosen; the source from placement.ChooseSource.
func Plan(blocks []Block, nodes []placement.Node, lim Limits, rnd *rand.Rand) ([]Action, Report) {
	var rep Report
	type todo struct {
		b *Block
		j Judged
	}
	var work []todo
	for i := range blocks {
		b := &blocks[i]
		j := Classify(b, nodes)
		rep.add(j.Class)
		rep.CorruptReplicas += len(j.Corrupt)
		if j.Class != Healthy && j.Class != Missing || len(j.Corrupt) > 0 && j.Class != Missing {
			work = append(work, todo{b, j})
		}
	}
	rank := func(t todo) int {
		switch t.j.Class {
		case UnderReplicated, MisReplicated:
			return t.j.Priority
		}
		return 3
	}
	slices.SortStableFunc(work, func(a, b todo) int { return rank(a) - rank(b) })
	busy := map[uint64]int{} // DataNode id -> copies in this round
	streams := func(n placement.Node) int { return n.Transfers + busy[n.ID] }
	// A DataNode at its stream limit is no target this round.
	avail := func() []placement.Node {
		out := make([]placement.Node, 0, len(nodes))
		for _, n := range nodes {
			if lim.StreamsPerNode <= 0 || streams(n) < lim.StreamsPerNode {
				out = append(out, n)
			}
		}
		return out
	}
	var acts []Action
	acted := 0
	for _, t := range work {
		if lim.BlocksPerRound > 0 && acted >= lim.BlocksPerRound {
			break
		}
		b, j := t.b, t.j
		did := false
		switch j.Class {
		case UnderReplicated, MisReplicated:
			need := b.Replication - len(j.Counted)
			if j.Class == MisReplicated {
				need = 1
			}
			srcs := append(slices.Clone(j.Counted), j.Readable...)
			cands := make([]placement.Node, len(srcs))
			for i, s := range srcs {
				s.Transfers = streams(s)
				cands[i] = s
			}
			src, ok := placement.ChooseSource(cands, lim.StreamsPerNode, rnd)
			if !ok {
				break
			}
			// Every DataNode holding any replica is chosen already: a
			// target must not hold the block in any state.
			var holders []uint64
			for _, r := range b.Replicas {
				holders = append(holders, r.Node.ID)
			}
			ts := placement.ChooseTargets(avail(), placement.Request{Replicas: need, BlockSize: b.Row.Length, Chosen: j.Counted, Exclude: holders}, rnd)
			if j.Class == MisReplicated {
				ts = slices.DeleteFunc(ts, func(n placement.Node) bool {
					return slices.ContainsFunc(j.Counted, func(c placement.Node) bool { return c.Zone == n.Zone })
				})
			}
			if len(ts) == 0 {
				break
			}
			busy[src.ID]++
			for _, n := range ts {
				busy[n.ID]++
			}
			acts = append(acts, Action{Kind: Replicate, Block: b.Row.ID, GenStamp: b.Row.GenStamp, Length: b.Row.Length, Source: src, Targets: ts, Why: j.Class})
			did = true
		case OverReplicated:
			ex := placement.ChooseExcess(j.Counted, len(j.Counted)-b.Replication)
			if len(ex) > 0 {
				acts = append(acts, deleteAction(b, ex, OverReplicated))
				did = true
			}
		}
		// Corrupt replicas go once the good ones are enough.
		if len(j.Corrupt) > 0 && len(j.Counted) >= b.Replication {
			acts = append(acts, deleteAction(b, j.Corrupt, j.Class))
			did = true
		}
		if did {
			acted++
		}
	}
	return acts, rep
}

func deleteAction(b *Block, ns []placement.Node, why Class) Action {
	a := Action{Kind: Delete, Block: b.Row.ID, GenStamp: b.Row.GenStamp, Length: b.Row.Length, Nodes: ns, Why: why}
	for _, n := range ns {
		for _, r := range b.Replicas {
			if r.Node.ID == n.ID {
				a.Stamps = append(a.Stamps, r.GenStamp)
				break
			}
		}
	}
	return a
}
