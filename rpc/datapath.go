package rpc

import (
	"context"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
)

// DataPath is the capability of a file system that runs the DataNode mode
// (namespace.Engine with Config.DataNodes): HDFS's ClientProtocol block
// calls. A server whose file system lacks it answers these methods with
// KIND_UNSUPPORTED; an engine in the local mode answers them with its own
// "not in the DataNode mode" error.
type DataPath interface {
	AddBlock(ctx context.Context, u meta.User, path, client string, previous *namespace.BlockRef, exclude []uint64, writer namespace.Location) (*namespace.LocatedBlock, error)
	CompleteBlock(ctx context.Context, u meta.User, path, client string, last *namespace.BlockRef) (*meta.FileStatus, error)
	GetBlockLocations(ctx context.Context, u meta.User, path string, offset, length int64, reader namespace.Location) (*namespace.LocatedBlocks, error)
	UpdateBlockForPipeline(ctx context.Context, u meta.User, path, client string, block namespace.BlockRef) (*namespace.LocatedBlock, error)
	UpdatePipeline(ctx context.Context, u meta.User, path, client string, old, updated namespace.BlockRef, nodes []uint64) error
	AbandonBlock(ctx context.Context, u meta.User, path, client string, block namespace.BlockRef) error
	Fsync(ctx context.Context, u meta.User, path, client string, lastBlockLength int64) error
	AdditionalDataNode(ctx context.Context, u meta.User, path, client string, block namespace.BlockRef, existing, exclude []uint64, n int, writer namespace.Location) (*namespace.LocatedBlock, error)
	AppendBlock(ctx context.Context, u meta.User, path, client string, writer namespace.Location) (*meta.FileStatus, *namespace.LocatedBlock, error)
}

var _ DataPath = (*namespace.Engine)(nil)

// dispatchDataPath serves the data-path methods; ok is false for any other
// request body.
func dispatchDataPath(ctx context.Context, fs meta.FileSystem, u meta.User, m Method, path string, body any, resp *api.Response) (err error, ok bool) {
	switch body.(type) {
	case *api.Request_AddBlock, *api.Request_CompleteBlock, *api.Request_GetBlockLocations,
		*api.Request_UpdateBlockForPipeline, *api.Request_UpdatePipeline, *api.Request_AbandonBlock,
		*api.Request_Fsync, *api.Request_AdditionalDataNode, *api.Request_AppendBlock:
	default:
		return nil, false
	}
	dp, isDP := fs.(DataPath)
	if !isDP {
		return meta.Errorf(m.String(), path, meta.ErrUnsupported, "this server's file system has no DataNode data path"), true
	}
	switch b := body.(type) {
	case *api.Request_AddBlock:
		r := b.AddBlock
		var lb *namespace.LocatedBlock
		lb, err = dp.AddBlock(ctx, u, r.GetPath(), r.GetClient(), BlockRefPtrFromProto(r.GetPrevious()), r.GetExclude(), LocationFromProto(r.GetWriter()))
		setLocated(resp, lb)
	case *api.Request_CompleteBlock:
		r := b.CompleteBlock
		var st *meta.FileStatus
		st, err = dp.CompleteBlock(ctx, u, r.GetPath(), r.GetClient(), BlockRefPtrFromProto(r.GetLast()))
		setStatus(resp, st)
	case *api.Request_GetBlockLocations:
		r := b.GetBlockLocations
		var lbs *namespace.LocatedBlocks
		lbs, err = dp.GetBlockLocations(ctx, u, r.GetPath(), r.GetOffset(), r.GetLength(), LocationFromProto(r.GetReader()))
		if lbs != nil {
			resp.Result = &api.Response_LocatedBlocks{LocatedBlocks: LocatedBlocksToProto(lbs)}
		}
	case *api.Request_UpdateBlockForPipeline:
		r := b.UpdateBlockForPipeline
		var lb *namespace.LocatedBlock
		lb, err = dp.UpdateBlockForPipeline(ctx, u, r.GetPath(), r.GetClient(), BlockRefFromProto(r.GetBlock()))
		setLocated(resp, lb)
	case *api.Request_UpdatePipeline:
		r := b.UpdatePipeline
		err = dp.UpdatePipeline(ctx, u, r.GetPath(), r.GetClient(), BlockRefFromProto(r.GetOld()), BlockRefFromProto(r.GetUpdated()), r.GetNodes())
	case *api.Request_AbandonBlock:
		r := b.AbandonBlock
		err = dp.AbandonBlock(ctx, u, r.GetPath(), r.GetClient(), BlockRefFromProto(r.GetBlock()))
	case *api.Request_Fsync:
		r := b.Fsync
		err = dp.Fsync(ctx, u, r.GetPath(), r.GetClient(), r.GetLastBlockLength())
	case *api.Request_AdditionalDataNode:
		r := b.AdditionalDataNode
		if r.GetN() > 1<<16 {
			return meta.Errorf(m.String(), path, meta.ErrInvalidArgument, "%d additional DataNodes asked", r.GetN()), true
		}
		var lb *namespace.LocatedBlock
		lb, err = dp.AdditionalDataNode(ctx, u, r.GetPath(), r.GetClient(), BlockRefFromProto(r.GetBlock()), r.GetExisting(), r.GetExclude(), int(r.GetN()), LocationFromProto(r.GetWriter()))
		setLocated(resp, lb)
	case *api.Request_AppendBlock:
		r := b.AppendBlock
		var st *meta.FileStatus
		var lb *namespace.LocatedBlock
		st, lb, err = dp.AppendBlock(ctx, u, r.GetPath(), r.GetClient(), LocationFromProto(r.GetWriter()))
		res := &api.AppendBlockResult{}
		if st != nil {
			res.Status = StatusToProto(st)
		}
		if lb != nil {
			res.Block = LocatedBlockToProto(lb)
		}
		resp.Result = &api.Response_AppendBlock{AppendBlock: res}
	}
	return err, true
}

