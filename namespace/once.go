package namespace

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// Exactly once (docs/NAMESPACE.md, "Exactly once").
//
// A write that arrives with a request id (meta.Request in its context: the
// RPC server puts the client's name and the request's id there) is run by
// runOnce. Every attempt of it, a first submission's as a resubmission's,
// locks its record's key ('r' id client, store/request.go) exclusive before
// anything else (first in its first lock batch) and reads it:
//
//   - found: the write was applied already, by another submission of the
//     same request to this or another NameNode on the store. The attempt
//     changes nothing and the operation answers what the record says.
//   - missing: the attempt runs the operation, and if it commits a change,
//     the record goes into the same transaction. So the record exists
//     exactly when the write's effect does.
//
// A first submission is read too: its copy can arrive after the client gave
// up on it and its resubmission committed (a frame that waited in a server
// for a request slot while its connection broke), and must then change
// nothing. A submission received more than half the TTL ago that finds no
// record is not started (staleAfter): the record could have expired.
//
// The record's lock is taken first, before any inode's, and only
// transactions of the same request (and the sweep, which holds no other
// lock) ever ask for it, so it adds no deadlock. A resubmission that
// arrives while the first submission is still under way waits at that lock
// for the first's transaction to end, and then finds the record (or, if
// the first failed, runs the write itself). An operation that takes several
// transactions (a recursive delete or chmod in batches, a subtree
// operation's flag and work) reads the record in each of them, and writes
// it in the one that finishes the operation: until then a resubmission
// meets the operation's subtree flag, waits, and reads the record after.
//
// A commit whose answer was lost (store.ErrCommitUnknown, a database
// connection broken after COMMIT was sent) is settled the same way: the
// attempt is run again, its lock waits until the database has ended the
// first transaction one way or the other, and the record says which.

// settleWait bounds how long a write whose commit is in doubt keeps trying
// to read its record while the store is unreachable, before it answers
// meta.ErrOutcomeUnknown: a database restart or failover takes seconds.
const settleWait = 30 * time.Second

// errAnswered ends an attempt that found its request's record: the
// operation answers from the record (recState.dup).
var errAnswered = errors.New("namespace: answered from the request record")

// recState is what an operation run by runOnce keeps across its attempts.
type recState struct {
	key  []byte // the record's key, in buf when it fits
	buf  [48]byte
	name string // the operation's name, kept in the record
	path string // the operation's path, for errors
	// received is when the edge received this submission (meta.Request),
	// zero when unknown: a submission older than staleAfter is not started.
	received time.Time
	// marks: the store's marks of resubmitted requests' record keys
	// (store.KeyMarker), nil on a store without them. resubmitted: this
	// submission is one.
	marks       *store.KeyMarks
	resubmitted bool
	// dup is the record found, when the write was applied already (or
	// failed: dup.Err). answered: the error the operation ends with came
	// from a record.
	dup      *store.RequestRecord
	answered bool
	// inDoubt: the last attempt's commit, which carried the record, has an
	// unknown outcome; after holds what that attempt would have run once
	// committed, run if the next attempt finds the record.
	inDoubt bool
	after   []func()
}

// request returns the request ctx carries, and false when there is none
// or duplicate detection is off.
func (e *Engine) request(ctx context.Context) (meta.Request, bool) {
	if e.cfg.RequestTTL <= 0 {
		return meta.Request{}, false
	}
	return meta.RequestFrom(ctx)
}

// runOnce runs fn as run does, as (one transaction of) the write that the
// request in ctx names: see the comment at the top of this file. It returns
// the request's record when the write had been applied already (the caller
// answers from it, and fn did not run to a commit); the error is then nil.
// Without a request in ctx it is run.
func (e *Engine) runOnce(ctx context.Context, opName, path string, u meta.User, fn func(t *tx) error) (*store.RequestRecord, error) {
	r, ok := e.request(ctx)
	if !ok {
		return nil, e.run(ctx, opName, path, u, fn)
	}
	rec := &recState{name: opName, path: path, received: r.Received, marks: e.marks, resubmitted: r.Resubmitted}
	rec.key = store.AppendRequestKey(rec.buf[:0], r.ID, r.Client)
	if rec.marks != nil && r.Resubmitted {
		// Before its first lock: a first submission that takes the lock
		// after this one held it sees the mark (recordRead).
		rec.marks.Mark(rec.key, time.Now(), e.cfg.RequestTTL)
	}
	err := e.runOp(ctx, opName, path, u, rec, fn)
	failed := rec.dup == nil && err != nil && !rec.answered && recordable(err)
	if failed {
		e.recordFailure(ctx, rec, err)
	}
	if e.log.Enabled(ctx, slog.LevelDebug) {
		e.log.Debug("request done", "op", opName, "path", path, "id", r.ID, "client", r.Client,
			"resubmitted", r.Resubmitted, "dup", rec.dup != nil, "answered", rec.answered, "recordsFailure", failed, "err", err)
	}
	if rec.dup != nil {
		if rec.dup.Err != nil {
			return nil, rec.dup.Err
		}
		return rec.dup, nil
	}
	return nil, err
}

