package rpc

import (
	"context"
	"time"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/meta"
)

// dispatch executes one decoded request against the file system and returns
// the response (never nil). It is the only place that knows which meta method
// serves which request body.
func (s *Server) dispatch(ctx context.Context, req *api.Request, m Method, path string, received time.Time) *api.Response {
	resp := &api.Response{RequestId: req.GetRequestId()}
	u := meta.User{Name: req.GetUser()}
	if !m.ReadOnly() {
		if received.IsZero() {
			// The reader took no clock reading for a frame that looked
			// quick (a read) but decoded as a write.
			received = time.Now()
		}
		// Which call this is, for a file system that records the writes
		// it applied and answers a resubmission from the record
		// (namespace/once.go): the engine sees it in the context, never
		// the wire type.
		ctx = meta.WithRequest(ctx, meta.Request{Client: req.GetClientName(), ID: req.GetRequestId(),
			Resubmitted: req.GetResubmitted(), Received: received})
	}
	fs := s.fs
	var err error
	switch b := req.GetBody().(type) {
	case *api.Request_Mkdirs:
		r := b.Mkdirs
		if r.Unmasked != nil {
			err = fs.MkdirsUnmasked(ctx, u, r.GetPath(), meta.Perm(r.GetPerm()), meta.Perm(*r.Unmasked))
		} else {
			err = fs.Mkdirs(ctx, u, r.GetPath(), meta.Perm(r.GetPerm()))
		}
	case *api.Request_Create:
		r := b.Create
		var st *meta.FileStatus
		opts := meta.CreateOptions{
			Client: r.GetClient(), Perm: meta.Perm(r.GetPerm()), Overwrite: r.GetOverwrite(),
			CreateParent: r.GetCreateParent(), Replication: uint16(r.GetReplication()), BlockSize: r.GetBlockSize(),
			Unmasked: meta.Perm(r.GetUnmasked()), HasUnmasked: r.Unmasked != nil,
		}
		if r.GetComplete() {
			st, err = meta.CreateFile(ctx, fs, u, r.GetPath(), opts, r.GetData())
		} else {
			st, err = fs.Create(ctx, u, r.GetPath(), opts)
		}
		setStatus(resp, st)
	case *api.Request_Append:
		var st *meta.FileStatus
		st, err = fs.Append(ctx, u, b.Append.GetPath(), b.Append.GetClient())
		setStatus(resp, st)
	case *api.Request_Write:
		r := b.Write
		err = fs.Write(ctx, u, r.GetPath(), r.GetClient(), r.GetOffset(), r.GetData())
	case *api.Request_Complete:
		var st *meta.FileStatus
		st, err = fs.Complete(ctx, u, b.Complete.GetPath(), b.Complete.GetClient())
		setStatus(resp, st)
	case *api.Request_Read:
		var data []byte
		data, err = fs.Read(ctx, u, b.Read.GetPath(), b.Read.GetOffset(), b.Read.GetLength())
		resp.Result = &api.Response_Read{Read: &api.ReadResult{Data: data}}
	case *api.Request_Stat:
		var st *meta.FileStatus
		st, err = fs.Stat(ctx, u, b.Stat.GetPath())
		setStatus(resp, st)
	case *api.Request_List:
		r := b.List
		var l *meta.Listing
		// Only encoded (ListingToProto copies what it keeps): a cached
		// page needs no copy of its own.
		l, err = meta.ListToRead(ctx, fs, u, r.GetPath(), r.GetStartAfter(), int(r.GetLimit()))
		resp.Result = &api.Response_Listing{Listing: ListingToProto(r.GetPath(), l)}
	case *api.Request_Delete:
		err = fs.Delete(ctx, u, b.Delete.GetPath(), b.Delete.GetRecursive())
	case *api.Request_Rename:
		r := b.Rename
		err = fs.Rename(ctx, u, r.GetSrc(), r.GetDst(), meta.RenameOptions{Overwrite: r.GetOverwrite()})
	case *api.Request_SetPermission:
		err = fs.SetPermission(ctx, u, b.SetPermission.GetPath(), meta.Perm(b.SetPermission.GetPerm()))
	case *api.Request_SetOwner:
		r := b.SetOwner
		err = fs.SetOwner(ctx, u, r.GetPath(), r.GetOwner(), r.GetGroup())
	case *api.Request_SetTimes:
		r := b.SetTimes
		err = fs.SetTimes(ctx, u, r.GetPath(), r.GetMtime(), r.GetAtime())
	case *api.Request_SetReplication:
		r := b.SetReplication
		if r.GetReplication() > 0xffff {
			err = meta.Errorf("setReplication", r.GetPath(), meta.ErrInvalidArgument, "replication %d out of range", r.GetReplication())
			break
		}
		err = fs.SetReplication(ctx, u, r.GetPath(), uint16(r.GetReplication()))
	case *api.Request_Truncate:
		err = fs.Truncate(ctx, u, b.Truncate.GetPath(), b.Truncate.GetNewLength())
	case *api.Request_Concat:
		err = fs.Concat(ctx, u, b.Concat.GetTarget(), b.Concat.GetSrcs())
	case *api.Request_ContentSummary:
		var cs *meta.ContentSummary
		cs, err = fs.ContentSummary(ctx, u, b.ContentSummary.GetPath())
		resp.Result = &api.Response_ContentSummary{ContentSummary: SummaryToProto(cs)}
	case *api.Request_SetQuota:
		r := b.SetQuota
		err = fs.SetQuota(ctx, u, r.GetPath(), r.GetNsQuota(), r.GetSpaceQuota())
	case *api.Request_CreateSymlink:
		r := b.CreateSymlink
		err = fs.CreateSymlink(ctx, u, r.GetTarget(), r.GetLink(), r.GetCreateParent())
	case *api.Request_RenewLease:
		err = fs.RenewLease(ctx, u, b.RenewLease.GetClient())
	case *api.Request_Defaults:
		var d *meta.ServerDefaults
		d, err = fs.Defaults(ctx)
		resp.Result = &api.Response_Defaults{Defaults: DefaultsToProto(d)}
	case *api.Request_Echo:
		resp.Result = &api.Response_Echo{Echo: &api.EchoResult{Payload: b.Echo.GetPayload()}}
	case *api.Request_Fsck:
		if s.opts.Fsck == nil {
			err = meta.Errorf("fsck", "/", meta.ErrUnsupported, "this server does not run fsck")
			break
		}
		// fsck reads the whole store: superusers only, as HDFS's fsck. A
		// file system that cannot tell superusers serves it to nobody.
		if su, ok := fs.(meta.Superusers); !ok || !su.IsSuperuser(u) {
			err = meta.Errorf("fsck", "/", meta.ErrPermission, "user %q is not a superuser; fsck is for superusers only", u.Name)
			break
		}
		var r *meta.FsckReport
		r, err = s.opts.Fsck(ctx)
		resp.Result = &api.Response_Fsck{Fsck: FsckToProto(r)}
	case *api.Request_Acl:
		err = dispatchAcl(ctx, fs, u, b.Acl, resp)
	case *api.Request_Xattr:
		err = dispatchXAttr(ctx, fs, u, b.Xattr, resp)
	case *api.Request_SetPermissionRecursive:
		r := b.SetPermissionRecursive
		if ra, ok := fs.(meta.RecursiveAttrs); ok {
			err = ra.SetPermissionRecursive(ctx, u, r.GetPath(), meta.Perm(r.GetPerm()))
		} else {
			err = meta.Errorf("setPermissionRecursive", r.GetPath(), meta.ErrUnsupported, "this server's file system has no recursive chmod")
		}
	case *api.Request_SetOwnerRecursive:
		r := b.SetOwnerRecursive
		if ra, ok := fs.(meta.RecursiveAttrs); ok {
			err = ra.SetOwnerRecursive(ctx, u, r.GetPath(), r.GetOwner(), r.GetGroup())
		} else {
			err = meta.Errorf("setOwnerRecursive", r.GetPath(), meta.ErrUnsupported, "this server's file system has no recursive chown")
		}
	default:
		err = meta.Errorf("rpc", "", meta.ErrUnsupported, "request carries no method this server knows")
	}
	if err != nil {
		resp.Result = nil
		resp.Error = ErrorToProto(err, m.String(), path)
	} else if resp.Result == nil {
		resp.Result = &api.Response_Empty{Empty: &api.Empty{}}
	}
	return resp
}

