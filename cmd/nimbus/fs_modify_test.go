package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

func TestMkdir(t *testing.T) {
	h := newHarness(t)
	h.ok("mkdir", "a", "/user/alice/b")
	for _, p := range []string{"/user/alice/a", "/user/alice/b"} {
		if st, err := h.stat(p); err != nil || !st.IsDir() {
			t.Errorf("%s: %v %v", p, st, err)
		}
	}
	h.put("/user/alice/file", "x")
	code, _, errs := h.run("mkdir", "x/y", "c", "a", "file/d")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	lines := strings.Split(errs, "\n")
	if len(lines) != 4 || lines[3] != "" ||
		lines[0] != "nimbus fs: mkdir /user/alice/x/y: not found (parent /user/alice/x does not exist; use -p)" ||
		lines[1] != "nimbus fs: mkdir /user/alice/a: already exists" ||
		!strings.HasPrefix(lines[2], "nimbus fs: mkdir /user/alice/file/d: not a directory") {
		t.Errorf("stderr %q", errs)
	}
	if _, err := h.stat("/user/alice/c"); err != nil {
		t.Errorf("mkdir went on to c: %v", err)
	}
	h.ok("mkdir", "-p", "x/y/z", "a")
	if st, err := h.stat("/user/alice/x/y/z"); err != nil || !st.IsDir() {
		t.Errorf("mkdir -p: %v %v", st, err)
	}
	code, _, errs = h.run("mkdir", "-p", "file/q")
	if code != 1 || !strings.HasPrefix(errs, "nimbus fs: mkdir /user/alice/file/q: not a directory") {
		t.Errorf("mkdir -p under a file: exit %d, %q", code, errs)
	}
}

