package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func count(t *testing.T, url string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestClusterKillStandbyPromote: a killed cluster restarts with its
// committed rows, and a synchronous standby, promoted after its primary is
// killed, has every row the primary acknowledged and takes writes.
func TestClusterKillStandbyPromote(t *testing.T) {
	p := NewCluster(t)
	db := p.CreateDB("d")
	p.Exec("d", "CREATE TABLE t (i int)")
	p.Exec("d", "INSERT INTO t VALUES (1)")
	p.Kill()
	if err := exec1(db, "SELECT 1"); err == nil {
		t.Fatal("a killed cluster answered")
	}
	p.Start()
	if n := count(t, db); n != 1 {
		t.Fatalf("%d rows after kill and restart, want 1", n)
	}

	s := p.NewStandby()
	p.Exec("d", "INSERT INTO t SELECT generate_series(1, 99)")
	p.Kill()
	s.Promote()
	if n := count(t, s.URL("d")); n != 100 {
		t.Fatalf("%d rows on the promoted standby, want 100", n)
	}
	s.Exec("d", "INSERT INTO t VALUES (2)")
}
