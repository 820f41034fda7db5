package maintain

import (
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"

	"github.com/nimbus-fs/nimbus/placement"
	"github.com/nimbus-fs/nimbus/store"
)

func node(id uint64, zone string) placement.Node {
	return placement.Node{ID: id, Host: "h" + string(rune('0'+id)), Zone: zone, Remaining: 1 << 30}
}

func blk(repl int, rs ...placement.Node) Block {
	b := Block{Row: store.Block{ID: 9, GenStamp: 5, Length: 100, Complete: true}, Replication: repl}
	for _, n := range rs {
		b.Replicas = append(b.Replicas, Replica{Node: n, GenStamp: 5, Length: 100, State: store.ReplicaFinalized})
	}
	return b
}

func TestClassify(t *testing.T) {
	a1, a2, b3, c4 := node(1, "a"), node(2, "a"), node(3, "b"), node(4, "c")
	all := []placement.Node{a1, a2, b3, c4}
	dead := b3
	dead.Liveness = placement.Dead
	dec := b3
	dec.Admin = placement.Decommissioning
	corrupt := blk(3, a1, b3, c4)
	corrupt.Replicas[2].State = store.ReplicaCorrupt
	stale := blk(2, a1, b3)
	stale.Replicas[1].GenStamp = 4
	for _, tc := range []struct {
		name    string
		b       Block
		want    Class
		prio    int
		corrupt int
	}{
		{"healthy", blk(3, a1, b3, c4), Healthy, 0, 0},
		{"one left", blk(3, a1), UnderReplicated, 0, 0},
		{"two of three", blk(3, a1, b3), UnderReplicated, 1, 0},
		{"dead replica", blk(2, a1, dead), UnderReplicated, 0, 0},
		{"decommissioning replica", blk(2, a1, dec), UnderReplicated, 0, 0},
		{"only decommissioning", blk(1, dec), UnderReplicated, 0, 0},
		{"excess", blk(1, a1, b3), OverReplicated, 0, 0},
		{"one zone", blk(2, a1, a2), MisReplicated, 2, 0},
		{"none", blk(3), Missing, 0, 0},
		{"only dead", blk(3, dead), Missing, 0, 0},
		{"corrupt", corrupt, UnderReplicated, 1, 1},
		{"old stamp", stale, UnderReplicated, 0, 1},
	} {
		j := Classify(&tc.b, all)
		if j.Class != tc.want || j.Priority != tc.prio || len(j.Corrupt) != tc.corrupt {
			t.Errorf("%s: %v priority %d corrupt %d, want %v %d %d", tc.name, j.Class, j.Priority, len(j.Corrupt), tc.want, tc.prio, tc.corrupt)
		}
	}
	// One zone is no mis-replication when no other zone has room.
	full := b3
	full.Full = true
	if j := Classify(&Block{Row: store.Block{ID: 1}, Replication: 2, Replicas: []Replica{{Node: a1, State: store.ReplicaFinalized}, {Node: a2, State: store.ReplicaFinalized}}},
		[]placement.Node{a1, a2, full}); j.Class != Healthy {
		t.Errorf("one zone, the other full: %v", j.Class)
	}
}

func TestPlan(t *testing.T) {
	a1, a2, b3, c4 := node(1, "a"), node(2, "a"), node(3, "b"), node(4, "c")
	all := []placement.Node{a1, a2, b3, c4}
	rnd := rand.New(rand.NewPCG(1, 2))

	// Under-replicated in zone a: the copy goes to two other zones.
	acts, rep := Plan([]Block{blk(3, a1)}, all, Limits{}, rnd)
	if rep.UnderReplicated != 1 || len(acts) != 1 || acts[0].Kind != Replicate || acts[0].Source.ID != 1 || len(acts[0].Targets) != 2 {
		t.Fatalf("under-replicated: %+v %+v", acts, rep)
	}
	z := map[string]bool{"a": true}
	for _, n := range acts[0].Targets {
		z[n.Zone] = true
	}
	if len(z) != 3 {
		t.Fatalf("targets %+v do not spread over zones b and c", acts[0].Targets)
	}

	// Over-replicated: the excess keeps a zone of each.
	acts, _ = Plan([]Block{blk(2, a1, a2, b3)}, all, Limits{}, rnd)
	if len(acts) != 1 || acts[0].Kind != Delete || len(acts[0].Nodes) != 1 || acts[0].Nodes[0].Zone != "a" {
		t.Fatalf("over-replicated: %+v", acts)
	}

	// Mis-replicated: one copy to another zone.
	acts, _ = Plan([]Block{blk(2, a1, a2)}, all, Limits{}, rnd)
	if len(acts) != 1 || acts[0].Kind != Replicate || len(acts[0].Targets) != 1 || acts[0].Targets[0].Zone == "a" {
		t.Fatalf("mis-replicated: %+v", acts)
	}

	// Corrupt: copied first, deleted once the good replicas suffice.
	c := blk(2, a1, b3)
	c.Replicas[1].State = store.ReplicaCorrupt
	acts, _ = Plan([]Block{c}, all, Limits{}, rnd)
	if len(acts) != 1 || acts[0].Kind != Replicate {
		t.Fatalf("corrupt, under-replicated: %+v", acts)
	}
	c = blk(2, a1, b3, c4)
	c.Replicas[2].State = store.ReplicaCorrupt
	acts, _ = Plan([]Block{c}, all, Limits{}, rnd)
	if len(acts) != 1 || acts[0].Kind != Delete || acts[0].Nodes[0].ID != 4 {
		t.Fatalf("corrupt, enough good: %+v", acts)
	}

	// Missing: nothing to do.
	if acts, rep := Plan([]Block{blk(2)}, all, Limits{}, rnd); len(acts) != 0 || rep.Missing != 1 {
		t.Fatalf("missing: %+v %+v", acts, rep)
	}

	// Bounds: blocks per round, priority first; streams per DataNode.
	bs := []Block{blk(3, a1, b3), blk(3, c4)}
	bs[1].Row.ID = 10
	acts, _ = Plan(bs, all, Limits{BlocksPerRound: 1}, rnd)
	if len(acts) != 1 || acts[0].Block != 10 {
		t.Fatalf("one block a round: %+v, want the one with one replica", acts)
	}
	many := make([]Block, 5)
	for i := range many {
		many[i] = blk(2, a1)
		many[i].Row.ID = uint64(100 + i)
	}
	acts, _ = Plan(many, all, Limits{StreamsPerNode: 2}, rnd)
	if len(acts) != 2 {
		t.Fatalf("one source, 2 streams: %d copies", len(acts))
	}
	use := map[uint64]int{}
	for _, a := range acts {
		use[a.Source.ID]++
		for _, n := range a.Targets {
			use[n.ID]++
		}
	}
	for id, n := range use {
		if n > 2 {
			t.Fatalf("DataNode %d in %d copies, limit 2", id, n)
		}
	}
}

