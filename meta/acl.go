package meta

import "context"

// ACLs and extended attributes, as HDFS defines them (HDFS's
// AclEntry/AclStatus and XAttr). Every FileSystem keeps them (ACLs and
// XAttrs are part of it); a client of a protocol that cannot carry them
// answers ErrUnsupported.

// AclScope says whether an entry is part of the access ACL (checked on
// access) or of a directory's default ACL (copied to new children).
type AclScope uint8

const (
	AclAccess AclScope = iota
	AclDefault
)

// AclType is the kind of an ACL entry.
type AclType uint8

const (
	AclUser  AclType = iota // the owner (Name empty) or a named user
	AclGroup                // the owning group (Name empty) or a named group
	AclMask                 // the upper bound of named users', groups' and the owning group's rights
	AclOther                // everyone else
)

// AclEntry is one entry of an ACL. Perm holds rwx in its low three bits
// (4 read, 2 write, 1 execute), HDFS's FsAction.
type AclEntry struct {
	Scope AclScope
	Type  AclType
	Name  string
	Perm  Perm
}

// AclStatus is what GETACLSTATUS returns: the inode's owner, group and
// permission, and its extended entries only (as HDFS returns them: the
// named users and groups of the access ACL, the owning group's entry when
// a mask exists, and the whole default ACL; never the owner, mask or other
// entries of the access ACL, which the permission bits carry).
type AclStatus struct {
	Owner     string
	Group     string
	Perm      Perm // the permission bits, the sticky bit included (with a mask, the group bits are the mask)
	StickyBit bool
	Entries   []AclEntry
}

// MaxAclEntries is HDFS's limit on the entries of one ACL (access and
// default counted apart).
const MaxAclEntries = 32

// ACLs is the part of a FileSystem that keeps POSIX ACLs.
// Every operation checks the caller as HDFS does: changing an ACL takes the
// owner or a superuser; reading it takes traversal of the path.
type ACLs interface {
	ModifyAclEntries(ctx context.Context, u User, path string, entries []AclEntry) error
	RemoveAclEntries(ctx context.Context, u User, path string, entries []AclEntry) error
	RemoveDefaultAcl(ctx context.Context, u User, path string) error
	RemoveAcl(ctx context.Context, u User, path string) error
	SetAcl(ctx context.Context, u User, path string, entries []AclEntry) error
	GetAclStatus(ctx context.Context, u User, path string) (*AclStatus, error)
}

// AccessChecker is the optional capability of a FileSystem that answers
// HDFS's checkAccess (FileSystem.access, WebHDFS CHECKACCESS) with the
// same rules as its own permission check, ACLs included: nil when u may
// search every ancestor of path and has mode (rwx bits: 4 read, 2 write,
// 1 execute) on path itself; an ErrPermission error when not; ErrNotFound
// when path does not exist. A superuser has every access.
//
// It stays optional because only the engine has it: the RPC carries no
// checkAccess call, so the client cannot answer it, and MemFS checks no
// permissions to answer with. The WebHDFS gateway answers CHECKACCESS
// unsupported where it is missing.
type AccessChecker interface {
	CheckAccess(ctx context.Context, u User, path string, mode Perm) error
}

// XAttr is one extended attribute: Name carries its namespace prefix
// ("user.k", "trusted.k", "security.k", "system.k", "raw.k").
type XAttr struct {
	Name  string
	Value []byte
}

// XAttrSetFlag says what SetXAttr may do: create a new attribute, replace an
// existing one, or either (XAttrCreate|XAttrReplace).
type XAttrSetFlag uint8

const (
	XAttrCreate XAttrSetFlag = 1 << iota
	XAttrReplace
)

// HDFS's limits: dfs.namenode.fs-limits.max-xattrs-per-inode and
// max-xattr-size (name without its namespace prefix plus value, in bytes).
const (
	MaxXAttrsPerInode = 32
	MaxXAttrSize      = 16384
)

// XAttrs is the part of a FileSystem that keeps extended attributes, with HDFS's permission rules per namespace.
type XAttrs interface {
	SetXAttr(ctx context.Context, u User, path string, x XAttr, flag XAttrSetFlag) error
	// GetXAttrs returns the named attributes, or all the caller may see
	// when names is empty. A named attribute that does not exist is an
	// error (HDFS: "At least one of the attributes provided was not found").
	GetXAttrs(ctx context.Context, u User, path string, names []string) ([]XAttr, error)
	// ListXAttrs returns the names of the attributes the caller may see.
	ListXAttrs(ctx context.Context, u User, path string) ([]string, error)
	RemoveXAttr(ctx context.Context, u User, path, name string) error
}
