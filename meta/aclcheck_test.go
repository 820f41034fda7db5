package meta

import (
	"errors"
	"strings"
	"testing"
)

func parseAcl(s string) []AclEntry {
	if s == "" {
		return nil
	}
	var out []AclEntry
	for _, f := range strings.Split(s, ",") {
		var e AclEntry
		if rest, ok := strings.CutPrefix(f, "default:"); ok {
			e.Scope, f = AclDefault, rest
		}
		p := strings.Split(f, ":")
		e.Type = map[string]AclType{"user": AclUser, "group": AclGroup, "mask": AclMask, "other": AclOther}[p[0]]
		e.Name = p[1]
		for i, c := range "rwx" {
			if p[2][i] == byte(c) {
				e.Perm |= 4 >> i
			}
		}
		out = append(out, e)
	}
	return out
}

func formatAcl(acl []AclEntry) string {
	var s []string
	for _, e := range acl {
		s = append(s, e.String())
	}
	return strings.Join(s, ",")
}

// The cases of HDFS's TestAclTransformation, in its notation.
func TestAclTransformations(t *testing.T) {
	const minimal = "user::rwx,group::r-x,other::---"
	const bruce = "user::rwx,user:bruce:rwx,group::r-x,mask::rwx,other::---"
	for _, c := range []struct {
		name           string
		fn             func(acl, spec []AclEntry) ([]AclEntry, error)
		existing, spec string
		want, err      string
	}{
		{"modify adds a named user and a mask", ModifyAcl, minimal, "user:bruce:rwx", bruce, ""},
		{"modify a default ACL copies the base entries", ModifyAcl, minimal, "default:user:bruce:rwx",
			minimal + ",default:user::rwx,default:user:bruce:rwx,default:group::r-x,default:mask::rwx,default:other::---", ""},
		{"modify with a mask keeps it", ModifyAcl, minimal, "user:bruce:rwx,mask::r--", "user::rwx,user:bruce:rwx,group::r-x,mask::r--,other::---", ""},
		{"modify recalculates an existing mask", ModifyAcl, "user::rwx,user:bruce:r--,group::r--,mask::r--,other::---", "user:bruce:rw-",
			"user::rwx,user:bruce:rw-,group::r--,mask::rw-,other::---", ""},
		{"modify an unrelated scope keeps the mask", ModifyAcl, "user::rwx,user:bruce:r--,group::r--,mask::---,other::---", "default:user:x:r--",
			"user::rwx,user:bruce:r--,group::r--,mask::---,other::---,default:user::rwx,default:user:x:r--,default:group::r--,default:mask::r--,default:other::---", ""},
		{"remove a named user recalculates the mask", RemoveAclEntries, bruce, "user:bruce:---", "user::rwx,group::r-x,mask::r-x,other::---", ""},
		{"remove a required mask", RemoveAclEntries, bruce, "mask::---", "", "Invalid ACL: mask is required and cannot be deleted."},
		{"remove a base entry", RemoveAclEntries, minimal, "other::---", "", "Invalid ACL: the user, group and other entries are required."},
		{"replace drops what it does not name", ReplaceAcl, bruce, minimal, minimal, ""},
		{"replace keeps the other scope", ReplaceAcl, minimal + ",default:user::rwx,default:group::r-x,default:other::---", "user::rw-,group::r--,other::r--",
			"user::rw-,group::r--,other::r--,default:user::rwx,default:group::r-x,default:other::---", ""},
		{"replace without other", ReplaceAcl, minimal, "user::rwx,group::r-x", "", "Invalid ACL: the user, group and other entries are required."},
		{"default without base entries of its own or access", ReplaceAcl, "", "default:user:b:rwx", "", "Invalid ACL: the user, group and other entries are required."},
		{"duplicates", ModifyAcl, minimal, "user:a:rwx,user:a:r--", "", "Invalid ACL: the ACL spec contains duplicate entries."},
		{"named mask", ModifyAcl, minimal, "mask:m:rwx", "", "Invalid ACL: this entry type must not have a name: mask:m:rwx."},
	} {
		got, err := c.fn(parseAcl(c.existing), parseAcl(c.spec))
		switch {
		case c.err != "":
			if err == nil || err.Error() != c.err || !errors.Is(err, ErrAcl) {
				t.Errorf("%s: error %v, want %q", c.name, err, c.err)
			}
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		case formatAcl(got) != c.want:
			t.Errorf("%s:\n got %s\nwant %s", c.name, formatAcl(got), c.want)
		}
	}
}

