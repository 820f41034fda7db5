package namespace

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
)

// The reference for the ACL model test: one path component's access ACL as
// a plain record, and HDFS's check (FSPermissionChecker.checkAccessAcl)
// written out from its description, apart from meta.AclAllows.
type refAcl struct {
	owner, group string
	user, grp    meta.Perm // user:: and group:: entries
	other        meta.Perm
	namedUsers   map[string]meta.Perm
	namedGroups  map[string]meta.Perm
	mask         meta.Perm
	hasMask      bool
	dir          bool
	def          *refAcl // a directory's default ACL
}

// randomAcl draws the entries of one scope into a, and returns them as a
// spec, its mask given or left to compute.
func randomAcl(rt *rapid.T, a *refAcl, scope meta.AclScope, users, groups []string) []meta.AclEntry {
	perm := func(label string) meta.Perm { return meta.Perm(rapid.IntRange(0, 7).Draw(rt, label)) }
	a.namedUsers, a.namedGroups = map[string]meta.Perm{}, map[string]meta.Perm{}
	a.user, a.grp, a.other = perm("u"), perm("g"), perm("o")
	spec := []meta.AclEntry{{Scope: scope, Type: meta.AclUser, Perm: a.user}, {Scope: scope, Type: meta.AclGroup, Perm: a.grp},
		{Scope: scope, Type: meta.AclOther, Perm: a.other}}
	for _, u := range users {
		if rapid.IntRange(0, 2).Draw(rt, "named user") == 0 {
			a.namedUsers[u] = perm("nu")
			spec = append(spec, meta.AclEntry{Scope: scope, Type: meta.AclUser, Name: u, Perm: a.namedUsers[u]})
		}
	}
	for _, g := range groups {
		if rapid.IntRange(0, 2).Draw(rt, "named group") == 0 {
			a.namedGroups[g] = perm("ng")
			spec = append(spec, meta.AclEntry{Scope: scope, Type: meta.AclGroup, Name: g, Perm: a.namedGroups[g]})
		}
	}
	named := len(a.namedUsers)+len(a.namedGroups) > 0
	if rapid.Bool().Draw(rt, "mask given") {
		a.hasMask, a.mask = true, perm("mask")
		spec = append(spec, meta.AclEntry{Scope: scope, Type: meta.AclMask, Perm: a.mask})
	} else if named {
		a.hasMask, a.mask = true, a.grp
		for _, p := range a.namedUsers {
			a.mask |= p
		}
		for _, p := range a.namedGroups {
			a.mask |= p
		}
	}
	return spec
}

// inherit is what a new child created with mode gets from a's default ACL:
// the default entries as its access ACL, the mode filtering the owner,
// mask (or group, without a mask) and other entries.
func (a *refAcl) inherit(owner string, mode meta.Perm, dir bool) *refAcl {
	d := a.def
	c := &refAcl{owner: owner, group: a.group, dir: dir, namedUsers: d.namedUsers, namedGroups: d.namedGroups,
		user: d.user & (mode >> 6), grp: d.grp, other: d.other & mode & 7, hasMask: d.hasMask}
	if d.hasMask {
		c.mask = d.mask & (mode >> 3 & 7)
	} else {
		c.grp &= mode >> 3 & 7
	}
	if dir {
		c.def = d
	}
	return c
}

func (a *refAcl) bits() meta.Perm {
	g := a.grp
	if a.hasMask {
		g = a.mask
	}
	return a.user<<6 | g<<3 | a.other
}

// chmod: with a mask the group bits are the mask, else the group entry.
func (a *refAcl) chmod(p meta.Perm) {
	a.user, a.other = p>>6&7, p&7
	if a.hasMask {
		a.mask = p >> 3 & 7
	} else {
		a.grp = p >> 3 & 7
	}
}

func (a *refAcl) allows(user string, groups []string, bits meta.Perm) bool {
	if user == "root" {
		return true
	}
	has := func(p meta.Perm) bool { return p&bits == bits }
	if user == a.owner {
		return has(a.user)
	}
	if p, ok := a.namedUsers[user]; ok {
		return has(p & a.mask) // a named user implies a mask
	}
	effective := func(p meta.Perm) meta.Perm {
		if a.hasMask {
			return p & a.mask
		}
		return p
	}
	member := false
	if slices.Contains(groups, a.group) {
		member = true
		if has(effective(a.grp)) {
			return true
		}
	}
	for g, p := range a.namedGroups {
		if slices.Contains(groups, g) {
			member = true
			if has(effective(p)) {
				return true
			}
		}
	}
	if member {
		return false
	}
	return has(a.other)
}

var modelGroups = map[string][]string{
	"u0": {"g0"},
	"u1": {"g1", "g2"},
	"u2": {"g0", "g2"},
	"u3": nil,
}

