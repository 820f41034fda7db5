package meta

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// HDFS's ACL algorithms (AclTransformation, AclStorage and
// FSPermissionChecker.checkAccessAcl), pure functions over entries, so that
// the engine and an in-memory file system apply the same rules.
//
// An inode keeps its ACL as HDFS's AclFeature does: the permission bits
// plus its extended entries (the access ACL's named users, owning group and
// named groups, then the whole default ACL). The owner, mask and other
// entries of the access ACL are the permission bits: with extended access
// entries, the group bits are the mask.

// ErrAcl matches (errors.Is) the errors of the ACL transformations; their
// text is HDFS's AclException message, nothing added.
var ErrAcl = errors.New("invalid ACL")

type aclError struct{ msg string }

func (e *aclError) Error() string        { return e.msg }
func (e *aclError) Is(target error) bool { return target == ErrAcl }

func aclErr(format string, args ...any) error {
	return &aclError{fmt.Sprintf(format, args...)}
}

// CompareAclEntries orders entries as HDFS's ACL_ENTRY_COMPARATOR: by scope
// (access first), type (user, group, mask, other) and name (unnamed first).
// Perm is not compared: two entries comparing equal are one key.
func CompareAclEntries(a, b AclEntry) int {
	if c := cmp.Compare(a.Scope, b.Scope); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Type, b.Type); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// ValidAclEntry reports what is wrong with one entry of a spec, if anything.
func ValidAclEntry(e AclEntry) error {
	switch {
	case e.Scope > AclDefault:
		return aclErr("Invalid ACL: unknown scope %d", e.Scope)
	case e.Type > AclOther:
		return aclErr("Invalid ACL: unknown entry type %d", e.Type)
	case e.Perm&^7 != 0:
		return aclErr("Invalid ACL: permission %o out of range in entry %s", e.Perm, e)
	case e.Name != "" && (e.Type == AclMask || e.Type == AclOther):
		return aclErr("Invalid ACL: this entry type must not have a name: %s.", e)
	case len(e.Name) > MaxNameLen || strings.ContainsAny(e.Name, ":,\x00\n"):
		return aclErr("Invalid ACL: bad name %q", e.Name)
	}
	return nil
}

// validatedSpec sorts a copy of spec and refuses HDFS's bad specs.
func validatedSpec(spec []AclEntry) ([]AclEntry, error) {
	if len(spec) > MaxAclEntries {
		return nil, aclErr("Invalid ACL: ACL spec has %d entries, which exceeds maximum of %d.", len(spec), MaxAclEntries)
	}
	s := slices.Clone(spec)
	slices.SortFunc(s, CompareAclEntries)
	for i, e := range s {
		if err := ValidAclEntry(e); err != nil {
			return nil, err
		}
		if i > 0 && CompareAclEntries(s[i-1], e) == 0 {
			return nil, aclErr("Invalid ACL: the ACL spec contains duplicate entries.")
		}
	}
	return s, nil
}

func specHas(spec []AclEntry, e AclEntry) (AclEntry, bool) {
	i, ok := slices.BinarySearchFunc(spec, e, CompareAclEntries)
	if !ok {
		return AclEntry{}, false
	}
	return spec[i], true
}

// LogicalAcl returns an inode's whole ACL (HDFS's readINodeLogicalAcl): the
// owner, group and other entries from perm when there are no extended access
// entries, else the owner entry, the extended access entries, the mask (the
// group bits) and other; then the default entries.
func LogicalAcl(perm Perm, ext []AclEntry) []AclEntry {
	out := make([]AclEntry, 0, len(ext)+3)
	i := 0
	for i < len(ext) && ext[i].Scope == AclAccess {
		i++
	}
	out = append(out, AclEntry{Type: AclUser, Perm: perm >> 6 & 7})
	if i == 0 {
		out = append(out, AclEntry{Type: AclGroup, Perm: perm >> 3 & 7})
	} else {
		out = append(out, ext[:i]...)
		out = append(out, AclEntry{Type: AclMask, Perm: perm >> 3 & 7})
	}
	out = append(out, AclEntry{Type: AclOther, Perm: perm & 7})
	return append(out, ext[i:]...)
}

// SplitAcl stores a validated whole ACL as HDFS's updateINodeAcl does: it
// returns the extended entries (nil for a minimal ACL) and the permission
// bits (owner, mask or group, other from the entries; the sticky bit kept).
// A default ACL on anything but a directory is refused.
func SplitAcl(acl []AclEntry, perm Perm, dir bool) ([]AclEntry, Perm, error) {
	n := 0
	for n < len(acl) && acl[n].Scope == AclAccess {
		n++
	}
	access, def := acl[:n], acl[n:]
	if len(def) > 0 && !dir {
		return nil, perm, aclErr("Invalid ACL: only directories may have a default ACL.")
	}
	newPerm := perm&StickyBit | access[0].Perm<<6 | access[n-2].Perm<<3 | access[n-1].Perm
	if len(acl) == 3 {
		return nil, newPerm, nil
	}
	var ext []AclEntry
	if n > 3 {
		ext = append(ext, access[1:n-2]...)
	}
	return append(ext, def...), newPerm, nil
}

