package linmodel

import (
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/nimbus-fs/nimbus/meta"
)

func TestSpec(t *testing.T) {
	s := Initial()
	for _, c := range []struct {
		in   Input
		want string
	}{
		{Input{Op: Stat, User: "bob", Path: "/a/b/f"}, "-rw-r--r-- bob"},
		{Input{Op: Create, User: "bob", Path: "/a/b/f", Perm: 0o644}, "already exists"},
		{Input{Op: Create, User: "bob", Path: "/x/f", Perm: 0o644}, "not found"},
		{Input{Op: Create, User: "bob", Path: "/a/b/f/g", Perm: 0o644}, "not a directory"},
		{Input{Op: Chmod, User: "bob", Path: "/a", Perm: 0o700}, "permission denied"}, // ann owns it
		{Input{Op: Chmod, User: "ann", Path: "/a", Perm: 0o700}, "ok"},
		{Input{Op: Stat, User: "bob", Path: "/a/b"}, "permission denied"},
		{Input{Op: Stat, User: "ann", Path: "/a/b"}, "drwxrwxrwx ann n=1"},
		{Input{Op: Stat, User: "root", Path: "/a/b/f"}, "-rw-r--r-- bob"},
		{Input{Op: SetQuota, User: "ann", Path: "/c", Quota: 2}, "permission denied"},
		{Input{Op: SetQuota, User: "root", Path: "/c", Quota: 2}, "ok"},
		{Input{Op: Mkdirs, User: "bob", Path: "/c/a", Perm: 0o777}, "ok"},
		{Input{Op: Create, User: "bob", Path: "/c/f", Perm: 0o644}, "quota exceeded"}, // /c and /c/a use 2
		{Input{Op: Rename, User: "root", Path: "/a", Dst: "/c"}, "already exists"},    // into /c, where /c/a is
		{Input{Op: Rename, User: "root", Path: "/a/b/f", Dst: "/c/g"}, "quota exceeded"},
		{Input{Op: Rename, User: "root", Path: "/a", Dst: "/a/b/x"}, "invalid argument"},
		{Input{Op: Rename, User: "root", Path: "/a", Dst: "/z"}, "ok"},
		{Input{Op: List, User: "root", Path: "/"}, "[c drwxrwxrwx bob n=1 q=2, z drwx------ ann n=1]"},
		{Input{Op: Rename, User: "root", Path: "/c/a", Dst: "/z"}, "ok"}, // into /z
		{Input{Op: Stat, User: "root", Path: "/z/a"}, "drwxrwxrwx bob n=0"},
		{Input{Op: Delete, User: "bob", Path: "/z", Recursive: true}, "permission denied"},
		{Input{Op: Delete, User: "ann", Path: "/z"}, "directory not empty"},
		{Input{Op: Delete, User: "ann", Path: "/z", Recursive: true}, "ok"},
		{Input{Op: List, User: "ann", Path: "/"}, "[c drwxrwxrwx bob n=0 q=2]"},
	} {
		var got Output
		got, s = Spec(s, c.in)
		if got.String() != c.want {
			t.Fatalf("%s: got %s, want %s; tree:\n%s", c.in, got, c.want, s)
		}
	}
}

// op builds one operation of a hand-made history; times in ms.
func op(client int, call, ret int64, in Input, out Output) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

// The two histories the subtree protocol prevents (a create of /a/b/c that
// resolved its path before a move or chmod of /a, and commits after it),
// written by hand: the checker must reject
// them, and accept the same calls when the create returns before the rename
// (or the chmod) is called.
func TestIssue26Histories(t *testing.T) {
	setup := NewState(RootPerm)
	_, setup = Spec(setup, Input{Op: Mkdirs, User: "ann", Path: "/a/b", Perm: 0o777})
	ok := Output{}
	notFound := Output{Err: meta.KindNotFound}
	file := func(owner string) Output {
		return Output{Stat: Entry{Type: meta.TypeFile, Perm: 0o644, Owner: owner, NsQuota: -1}}
	}
	create := func(user string, call, ret int64) porcupine.Operation {
		return op(0, call, ret, Input{Op: Create, User: user, Path: "/a/b/c", Perm: 0o644}, ok)
	}
	rename := []porcupine.Operation{
		op(1, 2, 3, Input{Op: Rename, User: "root", Path: "/a", Dst: "/z"}, ok),
		op(2, 4, 5, Input{Op: Stat, User: "root", Path: "/z/b/c"}, notFound),
		op(2, 7, 8, Input{Op: Stat, User: "root", Path: "/z/b/c"}, file("ann")),
	}
	chmodSetup := setup
	_, chmodSetup = Spec(chmodSetup, Input{Op: Chmod, User: "ann", Path: "/a", Perm: 0o777})
	chmod := []porcupine.Operation{
		op(1, 2, 3, Input{Op: Chmod, User: "ann", Path: "/a", Perm: 0o700}, ok),
		op(2, 4, 5, Input{Op: Stat, User: "bob", Path: "/a/b"}, Output{Err: meta.KindPermission}),
		op(3, 5, 6, Input{Op: Stat, User: "root", Path: "/a/b/c"}, notFound),
		op(3, 7, 8, Input{Op: Stat, User: "root", Path: "/a/b/c"}, file("bob")),
	}
	for _, c := range []struct {
		name  string
		init  *State
		h     []porcupine.Operation
		valid bool
	}{
		{"rename under create", setup, append(rename, create("ann", 1, 6)), false},
		{"chmod under create", chmodSetup, append(chmod, create("bob", 1, 6)), false},
		// The same calls, the create done before the rename: legal.
		{"create before rename", setup, append(rename[:1:1], op(0, 0, 1, Input{Op: Create, User: "ann", Path: "/a/b/c", Perm: 0o644}, ok),
			op(2, 7, 8, Input{Op: Stat, User: "root", Path: "/z/b/c"}, file("ann"))), true},
		// Without root's stat, the create may come first: legal. (So the
		// history needs an observation that pins the create late.)
		{"chmod without the stat", chmodSetup, append(chmod[:2:2], create("bob", 1, 6)), true},
	} {
		res, err := Check(c.init, c.h, 0, t.TempDir(), "unit")
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Verdict == porcupine.Ok; got != c.valid {
			t.Errorf("%s: verdict %s, want linearizable=%v", c.name, res.Verdict, c.valid)
		}
		if !c.valid && !strings.HasSuffix(res.Viz, ".html") {
			t.Errorf("%s: no visualization written (%q)", c.name, res.Viz)
		}
	}
}
