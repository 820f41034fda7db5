package main

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/nimbus-fs/nimbus/server"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
)

func TestPrintFsck(t *testing.T) {
	clean := &meta.FsckReport{Inodes: 5, Directories: 3, Files: 1, Symlinks: 1, Bytes: 42, DataChunks: 1}
	var out bytes.Buffer
	if code := printFsck(clean, false, &out); code != 0 {
		t.Errorf("clean: exit %d", code)
	}
	expectEq(t, "clean", out.String(), "Status: HEALTHY\n"+
		" Total inodes:\t5\n Directories:\t3\n Files:\t\t1\n Symlinks:\t1\n Total bytes:\t42\n"+
		" Data chunks:\t1\n Blocks:\t0\n Problems:\t0\n\nThe filesystem under path '/' is HEALTHY\n")
	bad := *clean
	bad.Problems = []string{"inode 7 (/a/b): parent 6 is not a directory", "orphan inode 9"}
	out.Reset()
	if code := printFsck(&bad, false, &out); code != 1 {
		t.Errorf("corrupt: exit %d", code)
	}
	if !strings.HasPrefix(out.String(), "PROBLEM: inode 7 (/a/b): parent 6 is not a directory\nPROBLEM: orphan inode 9\nStatus: CORRUPT\n") ||
		!strings.Contains(out.String(), " Problems:\t2\n") || !strings.HasSuffix(out.String(), "is CORRUPT\n") {
		t.Errorf("corrupt output:\n%s", out.String())
	}
	out.Reset()
	if code := printFsck(clean, true, &out); code != 0 {
		t.Errorf("json clean: exit %d", code)
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"clean": true, "inodes": 5.0, "directories": 3.0, "files": 1.0, "symlinks": 1.0,
		"bytes": 42.0, "data_chunks": 1.0, "blocks": 0.0, "problems": []any{}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("json %v, want %v", got, want)
	}
}

func TestFsckUsage(t *testing.T) {
	for _, args := range [][]string{{"extra"}, {"--nope"}, {"--data"}} {
		var out, errs bytes.Buffer
		if code := cmdFsck(context.Background(), args, &out, &errs); code != 2 || !strings.Contains(errs.String(), "usage: nimbus fsck") {
			t.Errorf("%q: exit %d, %q", args, code, errs.String())
		}
	}
}

// makeStore fills a store in dir through the engine and closes it, as a
// stopped server leaves it.
func makeStore(t *testing.T, dir string) {
	t.Helper()
	st, err := pebblestore.Open(dir, pebblestore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	eng, err := namespace.New(st, namespace.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	su := meta.User{Name: eng.Config().Superuser}
	sfs := streamFS{FileSystem: eng, client: "fsck-test"}
	if err := eng.Mkdirs(ctx, su, "/a/b", meta.DefaultDir); err != nil {
		t.Fatal(err)
	}
	w, err := sfs.CreateWriter(ctx, su, "/a/b/f", meta.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := eng.CreateSymlink(ctx, su, "/a/b/f", "/a/l", false); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestFsckLocalStore(t *testing.T) {
	data := t.TempDir()
	dir := server.StoreDir(data) // as `nimbus serve --data` lays it out
	makeStore(t, dir)
	var out, errs bytes.Buffer
	code := cmdFsck(context.Background(), []string{"--data", data, "--json"}, &out, &errs)
	if code != 0 || errs.Len() != 0 {
		t.Fatalf("clean store: exit %d, %s\n%s", code, errs.String(), out.String())
	}
	var rep jsonFsck
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	want := jsonFsck{Clean: true, Inodes: 5, Directories: 3, Files: 1, Symlinks: 1, Bytes: 5, DataChunks: 1, Problems: []string{}}
	if !reflect.DeepEqual(rep, want) {
		t.Errorf("report %+v, want %+v", rep, want)
	}

	// Remove /a's row: /a/b and below become unreachable.
	st, err := pebblestore.Open(dir, pebblestore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	txn, err := st.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	txn.Delete(store.InodeKey(store.RootID, "a"))
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	code = cmdFsck(context.Background(), []string{"--data", dir}, &out, &errs) // the store directory itself
	if code != 1 || !strings.Contains(out.String(), "PROBLEM: ") || !strings.Contains(out.String(), "Status: CORRUPT") {
		t.Errorf("corrupt store: exit %d\n%s%s", code, out.String(), errs.String())
	}
}

func TestFsckLocalMissingStore(t *testing.T) {
	empty := t.TempDir()
	for _, dir := range []string{filepath.Join(empty, "nope"), empty} {
		var out, errs bytes.Buffer
		code := cmdFsck(context.Background(), []string{"--data", dir}, &out, &errs)
		if code != 1 || !strings.HasPrefix(errs.String(), "nimbus fsck: no store in "+dir) {
			t.Errorf("%s: exit %d, %q", dir, code, errs.String())
		}
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Errorf("fsck created files in %s: %v", empty, ents)
	}
}
