package rpc

import (
	"errors"
	"slices"
	"strings"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/meta"
)

// This file is the one place where wire messages and meta types meet.

// StatusToProto converts a meta.FileStatus to its wire form.
func StatusToProto(s *meta.FileStatus) *api.FileStatus {
	if s == nil {
		return nil
	}
	p := &api.FileStatus{}
	statusToProto(s, p)
	return p
}

// statusToProto fills p, which is zero, from s. The fields are set one by
// one: api.FileStatus holds a lock-free internal state that must not be
// copied.
func statusToProto(s *meta.FileStatus, p *api.FileStatus) {
	p.Path = s.Path
	p.FileId = s.FileID
	p.Type = uint32(s.Type)
	p.Perm = uint32(s.Perm)
	p.Owner = s.Owner
	p.Group = s.Group
	p.Length = s.Length
	p.Replication = uint32(s.Replication)
	p.BlockSize = s.BlockSize
	p.Mtime = s.Mtime
	p.Atime = s.Atime
	p.ChildrenNum = s.ChildrenNum
	p.Symlink = s.Symlink
	p.UnderConstruction = s.UnderConstruction
	p.NsQuota = s.NsQuota
	p.SpaceQuota = s.SpaceQuota
	p.AclBit = s.AclBit
}

// StatusFromProto converts a wire FileStatus into dst.
func StatusFromProto(p *api.FileStatus, dst *meta.FileStatus) {
	*dst = meta.FileStatus{
		Path:              p.GetPath(),
		FileID:            p.GetFileId(),
		Type:              meta.FileType(p.GetType()),
		Perm:              meta.Perm(p.GetPerm()),
		Owner:             p.GetOwner(),
		Group:             p.GetGroup(),
		Length:            p.GetLength(),
		Replication:       uint16(p.GetReplication()),
		BlockSize:         p.GetBlockSize(),
		Mtime:             p.GetMtime(),
		Atime:             p.GetAtime(),
		ChildrenNum:       p.GetChildrenNum(),
		Symlink:           p.GetSymlink(),
		UnderConstruction: p.GetUnderConstruction(),
		NsQuota:           p.GetNsQuota(),
		SpaceQuota:        p.GetSpaceQuota(),
		AclBit:            p.GetAclBit(),
	}
}

// ListingToProto converts a page of the listing of dir to its wire form.
// Each entry's path goes as its name relative to dir, as HDFS sends a
// listing's local names: "" for dir itself (the listing of a file), the
// entry's name for a child, the full path for anything else (never sent by
// this server). A page of a deep directory is then a fraction of the bytes.
func ListingToProto(dir string, l *meta.Listing) *api.Listing {
	if l == nil {
		return &api.Listing{}
	}
	// From the pool, with the entries of an earlier page to reuse; the server
	// returns it once the response is encoded.
	out := api.ListingFromVTPool()
	out.Remaining = l.Remaining
	out.Entries = slices.Grow(out.Entries[:0], len(l.Entries))[:len(l.Entries)]
	clean, err := meta.CleanPath("list", dir)
	prefix := clean + meta.PathSep
	if clean == meta.RootPath {
		prefix = clean
	}
	for i := range l.Entries {
		st := out.Entries[i]
		if st == nil {
			st = api.FileStatusFromVTPool()
		}
		statusToProto(&l.Entries[i], st)
		switch p := st.Path; {
		case err != nil:
		case p == clean:
			st.Path = ""
		case len(p) > len(prefix) && p[:len(prefix)] == prefix && !strings.Contains(p[len(prefix):], meta.PathSep):
			st.Path = p[len(prefix):]
		}
		out.Entries[i] = st
	}
	return out
}

