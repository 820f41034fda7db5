package hadooprpc

import (
	"context"
	"errors"
	"math"
	"strings"

	"google.golang.org/protobuf/proto"

	h "github.com/nimbus-fs/nimbus/api/hadoop"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/webhdfs/wire"
)

// NewServer returns a server of ClientNamenodeProtocol's metadata methods
// over fs; it fails only when its metrics cannot be registered.
func NewServer(fs meta.FileSystem, cfg Config) (*Server, error) {
	n := &namenode{fs: fs, listBatch: 1000}
	m := map[string]handler{}
	add(m, "getFileInfo", n.getFileInfo)
	add(m, "getFileLinkInfo", n.getFileLinkInfo)
	add(m, "getListing", n.getListing)
	add(m, "mkdirs", n.mkdirs)
	add(m, "delete", n.delete)
	add(m, "rename", n.rename)
	add(m, "rename2", n.rename2)
	add(m, "setPermission", n.setPermission)
	add(m, "setOwner", n.setOwner)
	add(m, "setTimes", n.setTimes)
	add(m, "setReplication", n.setReplication)
	add(m, "getContentSummary", n.getContentSummary)
	add(m, "getQuotaUsage", n.getQuotaUsage)
	add(m, "setQuota", n.setQuota)
	add(m, "getServerDefaults", n.getServerDefaults)
	add(m, "getFsStats", n.getFsStats)
	add(m, "getLinkTarget", n.getLinkTarget)
	add(m, "createSymlink", n.createSymlink)
	add(m, "renewLease", n.renewLease)
	add(m, "modifyAclEntries", n.modifyAclEntries)
	add(m, "removeAclEntries", n.removeAclEntries)
	add(m, "removeDefaultAcl", n.removeDefaultAcl)
	add(m, "removeAcl", n.removeAcl)
	add(m, "setAcl", n.setAcl)
	add(m, "getAclStatus", n.getAclStatus)
	add(m, "setXAttr", n.setXAttr)
	add(m, "getXAttrs", n.getXAttrs)
	add(m, "listXAttrs", n.listXAttrs)
	add(m, "removeXAttr", n.removeXAttr)
	add(m, "isFileClosed", n.isFileClosed)
	add(m, "getPreferredBlockSize", n.getPreferredBlockSize)
	if _, ok := fs.(meta.AccessChecker); ok {
		add(m, "checkAccess", n.checkAccess)
	}
	// One active NameNode per address, always in sync with itself: what a
	// client using HDFS's HA and observer-read proxies asks first.
	add(m, "getHAServiceState", func(context.Context, meta.User, *h.HAServiceStateRequestProto) (*h.HAServiceStateResponseProto, error) {
		return &h.HAServiceStateResponseProto{State: h.HAServiceStateProto_ACTIVE.Enum()}, nil
	})
	add(m, "msync", func(context.Context, meta.User, *h.MsyncRequestProto) (*h.MsyncResponseProto, error) {
		return &h.MsyncResponseProto{}, nil
	})
	// Features Nimbus does not have, answered as HDFS answers when they are
	// not in use.
	add(m, "getEZForPath", func(context.Context, meta.User, *h.GetEZForPathRequestProto) (*h.GetEZForPathResponseProto, error) {
		return &h.GetEZForPathResponseProto{}, nil
	})
	add(m, "listEncryptionZones", func(context.Context, meta.User, *h.ListEncryptionZonesRequestProto) (*h.ListEncryptionZonesResponseProto, error) {
		return &h.ListEncryptionZonesResponseProto{HasMore: proto.Bool(false)}, nil
	})
	add(m, "getErasureCodingPolicy", func(context.Context, meta.User, *h.GetErasureCodingPolicyRequestProto) (*h.GetErasureCodingPolicyResponseProto, error) {
		return &h.GetErasureCodingPolicyResponseProto{}, nil
	})
	add(m, "getErasureCodingPolicies", func(context.Context, meta.User, *h.GetErasureCodingPoliciesRequestProto) (*h.GetErasureCodingPoliciesResponseProto, error) {
		return &h.GetErasureCodingPoliciesResponseProto{}, nil
	})
	add(m, "getStoragePolicy", func(ctx context.Context, u meta.User, r *h.GetStoragePolicyRequestProto) (*h.GetStoragePolicyResponseProto, error) {
		if _, err := fs.Stat(ctx, u, r.GetPath()); err != nil {
			return nil, err
		}
		return &h.GetStoragePolicyResponseProto{StoragePolicy: hotPolicy()}, nil
	})
	add(m, "getStoragePolicies", func(context.Context, meta.User, *h.GetStoragePoliciesRequestProto) (*h.GetStoragePoliciesResponseProto, error) {
		return &h.GetStoragePoliciesResponseProto{Policies: []*h.BlockStoragePolicyProto{hotPolicy()}}, nil
	})
	add(m, "getSnapshottableDirListing", func(context.Context, meta.User, *h.GetSnapshottableDirListingRequestProto) (*h.GetSnapshottableDirListingResponseProto, error) {
		return &h.GetSnapshottableDirListingResponseProto{}, nil
	})
	add(m, "getDelegationToken", func(context.Context, meta.User, *h.GetDelegationTokenRequestProto) (*h.GetDelegationTokenResponseProto, error) {
		return &h.GetDelegationTokenResponseProto{}, nil // security off: no token
	})
	return newServer(cfg, m)
}

