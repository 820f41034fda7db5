package coherence

import (
	"errors"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

const retry = 10 * time.Millisecond

var (
	t0   = time.Unix(1000, 0)
	root = cache.Inode{Parent: store.RootParentID, ID: store.RootID, Type: meta.TypeDir, Perm: 0o755}
	file = cache.Inode{Parent: store.RootID, Name: "f", ID: 7, Type: meta.TypeFile, Perm: 0o644}
	key  = Local(cache.Key(store.RootID, "f"))
)

type testNode struct {
	*Node
	c *cache.Cache
}

func newNode(t *testing.T, id NodeID) testNode {
	t.Helper()
	c, err := cache.New(cache.Config{MaxBytes: 1 << 20, HashSeed: 1})
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{ID: id, Cache: c, Owner: func(uint64) int { return 0 }, Retry: retry})
	if err != nil {
		t.Fatal(err)
	}
	return testNode{n, c}
}

// start gives n the view and the floor, and a session until t0+1h.
func (n testNode) start(v View) {
	n.ViewChanged(v)
	n.FloorRaised(v.Version)
	n.Renewed(t0.Add(time.Hour))
	n.Tick(t0)
	n.Ready()
}

// fill installs the file's row as a fill begun now would; it reports
// whether the cache took it.
func (n testNode) fill() bool { return n.c.PutPath(n.c.Begin(), root, file) == 2 }

func (n testNode) cached() bool { _, ok := n.c.Get(file.Parent, file.Name); return ok }

func pair(t *testing.T) (w, h testNode) {
	w, h = newNode(t, "w"), newNode(t, "h")
	v := View{Version: 1, Members: []Member{{ID: "h"}, {ID: "w"}}}
	w.start(v)
	h.start(v)
	return w, h
}

func only(t *testing.T, r Ready, typ MsgType) Message {
	t.Helper()
	if len(r.Messages) != 1 || r.Messages[0].Type != typ {
		t.Fatalf("want one %s, got %v", typ, r.Messages)
	}
	return r.Messages[0]
}

// TestWrite walks one write: INV, hold, ACK, commit, RELEASE, release.
func TestWrite(t *testing.T) {
	w, h := pair(t)
	if !h.fill() || !h.cached() {
		t.Fatal("the holder could not fill before the write")
	}
	op, err := w.WriteLocked([]Target{key})
	if err != nil {
		t.Fatal(err)
	}
	rd := w.Ready()
	inv := only(t, rd, MsgInv)
	if len(rd.Commits) != 0 {
		t.Fatal("committed before the ACK")
	}
	h.Step(inv)
	if h.cached() || h.fill() {
		t.Fatal("the INV did not drop the entry and refuse fills")
	}
	begun := h.c.Begin() // a fill that reads the store before the commit
	w.Step(only(t, h.Ready(), MsgAck))
	rd = w.Ready()
	if len(rd.Commits) != 1 || rd.Commits[0] != (Commit{Op: op, View: 1}) {
		t.Fatalf("after the ACK: %+v, want the commit of %s in view 1", rd, op)
	}
	if err := w.Committed(op, true); err != nil {
		t.Fatal(err)
	}
	h.Step(only(t, w.Ready(), MsgRelease))
	if h.Holding() != 0 {
		t.Fatal("RELEASE left the hold")
	}
	if h.c.PutPath(begun, root, file) == 2 {
		t.Fatal("a fill begun before the commit installed")
	}
	if !h.fill() {
		t.Fatal("a fill begun after the release was refused")
	}
	if err := w.Committed(op, true); err == nil {
		t.Fatal("a second Committed of one write was accepted")
	}
}

// TestLostMessagesAreResent: INV again until the ACK; the holder's ACK
// again until the RELEASE, answered by RELEASE once the write is done.
func TestLostMessagesAreResent(t *testing.T) {
	w, h := pair(t)
	op, _ := w.WriteLocked([]Target{key})
	inv := only(t, w.Ready(), MsgInv) // lost
	w.Tick(t0.Add(retry / 2))
	if w.HasReady() {
		t.Fatal("re-sent before Retry")
	}
	w.Tick(t0.Add(retry))
	if again := only(t, w.Ready(), MsgInv); again.Op != inv.Op {
		t.Fatalf("re-sent %v, want %v", again, inv)
	}
	h.Step(inv)
	w.Step(only(t, h.Ready(), MsgAck))
	w.Ready()
	w.Committed(op, true)
	w.Ready() // the RELEASE is lost
	h.Tick(t0.Add(2 * retry))
	w.Step(only(t, h.Ready(), MsgAck))
	h.Step(only(t, w.Ready(), MsgRelease))
	if h.Holding() != 0 {
		t.Fatal("still holding after the re-sent RELEASE")
	}
}

