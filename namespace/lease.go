package namespace

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// leaseTable keeps when each lease holder last renewed, in memory, as HDFS's
// LeaseManager does. Which files are under construction, and by whom, is in
// the store (inode rows and the lease table); after a restart every holder
// counts as renewed at the engine's start, which gives writers a grace period.
//
// On a store that several NameNodes share a client renews through one of
// them, and another may judge its lease: renewals are also written to the
// store's renewal rows (store.HolderKey), at most every quarter of the soft
// limit per holder, in the renewing operation's own transaction where there
// is one; a NameNode that finds a lease silent in its memory reads the row
// before it calls the lease expired (Engine.leaseExpired). The rows carry
// the renewing NameNode's clock: NameNodes' clocks must agree to well
// within the soft limit (NTP does).
type leaseTable struct {
	start     time.Time
	mu        sync.Mutex
	last      map[string]time.Time
	persisted map[string]time.Time // shared stores: when the renewal row was last written
}

func newLeaseTable(start time.Time) *leaseTable {
	return &leaseTable{start: start, last: make(map[string]time.Time), persisted: make(map[string]time.Time)}
}

// renewAt records a renewal at, found in the store, unless a later one is
// known (the engine's start counts as one).
func (l *leaseTable) renewAt(holder string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, ok := l.last[holder]
	if !ok {
		cur = l.start
	}
	if at.After(cur) {
		l.last[holder] = at
	}
}

// persistDue reports whether holder's renewal row is older than every.
func (l *leaseTable) persistDue(holder string, now time.Time, every time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.persisted[holder]
	return !ok || now.Sub(at) >= every
}

func (l *leaseTable) persistedAt(holder string, at time.Time) {
	l.mu.Lock()
	if at.After(l.persisted[holder]) {
		l.persisted[holder] = at
	}
	l.mu.Unlock()
}

func (l *leaseTable) renew(holder string, now time.Time) {
	l.mu.Lock()
	l.last[holder] = now
	l.mu.Unlock()
}

func (l *leaseTable) lastRenewed(holder string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[holder]; ok {
		return t
	}
	return l.start
}

// expired reports whether holder has not renewed for longer than limit.
func (l *leaseTable) expired(holder string, limit time.Duration, now time.Time) bool {
	return now.Sub(l.lastRenewed(holder)) > limit
}

func (l *leaseTable) forget(holder string) {
	l.mu.Lock()
	delete(l.last, holder)
	delete(l.persisted, holder)
	l.mu.Unlock()
}

// persistEvery is how stale a holder's renewal row may get on a shared
// store: a quarter of the soft limit, so that another NameNode never takes
// a lease for silent while its holder renews.
func (e *Engine) persistEvery() time.Duration { return e.cfg.LeaseSoftLimit / 4 }

// renew renews holder's lease in memory and reports whether its renewal row
// is due (a shared store whose row is older than persistEvery), with the
// time to write in it.
func (e *Engine) renew(holder string) (now time.Time, due bool) {
	now = e.cfg.Now()
	e.leases.renew(holder, now)
	return now, !e.alone && e.leases.persistDue(holder, now, e.persistEvery())
}

// renewLease renews holder's lease in the operation's transaction: in
// memory, and on a shared store in its renewal row when that is due.
func (t *tx) renewLease(holder string) {
	now, due := t.e.renew(holder)
	if !due {
		return
	}
	t.putRaw(store.HolderKey(holder), store.EncodeRenewal(now.UnixMilli()))
	t.after = append(t.after, func() { t.e.leases.persistedAt(holder, now) })
}

// renewLease is tx.renewLease for a renewal outside an operation's
// transaction (RenewLease, a block stream's write): the row, when due, is
// written in a transaction of its own.
func (e *Engine) renewLease(ctx context.Context, holder string) error {
	now, due := e.renew(holder)
	if !due {
		return nil
	}
	txn, err := e.st.Begin(ctx)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	txn.Put(store.HolderKey(holder), store.EncodeRenewal(now.UnixMilli()))
	if err := txn.Commit(ctx); err != nil {
		return err
	}
	e.leases.persistedAt(holder, now)
	return nil
}

// leaseExpired reports whether holder has been silent for longer than limit
// at now: by this engine's memory and, on a shared store, by the renewal
// row that another NameNode may have written (read in st).
func (e *Engine) leaseExpired(ctx context.Context, st store.Txn, holder string, limit time.Duration, now time.Time) (bool, error) {
	return e.leaseExpiredMode(ctx, st, store.ReadReq{Key: store.HolderKey(holder)}, holder, limit, now)
}

