package meta

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCleanPath(t *testing.T) {
	ok := map[string]string{
		"/":                                   "/",
		"//":                                  "/",
		"/a":                                  "/a",
		"/a/":                                 "/a",
		"//a//b///":                           "/a/b",
		"/a b/ü/日本":                           "/a b/ü/日本",
		"/..a/.b/c..":                         "/..a/.b/c..",
		"/" + strings.Repeat("x", MaxNameLen): "/" + strings.Repeat("x", MaxNameLen),
		"/" + strings.Repeat("a/", MaxDepth-1) + "a":  "/" + strings.Repeat("a/", MaxDepth-1) + "a",
		"/" + strings.Repeat("a/", MaxDepth-1) + "a/": "/" + strings.Repeat("a/", MaxDepth-1) + "a",
	}
	for in, want := range ok {
		got, err := CleanPath("op", in)
		if err != nil || got != want {
			t.Errorf("CleanPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	bad := []string{"", "a", "a/b", "/a/./b", "/a/../b", "/..", "/.", "/a/.", "/a/..", "/a\x00b", "/\xff",
		"/" + strings.Repeat("x", 256), "/" + strings.Repeat("a/", MaxDepth+1), "/" + strings.Repeat("y", MaxPathLen)}
	for _, in := range bad {
		_, err := CleanPath("mkdir", in)
		if !errors.Is(err, ErrInvalidPath) {
			t.Errorf("CleanPath(%q) = %v, want ErrInvalidPath", in, err)
			continue
		}
		var oe *OpError
		if !errors.As(err, &oe) || oe.Op != "mkdir" || oe.Detail == "" {
			t.Errorf("CleanPath(%q): error %v does not name the op and the reason", in, err)
		}
	}
}

func TestParentJoinAncestor(t *testing.T) {
	for _, c := range []struct{ p, parent, name string }{{"/", "/", ""}, {"/a", "/", "a"}, {"/a/b/c", "/a/b", "c"}} {
		if p, n := ParentPath(c.p); p != c.parent || n != c.name {
			t.Errorf("ParentPath(%q) = %q, %q", c.p, p, n)
		}
		if c.p != "/" && JoinPath(c.parent, c.name) != c.p {
			t.Errorf("JoinPath(%q, %q) != %q", c.parent, c.name, c.p)
		}
	}
	yes := [][2]string{{"/", "/a"}, {"/a", "/a/b"}, {"/a", "/a/b/c"}}
	no := [][2]string{{"/", "/"}, {"/a", "/a"}, {"/a", "/ab"}, {"/a/b", "/a"}}
	for _, c := range yes {
		if !IsAncestor(c[0], c[1]) {
			t.Errorf("IsAncestor(%q, %q) = false", c[0], c[1])
		}
	}
	for _, c := range no {
		if IsAncestor(c[0], c[1]) {
			t.Errorf("IsAncestor(%q, %q) = true", c[0], c[1])
		}
	}
}

func TestErrorsKinds(t *testing.T) {
	for k := KindNotFound; k <= KindInternal; k++ {
		s := Sentinel(k)
		err := WrapOp("op", "/p", Errorf("op", "/p", s, "detail %d", 1))
		if KindOf(err) != k || !errors.Is(err, s) {
			t.Errorf("kind %v did not survive wrapping: %v", k, err)
		}
		if !strings.Contains(err.Error(), "op /p: "+k.String()) {
			t.Errorf("message %q lacks op, path and kind", err)
		}
	}
	if KindOf(errors.New("x")) != KindUnknown {
		t.Error("a plain error has a kind")
	}
}

// FuzzCleanPath: CleanPath never panics, its output is clean (idempotent,
// absolute, no empty/dot components) and valid UTF-8, and SplitPath/JoinPath
// rebuild it.
func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"/", "/a/b", "//a//", "/a/../b", "/\x00", "/ü/日本", "a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := CleanPath("fuzz", in)
		if err != nil {
			if !errors.Is(err, ErrInvalidPath) {
				t.Fatalf("CleanPath(%q) error of another kind: %v", in, err)
			}
			return
		}
		if !utf8.ValidString(out) || out == "" || out[0] != '/' {
			t.Fatalf("CleanPath(%q) = %q", in, out)
		}
		if canonicalASCII(in) {
			// The one-pass check accepts only what the slow path
			// returns unchanged.
			if slow, err := cleanPathSlow("fuzz", in); err != nil || slow != in || out != in {
				t.Fatalf("canonicalASCII(%q) but the slow path gives %q, %v", in, slow, err)
			}
		}
		again, err := CleanPath("fuzz", out)
		if err != nil || again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", in, out, again, err)
		}
		p := RootPath
		for _, c := range SplitPath(out) {
			if c == "" || c == "." || c == ".." || len(c) > MaxNameLen {
				t.Fatalf("bad component %q in %q", c, out)
			}
			p = JoinPath(p, c)
		}
		if p != out {
			t.Fatalf("split/join of %q gave %q", out, p)
		}
	})
}

// TestPagePaths: each entry gets the concatenation of the parts added for it,
// in order, all slices of one string.
func TestPagePaths(t *testing.T) {
	var p PagePaths
	p.Grow(3, 8)
	p.Add("/d/", "a")
	p.Add("/")
	p.Add("/d/", "bc", "")
	entries := make([]FileStatus, 3)
	p.SetPaths(entries)
	for i, want := range []string{"/d/a", "/", "/d/bc"} {
		if entries[i].Path != want {
			t.Fatalf("entry %d: %q, want %q", i, entries[i].Path, want)
		}
	}
}

// BenchmarkCleanPath: a path already clean, as clients send them (the one
// pass), and one with a slash to remove (the slow path).
func BenchmarkCleanPath(b *testing.B) {
	for _, p := range []string{"/bench/d0017/f000123", "/bench//d0017/f000123/"} {
		b.Run(p, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := CleanPath("stat", p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