// TestDepartedWriterIsReleasedOnlyWhenFenced: a writer that left the
// membership may still commit; its holds stay until the store fenced it.
func TestDepartedWriterIsReleasedOnlyWhenFenced(t *testing.T) {
	w, h := pair(t)
	w.WriteLocked([]Target{key})
	h.Step(only(t, w.Ready(), MsgInv))
	h.Ready()
	h.ViewChanged(View{Version: 2, Members: []Member{{ID: "h"}}})
	rd := h.Ready()
	if len(rd.Fences) != 1 || rd.Fences[0] != "w" {
		t.Fatalf("the writer left: %+v, want a Fence of w", rd)
	}
	if h.Holding() != 1 || h.fill() {
		t.Fatal("released when the writer left, before it was fenced")
	}
	h.Fenced("w")
	if h.Holding() != 0 || !h.fill() {
		t.Fatal("still holding after the fence")
	}
	// A late INV from the fenced writer places nothing.
	h.Step(Message{Type: MsgInv, From: "w", To: "h", Since: 1, Op: OpID{"w", 9}, Targets: []cache.Target{key.Target}})
	if h.Holding() != 0 {
		t.Fatal("a fenced writer's INV placed a hold")
	}
}

// TestWriterStopsWaitingForDeparted: no ACK is needed from an instance the
// membership dropped (its session ended before the coordinator dropped it).
func TestWriterStopsWaitingForDeparted(t *testing.T) {
	w, _ := pair(t)
	op, _ := w.WriteLocked([]Target{key})
	w.Ready()
	w.ViewChanged(View{Version: 2, Members: []Member{{ID: "w"}}})
	rd := w.Ready()
	if len(rd.Commits) != 1 || rd.Commits[0].Op != op {
		t.Fatalf("after h left: %+v, want the commit", rd)
	}
}

// TestRouting: a local target reaches only the deployment owning its
// routing key; an everywhere target reaches all.
func TestRouting(t *testing.T) {
	c, _ := cache.New(cache.Config{MaxBytes: 1 << 20})
	n, _ := New(Config{ID: "a", Deployment: 0, Cache: c, Owner: func(p uint64) int { return int(p % 2) }, Retry: retry})
	n.ViewChanged(View{Version: 1, Members: []Member{{ID: "a"}, {ID: "b"}, {ID: "c", Deployment: 1}}})
	n.Ready()
	n.WriteLocked([]Target{Local(cache.Key(2, "x")), Everywhere(cache.Key(1, "d")), Local(cache.ListingOf(3)),
		LocalTo(cache.AttrsOf(8), 5), Local(cache.AttrsOf(4))})
	got := map[NodeID]int{}
	for _, m := range n.Ready().Messages {
		got[m.To] = len(m.Targets)
	}
	// AttrsOf(8) routed by 5 (its parent); Local(AttrsOf(4)) names no
	// routing key, so it goes everywhere.
	if got["b"] != 3 || got["c"] != 4 || len(got) != 2 {
		t.Fatalf("targets per instance %v, want b: Key(2,x), Key(1,d), AttrsOf(4); c: Key(1,d), ListingOf(3), AttrsOf(8), AttrsOf(4)", got)
	}
}

