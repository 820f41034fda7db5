package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/pgstore"
)

// TestFsckPostgres: `nimbus fsck --store URL` checks a namespace in
// PostgreSQL directly, while a NameNode runs on it: clean, then corrupt
// once a row is removed behind the namespace's back; on a database without
// a namespace it fails and creates nothing.
func TestFsckPostgres(t *testing.T) {
	ctx := context.Background()
	url := pgtest.DB(t)
	st, err := pgstore.Open(ctx, url, pgstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := namespace.DefaultConfig()
	cfg.Superuser = "root"
	eng, err := namespace.New(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	root := meta.User{Name: "root"}
	if err := eng.Mkdirs(ctx, root, "/a/b", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.CreateFile(ctx, root, "/a/f", meta.CreateOptions{Client: "c"}, []byte("data")); err != nil {
		t.Fatal(err)
	}
	fsck := func(args ...string) (int, string, string) {
		var out, errs bytes.Buffer
		code := cmdFsck(ctx, args, &out, &errs)
		return code, out.String(), errs.String()
	}
	if code, out, errs := fsck("--store", url); code != 0 || !strings.Contains(out, "HEALTHY") || !strings.Contains(out, "Total inodes:\t4") {
		t.Fatalf("fsck --store of a clean namespace: exit %d\n%s%s", code, out, errs)
	}

	// Remove /a/b's row: /a counts an entry it does not have.
	a, err := eng.Stat(ctx, root, "/a")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if tag, err := conn.Exec(ctx, "DELETE FROM nimbus_kv WHERE key = $1", store.InodeKey(a.FileID, "b")); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("deleting /a/b's row: %v, %v", tag, err)
	}
	if code, out, errs := fsck("--store", url, "--json"); code != 1 || !strings.Contains(out, `"clean": false`) || !strings.Contains(out, "records 2 entries but has 1") {
		t.Fatalf("fsck --store of a corrupt namespace: exit %d\n%s%s", code, out, errs)
	}

	// A database without a namespace: an error, and no table made.
	empty := pgtest.DB(t)
	if code, out, errs := fsck("--store", empty); code != 1 || !strings.Contains(errs, "no Nimbus namespace") {
		t.Fatalf("fsck --store of an empty database: exit %d\n%s%s", code, out, errs)
	}
	econn, err := pgx.Connect(ctx, empty)
	if err != nil {
		t.Fatal(err)
	}
	defer econn.Close(ctx)
	var tables int
	if err := econn.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'nimbus%'").Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("fsck --store made %d tables in an empty database (%v)", tables, err)
	}
	if code, _, errs := fsck("--store", url, "--data", "/tmp/x"); code != 2 || !strings.Contains(errs, "give one") {
		t.Fatalf("--store with --data: exit %d, %s", code, errs)
	}
}