func TestMutationJSON(t *testing.T) {
	h := newHarness(t)
	code, out, _ := h.run("--json", "mkdir", "a", "no/b")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	var got []opResult
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := []opResult{
		{Op: "mkdir", Path: "/user/alice/a", OK: true},
		{Op: "mkdir", Path: "/user/alice/no/b", Error: &jsonError{Kind: "not_found",
			Message: "mkdir /user/alice/no/b: not found (parent /user/alice/no does not exist; use -p)"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	var raw []map[string]any
	_ = json.Unmarshal([]byte(out), &raw)
	if _, ok := raw[0]["error"]; ok {
		t.Errorf("ok result carries an error field: %v", raw[0])
	}
	if e := raw[1]["error"].(map[string]any); e["kind"] != "not_found" {
		t.Errorf("error object %v", e)
	}
}

func TestTouch(t *testing.T) {
	h := newHarness(t)
	h.ok("touch", "t1", "/user/alice/t2")
	st, err := h.stat("/user/alice/t1")
	if err != nil || st.Type != meta.TypeFile || st.Length != 0 || st.UnderConstruction {
		t.Fatalf("touch created %+v, %v", st, err)
	}
	h.put("/user/alice/full", "data")
	h.setTimes("/user/alice/full", fakeTime)
	h.ok("touch", "full")
	st, _ = h.stat("/user/alice/full")
	if st.Mtime != harnessTime.UnixMilli() || st.Atime != harnessTime.UnixMilli() || st.Length != 4 {
		t.Errorf("touch existing: %+v", st)
	}
	h.mkdirs("/user/alice/dir")
	code, _, errs := h.run("touch", "dir", "missing/x")
	if code != 1 || !strings.Contains(errs, "nimbus fs: touch /user/alice/dir: is a directory\n") ||
		!strings.Contains(errs, "nimbus fs: touch /user/alice/missing/x: not found") {
		t.Errorf("touch errors: exit %d %q", code, errs)
	}
}

func TestMv(t *testing.T) {
	h := newHarness(t)
	h.put("/user/alice/a", "A")
	h.put("/user/alice/b", "B")
	h.mkdirs("/user/alice/d")
	h.ok("mv", "a", "a2")
	if h.content("/user/alice/a2") != "A" {
		t.Error("rename lost content")
	}
	h.ok("mv", "a2", "/user/alice/b", "d")
	for _, p := range []string{"/user/alice/d/a2", "/user/alice/d/b"} {
		if _, err := h.stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	h.put("/user/alice/c", "C")
	h.put("/user/alice/e", "E")
	code, _, errs := h.run("mv", "c", "e")
	if code != 1 || errs != "nimbus fs: mv /user/alice/c: already exists (at /user/alice/e)\n" {
		t.Errorf("mv onto a file: exit %d %q", code, errs)
	}
	code, _, errs = h.run("mv", "c", "e", "nope")
	if code != 1 || errs != "nimbus fs: mv /user/alice/nope: not found\n" {
		t.Errorf("mv several into missing: exit %d %q", code, errs)
	}
	code, _, errs = h.run("mv", "c", "d", "e")
	if code != 1 || errs != "nimbus fs: mv /user/alice/e: not a directory (several sources need a directory destination)\n" {
		t.Errorf("mv several into file: exit %d %q", code, errs)
	}
	if code, _, _ := h.run("mv", "c"); code != 2 {
		t.Errorf("mv with one argument: exit %d, want 2", code)
	}
}

func TestRm(t *testing.T) {
	h := newHarness(t)
	h.put("/user/alice/f", "x")
	h.put("/user/alice/d/g", "y")
	h.mkdirs("/user/alice/e")
	expectEq(t, "rm", h.ok("rm", "f"), "Deleted f\n")
	code, out, errs := h.run("rm", "d", "e", "nope")
	if code != 1 || out != "" {
		t.Errorf("rm dirs without -r: exit %d, out %q", code, out)
	}
	expectEq(t, "stderr", errs, ""+
		"nimbus fs: rm /user/alice/d: is a directory (use -r to delete a directory)\n"+
		"nimbus fs: rm /user/alice/e: is a directory (use -r to delete a directory)\n"+
		"nimbus fs: rm /user/alice/nope: not found\n")
	expectEq(t, "rm -r", h.ok("rm", "-r", "d", "/user/alice/e"), "Deleted d\nDeleted /user/alice/e\n")
	for _, p := range []string{"/user/alice/d", "/user/alice/d/g", "/user/alice/e"} {
		if _, err := h.stat(p); meta.KindOf(err) != meta.KindNotFound {
			t.Errorf("%s still there: %v", p, err)
		}
	}
	expectEq(t, "rm -f missing", h.ok("rm", "-f", "nope", "nope2"), "")
	h.put("/user/alice/z", "z")
	expectEq(t, "rm -rf", h.ok("rm", "-rf", "z", "nope"), "Deleted z\n")
	if code, _, errs := h.run("rm", "-r", "/"); code != 1 || !strings.HasPrefix(errs, "nimbus fs: rm /: ") {
		t.Errorf("rm -r /: exit %d %q", code, errs)
	}
}

func TestRecursiveAndMoveJSON(t *testing.T) {
	h := newHarness(t)
	h.put("/user/alice/d/f", "x")
	h.put("/user/alice/d/e/g", "y")
	var got []opResult
	if err := json.Unmarshal([]byte(h.ok("--json", "chmod", "-R", "700", "d")), &got); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, r := range got {
		if r.Op != "chmod" || !r.OK || r.Error != nil {
			t.Errorf("result %+v", r)
		}
		paths = append(paths, r.Path)
	}
	// One result per argument: the server changes the tree in one
	// operation (TestChmodRecursiveOnServer; a walk gives one per inode).
	want := []string{"/user/alice/d"}
	if !reflect.DeepEqual(paths, want) {
		t.Errorf("chmod -R results %v, want %v", paths, want)
	}
	got = nil
	if err := json.Unmarshal([]byte(h.ok("--json", "mv", "d/f", "d/e")), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != (opResult{Op: "mv", Path: "/user/alice/d/f", Dst: "/user/alice/d/e", OK: true}) {
		t.Errorf("mv --json %+v", got)
	}
	if _, err := h.stat("/user/alice/d/e/f"); err != nil {
		t.Errorf("mv into a directory: %v", err)
	}
	code, out, _ := h.run("--json", "rm", "d/nope", "d/e/f")
	got = nil
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if code != 1 || len(got) != 2 || got[0].OK || got[0].Error.Kind != "not_found" || !got[1].OK {
		t.Errorf("rm --json: exit %d %+v", code, got)
	}
}