// add registers f as method name: the request message is decoded into a
// fresh Req.
func add[Req, Resp proto.Message](m map[string]handler, name string, f func(context.Context, meta.User, Req) (Resp, error)) {
	m[name] = func(ctx context.Context, u meta.User, body []byte) (proto.Message, error) {
		var zero Req
		req := zero.ProtoReflect().New().Interface().(Req)
		if err := proto.Unmarshal(body, req); err != nil {
			return nil, &RemoteError{Class: "org.apache.hadoop.ipc.RpcServerException", Msg: name + ": cannot decode the request: " + err.Error(),
				Detail: h.RpcResponseHeaderProto_ERROR_RPC_SERVER}
		}
		resp, err := f(ctx, u, req)
		if err != nil {
			return nil, err
		}
		return resp, nil
	}
}

// toRemote gives err its Java exception: a meta error's kind names it by
// the table WebHDFS uses (webhdfs/wire), anything else is a RuntimeException.
func toRemote(err error) *RemoteError {
	var re *RemoteError
	if errors.As(err, &re) {
		return re
	}
	ex := wire.ExceptionOf(meta.KindOf(err))
	return &RemoteError{Class: ex.ClassName, Msg: err.Error(), Detail: h.RpcResponseHeaderProto_ERROR_APPLICATION}
}

type namenode struct {
	fs        meta.FileSystem
	listBatch int
}

func status(st *meta.FileStatus, name string) *h.HdfsFileStatusProto {
	ft := h.HdfsFileStatusProto_IS_FILE
	switch st.Type {
	case meta.TypeDir:
		ft = h.HdfsFileStatusProto_IS_DIR
	case meta.TypeSymlink:
		ft = h.HdfsFileStatusProto_IS_SYMLINK
	}
	p := &h.HdfsFileStatusProto{
		FileType:         &ft,
		Path:             []byte(name),
		Length:           proto.Uint64(uint64(max(st.Length, 0))),
		Permission:       &h.FsPermissionProto{Perm: proto.Uint32(uint32(st.Perm & meta.PermMask))},
		Owner:            proto.String(st.Owner),
		Group:            proto.String(st.Group),
		ModificationTime: proto.Uint64(uint64(max(st.Mtime, 0))),
		AccessTime:       proto.Uint64(uint64(max(st.Atime, 0))),
		BlockReplication: proto.Uint32(uint32(st.Replication)),
		Blocksize:        proto.Uint64(uint64(max(st.BlockSize, 0))),
		FileId:           proto.Uint64(st.FileID),
		ChildrenNum:      proto.Int32(int32(min(st.ChildrenNum, math.MaxInt32))),
		StoragePolicy:    proto.Uint32(0),
		Flags:            proto.Uint32(0),
	}
	if st.Type == meta.TypeSymlink {
		p.Symlink = []byte(st.Symlink)
	}
	if st.AclBit {
		p.Flags = proto.Uint32(uint32(h.HdfsFileStatusProto_HAS_ACL))
	}
	return p
}

