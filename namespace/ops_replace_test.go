package namespace

import (
	"bytes"
	"context"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

// TestCompleteAtUndoesAppend: CompleteAt closes a file at the length it had
// before an append, whatever the append wrote (inline, into the last block,
// across new blocks), and the file is complete and appendable afterwards.
func TestCompleteAtUndoesAppend(t *testing.T) {
	e, _ := newBlockEngine(t, t.TempDir())
	ctx := context.Background()
	for i, tc := range []struct{ before, appended int }{
		{100, 200},      // inline stays inline
		{100, 5000},     // inline moves to blocks, then back
		{1500, 300},     // into the last block
		{1500, 20000},   // across several syncs
		{4000, 0},       // nothing appended
		{2500, 1 << 20}, // many syncs
	} {
		p := "/f" + string(rune('a'+i))
		orig := randomBytes(tc.before, uint64(i))
		if _, err := e.Create(ctx, root, p, meta.CreateOptions{Client: "w"}); err != nil {
			t.Fatal(err)
		}
		writeChunks(t, e, p, "w", 0, orig, 700)
		if _, err := e.Complete(ctx, root, p, "w"); err != nil {
			t.Fatal(err)
		}
		st, err := e.Append(ctx, root, p, "a")
		if err != nil {
			t.Fatal(err)
		}
		writeChunks(t, e, p, "a", st.Length, randomBytes(tc.appended, 99), 4096)
		if cs, _ := e.ContentSummary(ctx, root, "/"); cs.SpaceConsumed < int64(tc.before) {
			t.Fatalf("%s: space %d", p, cs.SpaceConsumed)
		}
		out, err := e.CompleteAt(ctx, root, p, "a", st.Length)
		if err != nil {
			t.Fatalf("%s: CompleteAt: %v", p, err)
		}
		if out.Length != int64(tc.before) || out.UnderConstruction {
			t.Fatalf("%s: CompleteAt returned %+v", p, out)
		}
		if got := readAll(t, e, p); !bytes.Equal(got, orig) {
			t.Fatalf("%s: %d bytes after CompleteAt, want the %d before the append", p, len(got), len(orig))
		}
		// Appendable again, by anyone, at once.
		if _, err := e.Append(ctx, root, p, "b"); err != nil {
			t.Fatalf("%s: append after CompleteAt: %v", p, err)
		}
		writeChunks(t, e, p, "b", int64(tc.before), []byte("tail"), 4)
		if _, err := e.Complete(ctx, root, p, "b"); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, e, p); !bytes.Equal(got, append(orig, "tail"...)) {
			t.Fatalf("%s: after a later append: %d bytes", p, len(got))
		}
	}
	// Space usage follows: only what is kept is charged.
	cs, err := e.ContentSummary(ctx, root, "/")
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, b := range []int{100, 100, 1500, 1500, 4000, 2500} {
		want += int64(b + 4)
	}
	if cs.Length != want || cs.SpaceConsumed != want*int64(e.cfg.DefaultReplication) {
		t.Errorf("content summary %+v, want length %d", cs, want)
	}
	// A length past what was written is refused, and the file stays open.
	if _, err := e.Create(ctx, root, "/g", meta.CreateOptions{Client: "w"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CompleteAt(ctx, root, "/g", "w", 1); meta.KindOf(err) != meta.KindInvalidArgument {
		t.Errorf("CompleteAt past the end: %v", err)
	}
	if _, err := e.CompleteAt(ctx, root, "/g", "other", 0); meta.KindOf(err) != meta.KindLease {
		t.Errorf("CompleteAt by another client: %v", err)
	}
}