// The stored form: extended entries plus bits, and back.
func TestSplitAndLogicalAcl(t *testing.T) {
	acl := parseAcl("user::rwx,user:bruce:rwx,group::r-x,mask::r--,other::--x,default:user::rwx,default:group::r-x,default:other::---")
	ext, perm, err := SplitAcl(acl, StickyBit, true)
	if err != nil || perm != 0o1741 || formatAcl(ext) != "user:bruce:rwx,group::r-x,default:user::rwx,default:group::r-x,default:other::---" {
		t.Fatalf("SplitAcl = %s %o %v", formatAcl(ext), perm, err)
	}
	if got := formatAcl(LogicalAcl(perm, ext)); got != formatAcl(acl) {
		t.Fatalf("LogicalAcl = %s", got)
	}
	if _, _, err := SplitAcl(acl, 0, false); err == nil {
		t.Fatal("a file took a default ACL")
	}
	ext, perm, _ = SplitAcl(parseAcl("user::rw-,group::r--,other::---"), 0o777, false)
	if ext != nil || perm != 0o640 {
		t.Fatalf("a minimal ACL stored as %v %o", ext, perm)
	}
}

func TestInheritAcl(t *testing.T) {
	parent := parseAcl("default:user::rwx,default:user:bruce:rwx,default:group::r-x,default:mask::rwx,default:other::r-x")
	ext, perm, ok := InheritAcl(parent, 0o640, false)
	if !ok || perm != 0o640 || formatAcl(ext) != "user:bruce:rwx,group::r-x" {
		t.Fatalf("file: %s %o %v", formatAcl(ext), perm, ok)
	}
	ext, perm, _ = InheritAcl(parent, 0o755, true)
	if perm != 0o755 || formatAcl(ext) != "user:bruce:rwx,group::r-x,"+formatAcl(parent) {
		t.Fatalf("dir: %s %o", formatAcl(ext), perm)
	}
	if _, _, ok := InheritAcl(parseAcl("user:bruce:rwx,group::r-x"), 0o644, false); ok {
		t.Fatal("inherited without a default ACL")
	}
}

func TestAclAllows(t *testing.T) {
	ext := parseAcl("user:bruce:rwx,group::r--,group:eng:-w-")
	in := func(gs ...string) func(string) bool {
		return func(g string) bool { return strings.Contains(strings.Join(gs, ","), g) }
	}
	const perm = 0o751 // mask r-x
	for _, c := range []struct {
		user   string
		groups func(string) bool
		bits   Perm
		want   bool
	}{
		{"owner", in(), 7, true},
		{"bruce", in(), 5, true},  // rwx masked to r-x
		{"bruce", in(), 2, false}, // w masked away
		{"x", in("staff"), 4, true},
		{"x", in("eng"), 2, false},         // -w- masked to ---, and a match denies
		{"x", in("eng"), 1, false},         // other has x, but a group matched
		{"x", in("eng", "staff"), 4, true}, // any matching group grants
		{"x", in(), 1, true},               // other
	} {
		if got := AclAllows("owner", "staff", perm, ext, c.user, c.groups, c.bits); got != c.want {
			t.Errorf("%s %o: %v, want %v", c.user, c.bits, got, c.want)
		}
	}
	// A default ACL alone leaves the access check to the bits: the owning
	// group's bits apply.
	def := parseAcl("default:user::rwx,default:group::---,default:other::---")
	if !AclAllows("owner", "staff", 0o070, def, "x", in("staff"), 7) || AclAllows("owner", "staff", 0o070, def, "x", in(), 1) {
		t.Error("a default ACL alone changed the access check")
	}
}