// aclBuilder carries AclTransformation's bookkeeping per scope.
type aclBuilder struct {
	entries      []AclEntry
	providedMask [2]*AclEntry
	maskDirty    [2]bool
	scopeDirty   [2]bool
}

func (b *aclBuilder) keep(e AclEntry) {
	if e.Type == AclMask {
		b.providedMask[e.Scope] = &e
	} else {
		b.entries = append(b.entries, e)
	}
}

// take adds a spec entry: its scope is dirty, a mask is provided.
func (b *aclBuilder) take(e AclEntry) {
	b.scopeDirty[e.Scope] = true
	if e.Type == AclMask {
		b.maskDirty[e.Scope] = true
	}
	b.keep(e)
}

// ModifyAcl merges spec into acl (HDFS's mergeAclEntries): entries with the
// key of a spec entry are replaced, the others added.
func ModifyAcl(acl, spec []AclEntry) ([]AclEntry, error) {
	s, err := validatedSpec(spec)
	if err != nil {
		return nil, err
	}
	var b aclBuilder
	for _, e := range acl {
		if _, ok := specHas(s, e); !ok {
			b.keep(e)
		}
	}
	for _, e := range s {
		b.take(e)
	}
	return b.build()
}

// RemoveAclEntries removes the entries named by spec, whatever their
// permissions (HDFS's filterAclEntriesByAclSpec).
func RemoveAclEntries(acl, spec []AclEntry) ([]AclEntry, error) {
	s, err := validatedSpec(spec)
	if err != nil {
		return nil, err
	}
	var b aclBuilder
	for _, e := range acl {
		if _, ok := specHas(s, e); ok {
			b.scopeDirty[e.Scope] = true
			if e.Type == AclMask {
				b.maskDirty[e.Scope] = true
			}
			continue
		}
		b.keep(e)
	}
	return b.build()
}

// RemoveDefaultAcl drops the default entries (HDFS's filterDefaultAclEntries).
func RemoveDefaultAcl(acl []AclEntry) ([]AclEntry, error) {
	var out []AclEntry
	for _, e := range acl {
		if e.Scope == AclAccess {
			out = append(out, e)
		}
	}
	return out, nil
}

// ReplaceAcl replaces, scope by scope, the entries of acl with those of spec
// (HDFS's replaceAclEntries): a scope spec does not mention is kept.
func ReplaceAcl(acl, spec []AclEntry) ([]AclEntry, error) {
	s, err := validatedSpec(spec)
	if err != nil {
		return nil, err
	}
	var b aclBuilder
	for _, e := range s {
		b.take(e)
	}
	for _, e := range acl {
		if !b.scopeDirty[e.Scope] {
			b.keep(e)
		}
	}
	return b.build()
}

// build is HDFS's copyDefaultsIfNeeded, calculateMasks and
// buildAndValidateAcl.
func (b *aclBuilder) build() ([]AclEntry, error) {
	slices.SortFunc(b.entries, CompareAclEntries)
	// A default ACL takes the access ACL's owner, group and other entries it
	// lacks.
	n := 0
	for n < len(b.entries) && b.entries[n].Scope == AclAccess {
		n++
	}
	if n < len(b.entries) {
		access, def := b.entries[:n], b.entries[n:]
		var copied []AclEntry
		for _, t := range []AclType{AclUser, AclGroup, AclOther} {
			if _, ok := specHas(def, AclEntry{Scope: AclDefault, Type: t}); ok {
				continue
			}
			if a, ok := specHas(access, AclEntry{Type: t}); ok {
				copied = append(copied, AclEntry{Scope: AclDefault, Type: t, Perm: a.Perm})
			}
		}
		b.entries = append(b.entries, copied...)
	}
	// The masks.
	var union [2]Perm
	var found, maskNeeded [2]bool
	for _, e := range b.entries {
		found[e.Scope] = true
		if e.Type == AclGroup || e.Name != "" {
			union[e.Scope] |= e.Perm
		}
		if e.Name != "" {
			maskNeeded[e.Scope] = true
		}
	}
	for sc := range 2 {
		if !found[sc] {
			continue
		}
		pm := b.providedMask[sc]
		switch {
		case pm == nil && maskNeeded[sc] && b.maskDirty[sc]:
			return nil, aclErr("Invalid ACL: mask is required and cannot be deleted.")
		case pm != nil && (!b.scopeDirty[sc] || b.maskDirty[sc]):
			b.entries = append(b.entries, *pm)
		case maskNeeded[sc] || pm != nil:
			b.entries = append(b.entries, AclEntry{Scope: AclScope(sc), Type: AclMask, Perm: union[sc]})
		}
	}
	return ValidateAcl(b.entries)
}