// missing says that a lookup found nothing: the path is not there, or goes
// through a file. HDFS's getFileInfo and getListing answer null for both
// (Hadoop's exists() relies on it); only writes report
// ParentNotDirectoryException.
func missing(err error) bool {
	k := meta.KindOf(err)
	return err != nil && (k == meta.KindNotFound || k == meta.KindNotDir)
}

func (n *namenode) getFileInfo(ctx context.Context, u meta.User, r *h.GetFileInfoRequestProto) (*h.GetFileInfoResponseProto, error) {
	st, err := n.fs.Stat(ctx, u, r.GetSrc())
	if missing(err) {
		return &h.GetFileInfoResponseProto{}, nil // HDFS answers null
	}
	if err != nil {
		return nil, err
	}
	return &h.GetFileInfoResponseProto{Fs: status(st, "")}, nil
}

// getFileLinkInfo: meta's Stat does not follow a final symbolic link, so it
// answers both.
func (n *namenode) getFileLinkInfo(ctx context.Context, u meta.User, r *h.GetFileLinkInfoRequestProto) (*h.GetFileLinkInfoResponseProto, error) {
	st, err := n.fs.Stat(ctx, u, r.GetSrc())
	if missing(err) {
		return &h.GetFileLinkInfoResponseProto{}, nil
	}
	if err != nil {
		return nil, err
	}
	return &h.GetFileLinkInfoResponseProto{Fs: status(st, "")}, nil
}

func (n *namenode) getListing(ctx context.Context, u meta.User, r *h.GetListingRequestProto) (*h.GetListingResponseProto, error) {
	src := r.GetSrc()
	st, err := n.fs.Stat(ctx, u, src)
	if missing(err) {
		return &h.GetListingResponseProto{}, nil // HDFS answers null: the client throws FileNotFoundException
	}
	if err != nil {
		return nil, err
	}
	if st.Type != meta.TypeDir {
		// HDFS lists a file as itself, named by its full path's last component.
		return &h.GetListingResponseProto{DirList: &h.DirectoryListingProto{
			PartialListing: []*h.HdfsFileStatusProto{status(st, "")}, RemainingEntries: proto.Uint32(0)}}, nil
	}
	page, err := meta.ListToRead(ctx, n.fs, u, src, string(r.GetStartAfter()), n.listBatch)
	if err != nil {
		return nil, err
	}
	dl := &h.DirectoryListingProto{RemainingEntries: proto.Uint32(uint32(min(max(page.Remaining, 0), math.MaxUint32)))}
	for i := range page.Entries {
		e := &page.Entries[i]
		p := status(e, e.Name())
		if r.GetNeedLocation() && e.Type == meta.TypeFile {
			// Hadoop's client takes a file listed with needLocation
			// for a located status (listLocatedStatus casts it), so
			// every file carries locations. Block locations are the
			// data path's (not served on this port yet): the list is
			// empty.
			p.Locations = &h.LocatedBlocksProto{FileLength: proto.Uint64(uint64(max(e.Length, 0))), UnderConstruction: proto.Bool(e.UnderConstruction),
				IsLastBlockComplete: proto.Bool(!e.UnderConstruction)}
		}
		dl.PartialListing = append(dl.PartialListing, p)
	}
	return &h.GetListingResponseProto{DirList: dl}, nil
}

