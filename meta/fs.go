package meta

import "context"

// FileCreator is an optional capability of a FileSystem: CreateFile makes a
// complete file holding data in one atomic, durable step — create, write and
// close — the way HopsFS stores a small file with its metadata in one
// transaction. data must fit the server's inline threshold. Callers find the
// capability by type assertion and otherwise use Create, Write and Complete
// (CreateFile below), which gives the same result in three steps.
//
// It stays optional because MemFS lacks it: MemFS stands in for the engine
// in tests of the edges, and without it those tests take the three-step
// path that a file system without inline files makes them take.
type FileCreator interface {
	CreateFile(ctx context.Context, u User, path string, opts CreateOptions, data []byte) (*FileStatus, error)
}

// CreateFile makes a complete file holding data on fs: in one step when fs is
// a FileCreator, else with Create, Write (in chunks of at most 64 KiB) and
// Complete, leased to opts.Client.
func CreateFile(ctx context.Context, fs FileSystem, u User, path string, opts CreateOptions, data []byte) (*FileStatus, error) {
	if fc, ok := fs.(FileCreator); ok {
		return fc.CreateFile(ctx, u, path, opts, data)
	}
	if _, err := fs.Create(ctx, u, path, opts); err != nil {
		return nil, err
	}
	for off := 0; off < len(data); {
		n := min(len(data)-off, 64<<10)
		if err := fs.Write(ctx, u, path, opts.Client, int64(off), data[off:off+n]); err != nil {
			return nil, err
		}
		off += n
	}
	return fs.Complete(ctx, u, path, opts.Client)
}

// RecursiveAttrs is an optional capability of a FileSystem: chmod -R and
// chown -R done by the server in one operation, rather than by the client
// walking the tree with SetPermission and SetOwner on every entry (what HDFS's
// shell does, and what callers do when the capability is missing; found by
// type assertion).
//
// Every file and directory of the subtree at path, path itself included
// (symbolic links below it keep theirs, as the shell's walk skips them),
// gets the mode
// (SetPermissionRecursive; on an inode with an ACL the group bits are its
// mask, as with SetPermission) or the owner and group (SetOwnerRecursive;
// empty means unchanged). The permission rule is SetPermission's and
// SetOwner's, applied to every inode, and checked on all of them before any
// changes: a refusal changes nothing and names the first path refused.
// Unlike HDFS's walk, the change is atomic: no other operation sees the
// subtree half changed, and once one has returned nil the whole subtree has
// changed, durably. On a file or an empty directory they are SetPermission
// and SetOwner.
//
// It stays optional because WebHDFS has no such operation (its client
// cannot offer the atomic change) and MemFS lacks it, which also keeps the
// callers' walk tested.
type RecursiveAttrs interface {
	SetPermissionRecursive(ctx context.Context, u User, path string, perm Perm) error
	SetOwnerRecursive(ctx context.Context, u User, path, owner, group string) error
}

// User is the caller of an operation, as HDFS's "simple" authentication gives it:
// a user name the server trusts. The server resolves the user's groups itself.
// An empty name is nobody: the engine refuses it (ErrPermission).
type User struct {
	Name string
}

// Superusers is an optional capability of a FileSystem: it tells whether a
// user has every right. Edges that serve operations outside the FileSystem
// contract (fsck) find it by type assertion and refuse those operations to
// other users, and to everyone when the FileSystem cannot tell.
//
// It stays optional because a client cannot tell: the superuser is the
// server's configuration, and neither the RPC nor WebHDFS carries it.
type Superusers interface {
	IsSuperuser(u User) bool
}