func setStatus(resp *api.Response, st *meta.FileStatus) {
	if st != nil {
		resp.Result = &api.Response_Status{Status: StatusToProto(st)}
	}
}

// dispatchAcl serves an AclRequest with the file system's meta.ACLs.
func dispatchAcl(ctx context.Context, a meta.FileSystem, u meta.User, r *api.AclRequest, resp *api.Response) error {
	p := r.GetPath()
	es, err := AclEntriesFromProto("acl", p, r.GetEntries())
	if err != nil {
		return err
	}
	switch r.GetOp() {
	case api.AclRequest_OP_MODIFY_ENTRIES:
		return a.ModifyAclEntries(ctx, u, p, es)
	case api.AclRequest_OP_REMOVE_ENTRIES:
		return a.RemoveAclEntries(ctx, u, p, es)
	case api.AclRequest_OP_REMOVE_DEFAULT:
		return a.RemoveDefaultAcl(ctx, u, p)
	case api.AclRequest_OP_REMOVE_ALL:
		return a.RemoveAcl(ctx, u, p)
	case api.AclRequest_OP_SET:
		return a.SetAcl(ctx, u, p, es)
	case api.AclRequest_OP_GET_STATUS:
		st, err := a.GetAclStatus(ctx, u, p)
		if err != nil {
			return err
		}
		resp.Result = &api.Response_AclStatus{AclStatus: &api.AclStatus{Owner: st.Owner, Group: st.Group,
			Perm: uint32(st.Perm), StickyBit: st.StickyBit, Entries: AclEntriesToProto(st.Entries)}}
		return nil
	}
	return meta.Errorf("acl", p, meta.ErrUnsupported, "ACL operation %d unknown to this server", r.GetOp())
}

