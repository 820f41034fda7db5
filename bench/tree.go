package bench

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"

	"github.com/nimbus-fs/nimbus/meta"
)

// TreeConfig describes a generated namespace. The defaults are the Spotify
// statistics of the HopsFS paper (section 7.2): mean file path depth 7, 16
// files and 2 subdirectories per directory, names of 34 bytes on average.
type TreeConfig struct {
	Root          string // absolute directory the tree is built under
	Files         int    // number of files
	Seed          int64  // the same (Root, Files, Seed, ...) gives the same tree
	FilesPerDir   int    // mean files per directory
	SubdirsPerDir int    // mean subdirectories per non-leaf directory
	NameLen       int    // mean name length in bytes
	FileDepth     int    // target mean number of components in a file's path
}

// DefaultTreeConfig returns the Spotify statistics under /bench.
func DefaultTreeConfig() TreeConfig {
	return TreeConfig{Root: "/bench", Files: 10000, Seed: 1, FilesPerDir: 16, SubdirsPerDir: 2, NameLen: 34, FileDepth: 7}
}

// Validate reports a configuration that cannot be generated.
func (c TreeConfig) Validate() error {
	if _, err := meta.CleanPath("bench", c.Root); err != nil {
		return fmt.Errorf("bench: tree root: %w", err)
	}
	switch {
	case c.Files < 1:
		return errors.New("bench: tree needs at least one file")
	case c.Files > math.MaxInt32:
		return errors.New("bench: tree larger than 2^31 files")
	case c.FilesPerDir < 1:
		return errors.New("bench: files per directory must be at least 1")
	case c.SubdirsPerDir < 1:
		return errors.New("bench: subdirectories per directory must be at least 1")
	case c.NameLen < 16 || c.NameLen > 200:
		return errors.New("bench: mean name length must be within [16, 200]")
	case c.FileDepth < 2:
		return errors.New("bench: file depth must be at least 2")
	}
	return nil
}

// Tree is a generated namespace: directories below Root, each holding files.
// It keeps directory paths (about one per FilesPerDir files) and computes file
// names from the seed, so a million-file tree costs a few megabytes.
// A Tree is immutable and safe for concurrent use.
type Tree struct {
	cfg       TreeConfig
	root      string
	dirs      []treeDir
	dirPaths  []string
	firstFile []int32 // firstFile[d]: index of d's first file; files are numbered dir by dir
}

type treeDir struct {
	parent   int32 // -1: the root
	depth    uint16
	nfiles   uint16
	children uint16
}

// NewTree generates the tree described by cfg. Directories are made depth
// first in subtrees hanging off Root, each subtree a random tree of fanout
// 1..2*SubdirsPerDir-1 whose height is chosen so that the mean file depth is
// cfg.FileDepth; every directory holds 1..2*FilesPerDir-1 files (the last one
// fewer, so that the total is exactly cfg.Files).
func NewTree(cfg TreeConfig) (*Tree, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	root, _ := meta.CleanPath("bench", cfg.Root)
	t := &Tree{cfg: cfg, root: root}
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6e696d627573))
	height := subtreeHeight(cfg.FileDepth, len(meta.SplitPath(root)), float64(cfg.SubdirsPerDir))
	files := 0
	// Depth-first, so that a subtree cut short by the file budget still has
	// the depth distribution of a whole one.
	type frame struct {
		dir   int32
		level int
	}
	for files < cfg.Files {
		stack := []frame{{-1, -1}}
		for len(stack) > 0 && files < cfg.Files {
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			idx := int32(len(t.dirs))
			depth := len(meta.SplitPath(root)) + 1
			if f.dir >= 0 {
				depth = int(t.dirs[f.dir].depth) + 1
				t.dirs[f.dir].children++
			}
			n := 1 + rng.IntN(2*cfg.FilesPerDir-1)
			if n > cfg.Files-files {
				n = cfg.Files - files
			}
			t.dirs = append(t.dirs, treeDir{parent: f.dir, depth: uint16(depth), nfiles: uint16(n)})
			t.firstFile = append(t.firstFile, int32(files))
			files += n
			level := f.level + 1
			if level+1 < height {
				kids := 1 + rng.IntN(2*cfg.SubdirsPerDir-1)
				for k := 0; k < kids; k++ {
					stack = append(stack, frame{idx, level})
				}
			}
		}
	}
	t.dirPaths = make([]string, len(t.dirs))
	for i, d := range t.dirs {
		parent := root
		if d.parent >= 0 {
			parent = t.dirPaths[d.parent]
		}
		t.dirPaths[i] = meta.JoinPath(parent, t.name('d', uint64(i)))
	}
	return t, nil
}

