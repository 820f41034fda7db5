package rpc

import (
	"context"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/meta"
)

// dispatch executes one decoded request against the file system and returns
// the response (never nil). It is the only place that knows which meta method
// serves which request body.
func (s *Server) dispatch(ctx context.Context, req *api.Request, m Method, path string) *api.Response {
	resp := &api.Response{RequestId: req.GetRequestId()}
	u := meta.User{Name: req.GetUser()}
	fs := s.fs
	var err error
	switch b := req.GetBody().(type) {
	case *api.Request_Mkdirs:
		err = fs.Mkdirs(ctx, u, b.Mkdirs.GetPath(), meta.Perm(b.Mkdirs.GetPerm()))
	case *api.Request_Create:
		r := b.Create
		var st *meta.FileStatus
		opts := meta.CreateOptions{
			Client: r.GetClient(), Perm: meta.Perm(r.GetPerm()), Overwrite: r.GetOverwrite(),
			CreateParent: r.GetCreateParent(), Replication: uint16(r.GetReplication()), BlockSize: r.GetBlockSize(),
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
		l, err = fs.List(ctx, u, r.GetPath(), r.GetStartAfter(), int(r.GetLimit()))
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
