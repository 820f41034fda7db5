package pgstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
)

// TestNamespaceRoundTrips counts the round trips of the namespace's
// operations over this store (issue 27's budget: 1 for a stat, 3 for a
// create), warm: the namespace's directory-id hints filled, every
// statement prepared on the connections used.
func TestNamespaceRoundTrips(t *testing.T) {
	st := open(t, pgtest.DB(t), prometheus.NewRegistry())
	cfg := namespace.DefaultConfig()
	cfg.Superuser = "root"
	e, err := namespace.New(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	root := meta.User{Name: "root"}
	const dir = "/user/alice/warehouse/sales/year=2026/month=11"
	if err := e.Mkdirs(ctx, root, dir, 0); err != nil {
		t.Fatal(err)
	}
	ops := []struct {
		name   string
		budget float64
		fn     func(i int) error
	}{
		{"stat", 1, func(i int) error { _, err := e.Stat(ctx, root, dir); return err }},
		{"create", 3, func(i int) error {
			_, err := e.CreateFile(ctx, root, fmt.Sprintf("%s/f%d", dir, i), meta.CreateOptions{}, []byte("x"))
			return err
		}},
		{"stat file", 1, func(i int) error { _, err := e.Stat(ctx, root, fmt.Sprintf("%s/f%d", dir, i)); return err }},
		{"list", 3, func(i int) error { _, err := e.List(ctx, root, dir, "", 100); return err }},
		{"mkdir", 3, func(i int) error { return e.Mkdirs(ctx, root, fmt.Sprintf("%s/d%d", dir, i), 0) }},
		{"rename", 3, func(i int) error {
			return e.Rename(ctx, root, fmt.Sprintf("%s/f%d", dir, i), fmt.Sprintf("%s/g%d", dir, i), meta.RenameOptions{})
		}},
		{"delete", 3, func(i int) error { return e.Delete(ctx, root, fmt.Sprintf("%s/g%d", dir, i), false) }},
		// With a request id, as over the RPC: the record's lock joins the
		// first batch and its row the commit's (namespace/once.go), so
		// the budget is the same.
		{"create recorded", 3, func(i int) error {
			_, err := e.CreateFile(reqCtx(1, i), root, fmt.Sprintf("%s/r%d", dir, i), meta.CreateOptions{}, []byte("x"))
			return err
		}},
		{"mkdir recorded", 3, func(i int) error { return e.Mkdirs(reqCtx(2, i), root, fmt.Sprintf("%s/rd%d", dir, i), 0) }},
		{"rename recorded", 3, func(i int) error {
			return e.Rename(reqCtx(3, i), root, fmt.Sprintf("%s/r%d", dir, i), fmt.Sprintf("%s/rr%d", dir, i), meta.RenameOptions{})
		}},
		{"resubmitted rename", 2, func(i int) error { // lock and read the record, and the empty commit
			return e.Rename(meta.WithRequest(reqCtx(3, i), meta.Request{Client: "nimbus-pg", ID: 3<<32 | uint64(i), Resubmitted: true}),
				root, fmt.Sprintf("%s/r%d", dir, i), fmt.Sprintf("%s/rr%d", dir, i), meta.RenameOptions{})
		}},
	}
	for i := range 3 { // the first round warms hints and prepared statements
		for _, op := range ops {
			before := roundTrips(st)
			if err := op.fn(i); err != nil {
				t.Fatalf("%s: %v", op.name, err)
			}
			n := roundTrips(st) - before
			if i == 2 {
				t.Logf("%-9s %v round trips", op.name, n)
				if n > op.budget {
					t.Errorf("%s: %v round trips, budget %v", op.name, n, op.budget)
				}
			}
		}
	}
}

// reqCtx carries request id op<<32|i of client "nimbus-pg", first sent.
func reqCtx(op, i int) context.Context {
	return meta.WithRequest(context.Background(), meta.Request{Client: "nimbus-pg", ID: uint64(op)<<32 | uint64(i)})
}