func (n *namenode) mkdirs(ctx context.Context, u meta.User, r *h.MkdirsRequestProto) (*h.MkdirsResponseProto, error) {
	src := r.GetSrc()
	if !r.GetCreateParent() && src != meta.RootPath {
		parent, _ := meta.ParentPath(src)
		if _, err := n.fs.Stat(ctx, u, parent); err != nil {
			if meta.KindOf(err) == meta.KindNotFound {
				return nil, meta.Errorf("mkdirs", src, meta.ErrNotFound, "parent directory %s does not exist", parent)
			}
			return nil, err
		}
	}
	perm := meta.Perm(r.GetMasked().GetPerm()) & meta.PermMask
	var err error
	if r.Unmasked != nil {
		err = n.fs.MkdirsUnmasked(ctx, u, src, perm, meta.Perm(r.GetUnmasked().GetPerm())&meta.PermMask)
	} else {
		err = n.fs.Mkdirs(ctx, u, src, perm)
	}
	if err != nil {
		return nil, err
	}
	return &h.MkdirsResponseProto{Result: proto.Bool(true)}, nil
}

// delete: a missing path is false, as HDFS; so is the root, which HDFS
// never deletes.
func (n *namenode) delete(ctx context.Context, u meta.User, r *h.DeleteRequestProto) (*h.DeleteResponseProto, error) {
	src := r.GetSrc()
	if src == meta.RootPath {
		l, err := n.fs.List(ctx, u, src, "", 1)
		if err != nil {
			return nil, err
		}
		if len(l.Entries) > 0 && !r.GetRecursive() {
			return nil, meta.Errorf("delete", src, meta.ErrNotEmpty, "")
		}
		return &h.DeleteResponseProto{Result: proto.Bool(false)}, nil
	}
	err := n.fs.Delete(ctx, u, src, r.GetRecursive())
	if k := meta.KindOf(err); k == meta.KindNotFound || k == meta.KindNotDir {
		return &h.DeleteResponseProto{Result: proto.Bool(false)}, nil
	}
	if err != nil {
		return nil, err
	}
	return &h.DeleteResponseProto{Result: proto.Bool(true)}, nil
}

// rename is HDFS's first rename: the failures HDFS reports as false (missing
// source or destination parent, existing destination file, a directory into
// itself) are false.
func (n *namenode) rename(ctx context.Context, u meta.User, r *h.RenameRequestProto) (*h.RenameResponseProto, error) {
	src, dst := r.GetSrc(), r.GetDst()
	if src == dst {
		st, err := n.fs.Stat(ctx, u, src)
		if err != nil && meta.KindOf(err) != meta.KindNotFound {
			return nil, err
		}
		return &h.RenameResponseProto{Result: proto.Bool(err == nil && st.Type != meta.TypeDir)}, nil
	}
	err := n.fs.Rename(ctx, u, src, dst, meta.RenameOptions{})
	switch meta.KindOf(err) {
	case meta.KindUnknown:
		if err != nil {
			return nil, err
		}
		return &h.RenameResponseProto{Result: proto.Bool(true)}, nil
	case meta.KindNotFound, meta.KindExists, meta.KindNotDir, meta.KindIsDir, meta.KindNotEmpty, meta.KindInvalidArgument:
		return &h.RenameResponseProto{Result: proto.Bool(false)}, nil
	}
	return nil, err
}

// rename2's failures are exceptions; without OVERWRITE it never moves into
// an existing directory.
func (n *namenode) rename2(ctx context.Context, u meta.User, r *h.Rename2RequestProto) (*h.Rename2ResponseProto, error) {
	src, dst := r.GetSrc(), r.GetDst()
	if !r.GetOverwriteDest() {
		if _, err := n.fs.Stat(ctx, u, dst); err == nil {
			// A resubmission of a rename2 that was applied finds dst
			// there and src gone: the engine answers it from the call's
			// record. With src gone the rename cannot move anything
			// into dst, so letting it through is safe either way.
			rq, ok := meta.RequestFrom(ctx)
			_, serr := n.fs.Stat(ctx, u, src)
			if !ok || !rq.Resubmitted || meta.KindOf(serr) != meta.KindNotFound {
				return nil, meta.Errorf("rename2", dst, meta.ErrExists, "rename destination exists")
			}
		} else if meta.KindOf(err) != meta.KindNotFound {
			return nil, err
		}
	}
	if err := n.fs.Rename(ctx, u, src, dst, meta.RenameOptions{Overwrite: r.GetOverwriteDest()}); err != nil {
		return nil, err
	}
	return &h.Rename2ResponseProto{}, nil
}