// recordable reports whether err is the answer of a write that failed
// without changing anything, to be kept in its record (recordFailure):
// a failure about the namespace or the call. Not busy or wrong owner (not
// done: the client may send it again), nor an outcome unknown, an internal
// error, or a context or store error.
func recordable(err error) bool {
	switch meta.KindOf(err) {
	case meta.KindNotFound, meta.KindExists, meta.KindNotDir, meta.KindIsDir, meta.KindNotEmpty,
		meta.KindPermission, meta.KindInvalidPath, meta.KindQuota, meta.KindInvalidArgument,
		meta.KindLease, meta.KindTooLarge, meta.KindUnresolvedLink, meta.KindUnsupported:
		return true
	}
	return false
}

// recordFailure writes the record of a write that failed, in a transaction
// of its own, so that a copy of the same request that runs later (a first
// submission that waited in a server past its resubmission) answers the
// failure instead of succeeding after the client was told it failed: a
// delete that found nothing must not delete what was created since. A
// record found there (another copy committed meanwhile) is answered
// instead, in rec.dup. Best effort: if the store fails, the failure
// answers unrecorded.
func (e *Engine) recordFailure(ctx context.Context, rec *recState, err error) {
	kind := meta.KindOf(err)
	var oe *meta.OpError
	if !errors.As(err, &oe) {
		oe = &meta.OpError{Op: rec.name, Path: rec.path}
	}
	// Not cut short by a caller that went away: the copy it may have left
	// behind is what the record is for.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	werr := func() error {
		txn, err := e.st.Begin(ctx)
		if err != nil {
			return err
		}
		defer txn.Rollback()
		vals, err := txn.Read(ctx, []store.ReadReq{{Key: rec.key, Mode: store.Exclusive, OwnLock: true}})
		if err != nil {
			return err
		}
		if v := vals[0]; v != nil {
			var r store.RequestRecord
			if err := store.DecodeRequest(rec.key, v, &r); err != nil {
				return err
			}
			if r.Op == rec.name {
				e.answerFrom(rec, &r)
			}
			return nil
		}
		r := store.RequestRecord{At: e.cfg.Now().UnixMilli(), Op: rec.name,
			Err: &meta.OpError{Op: rec.name, Path: oe.Path, Err: meta.Sentinel(kind), Detail: oe.Detail}}
		if r.Err.Path == rec.path {
			r.Err.Path = ""
		}
		txn.Put(rec.key, store.EncodeRequest(nil, &r))
		return txn.Commit(ctx)
	}()
	if werr != nil {
		e.log.Warn("recording a failed write", "op", rec.name, "path", rec.path, "err", werr)
	}
}

// recordOutside records err, the failure of the write that the request in
// ctx names when it ended outside runOnce (a subtree operation's flag
// transaction, or a check of its work before its first commit), as runOnce
// records its own failures (recordFailure), and returns the answer: err, or
// the record's when another copy of the request had written one (nil for
// a success). Unrecorded, the failure answered to the client would not stop
// a copy of the request still under way, or arriving late, from applying
// the write after the client was told it failed.
func (e *Engine) recordOutside(ctx context.Context, opName, path string, err error) error {
	r, ok := e.request(ctx)
	if !ok || err == nil || !recordable(err) {
		return err
	}
	rec := &recState{name: opName, path: path}
	rec.key = store.AppendRequestKey(rec.buf[:0], r.ID, r.Client)
	e.recordFailure(ctx, rec, err)
	if e.log.Enabled(ctx, slog.LevelDebug) {
		e.log.Debug("request failed outside its transactions", "op", opName, "path", path, "id", r.ID, "client", r.Client,
			"resubmitted", r.Resubmitted, "dup", rec.dup != nil, "err", err)
	}
	switch {
	case rec.dup == nil:
		return err
	case rec.dup.Err != nil:
		return rec.dup.Err
	}
	return nil // another copy succeeded
}

// answerFrom makes rec answer from the record r of its request.
func (e *Engine) answerFrom(rec *recState, r *store.RequestRecord) {
	if r.Status != nil && r.Status.Path == "" {
		r.Status.Path = rec.path
	}
	if r.Err != nil && r.Err.Path == "" {
		r.Err.Path = rec.path
	}
	rec.dup = r
}

