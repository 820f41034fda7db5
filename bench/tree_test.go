package bench

import (
	"math"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

func TestTreeStatistics(t *testing.T) {
	for _, root := range []string{"/bench", "/a/b"} {
		cfg := DefaultTreeConfig()
		cfg.Root = root
		cfg.Files = 50000
		tr, err := NewTree(cfg)
		if err != nil {
			t.Fatal(err)
		}
		s := tr.Stats()
		t.Logf("%s: %+v", root, s)
		within := func(what string, got, want, tol float64) {
			if math.Abs(got-want) > tol {
				t.Errorf("%s: %s = %.2f, want %.2f ± %.2f", root, what, got, want, tol)
			}
		}
		if s.Files != cfg.Files {
			t.Errorf("files = %d, want %d", s.Files, cfg.Files)
		}
		within("mean file depth", s.MeanFileDepth, 7, 0.5)
		within("files per dir", s.MeanFilesPerDir, 16, 1)
		within("subdirs per non-leaf dir", s.MeanSubdirsPerNonLeaf, 2, 0.25)
		within("name length", s.MeanNameLen, 34, 1)
	}
}

func TestTreeDeterministicAndValid(t *testing.T) {
	cfg := DefaultTreeConfig()
	cfg.Files = 3000
	a, _ := NewTree(cfg)
	b, _ := NewTree(cfg)
	cfg.Seed = 2
	c, _ := NewTree(cfg)
	if a.NumDirs() != b.NumDirs() {
		t.Fatalf("same seed, %d vs %d dirs", a.NumDirs(), b.NumDirs())
	}
	same := 0
	seen := map[string]bool{}
	for k := 0; k < a.NumFiles(); k++ {
		p := a.FilePath(k)
		if p != b.FilePath(k) {
			t.Fatalf("file %d: %q vs %q with the same seed", k, p, b.FilePath(k))
		}
		if k < c.NumFiles() && p == c.FilePath(k) {
			same++
		}
		if clean, err := meta.CleanPath("t", p); err != nil || clean != p {
			t.Fatalf("file %d: bad path %q: %v", k, p, err)
		}
		if !strings.HasPrefix(p, "/bench/") || seen[p] {
			t.Fatalf("file %d: %q outside root or duplicate", k, p)
		}
		seen[p] = true
		d := a.FileDir(k)
		if first, end := a.DirFiles(d); k < first || k >= end {
			t.Fatalf("file %d not in its dir's range [%d,%d)", k, first, end)
		}
	}
	if same != 0 {
		t.Errorf("%d paths equal under another seed", same)
	}
	for i := 0; i < a.NumDirs(); i++ {
		if seen[a.DirPath(i)] {
			t.Fatalf("dir %q is also a file", a.DirPath(i))
		}
		seen[a.DirPath(i)] = true
	}
}

func TestTreeConfigValidate(t *testing.T) {
	bad := []func(*TreeConfig){
		func(c *TreeConfig) { c.Root = "rel" },
		func(c *TreeConfig) { c.Files = 0 },
		func(c *TreeConfig) { c.FilesPerDir = 0 },
		func(c *TreeConfig) { c.NameLen = 3 },
	}
	for i, f := range bad {
		c := DefaultTreeConfig()
		f(&c)
		if _, err := NewTree(c); err == nil {
			t.Errorf("case %d: invalid config accepted", i)
		}
	}
}