func (n *namenode) setPermission(ctx context.Context, u meta.User, r *h.SetPermissionRequestProto) (*h.SetPermissionResponseProto, error) {
	return &h.SetPermissionResponseProto{}, n.fs.SetPermission(ctx, u, r.GetSrc(), meta.Perm(r.GetPermission().GetPerm())&meta.PermMask)
}

func (n *namenode) setOwner(ctx context.Context, u meta.User, r *h.SetOwnerRequestProto) (*h.SetOwnerResponseProto, error) {
	return &h.SetOwnerResponseProto{}, n.fs.SetOwner(ctx, u, r.GetSrc(), r.GetUsername(), r.GetGroupname())
}

// setTimes: HDFS's -1 ("leave unchanged") arrives as the uint64 of -1.
func (n *namenode) setTimes(ctx context.Context, u meta.User, r *h.SetTimesRequestProto) (*h.SetTimesResponseProto, error) {
	return &h.SetTimesResponseProto{}, n.fs.SetTimes(ctx, u, r.GetSrc(), int64(r.GetMtime()), int64(r.GetAtime()))
}

func (n *namenode) setReplication(ctx context.Context, u meta.User, r *h.SetReplicationRequestProto) (*h.SetReplicationResponseProto, error) {
	rep := r.GetReplication()
	if rep > math.MaxUint16 {
		return nil, meta.Errorf("setReplication", r.GetSrc(), meta.ErrInvalidArgument, "replication %d too large", rep)
	}
	st, err := n.fs.Stat(ctx, u, r.GetSrc())
	if meta.KindOf(err) == meta.KindNotFound {
		return &h.SetReplicationResponseProto{Result: proto.Bool(false)}, nil
	}
	if err != nil {
		return nil, err
	}
	if st.Type != meta.TypeFile {
		return &h.SetReplicationResponseProto{Result: proto.Bool(false)}, nil // HDFS: false for a directory
	}
	if err := n.fs.SetReplication(ctx, u, r.GetSrc(), uint16(rep)); err != nil {
		return nil, err
	}
	return &h.SetReplicationResponseProto{Result: proto.Bool(true)}, nil
}

func (n *namenode) getContentSummary(ctx context.Context, u meta.User, r *h.GetContentSummaryRequestProto) (*h.GetContentSummaryResponseProto, error) {
	cs, err := n.fs.ContentSummary(ctx, u, r.GetPath())
	if err != nil {
		return nil, err
	}
	return &h.GetContentSummaryResponseProto{Summary: &h.ContentSummaryProto{
		Length: proto.Uint64(uint64(cs.Length)), FileCount: proto.Uint64(uint64(cs.FileCount)), DirectoryCount: proto.Uint64(uint64(cs.DirectoryCount)),
		Quota: proto.Uint64(uint64(cs.NsQuota)), SpaceConsumed: proto.Uint64(uint64(cs.SpaceConsumed)), SpaceQuota: proto.Uint64(uint64(cs.SpaceQuota)),
	}}, nil
}

func (n *namenode) getQuotaUsage(ctx context.Context, u meta.User, r *h.GetQuotaUsageRequestProto) (*h.GetQuotaUsageResponseProto, error) {
	cs, err := n.fs.ContentSummary(ctx, u, r.GetPath())
	if err != nil {
		return nil, err
	}
	return &h.GetQuotaUsageResponseProto{Usage: &h.QuotaUsageProto{
		FileAndDirectoryCount: proto.Uint64(uint64(cs.FileCount + cs.DirectoryCount)), Quota: proto.Uint64(uint64(cs.NsQuota)),
		SpaceConsumed: proto.Uint64(uint64(cs.SpaceConsumed)), SpaceQuota: proto.Uint64(uint64(cs.SpaceQuota)),
	}}, nil
}