// ListingFromProto converts a wire page of the listing of dir, making each
// entry's path whole again (see ListingToProto). Every string it keeps is its
// own copy, so p may alias a frame that is reused after the call (see
// rpc.Conn.CallView); an owner or group equal to the previous entry's shares
// that entry's copy.
func ListingFromProto(dir string, p *api.Listing) *meta.Listing {
	entries := p.GetEntries()
	out := &meta.Listing{Remaining: p.GetRemaining(), Entries: make([]meta.FileStatus, len(entries))}
	clean, err := meta.CleanPath("list", dir)
	if err != nil {
		clean = strings.Clone(dir)
	}
	// The entries' paths are slices of one string (meta.PagePaths), which
	// also copies each name out of the frame.
	prefix := meta.JoinPath(clean, "")
	var paths meta.PagePaths
	paths.Grow(len(entries), len(prefix)+24)
	var owner, group string
	for i, e := range entries {
		st := &out.Entries[i]
		StatusFromProto(e, st)
		switch name := st.Path; {
		case name == "":
			paths.Add(clean)
		case name[0] != '/':
			paths.Add(prefix, name)
		default:
			paths.Add(name)
		}
		if st.Owner != owner {
			owner = strings.Clone(st.Owner)
		}
		if st.Group != group {
			group = strings.Clone(st.Group)
		}
		st.Owner, st.Group = owner, group
		if st.Symlink != "" {
			st.Symlink = strings.Clone(st.Symlink)
		}
	}
	paths.SetPaths(out.Entries)
	return out
}

// SummaryToProto converts a content summary to its wire form.
func SummaryToProto(s *meta.ContentSummary) *api.ContentSummary {
	if s == nil {
		return &api.ContentSummary{}
	}
	return &api.ContentSummary{
		Length: s.Length, FileCount: s.FileCount, DirectoryCount: s.DirectoryCount,
		NsQuota: s.NsQuota, NsConsumed: s.NsConsumed, SpaceQuota: s.SpaceQuota, SpaceConsumed: s.SpaceConsumed,
	}
}

// SummaryFromProto converts a wire content summary.
func SummaryFromProto(p *api.ContentSummary) *meta.ContentSummary {
	return &meta.ContentSummary{
		Length: p.GetLength(), FileCount: p.GetFileCount(), DirectoryCount: p.GetDirectoryCount(),
		NsQuota: p.GetNsQuota(), NsConsumed: p.GetNsConsumed(), SpaceQuota: p.GetSpaceQuota(), SpaceConsumed: p.GetSpaceConsumed(),
	}
}

// DefaultsToProto converts server defaults to their wire form.
func DefaultsToProto(d *meta.ServerDefaults) *api.ServerDefaults {
	if d == nil {
		return &api.ServerDefaults{}
	}
	return &api.ServerDefaults{
		BlockSize: d.BlockSize, Replication: uint32(d.Replication), InlineThreshold: d.InlineThreshold,
		LeaseSoftLimitMs: d.LeaseSoftLimitMs, LeaseHardLimitMs: d.LeaseHardLimitMs,
	}
}

// DefaultsFromProto converts wire server defaults.
func DefaultsFromProto(p *api.ServerDefaults) *meta.ServerDefaults {
	return &meta.ServerDefaults{
		BlockSize: p.GetBlockSize(), Replication: uint16(p.GetReplication()), InlineThreshold: p.GetInlineThreshold(),
		LeaseSoftLimitMs: p.GetLeaseSoftLimitMs(), LeaseHardLimitMs: p.GetLeaseHardLimitMs(),
	}
}

// FsckToProto converts an fsck report to its wire form.
func FsckToProto(r *meta.FsckReport) *api.FsckReport {
	if r == nil {
		return &api.FsckReport{}
	}
	return &api.FsckReport{
		Inodes: r.Inodes, Directories: r.Directories, Files: r.Files, Symlinks: r.Symlinks,
		Bytes: r.Bytes, DataChunks: r.DataChunks, Problems: r.Problems, Blocks: r.Blocks,
	}
}

// FsckFromProto converts a wire fsck report.
func FsckFromProto(p *api.FsckReport) *meta.FsckReport {
	return &meta.FsckReport{
		Inodes: p.GetInodes(), Directories: p.GetDirectories(), Files: p.GetFiles(), Symlinks: p.GetSymlinks(),
		Bytes: p.GetBytes(), DataChunks: p.GetDataChunks(), Problems: p.GetProblems(), Blocks: p.GetBlocks(),
	}
}