// dispatchXAttr serves an XAttrRequest with the file system's meta.XAttrs.
func dispatchXAttr(ctx context.Context, x meta.FileSystem, u meta.User, r *api.XAttrRequest, resp *api.Response) error {
	p := r.GetPath()
	switch r.GetOp() {
	case api.XAttrRequest_OP_SET:
		if r.GetFlag() > uint32(meta.XAttrCreate|meta.XAttrReplace) {
			return meta.Errorf("setXAttr", p, meta.ErrInvalidArgument, "flag %d out of range", r.GetFlag())
		}
		return x.SetXAttr(ctx, u, p, meta.XAttr{Name: r.GetXattr().GetName(), Value: r.GetXattr().GetValue()}, meta.XAttrSetFlag(r.GetFlag()))
	case api.XAttrRequest_OP_GET:
		xs, err := x.GetXAttrs(ctx, u, p, r.GetNames())
		if err != nil {
			return err
		}
		resp.Result = &api.Response_Xattrs{Xattrs: &api.XAttrResult{Xattrs: XAttrsToProto(xs)}}
		return nil
	case api.XAttrRequest_OP_LIST:
		names, err := x.ListXAttrs(ctx, u, p)
		if err != nil {
			return err
		}
		out := make([]*api.XAttr, len(names))
		for i, n := range names {
			out[i] = &api.XAttr{Name: n}
		}
		resp.Result = &api.Response_Xattrs{Xattrs: &api.XAttrResult{Xattrs: out}}
		return nil
	case api.XAttrRequest_OP_REMOVE:
		if len(r.GetNames()) != 1 {
			return meta.Errorf("removeXAttr", p, meta.ErrInvalidArgument, "want one name, got %d", len(r.GetNames()))
		}
		return x.RemoveXAttr(ctx, u, p, r.GetNames()[0])
	}
	return meta.Errorf("xattr", p, meta.ErrUnsupported, "xattr operation %d unknown to this server", r.GetOp())
}
