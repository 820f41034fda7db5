package pebblestore

import (
	"sync"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/store"
)

// walGate holds every WAL sync back until release (called at the latest
// when the test ends): entered receives when a sync starts waiting, synced
// when one is let through.
type walGate struct {
	entered, synced chan struct{}
	release         func()
}

func holdWALSyncs(t *testing.T) *walGate {
	g := &walGate{entered: make(chan struct{}, 100), synced: make(chan struct{}, 100)}
	open := make(chan struct{})
	var once sync.Once
	g.release = func() { once.Do(func() { close(open) }) }
	walSyncHook = func() {
		g.entered <- struct{}{}
		<-open
		g.synced <- struct{}{}
	}
	t.Cleanup(func() {
		g.release()
		walSyncHook = nil
	})
	return g
}

// TestEarlyLockRelease holds the WAL sync of a commit back and checks both
// halves of early lock release: another transaction gets the row lock and
// sees the new row before the sync, and yet neither the committer nor that
// reader returns before the sync has happened.
func TestEarlyLockRelease(t *testing.T) {
	for _, hold := range []bool{false, true} {
		t.Run(map[bool]string{false: "early", true: "hold"}[hold], func(t *testing.T) {
			opts := DefaultOptions()
			opts.HoldLocksThroughSync = hold
			st := openTest(t, t.TempDir(), opts)
			key := []byte("k")

			gate := holdWALSyncs(t)

			committed := make(chan error, 1)
			go func() {
				w, _ := st.Begin(bg)
				if _, err := w.Read(bg, []store.ReadReq{{Key: key, Mode: store.Exclusive}}); err != nil {
					committed <- err
					return
				}
				w.Put(key, []byte("new"))
				committed <- w.Commit(bg)
			}()

			// The reader asks for the same row, exclusively.
			read := make(chan []byte, 1)
			readerDone := make(chan error, 1)
			<-gate.entered // the writer's batch is applied and its sync has begun
			go func() {
				r, _ := st.Begin(bg)
				vals, err := r.Read(bg, []store.ReadReq{{Key: key, Mode: store.Exclusive}})
				if err != nil {
					readerDone <- err
					return
				}
				read <- vals[0]
				readerDone <- r.Commit(bg) // wrote nothing
			}()

			select {
			case err := <-committed:
				t.Fatalf("the writer's commit returned (%v) before its WAL sync", err)
			case <-time.After(100 * time.Millisecond):
			}
			if hold {
				select {
				case v := <-read:
					t.Fatalf("holding locks through the sync, the reader got the row (%q) before it", v)
				case <-time.After(100 * time.Millisecond):
				}
			} else {
				select {
				case v := <-read:
					if string(v) != "new" {
						t.Fatalf("the reader saw %q, want the committed %q", v, "new")
					}
				case <-time.After(5 * time.Second):
					t.Fatal("with early lock release the reader still waited for the writer's sync")
				}
				select {
				case err := <-readerDone:
					t.Fatalf("the reader returned (%v) before the row it read was synced", err)
				case <-time.After(100 * time.Millisecond):
				}
			}
			gate.release()
			if err := <-committed; err != nil {
				t.Fatal(err)
			}
			if hold {
				if v := <-read; string(v) != "new" {
					t.Fatalf("the reader saw %q, want %q", v, "new")
				}
			}
			if err := <-readerDone; err != nil {
				t.Fatal(err)
			}
			if len(gate.synced) == 0 {
				t.Fatal("no WAL sync happened")
			}
		})
	}
}

// TestReadOnlyWaitsOnlyWhenNeeded: with nothing being committed, a read-only
// transaction costs no WAL sync.
func TestReadOnlyWaitsOnlyWhenNeeded(t *testing.T) {
	st := openTest(t, t.TempDir(), DefaultOptions())
	w, _ := st.Begin(bg)
	w.Put([]byte("k"), []byte("v"))
	if err := w.Commit(bg); err != nil {
		t.Fatal(err)
	}
	before := st.Stats().WALSyncs
	for range 10 {
		r, _ := st.Begin(bg)
		if _, err := r.Read(bg, []store.ReadReq{{Key: []byte("k"), Mode: store.Shared}}); err != nil {
			t.Fatal(err)
		}
		r.Rollback()
		r, _ = st.Begin(bg)
		if _, err := r.Read(bg, []store.ReadReq{{Key: []byte("k")}}); err != nil {
			t.Fatal(err)
		}
		if err := r.Commit(bg); err != nil {
			t.Fatal(err)
		}
	}
	if after := st.Stats().WALSyncs; after != before {
		t.Fatalf("20 read-only transactions with no commit under way made %d WAL syncs", after-before)
	}
}

// TestUnrelatedReadDoesNotWait: while a commit waits for its WAL sync, a
// transaction that reads another row ends at once, and one that reads the
// committed row waits for the sync.
func TestUnrelatedReadDoesNotWait(t *testing.T) {
	st := openTest(t, t.TempDir(), DefaultOptions())
	w0, _ := st.Begin(bg)
	w0.Put([]byte("other"), []byte("x"))
	if err := w0.Commit(bg); err != nil {
		t.Fatal(err)
	}
	gate := holdWALSyncs(t)
	committed := make(chan error, 1)
	go func() {
		w, _ := st.Begin(bg)
		w.Put([]byte("k"), []byte("new"))
		committed <- w.Commit(bg)
	}()
	<-gate.entered
	read := func(key string) chan error {
		done := make(chan error, 1)
		go func() {
			r, _ := st.Begin(bg)
			if _, err := r.Read(bg, []store.ReadReq{{Key: []byte(key)}}); err != nil {
				done <- err
				return
			}
			done <- r.Commit(bg)
		}()
		return done
	}
	select {
	case err := <-read("other"):
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a read of an unrelated row waited for another commit's sync")
	}
	related := read("k")
	select {
	case err := <-related:
		t.Fatalf("a read of the unsynced row ended (%v) before its sync", err)
	case <-time.After(100 * time.Millisecond):
	}
	gate.release()
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	if err := <-related; err != nil {
		t.Fatal(err)
	}
}