// Hadoop's quota constants: QUOTA_DONT_SET (Long.MAX_VALUE) leaves a quota
// as it is, QUOTA_RESET (-1) removes it.
const quotaDontSet = math.MaxInt64

func (n *namenode) setQuota(ctx context.Context, u meta.User, r *h.SetQuotaRequestProto) (*h.SetQuotaResponseProto, error) {
	if r.StorageType != nil {
		return nil, meta.Errorf("setQuota", r.GetPath(), meta.ErrUnsupported, "storage type quotas are not supported")
	}
	ns, ss := int64(r.GetNamespaceQuota()), int64(r.GetStoragespaceQuota())
	if ns == quotaDontSet || ss == quotaDontSet {
		cs, err := n.fs.ContentSummary(ctx, u, r.GetPath())
		if err != nil {
			return nil, err
		}
		if ns == quotaDontSet {
			ns = cs.NsQuota
		}
		if ss == quotaDontSet {
			ss = cs.SpaceQuota
		}
	}
	return &h.SetQuotaResponseProto{}, n.fs.SetQuota(ctx, u, r.GetPath(), ns, ss)
}

func (n *namenode) getServerDefaults(ctx context.Context, _ meta.User, _ *h.GetServerDefaultsRequestProto) (*h.GetServerDefaultsResponseProto, error) {
	d, err := n.fs.Defaults(ctx)
	if err != nil {
		return nil, err
	}
	crc := h.ChecksumTypeProto_CHECKSUM_CRC32C
	return &h.GetServerDefaultsResponseProto{ServerDefaults: &h.FsServerDefaultsProto{
		BlockSize: proto.Uint64(uint64(d.BlockSize)), BytesPerChecksum: proto.Uint32(512), WritePacketSize: proto.Uint32(64 << 10),
		Replication: proto.Uint32(uint32(d.Replication)), FileBufferSize: proto.Uint32(4096), EncryptDataTransfer: proto.Bool(false),
		TrashInterval: proto.Uint64(0), ChecksumType: &crc, KeyProviderUri: proto.String(""), PolicyId: proto.Uint32(0),
	}}, nil
}

// getFsStats: block counts are zero, as on an HDFS without DataNode
// problems; capacity comes from the file system when it reports one.
func (n *namenode) getFsStats(ctx context.Context, _ meta.User, _ *h.GetFsStatusRequestProto) (*h.GetFsStatsResponseProto, error) {
	z := proto.Uint64(0)
	return &h.GetFsStatsResponseProto{Capacity: z, Used: z, Remaining: z, UnderReplicated: z, CorruptBlocks: z, MissingBlocks: z,
		MissingReplOneBlocks: z, BlocksInFuture: z, PendingDeletionBlocks: z}, nil
}

func (n *namenode) getLinkTarget(ctx context.Context, u meta.User, r *h.GetLinkTargetRequestProto) (*h.GetLinkTargetResponseProto, error) {
	st, err := n.fs.Stat(ctx, u, r.GetPath())
	if err != nil {
		return nil, err
	}
	if st.Type != meta.TypeSymlink {
		return nil, meta.Errorf("getLinkTarget", r.GetPath(), meta.ErrInvalidArgument, "not a symbolic link")
	}
	return &h.GetLinkTargetResponseProto{TargetPath: proto.String(st.Symlink)}, nil
}

func (n *namenode) createSymlink(ctx context.Context, u meta.User, r *h.CreateSymlinkRequestProto) (*h.CreateSymlinkResponseProto, error) {
	return &h.CreateSymlinkResponseProto{}, n.fs.CreateSymlink(ctx, u, r.GetTarget(), r.GetLink(), r.GetCreateParent())
}

func (n *namenode) renewLease(ctx context.Context, u meta.User, r *h.RenewLeaseRequestProto) (*h.RenewLeaseResponseProto, error) {
	return &h.RenewLeaseResponseProto{}, n.fs.RenewLease(ctx, u, r.GetClientName())
}

