package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// cluster draws DataNodes over up to 4 zones, each host in one zone, in
// every state.
func cluster(t *rapid.T) []Node {
	zones := rapid.IntRange(1, 4).Draw(t, "zones")
	hosts := rapid.IntRange(1, 8).Draw(t, "hosts")
	n := rapid.IntRange(0, 16).Draw(t, "nodes")
	nodes := make([]Node, n)
	for i := range nodes {
		h := rapid.IntRange(0, hosts-1).Draw(t, "host")
		nodes[i] = Node{
			ID:        uint64(i + 1),
			Host:      fmt.Sprintf("h%d", h),
			Zone:      fmt.Sprintf("z%d", h%zones),
			Remaining: rapid.Int64Range(0, 1000).Draw(t, "remaining"),
			Transfers: rapid.IntRange(0, 20).Draw(t, "transfers"),
			Liveness:  Liveness(rapid.IntRange(0, 2).Draw(t, "liveness")),
			Admin:     Admin(rapid.IntRange(0, 2).Draw(t, "admin")),
			Full:      rapid.Float64Range(0, 1).Draw(t, "full") < 0.15,
			Failed:    rapid.Float64Range(0, 1).Draw(t, "failed") < 0.1,
		}
		if rapid.Bool().Draw(t, "healthy") { // so that many clusters have eligible nodes
			nodes[i].Liveness, nodes[i].Admin, nodes[i].Full, nodes[i].Failed = Live, InService, false, false
		}
	}
	return nodes
}

func TestChooseTargetsProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes := cluster(t)
		rnd := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 1))
		req := Request{
			Writer:    Location{Host: fmt.Sprintf("h%d", rapid.IntRange(0, 9).Draw(t, "writerHost"))},
			Replicas:  rapid.IntRange(0, 5).Draw(t, "replicas"),
			BlockSize: rapid.Int64Range(0, 500).Draw(t, "blockSize"),
		}
		// The writer's zone is its host's, when its host has a DataNode.
		req.Writer.Zone = "z-none"
		for _, n := range nodes {
			if n.Host == req.Writer.Host {
				req.Writer.Zone = n.Zone
			}
		}
		if rapid.Bool().Draw(t, "exclude") && len(nodes) > 0 {
			req.Exclude = []uint64{nodes[rapid.IntRange(0, len(nodes)-1).Draw(t, "excluded")].ID}
		}
		if rapid.Bool().Draw(t, "existing") && len(nodes) > 0 {
			req.Chosen = []Node{nodes[rapid.IntRange(0, len(nodes)-1).Draw(t, "chosen")]}
		}
		got := ChooseTargets(nodes, req, rnd)

		ineligible := func(n Node) bool {
			return !Eligible(n, req.BlockSize) || slices.Contains(req.Exclude, n.ID) ||
				slices.ContainsFunc(req.Chosen, func(c Node) bool { return c.ID == n.ID })
		}
		var eligible []Node
		zonesEligible := map[string]bool{}
		for _, n := range nodes {
			if !ineligible(n) {
				eligible = append(eligible, n)
				zonesEligible[n.Zone] = true
			}
		}
		// As many as asked, or every eligible node.
		if want := min(req.Replicas, len(eligible)); len(got) != want {
			t.Fatalf("%d targets, want %d (of %d eligible)", len(got), want, len(eligible))
		}
		seen := map[uint64]bool{}
		zones := map[string]bool{}
		for _, c := range req.Chosen {
			zones[c.Zone] = true
		}
		for _, n := range got {
			if ineligible(n) {
				t.Fatalf("chose an ineligible node %+v", n)
			}
			if seen[n.ID] {
				t.Fatalf("chose node %d twice", n.ID)
			}
			seen[n.ID] = true
			zones[n.Zone] = true
		}
		// Two zones at least, where two have eligible nodes and two
		// replicas are placed.
		if len(got)+len(req.Chosen) >= 2 && len(got) >= 1 {
			all := maps(zonesEligible, req.Chosen)
			if all >= 2 && len(zones) < 2 {
				t.Fatalf("replicas in zones %v; eligible zones %v", zones, zonesEligible)
			}
		}
		// First replica local to the writer.
		if len(got) > 0 && len(req.Chosen) == 0 {
			onHost := slices.ContainsFunc(eligible, func(n Node) bool { return n.Host == req.Writer.Host })
			inZone := slices.ContainsFunc(eligible, func(n Node) bool { return n.Zone == req.Writer.Zone })
			switch {
			case onHost && got[0].Host != req.Writer.Host:
				t.Fatalf("first target on %s, the writer's host %s has an eligible node", got[0].Host, req.Writer.Host)
			case !onHost && inZone && got[0].Zone != req.Writer.Zone:
				t.Fatalf("first target in %s, the writer's zone %s has an eligible node", got[0].Zone, req.Writer.Zone)
			}
		}
		// Hosts are shared (with each other or with an existing replica)
		// only when no fresh host was left.
		hosts := map[string]int{}
		for _, n := range got {
			hosts[n.Host]++
		}
		distinctEligibleHosts := map[string]bool{}
		for _, n := range eligible {
			if !slices.ContainsFunc(req.Chosen, func(c Node) bool { return c.Host == n.Host }) {
				distinctEligibleHosts[n.Host] = true
			}
		}
		if len(hosts) < min(len(got), len(distinctEligibleHosts)) {
			t.Fatalf("targets on hosts %v while %d eligible hosts", hosts, len(distinctEligibleHosts))
		}
	})
}

