package linmodel

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/nimbus-fs/nimbus/meta"
)

// Op is an operation of the model.
type Op uint8

// The operations. Each maps onto one meta.FileSystem call (see Run).
const (
	Mkdirs Op = iota + 1
	Create
	Stat
	List
	Rename
	Chmod
	Delete
	SetQuota
)

var opNames = [...]string{Mkdirs: "mkdirs", Create: "create", Stat: "stat", List: "ls", Rename: "mv",
	Chmod: "chmod", Delete: "rm", SetQuota: "setquota"}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Superuser is the one user with every right. Other users are in no group
// that an inode's group class applies to (the engine gives every inode its
// parent's group, the supergroup of the root), so only the owner and other
// classes matter.
const Superuser = "root"

// Input is one call. Paths are clean and absolute, relative to the root of
// the namespace under test (Run maps them below a base directory).
type Input struct {
	Op        Op
	User      string
	Path      string
	Dst       string    // Rename
	Perm      meta.Perm // Mkdirs, Create, Chmod
	Quota     int64     // SetQuota: the namespace quota; -1 clears it
	Recursive bool      // Delete
}

func (in Input) String() string {
	s := in.User + ": " + in.Op.String()
	switch in.Op {
	case Mkdirs, Create, Chmod:
		s += fmt.Sprintf(" %o", uint32(in.Perm))
	case SetQuota:
		s += fmt.Sprintf(" %d", in.Quota)
	case Delete:
		if in.Recursive {
			s += " -r"
		}
	}
	s += " " + in.Path
	if in.Op == Rename {
		s += " " + in.Dst
	}
	return s
}

// Entry is what the model predicts of an inode's status: nothing that
// depends on time or on the inode ids the engine hands out.
type Entry struct {
	Name     string // list entries only
	Type     meta.FileType
	Perm     meta.Perm
	Owner    string
	Children int64 // directories
	NsQuota  int64 // directories; -1 when none (and for files)
}

func (e Entry) String() string {
	s := meta.Symbolic(e.Type, e.Perm) + " " + e.Owner
	if e.Type == meta.TypeDir {
		s += fmt.Sprintf(" n=%d", e.Children)
		if e.NsQuota >= 0 {
			s += fmt.Sprintf(" q=%d", e.NsQuota)
		}
	}
	if e.Name != "" {
		s = e.Name + " " + s
	}
	return s
}

// Output is one call's result.
type Output struct {
	Err  meta.Kind // KindUnknown: success
	Stat Entry     // Stat, on success
	List []Entry   // List, on success, sorted by name
	// Fault is set when the call failed outside the contract (a transport
	// or context error): its outcome is unknown and the run is void.
	Fault string
}