// leaseExpiredLocked is leaseExpired with the renewal row locked shared
// (NoWait: it comes after the file's lock, out of the key order) until st
// ends, so that a renewal cannot commit between this judgement and st's
// commit: lease recovery's check.
func (e *Engine) leaseExpiredLocked(ctx context.Context, st store.Txn, holder string, limit time.Duration, now time.Time) (bool, error) {
	return e.leaseExpiredMode(ctx, st, store.ReadReq{Key: store.HolderKey(holder), Mode: store.Shared, NoWait: true}, holder, limit, now)
}

func (e *Engine) leaseExpiredMode(ctx context.Context, st store.Txn, req store.ReadReq, holder string, limit time.Duration, now time.Time) (bool, error) {
	if !e.leases.expired(holder, limit, now) {
		return false, nil
	}
	if e.alone {
		return true, nil
	}
	key := req.Key
	vals, err := st.Read(ctx, []store.ReadReq{req})
	if err != nil {
		return false, err
	}
	if vals[0] == nil {
		return true, nil
	}
	ms, err := store.DecodeRenewal(key, vals[0])
	if err != nil {
		return false, err
	}
	e.leases.renewAt(holder, time.UnixMilli(ms))
	return e.leases.expired(holder, limit, now), nil
}

// dropOldRenewals deletes the renewal rows older than twice the hard limit
// (shared stores): their holders' leases were recovered long ago.
func (e *Engine) dropOldRenewals(ctx context.Context, now time.Time) error {
	txn, err := e.st.Begin(ctx)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	start, end := store.AllHoldersRange()
	var old [][]byte
	var decErr error
	err = txn.Scan(ctx, start, end, 0, func(k, v []byte) bool {
		ms, err := store.DecodeRenewal(k, v)
		if err != nil {
			decErr = err
			return false
		}
		if now.Sub(time.UnixMilli(ms)) > 2*e.cfg.LeaseHardLimit {
			old = append(old, bytes.Clone(k))
		}
		return true
	})
	if err == nil {
		err = decErr
	}
	if err != nil || len(old) == 0 {
		return err
	}
	for _, k := range old {
		txn.Delete(k)
	}
	return txn.Commit(ctx)
}

// A lease is held by a client on behalf of a user: the holder recorded in the
// inode and lease rows, and the key of the renewal table, is the client name,
// a NUL and the name of the user who opened the file. Every operation of the
// writer (write, add block, complete, renew) must come from that user, not
// only name the client: client names are chosen by clients, and anyone could
// send another writer's. Holders recorded before the user was (no NUL) match
// no caller; lease recovery closes such files at the hard limit.

// holderKey is the holder of a lease that client takes for user.
func holderKey(client, user string) string { return client + "\x00" + user }

// holds reports whether h is holderKey(client, user), without building it.
func holds(h, client, user string) bool {
	return len(h) == len(client)+1+len(user) && h[len(client)] == 0 &&
		h[:len(client)] == client && h[len(client)+1:] == user
}

// splitHolder returns the client and user of holder h (user "" for a holder
// recorded before users were).
func splitHolder(h string) (client, user string) {
	i := strings.LastIndexByte(h, 0)
	if i < 0 {
		return h, ""
	}
	return h[:i], h[i+1:]
}

// describeHolder renders holder h for a message.
func describeHolder(h string) string {
	c, u := splitHolder(h)
	if u == "" {
		return "client " + c
	}
	return "client " + c + " of user " + u
}

// checkName refuses a user or client name that is empty or holds a NUL (which
// separates the two in a lease holder).
func checkName(op, path, what, name string) error {
	switch {
	case name == "":
		return meta.Errorf(op, path, meta.ErrInvalidArgument, "no %s name", what)
	case strings.IndexByte(name, 0) >= 0:
		return meta.Errorf(op, path, meta.ErrInvalidArgument, "the %s name %q contains a NUL byte", what, name)
	}
	return nil
}

// leaseConflict is the error of a caller that wants a file whose lease holder
// h is alive: it says who holds it and when another client may take it over.
func (t *tx) leaseConflict(op, path, h string) error {
	now := t.e.cfg.Now()
	left := t.e.cfg.LeaseSoftLimit - now.Sub(t.e.leases.lastRenewed(h))
	return meta.Errorf(op, path, meta.ErrLease,
		"open for writing by %s; unless it renews its lease, another client may take the file over in %v (the lease's soft limit is %v)",
		describeHolder(h), max(left, 0).Round(time.Second), t.e.cfg.LeaseSoftLimit)
}