func aclEntries(spec []*h.AclEntryProto) []meta.AclEntry {
	out := make([]meta.AclEntry, 0, len(spec))
	for _, e := range spec {
		out = append(out, meta.AclEntry{Scope: meta.AclScope(e.GetScope()), Type: meta.AclType(e.GetType()), Name: e.GetName(), Perm: meta.Perm(e.GetPermissions()) & 7})
	}
	return out
}

func (n *namenode) modifyAclEntries(ctx context.Context, u meta.User, r *h.ModifyAclEntriesRequestProto) (*h.ModifyAclEntriesResponseProto, error) {
	return &h.ModifyAclEntriesResponseProto{}, n.fs.ModifyAclEntries(ctx, u, r.GetSrc(), aclEntries(r.GetAclSpec()))
}

func (n *namenode) removeAclEntries(ctx context.Context, u meta.User, r *h.RemoveAclEntriesRequestProto) (*h.RemoveAclEntriesResponseProto, error) {
	return &h.RemoveAclEntriesResponseProto{}, n.fs.RemoveAclEntries(ctx, u, r.GetSrc(), aclEntries(r.GetAclSpec()))
}

func (n *namenode) removeDefaultAcl(ctx context.Context, u meta.User, r *h.RemoveDefaultAclRequestProto) (*h.RemoveDefaultAclResponseProto, error) {
	return &h.RemoveDefaultAclResponseProto{}, n.fs.RemoveDefaultAcl(ctx, u, r.GetSrc())
}

func (n *namenode) removeAcl(ctx context.Context, u meta.User, r *h.RemoveAclRequestProto) (*h.RemoveAclResponseProto, error) {
	return &h.RemoveAclResponseProto{}, n.fs.RemoveAcl(ctx, u, r.GetSrc())
}

func (n *namenode) setAcl(ctx context.Context, u meta.User, r *h.SetAclRequestProto) (*h.SetAclResponseProto, error) {
	return &h.SetAclResponseProto{}, n.fs.SetAcl(ctx, u, r.GetSrc(), aclEntries(r.GetAclSpec()))
}

func (n *namenode) getAclStatus(ctx context.Context, u meta.User, r *h.GetAclStatusRequestProto) (*h.GetAclStatusResponseProto, error) {
	st, err := n.fs.GetAclStatus(ctx, u, r.GetSrc())
	if err != nil {
		return nil, err
	}
	out := &h.AclStatusProto{Owner: proto.String(st.Owner), Group: proto.String(st.Group), Sticky: proto.Bool(st.StickyBit),
		Permission: &h.FsPermissionProto{Perm: proto.Uint32(uint32(st.Perm & meta.PermMask))}}
	for _, e := range st.Entries {
		t := h.AclEntryProto_AclEntryTypeProto(e.Type)
		sc := h.AclEntryProto_AclEntryScopeProto(e.Scope)
		p := h.AclEntryProto_FsActionProto(e.Perm & 7)
		ae := &h.AclEntryProto{Type: &t, Scope: &sc, Permissions: &p}
		if e.Name != "" {
			ae.Name = proto.String(e.Name)
		}
		out.Entries = append(out.Entries, ae)
	}
	return &h.GetAclStatusResponseProto{Result: out}, nil
}

// xattrName joins an XAttrProto's namespace and name into meta's form
// ("user.name").
func xattrName(x *h.XAttrProto) string {
	return strings.ToLower(x.GetNamespace().String()) + "." + x.GetName()
}

func xattrProto(name string, value []byte, withValue bool) *h.XAttrProto {
	ns, local, _ := strings.Cut(name, ".")
	v := h.XAttrProto_XAttrNamespaceProto_value[strings.ToUpper(ns)]
	nsp := h.XAttrProto_XAttrNamespaceProto(v)
	x := &h.XAttrProto{Namespace: &nsp, Name: proto.String(local)}
	if withValue {
		x.Value = value
		if x.Value == nil {
			x.Value = []byte{}
		}
	}
	return x
}