// subtreeHeight picks the number of levels below a top directory so that the
// mean file depth is closest to want: a full tree of fanout b and height h
// has its mean level at sum(l*b^l)/sum(b^l).
func subtreeHeight(want, rootDepth int, b float64) int {
	target := float64(want - 1 - (rootDepth + 1)) // mean level below a top directory
	best, bestErr := 0, math.Inf(1)
	for h := 0; h < 40; h++ {
		var num, den float64
		for l := 0; l <= h; l++ {
			w := math.Pow(b, float64(l))
			num += float64(l) * w
			den += w
		}
		if e := math.Abs(num/den - target); e < bestErr {
			best, bestErr = h+1, e
		}
	}
	return best
}

const nameAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789_-"

// name derives a name from the seed, its kind ('d' or 'f') and its index:
// kind letter, random characters, '.', the index in base 36. The index makes
// names unique in the whole tree; the length is uniform in
// [NameLen-10, NameLen+10].
func (t *Tree) name(kind byte, idx uint64) string {
	h := splitmix(uint64(t.cfg.Seed) ^ uint64(kind)<<56 ^ idx*0x9e3779b97f4a7c15)
	n := t.cfg.NameLen - 10 + int(h%21)
	var buf [256]byte
	b := append(buf[:0], kind)
	suffix := strconv.AppendUint(append(buf[128:128], '.'), idx, 36)
	for len(b)+len(suffix) < n {
		h = splitmix(h)
		b = append(b, nameAlphabet[h%uint64(len(nameAlphabet))])
	}
	return string(append(b, suffix...))
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Config returns the configuration the tree was made from.
func (t *Tree) Config() TreeConfig { return t.cfg }

// Root returns the clean root path.
func (t *Tree) Root() string { return t.root }

// NumDirs returns the number of directories below the root.
func (t *Tree) NumDirs() int { return len(t.dirs) }

// NumFiles returns the number of files.
func (t *Tree) NumFiles() int { return t.cfg.Files }

// DirPath returns the path of directory i, 0 <= i < NumDirs. Parents have
// smaller indexes than their children.
func (t *Tree) DirPath(i int) string { return t.dirPaths[i] }

// DirFiles returns the index range [first, end) of directory i's files.
func (t *Tree) DirFiles(i int) (first, end int) {
	f := int(t.firstFile[i])
	return f, f + int(t.dirs[i].nfiles)
}

// FileDir returns the directory that holds file k.
func (t *Tree) FileDir(k int) int {
	return sort.Search(len(t.firstFile), func(i int) bool { return int(t.firstFile[i]) > k }) - 1
}

// FilePath returns the path of file k, 0 <= k < NumFiles. It allocates the
// string; workloads build the paths they need before they measure.
func (t *Tree) FilePath(k int) string {
	return meta.JoinPath(t.dirPaths[t.FileDir(k)], t.name('f', uint64(k)))
}

// TreeStats are the statistics a tree was generated to have.
type TreeStats struct {
	Dirs, Files           int
	MeanFileDepth         float64 // components in a file path, from "/"
	MaxFileDepth          int
	MeanFilesPerDir       float64
	MeanSubdirsPerNonLeaf float64
	MeanNameLen           float64 // over directories and files
}

// Stats measures the tree (it builds every name: O(files)).
func (t *Tree) Stats() TreeStats {
	s := TreeStats{Dirs: len(t.dirs), Files: t.cfg.Files}
	var depthSum, nameSum, nonLeaf, subdirs float64
	for i, d := range t.dirs {
		depthSum += float64(int(d.depth)+1) * float64(d.nfiles)
		if int(d.depth)+1 > s.MaxFileDepth && d.nfiles > 0 {
			s.MaxFileDepth = int(d.depth) + 1
		}
		if d.children > 0 {
			nonLeaf++
			subdirs += float64(d.children)
		}
		nameSum += float64(len(t.name('d', uint64(i))))
	}
	for k := 0; k < t.cfg.Files; k++ {
		nameSum += float64(len(t.name('f', uint64(k))))
	}
	s.MeanFileDepth = depthSum / float64(s.Files)
	s.MeanFilesPerDir = float64(s.Files) / float64(s.Dirs)
	if nonLeaf > 0 {
		s.MeanSubdirsPerNonLeaf = subdirs / nonLeaf
	}
	s.MeanNameLen = nameSum / float64(s.Dirs+s.Files)
	return s
}