// FileSystem is the namespace contract. The engine (package namespace) implements
// it in process; the client (package client) implements it over the RPC; the
// WebHDFS gateway, the CLI and the benchmark driver are written against it.
// Package meta/fstest checks an implementation against it.
//
// What every implementation keeps is here; the optional capabilities beside
// it (FileCreator, RecursiveAttrs, Superusers, AccessChecker, SharedLister,
// DefersOwnerCheck) are what some implementation cannot offer, each saying
// which and why, and callers find them by type assertion.
//
// Every method is safe for concurrent use, blocks at most until ctx is done, and
// is atomic: it happens entirely or not at all, and when it returns nil the
// change is durable. Errors are *OpError values wrapping one sentinel (see Kind).
// Paths must be absolute; see CleanPath for what is accepted.
type FileSystem interface {
	// Mkdirs creates dir and any missing ancestors (mkdir -p). Existing
	// directories on the way are fine; an existing non-directory is ErrExists
	// (the last component) or ErrNotDir (an ancestor).
	Mkdirs(ctx context.Context, u User, dir string, perm Perm) error
	// MkdirsUnmasked is Mkdirs with, beside the mode perm the client's umask
	// gave, the mode unmasked it asked for before that umask. A new
	// directory whose parent has a default ACL takes its ACL and mode from
	// unmasked instead of perm (HDFS-6962, as CreateOptions.Unmasked for
	// files); missing ancestors it creates are treated alike, with the
	// implicit u+wx of Mkdirs applied to perm only. Where no default ACL
	// applies it is Mkdirs with perm.
	MkdirsUnmasked(ctx context.Context, u User, dir string, perm, unmasked Perm) error
	// Create makes a new file under construction, leased to opts.Client, and
	// returns its status. Readers see it with length 0 until Complete.
	Create(ctx context.Context, u User, path string, opts CreateOptions) (*FileStatus, error)
	// Append reopens a complete file for writing, leased to client. New data
	// is invisible to readers until Complete.
	Append(ctx context.Context, u User, path, client string) (*FileStatus, error)
	// Write adds data at offset to a file whose lease client holds. Writes are
	// sequential: offset must equal the file's written length so far. A write
	// that would take the file past the server's size limit is ErrTooLarge.
	Write(ctx context.Context, u User, path, client string, offset int64, data []byte) error
	// Complete closes a file: all written data becomes visible and the lease is
	// released.
	Complete(ctx context.Context, u User, path, client string) (*FileStatus, error)
	// Read returns up to length bytes of the completed content from offset
	// (fewer at the end of the file; none past it).
	Read(ctx context.Context, u User, path string, offset, length int64) ([]byte, error)
	// Stat returns the status of path without following a final symlink.
	Stat(ctx context.Context, u User, path string) (*FileStatus, error)
	// List returns entries of dir whose names sort after startAfter, at most
	// limit (the server caps it). Listing a file returns the file itself.
	List(ctx context.Context, u User, dir, startAfter string, limit int) (*Listing, error)
	// Delete removes path; a non-empty directory needs recursive. Deleting the
	// root is refused.
	Delete(ctx context.Context, u User, path string, recursive bool) error
	// Rename moves src to dst atomically. See RenameOptions for what happens
	// when dst exists. A directory is never moved into its own subtree.
	Rename(ctx context.Context, u User, src, dst string, opts RenameOptions) error
	// SetPermission changes the mode bits; only the owner or a superuser may.
	SetPermission(ctx context.Context, u User, path string, perm Perm) error
	// SetOwner changes owner and/or group (empty means unchanged). Only a
	// superuser changes the owner; the owner may change the group to one of
	// its own groups.
	SetOwner(ctx context.Context, u User, path, owner, group string) error
	// SetTimes sets modification and access time in ms; -1 leaves one as is.
	SetTimes(ctx context.Context, u User, path string, mtime, atime int64) error
	// SetReplication changes a file's replication factor.
	SetReplication(ctx context.Context, u User, path string, replication uint16) error
	// Truncate cuts a complete file to newLength, which may not exceed its
	// length.
	Truncate(ctx context.Context, u User, path string, newLength int64) error
	// Concat appends the contents of srcs, in order, to target and deletes
	// them. All must be complete files in target's directory.
	Concat(ctx context.Context, u User, target string, srcs []string) error
	// ContentSummary counts the subtree rooted at path.
	ContentSummary(ctx context.Context, u User, path string) (*ContentSummary, error)
	// SetQuota sets a directory's namespace quota (inodes) and space quota
	// (bytes times replication); -1 clears one, 0 leaves it unchanged. Superuser only.
	SetQuota(ctx context.Context, u User, dir string, nsQuota, spaceQuota int64) error
	// CreateSymlink makes link point at target (any string; it is not resolved).
	CreateSymlink(ctx context.Context, u User, target, link string, createParent bool) error
	// RenewLease extends every lease that client holds.
	RenewLease(ctx context.Context, u User, client string) error
	// Defaults returns the server's defaults.
	Defaults(ctx context.Context) (*ServerDefaults, error)

	// POSIX ACLs and extended attributes, as HDFS keeps them.
	ACLs
	XAttrs
}

// SharedLister is a FileSystem that can answer a listing with a page it
// keeps (its metadata cache's) instead of a copy for the caller:
// ListShared is List, except that the caller must not change the listing
// or its entries. An edge that only encodes the page (the RPC server)
// uses it, and saves the copy that List makes: for a cached page of a
// hundred entries, most of the listing's cost (namespace's
// BenchmarkCachedReads).
//
// It stays optional because only a file system that keeps pages (the
// engine's cache) has one to share; the others' List already returns a
// copy.
type SharedLister interface {
	ListShared(ctx context.Context, u User, dir, startAfter string, limit int) (*Listing, error)
}

// ListToRead is fs.List for a caller that only reads the page (to encode
// it): fs's ListShared when fs is a SharedLister.
func ListToRead(ctx context.Context, fs FileSystem, u User, dir, startAfter string, limit int) (*Listing, error) {
	if sl, ok := fs.(SharedLister); ok {
		return sl.ListShared(ctx, u, dir, startAfter, limit)
	}
	return fs.List(ctx, u, dir, startAfter, limit)
}
