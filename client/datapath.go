package client

import (
	"context"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/rpc"
)

// The data path of the DataNode mode (rpc.DataPath): the client allocates
// and commits blocks through these calls and moves their bytes to and
// from the DataNodes itself (package dataxfer). A server in the local
// mode answers them with an error naming the path; a CompleteBlock or
// AddBlock whose block has no reported replica yet answers meta.ErrBusy
// (namespace.ErrNotYetReplicated on the server): call again after a
// backoff.

var _ rpc.DataPath = (*Client)(nil)

// AddBlock implements rpc.DataPath.
func (c *Client) AddBlock(ctx context.Context, u meta.User, path, client string, previous *namespace.BlockRef, exclude []uint64, writer namespace.Location) (*namespace.LocatedBlock, error) {
	r := &api.AddBlockRequest{Path: path, Client: client, Exclude: exclude, Writer: rpc.LocationToProto(writer)}
	if previous != nil {
		r.Previous = rpc.BlockRefToProto(*previous)
	}
	resp, err := c.call(ctx, rpc.MethodAddBlock, path, u, &api.Request{Body: &api.Request_AddBlock{AddBlock: r}})
	if err != nil {
		return nil, err
	}
	return located(rpc.MethodAddBlock, path, resp)
}

// CompleteBlock implements rpc.DataPath.
func (c *Client) CompleteBlock(ctx context.Context, u meta.User, path, client string, last *namespace.BlockRef) (*meta.FileStatus, error) {
	r := &api.CompleteBlockRequest{Path: path, Client: client}
	if last != nil {
		r.Last = rpc.BlockRefToProto(*last)
	}
	resp, err := c.call(ctx, rpc.MethodCompleteBlock, path, u, &api.Request{Body: &api.Request_CompleteBlock{CompleteBlock: r}})
	if err != nil {
		return nil, err
	}
	return status(resp), nil
}

// GetBlockLocations implements rpc.DataPath.
func (c *Client) GetBlockLocations(ctx context.Context, u meta.User, path string, offset, length int64, reader namespace.Location) (*namespace.LocatedBlocks, error) {
	resp, err := c.call(ctx, rpc.MethodGetBlockLocations, path, u, &api.Request{Body: &api.Request_GetBlockLocations{
		GetBlockLocations: &api.GetBlockLocationsRequest{Path: path, Offset: offset, Length: length, Reader: rpc.LocationToProto(reader)}}})
	if err != nil {
		return nil, err
	}
	lbs := resp.GetLocatedBlocks()
	if lbs == nil {
		return nil, meta.Errorf(rpc.MethodGetBlockLocations.String(), path, meta.ErrInternal, "the server answered without located blocks")
	}
	return rpc.LocatedBlocksFromProto(lbs), nil
}

// UpdateBlockForPipeline implements rpc.DataPath.
func (c *Client) UpdateBlockForPipeline(ctx context.Context, u meta.User, path, client string, block namespace.BlockRef) (*namespace.LocatedBlock, error) {
	resp, err := c.call(ctx, rpc.MethodUpdateBlockForPipeline, path, u, &api.Request{Body: &api.Request_UpdateBlockForPipeline{
		UpdateBlockForPipeline: &api.UpdateBlockForPipelineRequest{Path: path, Client: client, Block: rpc.BlockRefToProto(block)}}})
	if err != nil {
		return nil, err
	}
	return located(rpc.MethodUpdateBlockForPipeline, path, resp)
}

// UpdatePipeline implements rpc.DataPath.
func (c *Client) UpdatePipeline(ctx context.Context, u meta.User, path, client string, old, updated namespace.BlockRef, nodes []uint64) error {
	_, err := c.call(ctx, rpc.MethodUpdatePipeline, path, u, &api.Request{Body: &api.Request_UpdatePipeline{
		UpdatePipeline: &api.UpdatePipelineRequest{Path: path, Client: client, Old: rpc.BlockRefToProto(old),
			Updated: rpc.BlockRefToProto(updated), Nodes: nodes}}})
	return err
}

// AbandonBlock implements rpc.DataPath.
func (c *Client) AbandonBlock(ctx context.Context, u meta.User, path, client string, block namespace.BlockRef) error {
	_, err := c.call(ctx, rpc.MethodAbandonBlock, path, u, &api.Request{Body: &api.Request_AbandonBlock{
		AbandonBlock: &api.AbandonBlockRequest{Path: path, Client: client, Block: rpc.BlockRefToProto(block)}}})
	return err
}

// Fsync implements rpc.DataPath.
func (c *Client) Fsync(ctx context.Context, u meta.User, path, client string, lastBlockLength int64) error {
	_, err := c.call(ctx, rpc.MethodFsync, path, u, &api.Request{Body: &api.Request_Fsync{
		Fsync: &api.FsyncRequest{Path: path, Client: client, LastBlockLength: lastBlockLength}}})
	return err
}

// AdditionalDataNode implements rpc.DataPath.
func (c *Client) AdditionalDataNode(ctx context.Context, u meta.User, path, client string, block namespace.BlockRef, existing, exclude []uint64, n int, writer namespace.Location) (*namespace.LocatedBlock, error) {
	if n < 0 || n > 1<<16 {
		return nil, meta.Errorf(rpc.MethodAdditionalDataNode.String(), path, meta.ErrInvalidArgument, "%d additional DataNodes asked", n)
	}
	resp, err := c.call(ctx, rpc.MethodAdditionalDataNode, path, u, &api.Request{Body: &api.Request_AdditionalDataNode{
		AdditionalDataNode: &api.AdditionalDataNodeRequest{Path: path, Client: client, Block: rpc.BlockRefToProto(block),
			Existing: existing, Exclude: exclude, N: uint32(n), Writer: rpc.LocationToProto(writer)}}})
	if err != nil {
		return nil, err
	}
	return located(rpc.MethodAdditionalDataNode, path, resp)
}

// AppendBlock implements rpc.DataPath.
func (c *Client) AppendBlock(ctx context.Context, u meta.User, path, client string, writer namespace.Location) (*meta.FileStatus, *namespace.LocatedBlock, error) {
	resp, err := c.call(ctx, rpc.MethodAppendBlock, path, u, &api.Request{Body: &api.Request_AppendBlock{
		AppendBlock: &api.AppendBlockRequest{Path: path, Client: client, Writer: rpc.LocationToProto(writer)}}})
	if err != nil {
		return nil, nil, err
	}
	r := resp.GetAppendBlock()
	var st *meta.FileStatus
	if r.GetStatus() != nil {
		st = new(meta.FileStatus)
		rpc.StatusFromProto(r.GetStatus(), st)
	}
	return st, rpc.LocatedBlockFromProto(r.GetBlock()), nil
}

// located is the located block a data-path answer carries.
func located(m rpc.Method, path string, resp *api.Response) (*namespace.LocatedBlock, error) {
	lb := resp.GetLocatedBlock()
	if lb == nil {
		return nil, meta.Errorf(m.String(), path, meta.ErrInternal, "the server answered without a located block")
	}
	return rpc.LocatedBlockFromProto(lb), nil
}