// putLease writes the lease row of file n at path, which is under construction.
func (t *tx) putLease(n *store.Inode, path string) {
	t.putRaw(store.LeaseKey(n.ID), store.EncodeLease(nil, &store.Lease{
		ID: n.ID, Parent: n.Parent, Name: n.Name, Holder: n.LeaseHolder, Path: path}))
}

// leases returns the lease rows, all of them (holder "") or one holder's.
func (t *tx) leases(ctx context.Context, holder string) ([]store.Lease, error) {
	return scanLeases(ctx, t.st, holder)
}

// scanLeases reads the lease rows of holder ("" for all) in txn, unlocked.
// The lease table holds only files under construction, so it is small.
func scanLeases(ctx context.Context, txn store.Txn, holder string) ([]store.Lease, error) {
	var out []store.Lease
	var decErr error
	start, end := store.AllLeasesRange()
	err := txn.Scan(ctx, start, end, 0, func(k, v []byte) bool {
		var l store.Lease
		if decErr = store.DecodeLease(k, v, &l); decErr != nil {
			return false
		}
		if holder == "" || l.Holder == holder {
			out = append(out, l)
		}
		return true
	})
	if err == nil {
		err = decErr
	}
	return out, err
}

// moveLeases rewrites the paths of the lease rows under directory src to be
// under dst (a directory rename). A lease row changes only under an
// exclusive lock on its file's inode, so each file is locked (NoWait: the
// order is not the global one; a busy lock restarts the rename) and its
// lease read again before the row is rewritten — otherwise a concurrent
// delete or close could see its removal of the row undone.
func (t *tx) moveLeases(ctx context.Context, src, dst string) error {
	ls, err := t.leases(ctx, "")
	if err != nil {
		return err
	}
	for _, l := range ls {
		if !meta.IsAncestor(src, l.Path) {
			continue
		}
		if _, err := t.st.Read(ctx, []store.ReadReq{{Key: store.InodeKey(l.Parent, l.Name), Mode: store.Exclusive, NoWait: true}}); err != nil {
			return err
		}
		vals, err := t.st.Read(ctx, []store.ReadReq{{Key: store.LeaseKey(l.ID)}})
		if err != nil {
			return err
		}
		var cur store.Lease
		if vals[0] == nil || store.DecodeLease(store.LeaseKey(l.ID), vals[0], &cur) != nil || cur.Path != l.Path {
			continue // closed, deleted or moved meanwhile
		}
		cur.Path = dst + cur.Path[len(src):]
		t.putRaw(store.LeaseKey(cur.ID), store.EncodeLease(nil, &cur))
	}
	return nil
}

// recoverFile closes a file whose writer is gone: a block file keeps what its
// blocks hold durably, an inline file everything written (each write
// committed before it returned).
// r is n's path, resolved with n locked exclusive.
func (t *tx) recoverFile(ctx context.Context, op string, r *resolved, n *store.Inode) error {
	if n.Blocks {
		if err := t.recoverBlocks(ctx, op, r, n); err != nil {
			return err
		}
	}
	t.closeFile(n)
	return nil
}

// closeFile makes everything written to n visible and releases its lease.
func (t *tx) closeFile(n *store.Inode) {
	n.Length = n.Written
	n.LeaseHolder = ""
	n.LeaseRenewed = 0
	n.Mtime = t.now
	t.put(n)
	t.delRaw(store.LeaseKey(n.ID))
}

// RenewLease implements meta.FileSystem. It renews the leases client holds
// for u: another user naming the same client renews nothing of them.
func (e *Engine) RenewLease(ctx context.Context, u meta.User, client string) error {
	const op = "renew lease"
	if err := checkUser(op, "", u); err != nil {
		return err
	}
	if err := checkName(op, "", "client", client); err != nil {
		return err
	}
	if err := e.renewLease(ctx, holderKey(client, u.Name)); err != nil {
		return meta.Errorf(op, "", meta.ErrInternal, "recording the renewal for the other NameNodes: %v", err)
	}
	return nil
}

// leaseMonitor is the engine's own lease monitor (Config.LeaseMonitor),
// from New until Close.
func (e *Engine) leaseMonitor() {
	defer close(e.done)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-e.stop
		cancel()
	}()
	e.RunLeaseMonitor(ctx)
	cancel()
}

