package linearizability

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/internal/linmodel"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/meta"
)

// The tests here run against two `nimbus serve` processes on one real
// PostgreSQL database: two NameNodes, each a stateless HopsFS
// NameNode with its own hint cache, serving one namespace, with the
// clients spread across them.

// startSharedServers starts n servers on one fresh PostgreSQL database and
// returns a client of each.
func startSharedServers(t *testing.T, n int) []meta.FileSystem {
	t.Helper()
	db := pgtest.DB(t)
	var out []meta.FileSystem
	for range n {
		addr := testproc.Start(t, binary, "", "", "--superuser", linmodel.Superuser, "--store", db).Addr
		c, err := client.Dial(context.Background(), "http://"+addr, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		out = append(out, c)
	}
	return out
}

// TestModelMatchesTwoServers: one client's calls, alternating between the
// two NameNodes, give what the model says: each sees at once what the other
// did (no cache of either serves a stale row).
func TestModelMatchesTwoServers(t *testing.T) {
	fss := startSharedServers(t, 2)
	ctx := context.Background()
	for _, seed := range seeds(t, 4) {
		base := fmt.Sprintf("/seq%d", seed)
		prepare(t, fss[0], base)
		s := linmodel.Initial()
		g := linmodel.NewGen(seed)
		for i := range 150 {
			in := g.Next(linmodel.Users[i%len(linmodel.Users)])
			got := linmodel.Run(ctx, fss[i%2], base, in)
			want, next := linmodel.Spec(s, in)
			if got.String() != want.String() {
				t.Fatalf("seed %d, call %d on server %d: %s: the server says %s, the model %s\ntree before:\n%s", seed, i, i%2, in, got, want, s)
			}
			s = next
		}
	}
}

// TestLinearizableTwoServers: histories of concurrent clients spread over
// two NameNodes on one database are linearizable, and the namespace they
// leave is clean by fsck.
func TestLinearizableTwoServers(t *testing.T) {
	fss := startSharedServers(t, 2)
	start := time.Now()
	ops, overlapped := 0, 0
	for _, seed := range seeds(t, 12) {
		base := fmt.Sprintf("/s%d", seed)
		h := recordOn(t, fss, base, seed, mix{clients: 6, ops: 25})
		check(t, "two-servers", seed, h, linmodel.Initial())
		ops, overlapped = ops+len(h), overlapped+concurrent(h)
	}
	t.Logf("%d operations, %d of them concurrent with another, in %s", ops, overlapped, time.Since(start).Round(time.Millisecond))
	if overlapped < ops/5 {
		t.Errorf("only %d of %d operations ran concurrently with another", overlapped, ops)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, fs := range fss {
		rep, err := fs.(*client.Client).FsckAs(ctx, meta.User{Name: linmodel.Superuser})
		if err != nil {
			t.Fatalf("fsck through server %d: %v", i, err)
		}
		if !rep.Clean() {
			t.Fatalf("fsck through server %d after the histories: %v", i, rep.Problems)
		}
	}
}

// TestIssue26RacesAcrossServers: the subtree races with the creates on one
// NameNode and the move or chmod on the other, whose quiesce cannot count
// the other's operations and walks the subtree's locks in the database.
func TestIssue26RacesAcrossServers(t *testing.T) {
	fss := startSharedServers(t, 2)
	t.Run("rename", func(t *testing.T) { stressOn(t, fss, renameRace) })
	t.Run("chmod", func(t *testing.T) { stressOn(t, fss, chmodRace) })
}