func setLocated(resp *api.Response, lb *namespace.LocatedBlock) {
	if lb != nil {
		resp.Result = &api.Response_LocatedBlock{LocatedBlock: LocatedBlockToProto(lb)}
	}
}

// BlockRefToProto converts a block reference for the wire.
func BlockRefToProto(b namespace.BlockRef) *api.BlockRef {
	return &api.BlockRef{Id: b.ID, GenStamp: b.GenStamp, NumBytes: b.NumBytes}
}

// BlockRefFromProto converts a block reference from the wire (unset: zero).
func BlockRefFromProto(b *api.BlockRef) namespace.BlockRef {
	return namespace.BlockRef{ID: b.GetId(), GenStamp: b.GetGenStamp(), NumBytes: b.GetNumBytes()}
}

// BlockRefPtrFromProto is BlockRefFromProto keeping unset as nil.
func BlockRefPtrFromProto(b *api.BlockRef) *namespace.BlockRef {
	if b == nil {
		return nil
	}
	r := BlockRefFromProto(b)
	return &r
}

// LocationToProto converts a client location for the wire.
func LocationToProto(l namespace.Location) *api.Location {
	return &api.Location{Host: l.Host, Zone: l.Zone}
}

// LocationFromProto converts a client location from the wire.
func LocationFromProto(l *api.Location) namespace.Location {
	return namespace.Location{Host: l.GetHost(), Zone: l.GetZone()}
}

// LocatedBlockToProto converts a located block for the wire.
func LocatedBlockToProto(b *namespace.LocatedBlock) *api.LocatedBlock {
	out := &api.LocatedBlock{Pool: b.Pool, Id: b.ID, GenStamp: b.GenStamp, NumBytes: b.NumBytes, Offset: b.Offset,
		Corrupt: b.Corrupt, Token: &api.BlockToken{Identifier: b.Token.Identifier, Password: b.Token.Password,
			Kind: b.Token.Kind, Service: b.Token.Service}}
	if len(b.Targets) > 0 {
		out.Targets = make([]*api.DataNodeInfo, len(b.Targets))
		for i, t := range b.Targets {
			out.Targets[i] = &api.DataNodeInfo{Id: t.ID, Uuid: t.UUID, StorageId: t.StorageID, DataAddr: t.DataAddr,
				HttpAddr: t.HTTPAddr, Host: t.Host, Zone: t.Zone}
		}
	}
	return out
}

// LocatedBlockFromProto converts a located block from the wire.
func LocatedBlockFromProto(b *api.LocatedBlock) *namespace.LocatedBlock {
	if b == nil {
		return nil
	}
	tok := b.GetToken()
	out := &namespace.LocatedBlock{Pool: b.GetPool(), ID: b.GetId(), GenStamp: b.GetGenStamp(), NumBytes: b.GetNumBytes(),
		Offset: b.GetOffset(), Corrupt: b.GetCorrupt(), Token: namespace.BlockToken{Identifier: tok.GetIdentifier(),
			Password: tok.GetPassword(), Kind: tok.GetKind(), Service: tok.GetService()}}
	if ts := b.GetTargets(); len(ts) > 0 {
		out.Targets = make([]namespace.DataNodeInfo, len(ts))
		for i, t := range ts {
			out.Targets[i] = namespace.DataNodeInfo{ID: t.GetId(), UUID: t.GetUuid(), StorageID: t.GetStorageId(),
				DataAddr: t.GetDataAddr(), HTTPAddr: t.GetHttpAddr(), Host: t.GetHost(), Zone: t.GetZone()}
		}
	}
	return out
}

// LocatedBlocksToProto converts a file's located blocks for the wire.
func LocatedBlocksToProto(l *namespace.LocatedBlocks) *api.LocatedBlocks {
	out := &api.LocatedBlocks{FileLength: l.FileLength, UnderConstruction: l.UnderConstruction,
		LastBlockComplete: l.LastBlockComplete, Inline: l.Inline}
	if len(l.Blocks) > 0 {
		out.Blocks = make([]*api.LocatedBlock, len(l.Blocks))
		for i := range l.Blocks {
			out.Blocks[i] = LocatedBlockToProto(&l.Blocks[i])
		}
	}
	if l.LastBlock != nil {
		out.LastBlock = LocatedBlockToProto(l.LastBlock)
	}
	return out
}

// LocatedBlocksFromProto converts a file's located blocks from the wire.
func LocatedBlocksFromProto(l *api.LocatedBlocks) *namespace.LocatedBlocks {
	out := &namespace.LocatedBlocks{FileLength: l.GetFileLength(), UnderConstruction: l.GetUnderConstruction(),
		LastBlockComplete: l.GetLastBlockComplete(), Inline: l.GetInline(), LastBlock: LocatedBlockFromProto(l.GetLastBlock())}
	if bs := l.GetBlocks(); len(bs) > 0 {
		out.Blocks = make([]namespace.LocatedBlock, len(bs))
		for i, b := range bs {
			out.Blocks[i] = *LocatedBlockFromProto(b)
		}
	}
	return out
}