// ValidateAcl sorts acl and checks it as HDFS's buildAndValidateAcl does.
func ValidateAcl(acl []AclEntry) ([]AclEntry, error) {
	if len(acl) > 2*MaxAclEntries {
		return nil, aclErr("Invalid ACL: ACL has %d entries, which exceeds maximum of %d.", len(acl), 2*MaxAclEntries)
	}
	slices.SortFunc(acl, CompareAclEntries)
	var count [2]int
	for i, e := range acl {
		if i > 0 && CompareAclEntries(acl[i-1], e) == 0 {
			return nil, aclErr("Invalid ACL: multiple entries with same scope, type and name.")
		}
		if e.Name != "" && (e.Type == AclMask || e.Type == AclOther) {
			return nil, aclErr("Invalid ACL: this entry type must not have a name: %s.", e)
		}
		count[e.Scope]++
	}
	if count[AclAccess] > MaxAclEntries {
		return nil, aclErr("Invalid ACL: ACL has %d access entries, which exceeds maximum of %d.", count[AclAccess], MaxAclEntries)
	}
	if count[AclDefault] > MaxAclEntries {
		return nil, aclErr("Invalid ACL: ACL has %d default entries, which exceeds maximum of %d.", count[AclDefault], MaxAclEntries)
	}
	access, def := acl[:count[AclAccess]], acl[count[AclAccess]:]
	for _, t := range []AclType{AclUser, AclGroup, AclOther} {
		if _, ok := specHas(access, AclEntry{Type: t}); !ok {
			return nil, aclErr("Invalid ACL: the user, group and other entries are required.")
		}
		if len(def) > 0 {
			if _, ok := specHas(def, AclEntry{Scope: AclDefault, Type: t}); !ok {
				return nil, aclErr("Invalid default ACL: the user, group and other entries are required.")
			}
		}
	}
	return acl, nil
}

// InheritAcl gives a new child of a directory with extended entries
// parentExt its ACL (HDFS's copyINodeDefaultAcl): the parent's default ACL
// becomes the child's access ACL (and a directory's default ACL too), the
// child's requested permission filtering the owner, mask (or, for a minimal
// default ACL, group) and other entries. ok is false when the parent has no
// default ACL: the child then keeps perm and has no ACL.
func InheritAcl(parentExt []AclEntry, perm Perm, dir bool) (ext []AclEntry, newPerm Perm, ok bool) {
	i := 0
	for i < len(parentExt) && parentExt[i].Scope == AclAccess {
		i++
	}
	def := parentExt[i:]
	if len(def) == 0 {
		return nil, perm, false
	}
	minimal := len(def) == 3
	access := make([]AclEntry, len(def), len(def)+len(def))
	for k, e := range def {
		p := e.Perm
		switch {
		case e.Type == AclUser && e.Name == "":
			p &= perm >> 6 & 7
		case e.Type == AclGroup && minimal:
			p &= perm >> 3 & 7
		case e.Type == AclMask:
			p &= perm >> 3 & 7
		case e.Type == AclOther:
			p &= perm & 7
		}
		access[k] = AclEntry{Scope: AclAccess, Type: e.Type, Name: e.Name, Perm: p}
	}
	full := access
	if dir {
		full = append(full, def...)
	}
	ext, newPerm, _ = SplitAcl(full, perm, dir)
	return ext, newPerm, true
}

// AclAllows is HDFS's checkAccessAcl: whether user (a member of the groups
// inGroup accepts) has all of bits on an inode with owner, group, perm and
// extended entries ext. The owner gets the owner bits; a named user entry
// its entry masked; the owning group and named groups, if any matches with
// the bits masked, grant, and a match that grants nothing denies; else
// other. An inode with a default ACL and no extended access entries is
// checked by its bits alone. Superusers are the caller's business.
func AclAllows(owner, group string, perm Perm, ext []AclEntry, user string, inGroup func(string) bool, bits Perm) bool {
	if user == owner {
		return perm>>6&bits == bits
	}
	if len(ext) == 0 || ext[0].Scope != AclAccess {
		// A default ACL alone: the bits, as without an ACL (the group bits
		// are the group's, there being no mask).
		if inGroup(group) {
			return perm>>3&bits == bits
		}
		return perm&bits == bits
	}
	mask := perm >> 3 & 7
	matched := false
	for _, e := range ext {
		if e.Scope != AclAccess {
			break
		}
		switch e.Type {
		case AclUser:
			if e.Name == user {
				return e.Perm&mask&bits == bits
			}
		case AclGroup:
			g := e.Name
			if g == "" {
				g = group
			}
			if inGroup(g) {
				if e.Perm&mask&bits == bits {
					return true
				}
				matched = true
			}
		}
	}
	if matched {
		return false
	}
	return perm&bits == bits
}

// AclStatusEntries returns what GETACLSTATUS shows of the extended entries
// (HDFS: the feature's entries as they are).
func AclStatusEntries(ext []AclEntry) []AclEntry { return slices.Clone(ext) }
