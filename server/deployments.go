package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nimbus-fs/nimbus/store"
)

// The number of deployments sharing a namespace (Config.Deployments) is a
// property of the cluster, not of one server: every server routes cache
// entries and invalidations with it (routing.Owner(key, N)), and two
// servers that disagree on N would each skip the other's invalidations.
// The first server on a store records it, and a server started with
// another N refuses to start:
//
//	'm' "cluster/deployments" -> N, decimal
//
// Changing N on a running cluster (moving entries between deployments) is
// not supported: stop every server, delete the row, start them all with
// the new N (their caches start empty).

var deploymentsKey = store.MetaKey("cluster/deployments")

// ErrDeployments: this server's --deployments is not the cluster's.
var ErrDeployments = errors.New("server: --deployments differs from the cluster's")

// checkDeployments records n in st if no server has, and fails with
// ErrDeployments if another n is recorded.
func checkDeployments(ctx context.Context, st store.Store, n int) error {
	// Once recorded the row never changes (see above): a read without a
	// lock settles it for every server after the first, in one round trip
	// instead of a locking transaction's three (a cold start of a
	// platform instance pays it).
	if ok, err := deploymentsRecorded(ctx, st, n); ok || err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		err := recordDeployments(ctx, st, n)
		if attempt < 3 && (errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrLockBusy)) {
			continue // another server recorded it meanwhile: read it again
		}
		return err
	}
}

// deploymentsRecorded reads the row without a lock: true when it records
// n, an error when it records another number, false when it is missing.
func deploymentsRecorded(ctx context.Context, st store.Store, n int) (bool, error) {
	txn, err := st.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer txn.Rollback()
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: deploymentsKey, Mode: store.ReadCommitted}})
	if err != nil || vals[0] == nil {
		return false, err
	}
	return true, compareDeployments(vals[0], n)
}

func compareDeployments(v []byte, n int) error {
	got, err := strconv.Atoi(string(v))
	if err != nil {
		return fmt.Errorf("server: malformed cluster/deployments row %q", v)
	}
	if got != n {
		return fmt.Errorf("%w: this server has %d, the store records %d (every server on one store must have the same --deployments)", ErrDeployments, n, got)
	}
	return nil
}

func recordDeployments(ctx context.Context, st store.Store, n int) error {
	txn, err := st.Begin(ctx)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: deploymentsKey, Mode: store.Exclusive}})
	if err != nil {
		return err
	}
	if v := vals[0]; v != nil {
		return compareDeployments(v, n)
	}
	v := []byte(strconv.Itoa(n))
	if ins, ok := txn.(store.Inserter); ok {
		ins.Insert(deploymentsKey, v)
	} else {
		txn.Put(deploymentsKey, v)
	}
	return txn.Commit(ctx)
}
