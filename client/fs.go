package client

import (
	"context"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/rpc"
)

// The meta.FileSystem methods: each builds its request, calls, and converts
// the result. Their contracts are those of meta.FileSystem.

var _ meta.FileSystem = (*Client)(nil)

func status(resp *api.Response) *meta.FileStatus {
	st := &meta.FileStatus{}
	rpc.StatusFromProto(resp.GetStatus(), st)
	return st
}

// Mkdirs implements meta.FileSystem.
func (c *Client) Mkdirs(ctx context.Context, u meta.User, dir string, perm meta.Perm) error {
	_, err := c.call(ctx, rpc.MethodMkdirs, dir, u, &api.Request{Body: &api.Request_Mkdirs{Mkdirs: &api.MkdirsRequest{Path: dir, Perm: uint32(perm)}}})
	return err
}

// MkdirsUnmasked implements meta.FileSystem.
func (c *Client) MkdirsUnmasked(ctx context.Context, u meta.User, dir string, perm, unmasked meta.Perm) error {
	um := uint32(unmasked)
	_, err := c.call(ctx, rpc.MethodMkdirs, dir, u, &api.Request{Body: &api.Request_Mkdirs{Mkdirs: &api.MkdirsRequest{Path: dir, Perm: uint32(perm), Unmasked: &um}}})
	return err
}

// unmasked is o's unmasked mode as the request carries it: nil when unset.
func unmasked(o meta.CreateOptions) *uint32 {
	if !o.HasUnmasked {
		return nil
	}
	um := uint32(o.Unmasked)
	return &um
}

// Create implements meta.FileSystem. An empty opts.Client means this
// client's ClientName.
func (c *Client) Create(ctx context.Context, u meta.User, path string, o meta.CreateOptions) (*meta.FileStatus, error) {
	if o.Client == "" {
		o.Client = c.name
	}
	resp, err := c.call(ctx, rpc.MethodCreate, path, u, &api.Request{Body: &api.Request_Create{Create: &api.CreateRequest{
		Path: path, Client: o.Client, Perm: uint32(o.Perm), Overwrite: o.Overwrite, CreateParent: o.CreateParent,
		Replication: uint32(o.Replication), BlockSize: o.BlockSize, Unmasked: unmasked(o),
	}}})
	if err != nil {
		return nil, err
	}
	return status(resp), nil
}

// CreateFile implements meta.FileCreator: a complete small file in one
// request (the server creates, writes and closes it in one transaction).
func (c *Client) CreateFile(ctx context.Context, u meta.User, path string, o meta.CreateOptions, data []byte) (*meta.FileStatus, error) {
	if o.Client == "" {
		o.Client = c.name
	}
	resp, err := c.call(ctx, rpc.MethodCreate, path, u, &api.Request{Body: &api.Request_Create{Create: &api.CreateRequest{
		Path: path, Client: o.Client, Perm: uint32(o.Perm), Overwrite: o.Overwrite, CreateParent: o.CreateParent,
		Replication: uint32(o.Replication), BlockSize: o.BlockSize, Data: data, Complete: true, Unmasked: unmasked(o),
	}}})
	if err != nil {
		return nil, err
	}
	return status(resp), nil
}

var _ meta.FileCreator = (*Client)(nil)

// Append implements meta.FileSystem.
func (c *Client) Append(ctx context.Context, u meta.User, path, client string) (*meta.FileStatus, error) {
	resp, err := c.call(ctx, rpc.MethodAppend, path, u, &api.Request{Body: &api.Request_Append{Append: &api.AppendRequest{Path: path, Client: client}}})
	if err != nil {
		return nil, err
	}
	return status(resp), nil
}

// Write implements meta.FileSystem.
func (c *Client) Write(ctx context.Context, u meta.User, path, client string, offset int64, data []byte) error {
	_, err := c.call(ctx, rpc.MethodWrite, path, u, &api.Request{Body: &api.Request_Write{Write: &api.WriteRequest{Path: path, Client: client, Offset: offset, Data: data}}})
	return err
}