func (o Output) String() string {
	switch {
	case o.Fault != "":
		return "fault: " + o.Fault
	case o.Err == meta.KindBusy:
		return "busy (no effect)"
	case o.Err != meta.KindUnknown:
		return o.Err.String()
	case o.Stat.Type != 0:
		return o.Stat.String()
	case o.List != nil:
		parts := make([]string, len(o.List))
		for i, e := range o.List {
			parts[i] = e.String()
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return "ok"
}

// equal compares the results of a call: error kinds, and for stat and list
// the predicted fields.
func (o Output) equal(p Output) bool {
	return o.Err == p.Err && o.Stat == p.Stat && slices.Equal(o.List, p.List)
}

type node struct {
	typ     meta.FileType
	perm    meta.Perm
	owner   string
	nsQuota int64 // directories; -1 when none
}

// State is a namespace tree: clean path to inode. It is never modified once
// made; key is its canonical form, which States compare by.
type State struct {
	nodes map[string]node
	key   string
}

// NewState returns a tree holding only the root, a directory owned by
// Superuser with mode perm.
func NewState(perm meta.Perm) *State {
	return newState(map[string]node{meta.RootPath: {typ: meta.TypeDir, perm: perm, owner: Superuser, nsQuota: -1}})
}

func newState(nodes map[string]node) *State {
	paths := make([]string, 0, len(nodes))
	for p := range nodes {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	var b strings.Builder
	for _, p := range paths {
		n := nodes[p]
		fmt.Fprintf(&b, "%s %s %s", p, meta.Symbolic(n.typ, n.perm), n.owner)
		if n.nsQuota >= 0 {
			fmt.Fprintf(&b, " q=%d", n.nsQuota)
		}
		b.WriteByte('\n')
	}
	return &State{nodes: nodes, key: b.String()}
}

// String renders the tree, one inode a line in path order.
func (s *State) String() string { return s.key }

// Exists reports whether path is in the tree (for tests).
func (s *State) Exists(path string) bool { _, ok := s.nodes[path]; return ok }

// change returns a copy of s changed by f.
func (s *State) change(f func(m map[string]node)) *State {
	m := make(map[string]node, len(s.nodes)+2)
	for p, n := range s.nodes {
		m[p] = n
	}
	f(m)
	return newState(m)
}

// children returns the names in dir, sorted.
func (s *State) children(dir string) []string {
	var names []string
	for p := range s.nodes {
		if parent, name := meta.ParentPath(p); p != meta.RootPath && parent == dir {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// used counts the inodes of p's subtree, p included, as a namespace quota
// does.
func (s *State) used(p string) int64 {
	var n int64
	for q := range s.nodes {
		if q == p || meta.IsAncestor(p, q) {
			n++
		}
	}
	return n
}

func (s *State) entry(p, name string) Entry {
	n := s.nodes[p]
	e := Entry{Name: name, Type: n.typ, Perm: n.perm, Owner: n.owner, NsQuota: -1}
	if n.typ == meta.TypeDir {
		e.Children = int64(len(s.children(p)))
		e.NsQuota = n.nsQuota
	}
	return e
}

// Access bits, as in rwx.
const (
	permR meta.Perm = 4
	permW meta.Perm = 2
	permX meta.Perm = 1
)

func allowed(u string, n node, bits meta.Perm) bool {
	if u == Superuser {
		return true
	}
	class := n.perm & 7
	if n.owner == u {
		class = (n.perm >> 6) & 7
	}
	return class&bits == bits
}

// prefix returns the path of the first k components.
func prefix(comps []string, k int) string {
	return meta.RootPath + strings.Join(comps[:k], meta.PathSep)
}

// ancestors checks the directories above the path of comps, from the root
// down, as the engine's checkAncestors does: each must exist, be a directory
// and grant search to u. The first failure decides the kind.
func (s *State) ancestors(u string, comps []string) meta.Kind {
	for k := 0; k < len(comps); k++ {
		n, ok := s.nodes[prefix(comps, k)]
		switch {
		case !ok:
			return meta.KindNotFound
		case n.typ != meta.TypeDir:
			return meta.KindNotDir
		case !allowed(u, n, permX):
			return meta.KindPermission
		}
	}
	return meta.KindUnknown
}

// quotaExceeded reports whether adding add inodes below each of dirs would
// pass a namespace quota of one of them.
func (s *State) quotaExceeded(dirs []string, add int64) bool {
	for _, d := range dirs {
		if n := s.nodes[d]; n.nsQuota >= 0 && s.used(d)+add > n.nsQuota {
			return true
		}
	}
	return false
}

func fail(k meta.Kind) Output { return Output{Err: k} }

// Spec is the sequential specification: the result of in on s, and the
// state after it (s itself when nothing changes). It follows the engine's
// order of checks, so that the error kind is the one the engine gives.
func Spec(s *State, in Input) (Output, *State) {
	u := in.User
	p := in.Path
	comps := meta.SplitPath(p)
	switch in.Op {
	case Mkdirs:
		if _, ok := s.nodes[p]; ok {
			if k := s.ancestors(u, comps); k != meta.KindUnknown {
				return fail(k), s
			}
			if s.nodes[p].typ != meta.TypeDir {
				return fail(meta.KindExists), s
			}
			return Output{}, s
		}
		j := 0 // the first missing component
		for k := 0; k <= len(comps); k++ {
			n, ok := s.nodes[prefix(comps, k)]
			if !ok {
				j = k
				break
			}
			if n.typ != meta.TypeDir {
				if k := s.ancestors(u, comps[:k]); k != meta.KindUnknown {
					return fail(k), s
				}
				return fail(meta.KindNotDir), s
			}
		}
		dirs := make([]string, j)
		for k := range dirs {
			dirs[k] = prefix(comps, k)
			if !allowed(u, s.nodes[dirs[k]], permX) || (k == j-1 && !allowed(u, s.nodes[dirs[k]], permW)) {
				return fail(meta.KindPermission), s
			}
		}
		if s.quotaExceeded(dirs, int64(len(comps)-j+1)) {
			return fail(meta.KindQuota), s
		}
		return Output{}, s.change(func(m map[string]node) {
			for k := j; k <= len(comps); k++ {
				perm := in.Perm | 0o300 // implicit parents stay writable and searchable by their owner
				if k == len(comps) {
					perm = in.Perm
				}
				m[prefix(comps, k)] = node{typ: meta.TypeDir, perm: perm, owner: u, nsQuota: -1}
			}
		})

	case Create:
		if p == meta.RootPath {
			return fail(meta.KindExists), s
		}
		if k := s.ancestors(u, comps); k != meta.KindUnknown {
			return fail(k), s
		}
		parent, _ := meta.ParentPath(p)
		if !allowed(u, s.nodes[parent], permW|permX) {
			return fail(meta.KindPermission), s
		}
		if _, ok := s.nodes[p]; ok {
			return fail(meta.KindExists), s
		}
		dirs := make([]string, len(comps))
		for k := range dirs {
			dirs[k] = prefix(comps, k)
		}
		if s.quotaExceeded(dirs, 1) {
			return fail(meta.KindQuota), s
		}
		return Output{}, s.change(func(m map[string]node) {
			m[p] = node{typ: meta.TypeFile, perm: in.Perm, owner: u, nsQuota: -1}
		})

	case Stat, List:
		if k := s.ancestors(u, comps); k != meta.KindUnknown {
			return fail(k), s
		}
		n, ok := s.nodes[p]
		if !ok {
			return fail(meta.KindNotFound), s
		}
		if in.Op == Stat {
			return Output{Stat: s.entry(p, "")}, s
		}
		_, name := meta.ParentPath(p)
		if n.typ != meta.TypeDir {
			return Output{List: []Entry{s.entry(p, name)}}, s
		}
		if !allowed(u, n, permR|permX) {
			return fail(meta.KindPermission), s
		}
		l := []Entry{}
		for _, c := range s.children(p) {
			l = append(l, s.entry(meta.JoinPath(p, c), c))
		}
		return Output{List: l}, s

	case Delete:
		if p == meta.RootPath {
			return fail(meta.KindInvalidArgument), s
		}
		if k := s.ancestors(u, comps); k != meta.KindUnknown {
			return fail(k), s
		}
		n, ok := s.nodes[p]
		if !ok {
			return fail(meta.KindNotFound), s
		}
		parent, _ := meta.ParentPath(p)
		if !allowed(u, s.nodes[parent], permW|permX) {
			return fail(meta.KindPermission), s
		}
		if n.typ == meta.TypeDir && len(s.children(p)) > 0 {
			if !in.Recursive {
				return fail(meta.KindNotEmpty), s
			}
			// HDFS's sub-access check: every directory of a non-empty
			// subtree grants rwx.
			for q, c := range s.nodes {
				if (q == p || meta.IsAncestor(p, q)) && c.typ == meta.TypeDir && !allowed(u, c, permR|permW|permX) {
					return fail(meta.KindPermission), s
				}
			}
		}
		return Output{}, s.change(func(m map[string]node) {
			for q := range m {
				if q == p || meta.IsAncestor(p, q) {
					delete(m, q)
				}
			}
		})

	case Rename:
		return s.rename(in)

	case Chmod, SetQuota:
		if k := s.ancestors(u, comps); k != meta.KindUnknown {
			return fail(k), s
		}
		n, ok := s.nodes[p]
		if !ok {
			return fail(meta.KindNotFound), s
		}
		if in.Op == Chmod {
			if u != Superuser && u != n.owner {
				return fail(meta.KindPermission), s
			}
			n.perm = in.Perm
		} else {
			switch {
			case u != Superuser:
				return fail(meta.KindPermission), s
			case n.typ != meta.TypeDir:
				return fail(meta.KindNotDir), s
			case in.Quota < -1:
				return fail(meta.KindInvalidArgument), s
			}
			if in.Quota != 0 {
				n.nsQuota = in.Quota
			}
		}
		return Output{}, s.change(func(m map[string]node) { m[p] = n })
	}
	return fail(meta.KindUnsupported), s
}

// rename follows the engine's Rename without overwrite: an existing
// directory as destination receives the source under its own name.
func (s *State) rename(in Input) (Output, *State) {
	u, sp, dp := in.User, in.Path, in.Dst
	if sp == meta.RootPath || meta.IsAncestor(sp, dp) {
		return fail(meta.KindInvalidArgument), s
	}
	if k := s.ancestors(u, meta.SplitPath(sp)); k != meta.KindUnknown {
		return fail(k), s
	}
	n, ok := s.nodes[sp]
	if !ok {
		return fail(meta.KindNotFound), s
	}
	if k := s.ancestors(u, meta.SplitPath(dp)); k != meta.KindUnknown {
		return fail(k), s
	}
	if dp == sp {
		return Output{}, s
	}
	target := dp
	if d, ok := s.nodes[dp]; ok && d.typ == meta.TypeDir {
		_, name := meta.ParentPath(sp)
		target = meta.JoinPath(dp, name)
		if k := s.ancestors(u, meta.SplitPath(target)); k != meta.KindUnknown {
			return fail(k), s
		}
		if target == sp {
			return Output{}, s
		}
	}
	sParent, _ := meta.ParentPath(sp)
	dParent, _ := meta.ParentPath(target)
	if !allowed(u, s.nodes[sParent], permW|permX) || !allowed(u, s.nodes[dParent], permW|permX) {
		return fail(meta.KindPermission), s
	}
	if n.typ == meta.TypeDir && (target == sp || meta.IsAncestor(sp, target)) {
		return fail(meta.KindInvalidArgument), s
	}
	if _, ok := s.nodes[target]; ok {
		return fail(meta.KindExists), s
	}
	// The subtree's usage moves to the quota directories above the target
	// that are not above the source.
	srcDirs := map[string]bool{}
	for q := sParent; ; q, _ = meta.ParentPath(q) {
		srcDirs[q] = true
		if q == meta.RootPath {
			break
		}
	}
	var arriving []string
	for q := dParent; ; q, _ = meta.ParentPath(q) {
		if !srcDirs[q] {
			arriving = append(arriving, q)
		}
		if q == meta.RootPath {
			break
		}
	}
	if s.quotaExceeded(arriving, s.used(sp)) {
		return fail(meta.KindQuota), s
	}
	return Output{}, s.change(func(m map[string]node) {
		for q, c := range s.nodes {
			if q == sp || meta.IsAncestor(sp, q) {
				delete(m, q)
				m[target+q[len(sp):]] = c
			}
		}
	})
}

// Model returns the porcupine model whose initial state is init. Inputs are
// Input values and outputs Output values. A busy result (the engine gave up
// after its retries) had no effect, so it is allowed in any state.
func Model(init *State) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return init },
		Step: func(st, in, out any) (bool, any) {
			s, o := st.(*State), out.(Output)
			if o.Err == meta.KindBusy {
				return true, s
			}
			want, next := Spec(s, in.(Input))
			if !want.equal(o) {
				return false, s
			}
			return true, next
		},
		Equal: func(a, b any) bool { return a.(*State).key == b.(*State).key },
		Hash: func(st any) uint64 {
			h := fnv.New64a()
			h.Write([]byte(st.(*State).key))
			return h.Sum64()
		},
		DescribeOperation: func(in, out any) string { return in.(Input).String() + " → " + out.(Output).String() },
		DescribeState:     func(st any) string { return st.(*State).key },
	}
}