// ErrorToProto converts an error returned by a FileSystem method to the wire
// Error. The kind comes from meta.KindOf; op, path and detail from the
// *meta.OpError it is or wraps. When err is not an *OpError, op and path
// (those of the request) are used so that the error still names them, and an
// error of unknown kind carries its text as the detail.
func ErrorToProto(err error, op, path string) *api.Error {
	kind := meta.KindOf(err)
	e := &api.Error{Kind: api.Kind(kind), Op: op, Path: path}
	var oe *meta.OpError
	if errors.As(err, &oe) {
		e.Op, e.Path, e.Detail = oe.Op, oe.Path, oe.Detail
		if kind == meta.KindUnknown && oe.Err != nil {
			e.Detail = joinDetail(oe.Err.Error(), oe.Detail)
		}
		return e
	}
	if kind == meta.KindUnknown {
		e.Detail = err.Error()
	} else if err != meta.Sentinel(kind) {
		// A sentinel wrapped in some other error: keep its text as detail.
		e.Detail = err.Error()
	}
	return e
}

func joinDetail(a, b string) string {
	if b == "" {
		return a
	}
	return a + ": " + b
}

// RemoteError is the error an *meta.OpError from the wire wraps when the
// server's error had no known kind: it carries the server's error text.
type RemoteError struct{ Msg string }

func (e *RemoteError) Error() string { return e.Msg }

// ErrorFromProto converts a wire Error into an *meta.OpError wrapping the
// sentinel of its kind (errors.Is(err, meta.ErrNotFound) works across the
// wire). A kind unknown to this build wraps a *RemoteError with the detail.
func ErrorFromProto(e *api.Error) *meta.OpError {
	// Copies: e may alias a frame that is reused (rpc.Conn.CallView).
	oe := &meta.OpError{Op: strings.Clone(e.GetOp()), Path: strings.Clone(e.GetPath()), Detail: strings.Clone(e.GetDetail())}
	if s := meta.Sentinel(meta.Kind(e.GetKind())); s != nil {
		oe.Err = s
	} else {
		msg := oe.Detail
		if msg == "" {
			msg = meta.Kind(e.GetKind()).String()
		}
		oe.Err, oe.Detail = &RemoteError{Msg: msg}, ""
	}
	return oe
}

// AclEntriesToProto converts ACL entries to the wire.
func AclEntriesToProto(es []meta.AclEntry) []*api.AclEntry {
	out := make([]*api.AclEntry, len(es))
	for i, e := range es {
		out[i] = &api.AclEntry{Scope: uint32(e.Scope), Type: uint32(e.Type), Name: e.Name, Perm: uint32(e.Perm)}
	}
	return out
}

// AclEntriesFromProto converts wire ACL entries; a scope, type or
// permission out of range is an invalid argument, not a silent cut.
func AclEntriesFromProto(op, path string, ps []*api.AclEntry) ([]meta.AclEntry, error) {
	out := make([]meta.AclEntry, len(ps))
	for i, p := range ps {
		if p.GetScope() > uint32(meta.AclDefault) || p.GetType() > uint32(meta.AclOther) || p.GetPerm() > 7 {
			return nil, meta.Errorf(op, path, meta.ErrInvalidArgument, "ACL entry %d out of range (scope %d, type %d, perm %o)", i, p.GetScope(), p.GetType(), p.GetPerm())
		}
		out[i] = meta.AclEntry{Scope: meta.AclScope(p.GetScope()), Type: meta.AclType(p.GetType()), Name: p.GetName(), Perm: meta.Perm(p.GetPerm())}
	}
	return out, nil
}

// XAttrsToProto converts extended attributes to the wire.
func XAttrsToProto(xs []meta.XAttr) []*api.XAttr {
	out := make([]*api.XAttr, len(xs))
	for i, x := range xs {
		out[i] = &api.XAttr{Name: x.Name, Value: x.Value}
	}
	return out
}
