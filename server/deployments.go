package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nimbus-fs/nimbus/store"
)

// Some settings are properties of the cluster, not of one server: every
// server on a store must have the same, and the first server on the store
// records its own, and a server started with another refuses to start:
//
//	'm' "cluster/deployments" -> N, decimal
//	'm' "cluster/request-ttl" -> the TTL in milliseconds, decimal
//
// The number of deployments sharing a namespace (Config.Deployments):
// every server routes cache entries and invalidations with it
// (routing.Owner(key, N)), and two servers that disagree on N would each
// skip the other's invalidations.
//
// The request records' TTL (--request-ttl, namespace.Config.RequestTTL):
// a write resubmitted to another server is answered from the record its
// first submission wrote, and a submission that waited in a server is not
// started once it is older than half the TTL (namespace/once.go). A server
// with a shorter TTL sweeps the records a longer one relies on, and one
// with 0 neither reads nor writes them: with either, a write could be
// applied twice.
//
// Changing either on a running cluster is not supported: stop every
// server, delete the row, start them all with the new value (for
// deployments, their caches start empty).

var (
	deploymentsKey = store.MetaKey("cluster/deployments")
	requestTTLKey  = store.MetaKey("cluster/request-ttl")
)

// ErrDeployments: this server's --deployments is not the cluster's.
var ErrDeployments = errors.New("server: --deployments differs from the cluster's")

// ErrRequestTTL: this server's --request-ttl is not the cluster's.
var ErrRequestTTL = errors.New("server: --request-ttl differs from the cluster's")

// checkDeployments records n in st if no server has, and fails with
// ErrDeployments if another n is recorded.
func checkDeployments(ctx context.Context, st store.Store, n int) error {
	return checkSetting(ctx, st, setting{key: deploymentsKey, flag: "--deployments", err: ErrDeployments,
		value: int64(n), show: func(v int64) string { return strconv.FormatInt(v, 10) }})
}

// checkRequestTTL records ttl in st if no server has, and fails with
// ErrRequestTTL if another TTL is recorded.
func checkRequestTTL(ctx context.Context, st store.Store, ttl time.Duration) error {
	return checkSetting(ctx, st, setting{key: requestTTLKey, flag: "--request-ttl", err: ErrRequestTTL,
		value: max(ttl.Milliseconds(), 0), show: func(v int64) string { return (time.Duration(v) * time.Millisecond).String() }})
}

// setting is one cluster setting's row and this server's value of it.
type setting struct {
	key   []byte
	flag  string
	err   error
	value int64
	show  func(int64) string
}

// checkSetting records s's value in st if no server has, and fails with
// s.err if another value is recorded.
func checkSetting(ctx context.Context, st store.Store, s setting) error {
	// Once recorded the row never changes (see above): a read without a
	// lock settles it for every server after the first, in one round trip
	// instead of a locking transaction's three (a cold start of a
	// platform instance pays it).
	if ok, err := settingRecorded(ctx, st, s); ok || err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		err := recordSetting(ctx, st, s)
		if attempt < 3 && (errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrLockBusy)) {
			continue // another server recorded it meanwhile: read it again
		}
		return err
	}
}

// settingRecorded reads the row without a lock: true when it records s's
// value, an error when it records another, false when it is missing.
func settingRecorded(ctx context.Context, st store.Store, s setting) (bool, error) {
	txn, err := st.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer txn.Rollback()
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: s.key, Mode: store.ReadCommitted}})
	if err != nil || vals[0] == nil {
		return false, err
	}
	return true, compareSetting(vals[0], s)
}

func compareSetting(v []byte, s setting) error {
	got, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return fmt.Errorf("server: malformed %s row %q", store.FormatKey(s.key), v)
	}
	if got != s.value {
		return fmt.Errorf("%w: this server has %s, the store records %s (every server on one store must have the same %s)",
			s.err, s.show(s.value), s.show(got), s.flag)
	}
	return nil
}

func recordSetting(ctx context.Context, st store.Store, s setting) error {
	txn, err := st.Begin(ctx)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: s.key, Mode: store.Exclusive}})
	if err != nil {
		return err
	}
	if v := vals[0]; v != nil {
		return compareSetting(v, s)
	}
	v := []byte(strconv.FormatInt(s.value, 10))
	if ins, ok := txn.(store.Inserter); ok {
		ins.Insert(s.key, v)
	} else {
		txn.Put(s.key, v)
	}
	return txn.Commit(ctx)
}
