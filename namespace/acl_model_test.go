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
	perm := rapid.Custom(func(t *rapid.T) meta.Perm { return meta.Perm(rapid.IntRange(0, 7).Draw(t, "perm")) })

	rapid.Check(t, func(rt *rapid.T) {
		ref := map[string]*refAcl{}
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
				a.user, a.grp, a.other = perm.Draw(rt, "u"), perm.Draw(rt, "g"), perm.Draw(rt, "o")
				spec := []meta.AclEntry{{Type: meta.AclUser, Perm: a.user}, {Type: meta.AclGroup, Perm: a.grp}, {Type: meta.AclOther, Perm: a.other}}
				for _, u := range users {
					if rapid.IntRange(0, 2).Draw(rt, "named user") == 0 {
						a.namedUsers[u] = perm.Draw(rt, "nu")
						spec = append(spec, meta.AclEntry{Type: meta.AclUser, Name: u, Perm: a.namedUsers[u]})
					}
				}
				for _, g := range groups {
					if rapid.IntRange(0, 2).Draw(rt, "named group") == 0 {
						a.namedGroups[g] = perm.Draw(rt, "ng")
						spec = append(spec, meta.AclEntry{Type: meta.AclGroup, Name: g, Perm: a.namedGroups[g]})
					}
				}
				named := len(a.namedUsers)+len(a.namedGroups) > 0
				if rapid.Bool().Draw(rt, "mask given") {
					a.hasMask, a.mask = true, perm.Draw(rt, "mask")
					spec = append(spec, meta.AclEntry{Type: meta.AclMask, Perm: a.mask})
				} else if named {
					a.hasMask, a.mask = true, a.grp
					for _, p := range a.namedUsers {
						a.mask |= p
					}
					for _, p := range a.namedGroups {
						a.mask |= p
					}
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