// TestPlanProperties: over random clusters and blocks, a round's actions
// never copy to a DataNode holding the block, stay within the stream and
// block bounds, and never delete so much that a block falls below its
// replication or loses a zone.
func TestPlanProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		zs := []string{"a", "b", "c"}
		var nodes []placement.Node
		for i := range rapid.IntRange(1, 8).Draw(t, "nodes") {
			n := node(uint64(i+1), zs[rapid.IntRange(0, 2).Draw(t, "zone")])
			n.Liveness = placement.Liveness(rapid.IntRange(0, 2).Draw(t, "liveness"))
			n.Admin = placement.Admin(rapid.IntRange(0, 2).Draw(t, "admin"))
			n.Transfers = rapid.IntRange(0, 3).Draw(t, "transfers")
			nodes = append(nodes, n)
		}
		var bs []Block
		for i := range rapid.IntRange(0, 10).Draw(t, "blocks") {
			b := Block{Row: store.Block{ID: uint64(i + 1), GenStamp: 5, Length: 10, Complete: true}, Replication: rapid.IntRange(1, 4).Draw(t, "repl")}
			for _, n := range nodes {
				if rapid.Bool().Draw(t, "holds") {
					st := store.ReplicaFinalized
					if rapid.IntRange(0, 5).Draw(t, "corrupt") == 0 {
						st = store.ReplicaCorrupt
					}
					b.Replicas = append(b.Replicas, Replica{Node: n, GenStamp: 5, Length: 10, State: st})
				}
			}
			bs = append(bs, b)
		}
		lim := Limits{BlocksPerRound: rapid.IntRange(0, 5).Draw(t, "perRound"), StreamsPerNode: rapid.IntRange(0, 4).Draw(t, "streams")}
		acts, rep := Plan(bs, nodes, lim, rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 0)))
		if rep.Blocks != len(bs) || rep.Healthy+rep.UnderReplicated+rep.OverReplicated+rep.MisReplicated+rep.Missing != len(bs) {
			t.Fatalf("report %+v for %d blocks", rep, len(bs))
		}
		byID := map[uint64]*Block{}
		for i := range bs {
			byID[bs[i].Row.ID] = &bs[i]
		}
		blocksActed := map[uint64]bool{}
		use := map[uint64]int{}
		deleted := map[uint64]map[uint64]bool{}
		for _, a := range acts {
			b := byID[a.Block]
			blocksActed[a.Block] = true
			switch a.Kind {
			case Replicate:
				use[a.Source.ID]++
				for _, n := range a.Targets {
					use[n.ID]++
					if !placement.Eligible(n, b.Row.Length) {
						t.Fatalf("blk_%d: target %+v cannot take a replica", a.Block, n)
					}
					for _, r := range b.Replicas {
						if r.Node.ID == n.ID {
							t.Fatalf("blk_%d: copy to DataNode %d, which holds it", a.Block, n.ID)
						}
					}
				}
			case Delete:
				if deleted[a.Block] == nil {
					deleted[a.Block] = map[uint64]bool{}
				}
				for _, n := range a.Nodes {
					deleted[a.Block][n.ID] = true
				}
			}
		}
		if lim.BlocksPerRound > 0 && len(blocksActed) > lim.BlocksPerRound {
			t.Fatalf("%d blocks acted on, limit %d", len(blocksActed), lim.BlocksPerRound)
		}
		if lim.StreamsPerNode > 0 {
			for _, n := range nodes {
				if use[n.ID] > 0 && n.Transfers+use[n.ID] > lim.StreamsPerNode {
					t.Fatalf("DataNode %d: %d transfers + %d copies, limit %d", n.ID, n.Transfers, use[n.ID], lim.StreamsPerNode)
				}
			}
		}
		for id, del := range deleted {
			b := byID[id]
			before := Classify(b, nodes)
			var after []placement.Node
			for _, n := range before.Counted {
				if !del[n.ID] {
					after = append(after, n)
				}
			}
			if len(after) < b.Replication || zones(after) < min(2, b.Replication, zones(before.Counted)) {
				t.Fatalf("blk_%d (replication %d): deleting %v leaves %d replicas over %d zones (before %d over %d)",
					id, b.Replication, del, len(after), zones(after), len(before.Counted), zones(before.Counted))
			}
		}
	})
}