// runOnceStatus is runOnce for an operation that answers a FileStatus: fn sets
// *st (and records it with t.answer); a write answered from its record
// answers the recorded status.
func (e *Engine) runOnceStatus(ctx context.Context, opName, path string, u meta.User, st **meta.FileStatus, fn func(t *tx) error) error {
	dup, err := e.runOnce(ctx, opName, path, u, fn)
	if dup != nil {
		*st = dup.Status
	}
	return err
}

// recordReq is the request for the record's key of an attempt of a
// recorded write: its lock, exclusive, and its value, on every attempt of
// a first submission as of a resubmission. A first submission's copy can
// reach the engine after the client gave up on it and its resubmission
// committed (a frame that waited in a server for a request slot while its
// connection broke, or an attempt retried after a conflict): unread, the
// record would not stop it from applying the write a second time, after
// the client's later writes. Only this request's transactions write the
// key, each under this lock (store.ReadReq.OwnLock): the value read is
// final, and PostgreSQL reads a missing record once, in the lock's own
// statement.
//
// On a single-process store (store.KeyMarker: the embedded Pebble) a first
// submission takes the lock without the read (LockOnly: the point read of a
// missing key, a memtable seek, is most of what the record costs there),
// and reads only when the key is marked once the lock is held: every
// resubmission marks its record's key before it takes the lock, so one that
// wrote the record marked it before this attempt got the lock.
func (t *tx) recordReq() store.ReadReq {
	rec := t.op.rec
	return store.ReadReq{Key: rec.key, Mode: store.Exclusive, OwnLock: true,
		LockOnly: rec.marks != nil && !rec.resubmitted && !rec.inDoubt}
}

// staleAfter is how old a submission (from its receipt by the edge) may be
// when it finds no record and starts the write: half the record's TTL. A
// record written by another submission of the same call (sent after this
// one was received) is kept at least the TTL after it committed, by the
// clock of whichever NameNode sweeps: past half of it, a missing record
// could be one that expired (with clocks skewed by up to half the TTL),
// and the write would be applied twice.
func (e *Engine) staleAfter() time.Duration { return e.cfg.RequestTTL / 2 }

// The record's request goes first in the attempt's first locked batch read
// (resolve's): one batch, one round trip on PostgreSQL. First, not in key
// order: the key is locked by the transactions of one request only, each
// of which asks for it before any other lock, so no two of them wait for
// each other in a cycle; and on PostgreSQL a lock-only request first
// leaves the batch's missing inode keys last, where they need no second
// read (pgstore's rereadMissing). An attempt that never resolves takes it
// with checkRecord before it commits.

// checkRecord takes the record's lock (and reads it) on its own: for an
// attempt that never resolved a path.
func (t *tx) checkRecord(ctx context.Context) error {
	vals, err := t.st.Read(ctx, []store.ReadReq{t.recordReq()})
	if err != nil {
		return err
	}
	return t.recordRead(ctx, vals[0])
}

// recordRead judges the record's value as the attempt read it under its
// lock. A record found ends the attempt with errAnswered (or, for a record
// of another operation, an invalid argument: a client that reuses ids).
// After a commit in doubt, the record found says that it committed (and
// what that attempt would have done after its commit is done now); none
// read under the lock, which waited for that transaction's end, says that
// it did not.
func (t *tx) recordRead(ctx context.Context, v []byte) error {
	t.recPending = false
	rec := t.op.rec
	if req := t.recordReq(); req.LockOnly {
		// Locked, not read: read now if a resubmission marked the key.
		if !rec.marks.Marked(rec.key) {
			v = nil
		} else {
			req.LockOnly = false
			vals, err := t.st.Read(ctx, []store.ReadReq{req})
			if err != nil {
				return err
			}
			v = vals[0]
		}
	}
	if v == nil && t.op.own == 0 && !rec.received.IsZero() {
		// About to start the write. Not needed once the operation holds
		// its subtree flag (its later transactions): no other submission
		// of the call can commit while the flag is held.
		if age := time.Since(rec.received); age > t.e.staleAfter() {
			t.e.metrics.requestsStale.Inc()
			if rec.inDoubt {
				return meta.Errorf(rec.name, rec.path, meta.ErrOutcomeUnknown,
					"the store lost the answer to the commit, and the request, received %v ago, is past half the request TTL (%v): its record cannot tell any more",
					age.Round(time.Millisecond), t.e.cfg.RequestTTL)
			}
			return meta.Errorf(rec.name, rec.path, meta.ErrBusy,
				"not started: the request was received %v ago, more than half the request TTL (%v), and a record of it written since may have expired; nothing was changed, the client may send it again",
				age.Round(time.Millisecond), t.e.cfg.RequestTTL)
		}
	}
	if t.e.log.Enabled(ctx, slog.LevelDebug) {
		id, client, _ := store.DecodeRequestKey(rec.key)
		t.e.log.Debug("request record", "op", rec.name, "path", rec.path, "id", id, "client", client,
			"resubmitted", rec.resubmitted, "lockOnly", t.recordReq().LockOnly, "found", v != nil, "own", t.op.own)
	}
	if rec.inDoubt {
		if v != nil {
			for _, f := range rec.after {
				f()
			}
		}
		rec.inDoubt, rec.after = false, nil
	}
	if v == nil {
		return nil
	}
	var r store.RequestRecord
	if err := store.DecodeRequest(rec.key, v, &r); err != nil {
		return err
	}
	if r.Op != rec.name {
		id, client, _ := store.DecodeRequestKey(rec.key)
		return meta.Errorf(rec.name, rec.path, meta.ErrInvalidArgument,
			"request id %#x of client %q was used already by a %s: a resubmission must repeat the same call", id, client, r.Op)
	}
	if r.Err != nil {
		// A failure recorded by another copy: answered as it was.
		if r.Err.Path == "" {
			r.Err.Path = rec.path
		}
		rec.answered = true
		return r.Err
	}
	t.e.answerFrom(rec, &r)
	return errAnswered
}