// maps counts the zones with eligible nodes or existing replicas.
func maps(eligible map[string]bool, chosen []Node) int {
	z := map[string]bool{}
	for k := range eligible {
		z[k] = true
	}
	for _, c := range chosen {
		z[c.Zone] = true
	}
	return len(z)
}

// Three replicas over three zones with room: one in each.
func TestThreeZonesOneEach(t *testing.T) {
	var nodes []Node
	for i := range 9 {
		nodes = append(nodes, Node{ID: uint64(i + 1), Host: fmt.Sprintf("h%d", i), Zone: fmt.Sprintf("z%d", i%3), Remaining: 100})
	}
	for seed := range uint64(50) {
		got := ChooseTargets(nodes, Request{Writer: Location{Host: "h4", Zone: "z1"}, Replicas: 3}, rand.New(rand.NewPCG(seed, 0)))
		if len(got) != 3 || got[0].Host != "h4" {
			t.Fatalf("seed %d: %+v", seed, got)
		}
		zones := map[string]bool{}
		for _, n := range got {
			zones[n.Zone] = true
		}
		if len(zones) != 3 {
			t.Fatalf("seed %d: zones %v", seed, zones)
		}
	}
}

// Among equals, the emptier DataNode is chosen more often, and a busy one
// less often.
func TestBalance(t *testing.T) {
	nodes := []Node{
		{ID: 1, Host: "a", Zone: "z", Remaining: 1000},
		{ID: 2, Host: "b", Zone: "z", Remaining: 10},
		{ID: 3, Host: "c", Zone: "z", Remaining: 5000, Transfers: 100},
		{ID: 4, Host: "d", Zone: "z", Remaining: 10},
	}
	count := map[uint64]int{}
	rnd := rand.New(rand.NewPCG(7, 7))
	for range 2000 {
		got := ChooseTargets(nodes, Request{Replicas: 1}, rnd)
		count[got[0].ID]++
	}
	if count[1] <= count[2] || count[1] <= count[4] || count[1] <= count[3] {
		t.Fatalf("choices %v: the emptier idle node should win most", count)
	}
}

func TestSortForReader(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes := cluster(t)
		r := Location{Host: fmt.Sprintf("h%d", rapid.IntRange(0, 9).Draw(t, "host")), Zone: fmt.Sprintf("z%d", rapid.IntRange(0, 4).Draw(t, "zone"))}
		got := SortForReader(r, nodes, rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 2)))
		live := 0
		for _, n := range nodes {
			if n.Liveness != Dead {
				live++
			}
		}
		if len(got) != live {
			t.Fatalf("%d replicas for the reader, want the %d not dead", len(got), live)
		}
		key := func(n Node) [2]int {
			c := 0
			if n.Admin == Decommissioned || n.Failed {
				c = 2
			} else if n.Liveness == Stale {
				c = 1
			}
			return [2]int{c, distance(r, n)}
		}
		for i := 1; i < len(got); i++ {
			if got[i].Liveness == Dead {
				t.Fatalf("a dead node for the reader")
			}
			a, b := key(got[i-1]), key(got[i])
			if slices.Compare(a[:], b[:]) > 0 {
				t.Fatalf("out of order at %d: %+v before %+v (reader %+v)", i, got[i-1], got[i], r)
			}
		}
	})
}

func TestChooseSource(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes := cluster(t)
		maxStreams := rapid.IntRange(0, 20).Draw(t, "maxStreams")
		src, ok := ChooseSource(nodes, maxStreams, rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 3)))
		can := func(n Node) bool {
			return n.Liveness != Dead && !n.Failed && (maxStreams <= 0 || n.Transfers < maxStreams)
		}
		any := slices.ContainsFunc(nodes, can)
		if ok != any {
			t.Fatalf("ok %v, a possible source exists: %v", ok, any)
		}
		if !ok {
			return
		}
		if !can(src) {
			t.Fatalf("source %+v cannot serve", src)
		}
		for _, n := range nodes {
			if !can(n) {
				continue
			}
			decN, decS := n.Admin != InService, src.Admin != InService
			if decN && !decS {
				t.Fatalf("source %+v while decommissioning %+v can serve", src, n)
			}
			if decN == decS && n.Liveness < src.Liveness {
				t.Fatalf("source %+v while live %+v can serve", src, n)
			}
			if decN == decS && n.Liveness == src.Liveness && n.Transfers < src.Transfers {
				t.Fatalf("source %+v busier than %+v", src, n)
			}
		}
	})
}

func TestChooseExcessKeepsZones(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes := cluster(t)
		n := rapid.IntRange(0, len(nodes)).Draw(t, "n")
		del := ChooseExcess(nodes, n)
		if len(del) != n {
			t.Fatalf("%d to delete, want %d", len(del), n)
		}
		zones := func(ns []Node) map[string]bool {
			z := map[string]bool{}
			for _, x := range ns {
				z[x.Zone] = true
			}
			return z
		}
		var left []Node
		for _, x := range nodes {
			if !slices.ContainsFunc(del, func(d Node) bool { return d.ID == x.ID }) {
				left = append(left, x)
			}
		}
		if len(left) != len(nodes)-n {
			t.Fatalf("deleted a node twice")
		}
		// No zone emptied while another still holds two or more.
		before, after := zones(nodes), zones(left)
		want := min(len(before), len(left))
		if len(after) < want {
			t.Fatalf("zones %v left of %v with %d replicas", after, before, len(left))
		}
	})
}