// TestServing: nothing is served before the floor reaches the join
// version, nor at or after the session deadline; a view without the
// instance ends the incarnation.
func TestServing(t *testing.T) {
	n := newNode(t, "a")
	n.Renewed(t0.Add(time.Second))
	n.ViewChanged(View{Version: 5, Members: []Member{{ID: "a"}}})
	if rd := n.Ready(); rd.Floor != 5 {
		t.Fatalf("Ready %+v, want the floor raised to the join version 5", rd)
	}
	if n.Serving(t0) {
		t.Fatal("serving before the floor")
	}
	n.FloorRaised(4)
	if n.Serving(t0) {
		t.Fatal("serving with the floor below the join version")
	}
	n.FloorRaised(5)
	if !n.Serving(t0) || n.Serving(t0.Add(time.Second)) {
		t.Fatal("Serving does not follow the deadline")
	}
	n.ViewChanged(View{Version: 6})
	if n.Serving(t0) || !errors.Is(n.Err(), ErrLost) {
		t.Fatal("still serving after a view without it")
	}
	if _, err := n.WriteLocked([]Target{key}); !errors.Is(err, ErrLost) {
		t.Fatalf("WriteLocked after the end: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	c, _ := cache.New(cache.Config{MaxBytes: 1 << 20})
	owner := func(uint64) int { return 0 }
	for _, cfg := range []Config{
		{Cache: c, Owner: owner, Retry: retry},
		{ID: "a", Owner: owner, Retry: retry},
		{ID: "a", Cache: c, Retry: retry},
		{ID: "a", Cache: c, Owner: owner},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(%+v) = %v, want ErrInvalid", cfg, err)
		}
	}
}

// TestLatePeerIsDeparted: a message from a peer that the current view
// should list but does not (it joined and left between the views this
// instance saw) marks the peer gone: its hold stays until its fence.
func TestLatePeerIsDeparted(t *testing.T) {
	h := newNode(t, "h")
	h.start(View{Version: 3, Members: []Member{{ID: "h"}}})
	h.Step(Message{Type: MsgInv, From: "x", To: "h", Since: 2, Op: OpID{"x", 1}, Targets: []cache.Target{key.Target}})
	rd := h.Ready()
	if len(rd.Fences) != 1 || rd.Fences[0] != "x" {
		t.Fatalf("Ready %+v, want a Fence of x", rd)
	}
	if h.Holding() != 1 {
		t.Fatal("no hold for the late writer: it may still commit")
	}
	h.Fenced("x")
	if h.Holding() != 0 {
		t.Fatal("the hold outlived the fence")
	}
	// A peer that joined after the view it knows is live, and a write reaches it.
	h.Step(Message{Type: MsgAck, From: "y", To: "h", Since: 4, Op: OpID{"h", 99}})
	h.Ready()
	if _, err := h.WriteLocked([]Target{key}); err != nil {
		t.Fatal(err)
	}
	if m := only(t, h.Ready(), MsgInv); m.To != "y" {
		t.Fatalf("INV to %s, want y", m.To)
	}
}

// TestNoCacheMember: a writer sends no INV to a member whose view says it
// has no cache, and commits without it; a member met only in a message is
// taken to cache. An uncached member's own write invalidates the others,
// and it holds and ACKs an INV that reaches it.
func TestNoCacheMember(t *testing.T) {
	w, u, h := newNode(t, "w"), newNode(t, "u"), newNode(t, "h")
	v := View{Version: 1, Members: []Member{{ID: "h"}, {ID: "u", NoCache: true}, {ID: "w"}}}
	for _, n := range []testNode{w, u, h} {
		n.start(v)
	}
	op, err := w.WriteLocked([]Target{key})
	if err != nil {
		t.Fatal(err)
	}
	rd := w.Ready()
	if len(rd.Messages) != 1 || rd.Messages[0].To != "h" || len(rd.Commits) != 0 {
		t.Fatalf("writer's Ready %+v, want one INV, to h, and no commit", rd)
	}
	h.Step(rd.Messages[0])
	for _, m := range h.Ready().Messages {
		w.Step(m)
	}
	if rd := w.Ready(); len(rd.Commits) != 1 || rd.Commits[0].Op != op {
		t.Fatalf("after h's ACK: %+v, want the commit (u caches nothing)", rd)
	}

	if err := w.Committed(op, true); err != nil {
		t.Fatal(err)
	}
	for _, m := range w.Ready().Messages {
		h.Step(m)
	}
	h.Ready()

	// u writes: h and w, which cache, are invalidated.
	if !h.fill() {
		t.Fatal("h did not fill")
	}
	if _, err := u.WriteLocked([]Target{key}); err != nil {
		t.Fatal(err)
	}
	got := map[NodeID]bool{}
	for _, m := range u.Ready().Messages {
		if m.Type == MsgInv {
			got[m.To] = true
		}
		if m.To == "h" {
			h.Step(m)
		}
	}
	if !got["h"] || !got["w"] || len(got) != 2 {
		t.Fatalf("u's INVs went to %v, want h and w", got)
	}
	if h.cached() {
		t.Fatal("h still caches the row u's write holds")
	}

	// x, met in a message before any view lists it, is sent INV.
	x := newNode(t, "x")
	x.start(View{Version: 2, Members: []Member{{ID: "h"}, {ID: "u", NoCache: true}, {ID: "w"}, {ID: "x"}}})
	u.Step(Message{Type: MsgAck, From: "x", To: "u", Since: 2, Op: OpID{Writer: "u", Seq: 99}})
	u.Ready()
	if _, err := u.WriteLocked([]Target{key}); err != nil {
		t.Fatal(err)
	}
	got = map[NodeID]bool{}
	for _, m := range u.Ready().Messages {
		got[m.To] = true
	}
	if !got["x"] {
		t.Fatalf("u's INVs went to %v, want x among them", got)
	}

	// An INV that reaches u (from a writer that took it to cache) is
	// ACKed at once.
	u.Step(Message{Type: MsgInv, From: "x", To: "u", Since: 2, Op: OpID{Writer: "x", Seq: 1}, Targets: []cache.Target{key.Target}})
	if rd := u.Ready(); len(rd.Messages) != 1 || rd.Messages[0].Type != MsgAck || rd.Messages[0].To != "x" {
		t.Fatalf("u's answer to an INV: %+v, want an ACK to x", rd)
	}
}