// TestAclModel checks the permission check with ACLs on every path
// component against the reference, over random owners, groups, modes, ACL
// specs (masks given or computed, chmod after the ACL) and callers.
func TestAclModel(t *testing.T) {
	opts := pebblestore.DefaultOptions()
	opts.CacheSize = 8 << 20
	opts.MemTableSize = 4 << 20
	st, err := pebblestore.Open(t.TempDir(), opts)
	must(t, err)
	defer st.Close()
	cfg := DefaultConfig()
	cfg.Superuser = "root"
	cfg.Groups = func(u string) []string { return modelGroups[u] }
	e, err := New(st, cfg)
	must(t, err)
	defer e.Close()
	ctx := context.Background()
	dirs := []string{"/t", "/t/d", "/t/e"}
	files := []string{"/t/d/f", "/t/e/g"}
	for _, d := range dirs {
		must(t, e.Mkdirs(ctx, root, d, 0o755))
	}
	for _, f := range files {
		writeFile(t, e, root, f, []byte("x"))
	}
	nodes := append(slices.Clone(dirs), files...)
	users := []string{"u0", "u1", "u2", "u3"}
	groups := []string{"g0", "g1", "g2"}

	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		ref := map[string]*refAcl{}
		nodes := slices.Clone(nodes)
		for _, p := range nodes {
			a := &refAcl{owner: rapid.SampledFrom(users).Draw(rt, "owner"), group: rapid.SampledFrom(groups).Draw(rt, "group"),
				dir: slices.Contains(dirs, p), namedUsers: map[string]meta.Perm{}, namedGroups: map[string]meta.Perm{}}
			mode := meta.Perm(rapid.IntRange(0, 0o777).Draw(rt, "mode"))
			if err := e.RemoveAcl(ctx, root, p); err != nil {
				rt.Fatal(err)
			}
			if err := e.SetOwner(ctx, root, p, a.owner, a.group); err != nil {
				rt.Fatal(err)
			}
			if err := e.SetPermission(ctx, root, p, mode); err != nil {
				rt.Fatal(err)
			}
			a.chmod(mode)
			if rapid.Bool().Draw(rt, "acl") {
				spec := randomAcl(rt, a, meta.AclAccess, users, groups)
				if a.dir && rapid.Bool().Draw(rt, "default acl") {
					a.def = &refAcl{}
					spec = append(spec, randomAcl(rt, a.def, meta.AclDefault, users, groups)...)
				}
				for i := len(spec) - 1; i > 0; i-- { // any order: the engine sorts
					j := rapid.IntRange(0, i).Draw(rt, "swap")
					spec[i], spec[j] = spec[j], spec[i]
				}
				if err := e.SetAcl(ctx, root, p, spec); err != nil {
					rt.Fatalf("set acl %s %v: %v", p, spec, err)
				}
				if rapid.Bool().Draw(rt, "chmod after") {
					mode := meta.Perm(rapid.IntRange(0, 0o777).Draw(rt, "mode after"))
					if err := e.SetPermission(ctx, root, p, mode); err != nil {
						rt.Fatal(err)
					}
					a.chmod(mode)
				}
			}
			ref[p] = a
		}
		// New children of directories with a default ACL inherit it,
		// filtered by the unmasked mode when the client sends one (HDFS-6962)
		// and by the mode otherwise; elsewhere they take the mode.
		for _, d := range dirs {
			run++
			isDir := rapid.Bool().Draw(rt, "child dir")
			mode := meta.Perm(rapid.IntRange(1, 0o777).Draw(rt, "child mode"))
			hasUnmasked := rapid.Bool().Draw(rt, "unmasked given")
			unmasked := meta.Perm(rapid.IntRange(0, 0o777).Draw(rt, "unmasked"))
			if ref[d].def == nil && !hasUnmasked {
				continue
			}
			c := path.Join(d, fmt.Sprintf("c%d", run))
			var err error
			switch {
			case isDir && hasUnmasked:
				err = e.MkdirsUnmasked(ctx, root, c, mode, unmasked)
			case isDir:
				err = e.Mkdirs(ctx, root, c, mode)
			default:
				_, err = e.CreateFile(ctx, root, c, meta.CreateOptions{Perm: mode, Unmasked: unmasked, HasUnmasked: hasUnmasked}, []byte("x"))
			}
			if err != nil {
				rt.Fatal(err)
			}
			wantBit := false
			if ref[d].def == nil {
				ref[c] = &refAcl{owner: "root", group: ref[d].group, dir: isDir, namedUsers: map[string]meta.Perm{}, namedGroups: map[string]meta.Perm{}}
				ref[c].chmod(mode)
			} else {
				from := mode
				if hasUnmasked {
					from = unmasked
				}
				ref[c] = ref[d].inherit("root", from, isDir)
				wantBit = isDir || ref[c].hasMask
			}
			nodes = append(nodes, c)
			st, err := e.Stat(ctx, root, c)
			if err != nil {
				rt.Fatal(err)
			}
			if st.Perm != ref[c].bits() || st.AclBit != wantBit {
				rt.Fatalf("%s created with %o (unmasked %o, %v) under %+v: perm %o aclBit %v, reference %o %v",
					c, mode, unmasked, hasUnmasked, *ref[d], st.Perm, st.AclBit, ref[c].bits(), wantBit)
			}
		}
		for range 20 {
			u := rapid.SampledFrom(users).Draw(rt, "caller")
			caller := meta.User{Name: u}
			p := rapid.SampledFrom(nodes).Draw(rt, "path")
			want := true
			for d := path.Dir(p); d != "/"; d = path.Dir(d) {
				want = want && ref[d].allows(u, modelGroups[u], permX)
			}
			var err error
			var op string
			switch {
			case ref[p].dir:
				op = "list"
				want = want && ref[p].allows(u, modelGroups[u], permR|permX)
				_, err = e.List(ctx, caller, p, "", 0)
			case rapid.Bool().Draw(rt, "read"):
				op = "read"
				want = want && ref[p].allows(u, modelGroups[u], permR)
				_, err = e.Read(ctx, caller, p, 0, 1)
			default:
				op = "stat"
				_, err = e.Stat(ctx, caller, p)
			}
			if want != (err == nil) || err != nil && !errors.Is(err, meta.ErrPermission) {
				rt.Fatalf("%s %s as %s: %v, reference allows: %v\n%s", op, p, u, err, want, dump(ref))
			}
		}
	})
	fsckClean(t, e)
}

func dump(ref map[string]*refAcl) string {
	s := ""
	for p, a := range ref {
		s += fmt.Sprintf("%s: %+v\n", p, *a)
	}
	return s
}
