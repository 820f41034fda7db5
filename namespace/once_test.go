package namespace

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
)

// reqCtx is a context carrying request id of client "nimbus-test", first
// submitted (as the RPC server builds it for a write).
func reqCtx(id uint64) context.Context {
	return meta.WithRequest(context.Background(), meta.Request{Client: "nimbus-test", ID: id})
}

// resub is reqCtx for the same request sent again after a lost reply.
func resub(id uint64) context.Context {
	return meta.WithRequest(context.Background(), meta.Request{Client: "nimbus-test", ID: id, Resubmitted: true})
}

// onceEngine opens an engine on a fresh Pebble store with set applied to
// its Config.
func onceEngine(t *testing.T, set func(*Config)) *Engine {
	t.Helper()
	opts := pebblestore.DefaultOptions()
	opts.CacheSize = 8 << 20
	opts.MemTableSize = 4 << 20
	ps, err := pebblestore.Open(t.TempDir(), opts)
	must(t, err)
	cfg := DefaultConfig()
	cfg.Superuser = "root"
	cfg.Groups = func(string) []string { return nil }
	set(&cfg)
	e, err := New(ps, cfg)
	must(t, err)
	t.Cleanup(func() {
		e.Close()
		ps.Close()
	})
	return e
}

// resubmission is one write sent twice with one request id, as a client
// does after a lost reply: prep builds what it needs, call is the write
// (returning the status it answers, if any), and check looks at the
// namespace afterwards.
type resubmission struct {
	name string
	prep func(t *testing.T, e *Engine)
	call func(ctx context.Context, e *Engine) (*meta.FileStatus, error)
	// again is the error the second call answers when nothing remembers
	// the first (duplicate detection off): what a client would see.
	again error
}

func resubmissions() []resubmission {
	ctx := context.Background()
	file := func(p string) func(t *testing.T, e *Engine) {
		return func(t *testing.T, e *Engine) { writeFile(t, e, root, p, []byte("abc")) }
	}
	tree := func(t *testing.T, e *Engine) {
		for i := range 3 {
			must(t, e.Mkdirs(ctx, root, fmt.Sprintf("/d/sub%d", i), 0))
			writeFile(t, e, root, fmt.Sprintf("/d/sub%d/f", i), []byte("x"))
		}
	}
	return []resubmission{
		{name: "create", again: meta.ErrExists,
			call: func(ctx context.Context, e *Engine) (*meta.FileStatus, error) {
				return e.Create(ctx, root, "/new", meta.CreateOptions{Client: "c1"})
			}},
		{name: "create file", again: meta.ErrExists,
			call: func(ctx context.Context, e *Engine) (*meta.FileStatus, error) {
				return e.CreateFile(ctx, root, "/small", meta.CreateOptions{}, []byte("hello"))
			}},
		{name: "rename file", prep: file("/a"), again: meta.ErrNotFound,
			call: func(ctx context.Context, e *Engine) (*meta.FileStatus, error) {
				return nil, e.Rename(ctx, root, "/a", "/b", meta.RenameOptions{})
			}},
		{name: "rename directory (subtree)", prep: tree, again: meta.ErrNotFound,
			call: func(ctx context.Context, e *Engine) (*meta.FileStatus, error) {
				return nil, e.Rename(ctx, root, "/d", "/moved", meta.RenameOptions{})
			}},
		{name: "delete file", prep: file("/a"), again: meta.ErrNotFound,
			call: func(ctx context.Context, e *Engine) (*meta.FileStatus, error) {
				return nil, e.Delete(ctx, root, "/a", false)
			}},
		{name: "delete recursive (subtree, in batches)", prep: tree, again: meta.ErrNotFound,
			call: func(ctx context.Context, e *Engine) (*meta.FileStatus, error) {
				return nil, e.Delete(ctx, root, "/d", true)
			}},
		{name: "append", prep: file("/a"), again: meta.ErrLease,
			call: func(ctx context.Context, e *Engine) (*meta.FileStatus, error) {
				return e.Append(ctx, root, "/a", "c1")
			}},
		{name: "complete", prep: func(t *testing.T, e *Engine) {
			_, err := e.Create(ctx, root, "/open", meta.CreateOptions{Client: "c1"})
			must(t, err)
			must(t, e.Write(ctx, root, "/open", "c1", 0, []byte("data")))
		}, again: meta.ErrLease,
			call: func(ctx context.Context, e *Engine) (*meta.FileStatus, error) {
				return e.Complete(ctx, root, "/open", "c1")
			}},
		{name: "concat", prep: func(t *testing.T, e *Engine) {
			file("/t")(t, e)
			file("/s1")(t, e)
		}, again: meta.ErrNotFound,
			call: func(ctx context.Context, e *Engine) (*meta.FileStatus, error) {
				return nil, e.Concat(ctx, root, "/t", []string{"/s1"})
			}},
		{name: "create symlink", again: meta.ErrExists,
			call: func(ctx context.Context, e *Engine) (*meta.FileStatus, error) {
				return nil, e.CreateSymlink(ctx, root, "/target", "/link", false)
			}},
		{name: "set xattr (create flag)", prep: file("/a"), again: meta.ErrExists,
			call: func(ctx context.Context, e *Engine) (*meta.FileStatus, error) {
				return nil, e.SetXAttr(ctx, root, "/a", meta.XAttr{Name: "user.k", Value: []byte("v")}, meta.XAttrCreate)
			}},
		{name: "mkdirs", again: nil,
			call: func(ctx context.Context, e *Engine) (*meta.FileStatus, error) {
				return nil, e.Mkdirs(ctx, root, "/m/n", 0)
			}},
		{name: "set permission recursive", prep: tree, again: nil,
			call: func(ctx context.Context, e *Engine) (*meta.FileStatus, error) {
				return nil, e.SetPermissionRecursive(ctx, root, "/d", 0o700)
			}},
	}
}

