package linmodel

import (
	"math/rand/v2"

	"github.com/nimbus-fs/nimbus/meta"
)

// The names of the generated namespace. Directories and files have names
// of their own, and renames keep a name's class, so that a path names a
// directory or a file in every state where it exists: an input alone tells
// whether it may touch a subtree.
var (
	DirNames  = []string{"a", "b", "c"}
	FileNames = []string{"f", "g"}
)

// Users of generated histories: the superuser and two others, so that modes
// and owners decide outcomes.
var Users = []string{Superuser, "ann", "bob"}

// Setup returns the calls that build the starting tree on a root of mode
// 0777 owned by Superuser: directories of both users, a file beneath.
func Setup() []Input {
	return []Input{
		{Op: Mkdirs, User: "ann", Path: "/a/b", Perm: 0o777},
		{Op: Chmod, User: "ann", Path: "/a", Perm: 0o777},
		{Op: Mkdirs, User: "bob", Path: "/c", Perm: 0o777},
		{Op: Create, User: "bob", Path: "/a/b/f", Perm: 0o644},
	}
}

// RootPerm is the mode of the model's root in generated histories.
const RootPerm meta.Perm = 0o777

// Initial returns the state after Setup.
func Initial() *State {
	s := NewState(RootPerm)
	for _, in := range Setup() {
		_, s = Spec(s, in)
	}
	return s
}

// Gen makes random inputs from a seed: the same seed, the same inputs.
type Gen struct {
	r *rand.Rand
}

// NewGen returns a generator seeded with seed.
func NewGen(seed uint64) *Gen { return &Gen{r: rand.New(rand.NewPCG(seed, 0x6e696d627573))} }

func (g *Gen) pick(s []string) string { return s[g.r.IntN(len(s))] }

// dirPath returns a path of 1 to 3 directory names, shallow ones likelier.
func (g *Gen) dirPath() string {
	depth := 1
	switch x := g.r.IntN(20); {
	case x >= 17:
		depth = 3
	case x >= 10:
		depth = 2
	}
	p := ""
	for range depth {
		p += "/" + g.pick(DirNames)
	}
	return p
}

// filePath returns a file name in the root or a directory of 1 or 2 names.
func (g *Gen) filePath() string {
	p := ""
	for range g.r.IntN(3) {
		p += "/" + g.pick(DirNames)
	}
	return p + "/" + g.pick(FileNames)
}

func (g *Gen) anyPath() string {
	if g.r.IntN(2) == 0 {
		return g.filePath()
	}
	return g.dirPath()
}

var modes = []meta.Perm{0o777, 0o777, 0o755, 0o700, 0o711, 0o733}

// Next returns a random call by user.
func (g *Gen) Next(user string) Input {
	in := Input{User: user}
	switch x := g.r.IntN(100); {
	case x < 12:
		in.Op, in.Path, in.Perm = Mkdirs, g.dirPath(), modes[g.r.IntN(len(modes))]
		if g.r.IntN(2) == 0 {
			in.Perm = 0o777
		}
	case x < 32:
		in.Op, in.Path, in.Perm = Create, g.filePath(), 0o644
	case x < 48:
		in.Op, in.Path = Stat, g.anyPath()
	case x < 58:
		in.Op, in.Path = List, g.dirPath()
		if g.r.IntN(5) == 0 {
			in.Path = meta.RootPath
		}
	case x < 68:
		in.Op, in.Path, in.Dst = Rename, g.filePath(), g.filePath()
		if g.r.IntN(2) == 0 { // move into a directory
			in.Dst = g.dirPath()
		}
	case x < 76:
		in.Op, in.Path, in.Dst = Rename, g.dirPath(), g.dirPath()
	case x < 84:
		in.Op, in.Path, in.Perm = Chmod, g.anyPath(), modes[g.r.IntN(len(modes))]
	case x < 95:
		in.Op, in.Path, in.Recursive = Delete, g.anyPath(), g.r.IntN(4) != 0
	default:
		in.Op, in.Path = SetQuota, g.dirPath()
		in.Quota = []int64{-1, 3, 5, 8}[g.r.IntN(4)]
	}
	return in
}