// RunLeaseMonitor recovers, every Config.LeaseCheckInterval until ctx is
// done, the files whose writer has not renewed its lease within the hard
// limit: each is closed at the length that was written, which is all
// durable (every Write committed before it returned).
//
// On a store that several NameNodes share, one of them runs it: the one
// that leads the coordinator's "lease-monitor" election, with a ctx that
// ends when its leadership may have (coordinator.RunDuty). A recovery it
// began before that can still commit after another NameNode took over: it
// is harmless, because each recovery checks again, under its file's
// exclusive lock and with the holder's renewal row locked shared, that the
// lease is still the one listed and still expired (recoverLease), so it
// does only what any monitor would do at that moment, and two recoveries
// of one file serialize on its lock, the second finding it closed.
func (e *Engine) RunLeaseMonitor(ctx context.Context) {
	e.metrics.monitorLeader.Set(1)
	defer e.metrics.monitorLeader.Set(0)
	e.log.Info("lease monitor running", "check_every", e.cfg.LeaseCheckInterval, "hard_limit", e.cfg.LeaseHardLimit)
	defer e.log.Info("lease monitor stopped")
	tick := time.NewTicker(e.cfg.LeaseCheckInterval)
	defer tick.Stop()
	var sweep <-chan time.Time // the request records' (once.go)
	if e.cfg.RequestTTL > 0 {
		st := time.NewTicker(e.cfg.RequestSweep)
		defer st.Stop()
		sweep = st.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-sweep:
			e.sweepRequests()
		case <-tick.C:
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			if err := e.RecoverExpiredLeases(rctx); err != nil && ctx.Err() == nil {
				e.log.Warn("lease recovery", "err", err)
			}
			cancel()
		}
	}
}

// RecoverExpiredLeases closes every file whose lease holder has been silent
// for longer than the hard limit. The lease monitor calls it periodically.
func (e *Engine) RecoverExpiredLeases(ctx context.Context) error {
	now := e.cfg.Now()
	txn, err := e.st.Begin(ctx)
	if err != nil {
		return err
	}
	all, err := scanLeases(ctx, txn, "")
	if err != nil {
		txn.Rollback()
		return err
	}
	var expired []store.Lease
	for _, l := range all {
		exp, err := e.leaseExpired(ctx, txn, l.Holder, e.cfg.LeaseHardLimit, now)
		if err != nil {
			txn.Rollback()
			return err
		}
		if exp {
			expired = append(expired, l)
		}
	}
	txn.Rollback()
	if !e.alone {
		if err := e.dropOldRenewals(ctx, now); err != nil {
			e.log.Warn("dropping old lease renewal rows", "err", err)
		}
	}
	// One file that cannot be recovered (a replica that cannot be read, a
	// busy lock) must not keep the others open: each is tried, and the
	// failures are logged and returned together.
	var errs []error
	for _, l := range expired {
		if err := ctx.Err(); err != nil {
			// The monitor's leadership may have ended: stop before acting.
			errs = append(errs, err)
			break
		}
		if err := e.recoverLease(ctx, l); err != nil {
			e.log.Warn("lease recovery failed", "file", l.ID, "path", l.Path, "holder", l.Holder, "err", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// recoverLease closes the file of lease l if l's holder still holds it.
func (e *Engine) recoverLease(ctx context.Context, l store.Lease) error {
	su := meta.User{Name: e.cfg.Superuser}
	const op = "recover lease"
	// By the lease's path, which every rename keeps up to date (moveLeases):
	// a recovery may change the usage of the quota directories above it.
	return e.run(ctx, op, l.Path, su, func(t *tx) error {
		rs, err := t.resolve(ctx, want{path: l.Path, last: store.Exclusive})
		if err != nil {
			return err
		}
		n := rs[0].last()
		if n == nil || n.ID != l.ID || n.LeaseHolder != l.Holder {
			return nil // closed, renamed or deleted meanwhile: its own transaction fixed the lease row
		}
		// Still expired, judged again under the file's lock and with the
		// renewal row locked shared: the list was made earlier, perhaps by
		// a monitor that has since lost its leadership (RunLeaseMonitor).
		exp, err := e.leaseExpiredLocked(ctx, t.st, l.Holder, e.cfg.LeaseHardLimit, e.cfg.Now())
		if err != nil {
			return err
		}
		if !exp {
			return nil // renewed meanwhile
		}
		e.log.Info("recovering lease", "file", l.ID, "path", l.Path, "holder", l.Holder, "written", n.Written)
		if err := t.recoverFile(ctx, op, rs[0], n); err != nil {
			return err
		}
		e.metrics.recovered.Inc()
		return nil
	})
}