// TestResubmittedWriteAnswersFirstResult: a write sent again with the
// request id of one that was applied answers what the first answered and
// changes nothing; with duplicate detection off (RequestTTL 0) the same
// resubmission is applied again and fails as a client would see it (which
// makes this test fail when the detection is switched off).
func TestResubmittedWriteAnswersFirstResult(t *testing.T) {
	for _, on := range []bool{true, false} {
		for i, r := range resubmissions() {
			t.Run(fmt.Sprintf("%s/detection=%v", r.name, on), func(t *testing.T) {
				e := onceEngine(t, func(c *Config) {
					if !on {
						c.RequestTTL = 0
					}
				})
				if r.prep != nil {
					r.prep(t, e)
				}
				st1, err := r.call(reqCtx(uint64(100+i)), e)
				must(t, err)
				st2, err := r.call(resub(uint64(100+i)), e)
				if !on {
					if r.again != nil && !errors.Is(err, r.again) {
						t.Fatalf("without detection the resubmission answered %v, want %v", err, r.again)
					}
					return
				}
				if err != nil {
					t.Fatalf("resubmission: %v, want the first answer (success)", err)
				}
				if (st1 == nil) != (st2 == nil) || st1 != nil && *st1 != *st2 {
					t.Fatalf("resubmission answered %+v, first %+v", st2, st1)
				}
				fsckClean(t, e)
			})
		}
	}
}

// TestResubmissionAcrossEngines: the record is in the store, so a
// resubmission to another NameNode on the same store is answered from it.
func TestResubmissionAcrossEngines(t *testing.T) {
	a, b, _ := twoEngines(t)
	ctx := context.Background()
	st1, err := a.Create(reqCtx(1), root, "/f", meta.CreateOptions{Client: "c1"})
	must(t, err)
	st2, err := b.Create(resub(1), root, "/f", meta.CreateOptions{Client: "c1"})
	must(t, err)
	if *st1 != *st2 {
		t.Fatalf("b answered %+v, a %+v", st2, st1)
	}
	_, err = a.Complete(reqCtx(2), root, "/f", "c1")
	must(t, err)
	must(t, a.Rename(reqCtx(3), root, "/f", "/g", meta.RenameOptions{}))
	must(t, b.Rename(resub(3), root, "/f", "/g", meta.RenameOptions{}))
	for i := range 3 {
		must(t, a.Mkdirs(ctx, root, fmt.Sprintf("/d/s%d", i), 0))
		writeFile(t, a, root, fmt.Sprintf("/d/s%d/f", i), nil)
	}
	must(t, a.Delete(reqCtx(4), root, "/d", true))
	must(t, b.Delete(resub(4), root, "/d", true))
	// A new id is a new write.
	wantKind(t, b.Delete(reqCtx(5), root, "/d", true), meta.ErrNotFound)
	if _, err := b.Stat(ctx, root, "/g"); err != nil {
		t.Fatal(err)
	}
	fsckClean(t, a)
}