// answer sets the FileStatus that the record of this transaction's write
// keeps, for a resubmission to answer with.
func (t *tx) answer(st *meta.FileStatus) { t.status = st }

// unfinished marks a transaction of a recorded write that does not finish
// the operation (a batch of a recursive delete or chmod with more to do):
// it commits without the record.
func (t *tx) unfinished() { t.partial = true }

// putRecord adds the record of the write to the transaction about to
// commit, when it is a recorded write's and finishes the operation.
func (t *tx) putRecord() bool {
	rec := t.op.rec
	if rec == nil || t.partial {
		return false
	}
	r := store.RequestRecord{At: t.now, Op: rec.name}
	if t.status != nil {
		// The path is the operation's (unless a file being written was
		// renamed meanwhile): kept as "" then, the record a third of its
		// size at the paths of the benchmark's tree.
		st := *t.status
		if st.Path == rec.path {
			st.Path = ""
		}
		r.Status = &st
	}
	t.st.Put(rec.key, store.EncodeRequest(nil, &r))
	return true
}

// rewritten reports whether a write of n bytes at offset, on a file whose
// writer has written written bytes, is a resubmission of the write that
// ended there, to be answered as done without writing again. A write is
// not recorded (a block file's bytes go to its stream outside any
// transaction); it is idempotent by its offset instead: the lease holder's
// writes are sequential, so the one write that started at offset and
// ended exactly at written is the one the client is sending again after a
// lost reply. Only a write that carries a request id (from a client that
// resubmits) is judged so, with duplicate detection on; the bytes are not
// compared.
func (e *Engine) rewritten(ctx context.Context, offset int64, n int, written int64) bool {
	if n == 0 || offset+int64(n) != written {
		return false
	}
	r, ok := e.request(ctx)
	return ok && r.Resubmitted
}

// SweepRequests deletes the request records older than Config.RequestTTL,
// a page at a time, each page in a transaction of its own, and returns how
// many it kept and deleted. The lease monitor runs it every
// Config.RequestSweep; every NameNode on a shared store does (a record
// deleted twice is deleted).
func (e *Engine) SweepRequests(ctx context.Context) (kept, deleted int, err error) {
	if e.cfg.RequestTTL <= 0 {
		return 0, 0, nil
	}
	const page = 1024
	cutoff := e.cfg.Now().Add(-e.cfg.RequestTTL).UnixMilli()
	start, end := store.AllRequestsRange()
	for {
		txn, err := e.st.Begin(ctx)
		if err != nil {
			return kept, deleted, err
		}
		var expired [][]byte
		var last []byte
		n := 0
		var derr error
		err = txn.Scan(ctx, start, end, page, func(k, v []byte) bool {
			n++
			last = append(last[:0], k...)
			at, err := store.DecodeRequestAt(k, v)
			if err != nil {
				derr = err
				return false
			}
			if at < cutoff {
				expired = append(expired, append([]byte(nil), k...))
			} else {
				kept++
			}
			return true
		})
		if err == nil {
			err = derr
		}
		if err != nil {
			txn.Rollback()
			return kept, deleted, err
		}
		for _, k := range expired {
			txn.Delete(k)
		}
		if err := txn.Commit(ctx); err != nil {
			txn.Rollback()
			return kept, deleted, err
		}
		deleted += len(expired)
		e.metrics.requestsExpired.Add(float64(len(expired)))
		if n < page {
			e.metrics.requestsKept.Set(float64(kept))
			return kept, deleted, nil
		}
		start = append(append([]byte(nil), last...), 0) // the smallest key after the last one seen
	}
}

// sweepRequests is the lease monitor's call of SweepRequests.
func (e *Engine) sweepRequests() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, _, err := e.SweepRequests(ctx); err != nil {
		e.log.Warn("request record sweep", "err", err)
	}
}