func (n *namenode) setXAttr(ctx context.Context, u meta.User, r *h.SetXAttrRequestProto) (*h.SetXAttrResponseProto, error) {
	x := r.GetXAttr()
	return &h.SetXAttrResponseProto{}, n.fs.SetXAttr(ctx, u, r.GetSrc(), meta.XAttr{Name: xattrName(x), Value: x.GetValue()}, meta.XAttrSetFlag(r.GetFlag()&3))
}

func (n *namenode) getXAttrs(ctx context.Context, u meta.User, r *h.GetXAttrsRequestProto) (*h.GetXAttrsResponseProto, error) {
	var names []string
	for _, x := range r.GetXAttrs() {
		names = append(names, xattrName(x))
	}
	xs, err := n.fs.GetXAttrs(ctx, u, r.GetSrc(), names)
	if err != nil {
		return nil, err
	}
	out := &h.GetXAttrsResponseProto{}
	for _, x := range xs {
		out.XAttrs = append(out.XAttrs, xattrProto(x.Name, x.Value, true))
	}
	return out, nil
}

func (n *namenode) listXAttrs(ctx context.Context, u meta.User, r *h.ListXAttrsRequestProto) (*h.ListXAttrsResponseProto, error) {
	names, err := n.fs.ListXAttrs(ctx, u, r.GetSrc())
	if err != nil {
		return nil, err
	}
	out := &h.ListXAttrsResponseProto{}
	for _, name := range names {
		out.XAttrs = append(out.XAttrs, xattrProto(name, nil, false))
	}
	return out, nil
}

func (n *namenode) removeXAttr(ctx context.Context, u meta.User, r *h.RemoveXAttrRequestProto) (*h.RemoveXAttrResponseProto, error) {
	return &h.RemoveXAttrResponseProto{}, n.fs.RemoveXAttr(ctx, u, r.GetSrc(), xattrName(r.GetXAttr()))
}

func (n *namenode) isFileClosed(ctx context.Context, u meta.User, r *h.IsFileClosedRequestProto) (*h.IsFileClosedResponseProto, error) {
	st, err := n.fs.Stat(ctx, u, r.GetSrc())
	if err != nil {
		return nil, err
	}
	if st.Type != meta.TypeFile {
		return nil, meta.Errorf("isFileClosed", r.GetSrc(), meta.ErrIsDir, "not a file")
	}
	return &h.IsFileClosedResponseProto{Result: proto.Bool(!st.UnderConstruction)}, nil
}

func (n *namenode) getPreferredBlockSize(ctx context.Context, u meta.User, r *h.GetPreferredBlockSizeRequestProto) (*h.GetPreferredBlockSizeResponseProto, error) {
	st, err := n.fs.Stat(ctx, u, r.GetFilename())
	if err != nil {
		return nil, err
	}
	if st.Type != meta.TypeFile {
		return nil, meta.Errorf("getPreferredBlockSize", r.GetFilename(), meta.ErrIsDir, "not a file")
	}
	return &h.GetPreferredBlockSizeResponseProto{Bsize: proto.Uint64(uint64(max(st.BlockSize, 0)))}, nil
}

func (n *namenode) checkAccess(ctx context.Context, u meta.User, r *h.CheckAccessRequestProto) (*h.CheckAccessResponseProto, error) {
	return &h.CheckAccessResponseProto{}, n.fs.(meta.AccessChecker).CheckAccess(ctx, u, r.GetPath(), meta.Perm(r.GetMode())&7)
}

// hotPolicy is HDFS's default storage policy, HOT (id 7): every replica on
// DISK.
func hotPolicy() *h.BlockStoragePolicyProto {
	disk := h.StorageTypeProto_DISK
	arch := h.StorageTypeProto_ARCHIVE
	return &h.BlockStoragePolicyProto{PolicyId: proto.Uint32(7), Name: proto.String("HOT"),
		CreationPolicy:         &h.StorageTypesProto{StorageTypes: []h.StorageTypeProto{disk}},
		CreationFallbackPolicy: &h.StorageTypesProto{}, ReplicationFallbackPolicy: &h.StorageTypesProto{StorageTypes: []h.StorageTypeProto{arch}}}
}
