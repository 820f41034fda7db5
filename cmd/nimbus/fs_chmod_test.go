package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

func TestParseMode(t *testing.T) {
	cases := []struct {
		mode  string
		old   meta.Perm
		isDir bool
		want  meta.Perm
	}{
		{"755", 0o000, false, 0o755},
		{"0644", 0o777, false, 0o644},
		{"1777", 0o755, true, 0o1777},
		{"0", 0o777, false, 0},
		{"u+x", 0o644, false, 0o744},
		{"go-w", 0o666, false, 0o644},
		{"a=r", 0o777, false, 0o444},
		{"=r", 0o1777, true, 0o444},
		{"+x", 0o644, false, 0o755},
		{"-x", 0o755, false, 0o644},
		{"u+x,go-w,a+r", 0o622, false, 0o744},
		{"u=rwx,g=rx,o=", 0o000, false, 0o750},
		{"u+x-w", 0o644, false, 0o544},
		{"ug+w", 0o444, false, 0o664},
		{"o+t", 0o777, true, 0o1777},
		{"+t", 0o755, true, 0o1755},
		{"-t", 0o1777, true, 0o777},
		{"u+t", 0o755, true, 0o755}, // sticky belongs to "other"
		{"a+X", 0o644, true, 0o755},
		{"a+X", 0o644, false, 0o644},
		{"a+X", 0o744, false, 0o755},
		{"g=u", 0o000, false, 0}, // handled below as an error
	}
	for _, c := range cases {
		m, err := parseMode(c.mode)
		if c.mode == "g=u" {
			if !errors.Is(err, errBadMode) {
				t.Errorf("parseMode(%q) = %v, want errBadMode", c.mode, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseMode(%q): %v", c.mode, err)
			continue
		}
		if got := m.apply(c.old, c.isDir); got != c.want {
			t.Errorf("%q on %o (dir %v) = %o, want %o", c.mode, c.old, c.isDir, got, c.want)
		}
	}
	for _, bad := range []string{"", "8", "12345", "2777", "u", "ux", "z+x", "u+q", "u+x,", ",", "a+rw x", "+-z", "7a"} {
		if _, err := parseMode(bad); !errors.Is(err, errBadMode) {
			t.Errorf("parseMode(%q) = %v, want errBadMode", bad, err)
		}
	}
}

// FuzzParseMode: no input panics; every accepted mode yields only
// permission and sticky bits; an octal mode is absolute.
func FuzzParseMode(f *testing.F) {
	for _, s := range []string{"755", "1777", "u+x", "go-w,a=r", "a+X", "+t", "u=rwx,g=rx,o=", "u+x-w=r"} {
		f.Add(s, uint16(0o644), false)
	}
	f.Fuzz(func(t *testing.T, s string, old uint16, isDir bool) {
		m, err := parseMode(s)
		if err != nil {
			if !errors.Is(err, errBadMode) {
				t.Fatalf("%q: error %v is not errBadMode", s, err)
			}
			return
		}
		got := m.apply(meta.Perm(old), isDir)
		if got&^meta.PermMask != 0 {
			t.Fatalf("%q on %o gave %o: bits outside the mask", s, old, got)
		}
		if m.octal && got != m.apply(0, !isDir) {
			t.Fatalf("octal %q depends on the old mode", s)
		}
		if m.apply(got, isDir) != m.apply(m.apply(got, isDir), isDir) {
			t.Fatalf("%q is not idempotent after one application", s)
		}
	})
}

func TestChmod(t *testing.T) {
	h := newHarness(t)
	h.put("/user/alice/d/f", "x")
	h.put("/user/alice/d/e/g", "y")
	h.put("/user/alice/top", "z")
	h.ok("chmod", "600", "top")
	if st, _ := h.stat("/user/alice/top"); st.Perm != 0o600 {
		t.Errorf("chmod 600: %o", st.Perm)
	}
	h.ok("chmod", "-w", "top") // a mode that looks like a flag
	if st, _ := h.stat("/user/alice/top"); st.Perm != 0o400 {
		t.Errorf("chmod -w: %o", st.Perm)
	}
	h.ok("chmod", "-R", "go-rx,u+w", "d")
	for p, want := range map[string]meta.Perm{"/user/alice/d": 0o700, "/user/alice/d/e": 0o700,
		"/user/alice/d/f": 0o600, "/user/alice/d/e/g": 0o600} {
		if st, _ := h.stat(p); st.Perm != want {
			t.Errorf("chmod -R %s: %o, want %o", p, st.Perm, want)
		}
	}
	h.ok("chmod", "a+X", "d") // without -R only d itself
	if st, _ := h.stat("/user/alice/d/e"); st.Perm != 0o700 {
		t.Errorf("chmod without -R reached a child: %o", st.Perm)
	}
	code, _, errs := h.run("chmod", "u+q", "top")
	if code != 2 || !strings.Contains(errs, `nimbus fs: chmod: invalid mode "u+q"`) ||
		!strings.Contains(errs, "usage: nimbus fs chmod [-R] MODE PATH...") {
		t.Errorf("bad mode: exit %d %q", code, errs)
	}
	code, _, errs = h.run("chmod", "644", "nope", "top")
	if code != 1 || errs != "nimbus fs: chmod /user/alice/nope: not found\n" {
		t.Errorf("missing path: exit %d %q", code, errs)
	}
	if st, _ := h.stat("/user/alice/top"); st.Perm != 0o644 {
		t.Errorf("chmod went on after an error: %o", st.Perm)
	}
}

func TestChown(t *testing.T) {
	h := newHarness(t)
	h.put("/user/alice/d/f", "x")
	h.ok("chown", "-R", ":staff", "d")
	for _, p := range []string{"/user/alice/d", "/user/alice/d/f"} {
		if st, _ := h.stat(p); st.Group != "staff" || st.Owner != "alice" {
			t.Errorf("chown -R :staff %s: %s:%s", p, st.Owner, st.Group)
		}
	}
	code, _, errs := h.run("chown", "bob", "d")
	if code != 1 || !strings.HasPrefix(errs, "nimbus fs: chown /user/alice/d: permission denied") {
		t.Errorf("chown by a non-superuser: exit %d %q", code, errs)
	}
	for _, bad := range []string{":", "a b", "a:b:c", ""} {
		if code, _, _ := h.run("chown", bad, "d"); code != 2 {
			t.Errorf("chown %q: exit %d, want 2", bad, code)
		}
	}
	for s, want := range map[string][2]string{"bob": {"bob", ""}, "bob:g": {"bob", "g"}, ":g": {"", "g"}, "bob:": {"bob", ""}} {
		o, g, err := parseOwner(s)
		if err != nil || o != want[0] || g != want[1] {
			t.Errorf("parseOwner(%q) = %q %q %v", s, o, g, err)
		}
	}
}

// countingFS counts the shell's chmod and chown calls: one per inode (the
// walk) or one per tree (meta.RecursiveAttrs, which it answers as a server
// that does not know the request would when unsupported is set).
type countingFS struct {
	meta.FileSystem
	unsupported      bool
	plain, recursive int
}

func (c *countingFS) SetPermission(ctx context.Context, u meta.User, p string, perm meta.Perm) error {
	c.plain++
	return c.FileSystem.SetPermission(ctx, u, p, perm)
}

func (c *countingFS) SetOwner(ctx context.Context, u meta.User, p, owner, group string) error {
	c.plain++
	return c.FileSystem.SetOwner(ctx, u, p, owner, group)
}

func (c *countingFS) SetPermissionRecursive(ctx context.Context, u meta.User, p string, perm meta.Perm) error {
	c.recursive++
	if c.unsupported {
		return meta.Errorf("setPermissionRecursive", p, meta.ErrUnsupported, "unknown request")
	}
	return c.FileSystem.(meta.RecursiveAttrs).SetPermissionRecursive(ctx, u, p, perm)
}

func (c *countingFS) SetOwnerRecursive(ctx context.Context, u meta.User, p, owner, group string) error {
	c.recursive++
	if c.unsupported {
		return meta.Errorf("setOwnerRecursive", p, meta.ErrUnsupported, "unknown request")
	}
	return c.FileSystem.(meta.RecursiveAttrs).SetOwnerRecursive(ctx, u, p, owner, group)
}

// TestChmodRecursiveOnServer: chmod -R with an absolute mode and chown -R
// are one call of the server when it has them; a symbolic mode, and a
// server that does not know the call, walk the tree; either way every inode
// changes. A refusal below names the path refused and changes nothing.
func TestChmodRecursiveOnServer(t *testing.T) {
	h := newHarness(t)
	h.put("/user/alice/d/f", "x")
	h.put("/user/alice/d/e/g", "y")
	h.put("/user/alice/d/e/h", "z")
	c := &countingFS{FileSystem: h.fs}
	h.fs = c
	all := []string{"/user/alice/d", "/user/alice/d/e", "/user/alice/d/e/g", "/user/alice/d/e/h", "/user/alice/d/f"}
	modes := func(want meta.Perm) {
		t.Helper()
		for _, p := range all {
			if st, _ := h.stat(p); st.Perm != want {
				t.Errorf("%s: %o, want %o", p, st.Perm, want)
			}
		}
	}
	h.ok("chmod", "-R", "750", "d")
	modes(0o750)
	if c.recursive != 1 || c.plain != 0 {
		t.Errorf("chmod -R 750: %d recursive calls, %d plain, want 1 and 0", c.recursive, c.plain)
	}
	var got []opResult
	if err := json.Unmarshal([]byte(h.ok("--json", "chown", "-R", ":staff", "d")), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != (opResult{Op: "chown", Path: "/user/alice/d", OK: true}) {
		t.Errorf("chown -R --json: %+v", got)
	}
	for _, p := range all {
		if st, _ := h.stat(p); st.Group != "staff" {
			t.Errorf("chown -R :staff %s: group %s", p, st.Group)
		}
	}
	c.recursive, c.plain = 0, 0
	h.ok("chmod", "-R", "o+r", "d") // symbolic: the walk
	if c.recursive != 0 || c.plain != len(all) {
		t.Errorf("chmod -R o+r: %d recursive calls, %d plain", c.recursive, c.plain)
	}
	c.unsupported, c.recursive, c.plain = true, 0, 0
	h.ok("chmod", "-R", "700", "d")
	modes(0o700)
	if c.recursive != 1 || c.plain != len(all) {
		t.Errorf("chmod -R 700 on a server without it: %d recursive calls, %d plain", c.recursive, c.plain)
	}
	c.unsupported = false

	// bob's file below: alice's chmod -R is refused, naming it, and changes nothing.
	if err := c.FileSystem.SetOwner(context.Background(), meta.User{Name: testSuperuser}, "/user/alice/d/e/h", "bob", ""); err != nil {
		t.Fatal(err)
	}
	code, _, errs := h.run("chmod", "-R", "755", "d")
	if code != 1 || !strings.Contains(errs, "nimbus fs: chmod /user/alice/d: permission denied") || !strings.Contains(errs, "/user/alice/d/e/h") {
		t.Errorf("chmod -R over bob's file: exit %d %q", code, errs)
	}
	modes(0o700)
}