// TestRequestRecordsExpire: a record older than RequestTTL is deleted by
// the sweep, and a resubmission after that is a new write.
func TestRequestRecordsExpire(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	e := onceEngine(t, func(c *Config) {
		c.Now = func() time.Time { return time.Unix(0, now.Load()) }
		c.RequestTTL = time.Minute
		c.RequestSweep = time.Hour // the test sweeps
	})
	ctx := context.Background()
	for i := range 3 {
		_, err := e.Create(reqCtx(uint64(10+i)), root, fmt.Sprintf("/f%d", i), meta.CreateOptions{Client: "c1"})
		must(t, err)
	}
	now.Add(int64(30 * time.Second))
	_, err := e.Create(reqCtx(20), root, "/late", meta.CreateOptions{Client: "c1"})
	must(t, err)
	kept, deleted, err := e.SweepRequests(ctx)
	must(t, err)
	if kept != 4 || deleted != 0 {
		t.Fatalf("sweep within the TTL kept %d, deleted %d; want 4, 0", kept, deleted)
	}
	now.Add(int64(45 * time.Second)) // the first three are 75 s old, the last 45 s
	kept, deleted, err = e.SweepRequests(ctx)
	must(t, err)
	if kept != 1 || deleted != 3 {
		t.Fatalf("sweep kept %d, deleted %d; want 1, 3", kept, deleted)
	}
	_, err = e.Create(resub(10), root, "/f0", meta.CreateOptions{Client: "c1"})
	wantKind(t, err, meta.ErrExists) // no record: applied again
	_, err = e.Create(resub(20), root, "/late", meta.CreateOptions{Client: "c1"})
	must(t, err) // still recorded
}