// Complete implements meta.FileSystem.
func (c *Client) Complete(ctx context.Context, u meta.User, path, client string) (*meta.FileStatus, error) {
	resp, err := c.call(ctx, rpc.MethodComplete, path, u, &api.Request{Body: &api.Request_Complete{Complete: &api.CompleteRequest{Path: path, Client: client}}})
	if err != nil {
		return nil, err
	}
	return status(resp), nil
}

// Read implements meta.FileSystem.
func (c *Client) Read(ctx context.Context, u meta.User, path string, offset, length int64) ([]byte, error) {
	resp, err := c.call(ctx, rpc.MethodRead, path, u, &api.Request{Body: &api.Request_Read{Read: &api.ReadRequest{Path: path, Offset: offset, Length: length}}})
	if err != nil {
		return nil, err
	}
	return resp.GetRead().GetData(), nil
}

// Stat implements meta.FileSystem.
func (c *Client) Stat(ctx context.Context, u meta.User, path string) (*meta.FileStatus, error) {
	resp, err := c.call(ctx, rpc.MethodStat, path, u, &api.Request{Body: &api.Request_Stat{Stat: &api.StatRequest{Path: path}}})
	if err != nil {
		return nil, err
	}
	return status(resp), nil
}

// List implements meta.FileSystem.
func (c *Client) List(ctx context.Context, u meta.User, dir, startAfter string, limit int) (*meta.Listing, error) {
	if limit < 0 || limit > 1<<31-1 {
		limit = 0
	}
	// The page is decoded in place into a pooled listing, whose entries and
	// their memory are reused from page to page; the conversion copies what
	// it keeps.
	page := api.ListingFromVTPool()
	defer page.ReturnToVTPool()
	resp := &api.Response{Result: &api.Response_Listing{Listing: page}}
	var l *meta.Listing
	req := &api.Request{Body: &api.Request_List{List: &api.ListRequest{Path: dir, StartAfter: startAfter, Limit: int32(limit)}}}
	err := c.callView(ctx, rpc.MethodList, dir, u, req, resp, func() {
		l = rpc.ListingFromProto(dir, resp.GetListing())
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Delete implements meta.FileSystem.
func (c *Client) Delete(ctx context.Context, u meta.User, path string, recursive bool) error {
	_, err := c.call(ctx, rpc.MethodDelete, path, u, &api.Request{Body: &api.Request_Delete{Delete: &api.DeleteRequest{Path: path, Recursive: recursive}}})
	return err
}

// Rename implements meta.FileSystem.
func (c *Client) Rename(ctx context.Context, u meta.User, src, dst string, o meta.RenameOptions) error {
	_, err := c.call(ctx, rpc.MethodRename, src, u, &api.Request{Body: &api.Request_Rename{Rename: &api.RenameRequest{Src: src, Dst: dst, Overwrite: o.Overwrite}}})
	return err
}

// SetPermission implements meta.FileSystem.
func (c *Client) SetPermission(ctx context.Context, u meta.User, path string, perm meta.Perm) error {
	_, err := c.call(ctx, rpc.MethodSetPermission, path, u, &api.Request{Body: &api.Request_SetPermission{SetPermission: &api.SetPermissionRequest{Path: path, Perm: uint32(perm)}}})
	return err
}

// SetOwner implements meta.FileSystem.
func (c *Client) SetOwner(ctx context.Context, u meta.User, path, owner, group string) error {
	_, err := c.call(ctx, rpc.MethodSetOwner, path, u, &api.Request{Body: &api.Request_SetOwner{SetOwner: &api.SetOwnerRequest{Path: path, Owner: owner, Group: group}}})
	return err
}

var _ meta.RecursiveAttrs = (*Client)(nil)

// SetPermissionRecursive implements meta.RecursiveAttrs: one call, the
// server changes the whole subtree. A server that does not know the call
// (an older one) answers meta.ErrUnsupported: callers then walk the tree
// with SetPermission.
func (c *Client) SetPermissionRecursive(ctx context.Context, u meta.User, path string, perm meta.Perm) error {
	_, err := c.call(ctx, rpc.MethodSetPermissionRecursive, path, u, &api.Request{Body: &api.Request_SetPermissionRecursive{
		SetPermissionRecursive: &api.SetPermissionRecursiveRequest{Path: path, Perm: uint32(perm)}}})
	return err
}

// SetOwnerRecursive implements meta.RecursiveAttrs, as
// SetPermissionRecursive.
func (c *Client) SetOwnerRecursive(ctx context.Context, u meta.User, path, owner, group string) error {
	_, err := c.call(ctx, rpc.MethodSetOwnerRecursive, path, u, &api.Request{Body: &api.Request_SetOwnerRecursive{
		SetOwnerRecursive: &api.SetOwnerRecursiveRequest{Path: path, Owner: owner, Group: group}}})
	return err
}

// SetTimes implements meta.FileSystem.
func (c *Client) SetTimes(ctx context.Context, u meta.User, path string, mtime, atime int64) error {
	_, err := c.call(ctx, rpc.MethodSetTimes, path, u, &api.Request{Body: &api.Request_SetTimes{SetTimes: &api.SetTimesRequest{Path: path, Mtime: mtime, Atime: atime}}})
	return err
}

// SetReplication implements meta.FileSystem.
func (c *Client) SetReplication(ctx context.Context, u meta.User, path string, replication uint16) error {
	_, err := c.call(ctx, rpc.MethodSetReplication, path, u, &api.Request{Body: &api.Request_SetReplication{SetReplication: &api.SetReplicationRequest{Path: path, Replication: uint32(replication)}}})
	return err
}

// Truncate implements meta.FileSystem.
func (c *Client) Truncate(ctx context.Context, u meta.User, path string, newLength int64) error {
	_, err := c.call(ctx, rpc.MethodTruncate, path, u, &api.Request{Body: &api.Request_Truncate{Truncate: &api.TruncateRequest{Path: path, NewLength: newLength}}})
	return err
}

// Concat implements meta.FileSystem.
func (c *Client) Concat(ctx context.Context, u meta.User, target string, srcs []string) error {
	_, err := c.call(ctx, rpc.MethodConcat, target, u, &api.Request{Body: &api.Request_Concat{Concat: &api.ConcatRequest{Target: target, Srcs: srcs}}})
	return err
}

// ContentSummary implements meta.FileSystem.
func (c *Client) ContentSummary(ctx context.Context, u meta.User, path string) (*meta.ContentSummary, error) {
	resp, err := c.call(ctx, rpc.MethodContentSummary, path, u, &api.Request{Body: &api.Request_ContentSummary{ContentSummary: &api.ContentSummaryRequest{Path: path}}})
	if err != nil {
		return nil, err
	}
	return rpc.SummaryFromProto(resp.GetContentSummary()), nil
}

// SetQuota implements meta.FileSystem.
func (c *Client) SetQuota(ctx context.Context, u meta.User, dir string, nsQuota, spaceQuota int64) error {
	_, err := c.call(ctx, rpc.MethodSetQuota, dir, u, &api.Request{Body: &api.Request_SetQuota{SetQuota: &api.SetQuotaRequest{Path: dir, NsQuota: nsQuota, SpaceQuota: spaceQuota}}})
	return err
}

// CreateSymlink implements meta.FileSystem.
func (c *Client) CreateSymlink(ctx context.Context, u meta.User, target, link string, createParent bool) error {
	_, err := c.call(ctx, rpc.MethodCreateSymlink, link, u, &api.Request{Body: &api.Request_CreateSymlink{CreateSymlink: &api.CreateSymlinkRequest{Target: target, Link: link, CreateParent: createParent}}})
	return err
}

// RenewLease implements meta.FileSystem.
func (c *Client) RenewLease(ctx context.Context, u meta.User, client string) error {
	_, err := c.call(ctx, rpc.MethodRenewLease, "", u, &api.Request{Body: &api.Request_RenewLease{RenewLease: &api.RenewLeaseRequest{Client: client}}})
	return err
}

// Defaults implements meta.FileSystem.
func (c *Client) Defaults(ctx context.Context) (*meta.ServerDefaults, error) {
	resp, err := c.call(ctx, rpc.MethodDefaults, "", meta.User{}, &api.Request{Body: &api.Request_Defaults{Defaults: &api.DefaultsRequest{}}})
	if err != nil {
		return nil, err
	}
	return rpc.DefaultsFromProto(resp.GetDefaults()), nil
}