// TestResubmissionWhileFirstRuns: a resubmission that arrives while the
// first submission's transaction is committing waits for it at the
// record's lock, and answers its result.
func TestResubmissionWhileFirstRuns(t *testing.T) {
	e := onceEngine(t, func(*Config) {})
	inCommit, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.testHookCommit = func() {
		once.Do(func() {
			close(inCommit)
			<-release
		})
	}
	type answer struct {
		st  *meta.FileStatus
		err error
	}
	first, second := make(chan answer, 1), make(chan answer, 1)
	go func() {
		st, err := e.Create(reqCtx(7), root, "/f", meta.CreateOptions{Client: "c1"})
		first <- answer{st, err}
	}()
	<-inCommit
	go func() {
		st, err := e.Create(resub(7), root, "/f", meta.CreateOptions{Client: "c1"})
		second <- answer{st, err}
	}()
	select {
	case a := <-second:
		t.Fatalf("the resubmission answered %+v while the first was committing", a)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	a1, a2 := <-first, <-second
	must(t, a1.err)
	must(t, a2.err)
	if *a1.st != *a2.st {
		t.Fatalf("resubmission answered %+v, first %+v", a2.st, a1.st)
	}
}

// TestRequestIDReusedForAnotherOp: a record answers only the operation it
// recorded; a client that reuses an id for another call is told so.
func TestRequestIDReusedForAnotherOp(t *testing.T) {
	e := onceEngine(t, func(*Config) {})
	must(t, e.Mkdirs(reqCtx(5), root, "/x", 0))
	err := e.Delete(resub(5), root, "/x", false)
	wantKind(t, err, meta.ErrInvalidArgument)
}

// commitLost commits the armed transaction that carries a request record,
// then answers store.ErrCommitUnknown, as a PostgreSQL connection that
// broke after COMMIT was sent does: the transaction did commit.
type commitLost struct {
	store.Store
	armed atomic.Bool
	// down: after the lost commit, this many Begins fail unavailable, as
	// while a database restarts.
	down, downAfter atomic.Int32
}

func (s *commitLost) Begin(ctx context.Context) (store.Txn, error) {
	if s.down.Load() > 0 && s.down.Add(-1) >= 0 {
		return nil, fmt.Errorf("test: %w: the database is restarting", store.ErrUnavailable)
	}
	txn, err := s.Store.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &commitLostTxn{Txn: txn, s: s}, nil
}

type commitLostTxn struct {
	store.Txn
	s       *commitLost
	records bool
	inodes  bool
}

func (t *commitLostTxn) Put(k, v []byte) {
	if _, _, ok := store.DecodeRequestKey(k); ok {
		t.records = true
	}
	if _, _, ok := store.DecodeInodeKey(k); ok {
		t.inodes = true
	}
	t.Txn.Put(k, v)
}

func (t *commitLostTxn) Commit(ctx context.Context) error {
	if err := t.Txn.Commit(ctx); err != nil {
		return err
	}
	if t.inodes && t.s.armed.CompareAndSwap(true, false) {
		t.s.down.Store(t.s.downAfter.Load())
		return fmt.Errorf("test: %w: the answer to COMMIT was lost", store.ErrCommitUnknown)
	}
	return nil
}

// TestCommitInDoubtSettledByRecord: a recorded write whose commit's answer
// was lost is settled by reading its record again (it committed: the
// write answers success, once); without a request id, or with detection
// off, it fails with meta.ErrOutcomeUnknown, not busy.
func TestCommitInDoubtSettledByRecord(t *testing.T) {
	for _, c := range []struct {
		name string
		ctx  context.Context
		ttl  time.Duration
		down int32 // Begins that fail unavailable after the lost commit
		want error
	}{
		{"recorded", reqCtx(9), 5 * time.Minute, 0, nil},
		// More failures than MaxAttempts: settling waits for the store.
		{"recorded, store down a while", reqCtx(9), 5 * time.Minute, 100, nil},
		{"no request id", context.Background(), 5 * time.Minute, 0, meta.ErrOutcomeUnknown},
		{"detection off", reqCtx(9), 0, 0, meta.ErrOutcomeUnknown},
	} {
		t.Run(c.name, func(t *testing.T) {
			ps, err := pebblestore.Open(filepath.Join(t.TempDir(), "meta"), pebblestore.DefaultOptions())
			must(t, err)
			st := &commitLost{Store: ps}
			cfg := DefaultConfig()
			cfg.Superuser = "root"
			cfg.RequestTTL = c.ttl
			e, err := New(st, cfg)
			must(t, err)
			t.Cleanup(func() {
				e.Close()
				ps.Close()
			})
			st.downAfter.Store(c.down)
			st.armed.Store(true)
			_, err = e.Create(c.ctx, root, "/f", meta.CreateOptions{Client: "c1"})
			if c.want == nil {
				must(t, err)
			} else {
				wantKind(t, err, c.want)
			}
			if st.armed.Load() {
				t.Fatal("no commit was lost")
			}
			if _, err := e.Stat(context.Background(), root, "/f"); err != nil {
				t.Fatalf("the lost commit did not commit: %v", err)
			}
			fsckClean(t, e)
		})
	}
}

// TestResubmittedWriteIsIdempotent: a write is not recorded, but one sent
// again after a lost reply (same offset and length, now just behind the
// written length) is answered as done (an inline file here; a block
// file's stream makes the same check); without a request id it is out of
// sequence.
func TestResubmittedWriteIsIdempotent(t *testing.T) {
	e := onceEngine(t, func(*Config) {})
	ctx := context.Background()
	_, err := e.Create(ctx, root, "/f", meta.CreateOptions{Client: "c1"})
	must(t, err)
	must(t, e.Write(reqCtx(1), root, "/f", "c1", 0, []byte("abc")))
	must(t, e.Write(resub(1), root, "/f", "c1", 0, []byte("abc")))
	wantKind(t, e.Write(ctx, root, "/f", "c1", 0, []byte("abc")), meta.ErrInvalidArgument)
	wantKind(t, e.Write(reqCtx(4), root, "/f", "c1", 0, []byte("abc")), meta.ErrInvalidArgument) // not sent before
	must(t, e.Write(reqCtx(2), root, "/f", "c1", 3, []byte("de")))
	wantKind(t, e.Write(reqCtx(3), root, "/f", "c1", 0, []byte("abc")), meta.ErrInvalidArgument)
	_, err = e.Complete(ctx, root, "/f", "c1")
	must(t, err)
	got, err := e.Read(ctx, root, "/f", 0, 100)
	must(t, err)
	if string(got) != "abcde" {
		t.Fatalf("read %q, want abcde", got)
	}
}

// TestResumedDeleteWritesRecord: a recursive delete that stopped half done
// (its goroutine gone in the middle of a commit, as in a crash) is
// finished by the next start, which writes the request's record with the
// last batch (the subtree operation row carries the request): the
// client's resubmission then answers success, not "not found".
func TestResumedDeleteWritesRecord(t *testing.T) {
	dir := t.TempDir()
	e, st, err := openEngineDir(dir)
	must(t, err)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/q/top", 0o755))
	buildTree(t, e, "/q/top", 8, 150)
	e.cfg.SubtreeDeleteBatch = 200
	var commits atomic.Int32
	e.testHookCommit = func() {
		if commits.Add(1) == 3 { // the flag, then two batches
			runtime.Goexit()
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.Delete(reqCtx(77), root, "/q/top", true)
		t.Error("the delete returned")
	}()
	<-done
	e.testHookCommit = nil
	must(t, e.Close())
	must(t, st.Close())

	e, _ = openEngine(t, dir)
	if _, err := e.Stat(ctx, root, "/q/top"); meta.KindOf(err) != meta.KindNotFound {
		t.Fatalf("stat /q/top after the restart: %v, want not found (the delete finished)", err)
	}
	must(t, e.Delete(resub(77), root, "/q/top", true))
	wantKind(t, e.Delete(resub(78), root, "/q/top", true), meta.ErrNotFound)
	fsckClean(t, e)
}

// TestFirstSubmissionAfterResubmission: a first submission that reaches
// an engine only after its resubmission was applied by another engine on
// the store, and after the client's next write, answers from the record
// and changes nothing (a connection that broke while its frame waited in
// a server: rpc.TestDelayedFirstSubmissionAfterResubmission). Without the
// read, the stale delete, overwrite or rename would undo the later write.
func TestFirstSubmissionAfterResubmission(t *testing.T) {
	for _, tc := range []struct {
		name  string
		prep  func(e *Engine)                            // before the first submission
		call  func(ctx context.Context, e *Engine) error // the write, sent twice
		later func(e *Engine)                            // the client's next write, after the resubmission
		check func(e *Engine) error                      // what the later write left
	}{{
		name:  "delete",
		prep:  func(e *Engine) { must(t, e.Mkdirs(reqCtx(100), root, "/x", 0)) },
		call:  func(ctx context.Context, e *Engine) error { return e.Delete(ctx, root, "/x", false) },
		later: func(e *Engine) { must(t, e.Mkdirs(reqCtx(101), root, "/x", 0)) },
		check: func(e *Engine) error { _, err := e.Stat(context.Background(), root, "/x"); return err },
	}, {
		name: "create overwrite",
		call: func(ctx context.Context, e *Engine) error {
			_, err := e.Create(ctx, root, "/f", meta.CreateOptions{Client: "c1", Overwrite: true})
			return err
		},
		later: func(e *Engine) {
			_, err := e.Complete(context.Background(), root, "/f", "c1")
			must(t, err)
			writeFile(t, e, root, "/f", []byte("later"))
		},
		check: func(e *Engine) error {
			st, err := e.Stat(context.Background(), root, "/f")
			if err == nil && st.Length != 5 {
				err = fmt.Errorf("/f has %d bytes, want the later write's 5", st.Length)
			}
			return err
		},
	}, {
		name: "rename over",
		prep: func(e *Engine) {
			writeFile(t, e, root, "/a", []byte("a"))
			writeFile(t, e, root, "/b", []byte("bb"))
		},
		call: func(ctx context.Context, e *Engine) error {
			return e.Rename(ctx, root, "/a", "/b", meta.RenameOptions{Overwrite: true})
		},
		later: func(e *Engine) { writeFile(t, e, root, "/a", []byte("later")) },
		check: func(e *Engine) error {
			st, err := e.Stat(context.Background(), root, "/a")
			if err == nil && st.Length != 5 {
				err = fmt.Errorf("/a has %d bytes, want the later write's 5", st.Length)
			}
			return err
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, _ := twoEngines(t)
			if tc.prep != nil {
				tc.prep(b)
			}
			must(t, tc.call(resub(7), b)) // the resubmission, applied by b
			tc.later(b)
			must(t, tc.call(reqCtx(7), a)) // the first submission, late: the record answers
			if err := tc.check(b); err != nil {
				t.Fatalf("after the late first submission: %v", err)
			}
			fsckClean(t, a)
		})
	}
}

// TestStaleSubmissionNotStarted: a submission received more than half the
// request TTL ago that finds no record is refused busy and changes
// nothing; one that finds its record still answers from it.
func TestStaleSubmissionNotStarted(t *testing.T) {
	e := onceEngine(t, func(c *Config) { c.RequestTTL = time.Minute })
	old := func(id uint64, resubmitted bool) context.Context {
		return meta.WithRequest(context.Background(), meta.Request{Client: "nimbus-test", ID: id,
			Resubmitted: resubmitted, Received: time.Now().Add(-31 * time.Second)})
	}
	err := e.Mkdirs(old(1, false), root, "/late", 0)
	wantKind(t, err, meta.ErrBusy)
	if _, serr := e.Stat(context.Background(), root, "/late"); !errors.Is(serr, meta.ErrNotFound) {
		t.Fatalf("after the refused mkdirs (%v), stat: %v", err, serr)
	}
	must(t, e.Mkdirs(reqCtx(2), root, "/d", 0))
	must(t, e.Mkdirs(old(2, true), root, "/d", 0)) // recorded: answered
	fresh := meta.WithRequest(context.Background(), meta.Request{Client: "nimbus-test", ID: 3, Received: time.Now()})
	must(t, e.Mkdirs(fresh, root, "/new", 0))
}

// TestLateCopyOfFailedWrite: a write that failed is recorded too, so a
// copy of it that runs later answers the same failure instead of
// succeeding after the client was told it failed: a delete that found no
// /x must not delete the /x created since, nor a create that found /f
// create it again once it is gone.
func TestLateCopyOfFailedWrite(t *testing.T) {
	a, b, _ := twoEngines(t)
	ctx := context.Background()
	wantKind(t, b.Delete(resub(7), root, "/x", false), meta.ErrNotFound)
	must(t, b.Mkdirs(reqCtx(8), root, "/x", 0))
	wantKind(t, a.Delete(reqCtx(7), root, "/x", false), meta.ErrNotFound) // late: the record answers
	if _, err := b.Stat(ctx, root, "/x"); err != nil {
		t.Fatalf("/x after a late copy of a delete that had failed: %v", err)
	}

	writeFile(t, b, root, "/f", nil)
	_, err := b.Create(resub(9), root, "/f", meta.CreateOptions{Client: "c2"})
	wantKind(t, err, meta.ErrExists)
	must(t, b.Delete(reqCtx(10), root, "/f", false))
	_, err = a.Create(reqCtx(9), root, "/f", meta.CreateOptions{Client: "c2"})
	wantKind(t, err, meta.ErrExists)
	if _, err := b.Stat(ctx, root, "/f"); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("/f after a late copy of a create that had failed: %v, want not found", err)
	}
	// A busy answer is not recorded: the client may send it again.
	if recordable(meta.Errorf("mkdirs", "/y", meta.ErrBusy, "")) {
		t.Error("busy is recorded")
	}
}

// TestLateCopyOfWriteThatChangedNothing: a write that succeeded without
// changing anything (mkdirs of a directory that exists, a chmod to the
// mode the inode has) is recorded too, so a copy of it that runs later,
// after the client's next write changed what it looked at, answers from
// the record instead of being applied then: the late mkdirs must not
// re-create the directory the client has renamed away since. On one
// engine over the embedded store (a first submission reads the record
// only when a resubmission marked its key) and on two sharing a store
// (every submission reads it).
func TestLateCopyOfWriteThatChangedNothing(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		prep  func(t *testing.T, e *Engine)
		call  func(ctx context.Context, e *Engine) error // changes nothing the first time
		later func(t *testing.T, e *Engine)
		check func(e *Engine) error
	}{{
		name:  "mkdirs of an existing directory",
		prep:  func(t *testing.T, e *Engine) { must(t, e.Mkdirs(reqCtx(100), root, "/x", 0o755)) },
		call:  func(ctx context.Context, e *Engine) error { return e.Mkdirs(ctx, root, "/x", 0o755) },
		later: func(t *testing.T, e *Engine) { must(t, e.Rename(reqCtx(101), root, "/x", "/y", meta.RenameOptions{})) },
		check: func(e *Engine) error {
			if _, err := e.Stat(ctx, root, "/x"); !errors.Is(err, meta.ErrNotFound) {
				return fmt.Errorf("stat /x: %v, want not found (the late mkdirs re-created it)", err)
			}
			return nil
		},
	}, {
		name:  "chmod to the mode it has",
		prep:  func(t *testing.T, e *Engine) { must(t, e.Mkdirs(reqCtx(100), root, "/x", 0o755)) },
		call:  func(ctx context.Context, e *Engine) error { return e.SetPermission(ctx, root, "/x", 0o755) },
		later: func(t *testing.T, e *Engine) { must(t, e.SetPermission(reqCtx(101), root, "/x", 0o700)) },
		check: func(e *Engine) error {
			st, err := e.Stat(ctx, root, "/x")
			if err == nil && st.Perm != 0o700 {
				err = fmt.Errorf("/x has mode %o, want the later chmod's 700", st.Perm)
			}
			return err
		},
	}} {
		for _, engines := range []string{"one engine", "two engines"} {
			t.Run(tc.name+"/"+engines, func(t *testing.T) {
				var a, b *Engine
				if engines == "one engine" {
					a = onceEngine(t, func(*Config) {})
					if a.marks == nil {
						t.Fatal("the engine on the embedded store keeps no marks")
					}
					b = a
				} else {
					a, b, _ = twoEngines(t)
				}
				tc.prep(t, b)
				must(t, tc.call(resub(7), b)) // the resubmission: nothing to change
				tc.later(t, b)
				must(t, tc.call(reqCtx(7), a)) // the first submission, late
				if err := tc.check(b); err != nil {
					t.Fatalf("after the late first submission: %v", err)
				}
			})
		}
	}
}

// TestLateCopyOfSubtreeFailure: a write under the subtree protocol that
// fails outside its recorded transactions (a recursive delete refused by
// its sub-access check, after its flag was set) is recorded too, so a copy
// of it that runs later answers the same failure: a late copy of ann's
// refused delete of /b must not delete /b once root has emptied it.
func TestLateCopyOfSubtreeFailure(t *testing.T) {
	ctx := context.Background()
	ann := meta.User{Name: "ann"}
	for _, engines := range []string{"one engine", "two engines"} {
		t.Run(engines, func(t *testing.T) {
			var a, b *Engine
			if engines == "one engine" {
				a = onceEngine(t, func(*Config) {})
				b = a
			} else {
				a, b, _ = twoEngines(t)
			}
			must(t, b.SetPermission(ctx, root, "/", 0o777))
			must(t, b.Mkdirs(ctx, root, "/b", 0o777))
			must(t, b.Mkdirs(ctx, root, "/b/s", 0o700))
			// The resubmission: refused by the sub-access check (ann may
			// not delete /b/s).
			wantKind(t, b.Delete(resub(7), ann, "/b", true), meta.ErrPermission)
			must(t, b.Delete(reqCtx(8), root, "/b/s", true)) // the next write: /b empty
			// The first submission, late: the record answers.
			wantKind(t, a.Delete(reqCtx(7), ann, "/b", true), meta.ErrPermission)
			if _, err := b.Stat(ctx, root, "/b"); err != nil {
				t.Fatalf("/b after a late copy of a recursive delete that was refused: %v", err)
			}
		})
	}
}
