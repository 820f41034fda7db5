package client

import (
	"context"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/rpc"
)

// The Client implements the optional capabilities over the RPC; a server
// whose file system lacks one answers meta.ErrUnsupported.
var (
	_ meta.ACLs   = (*Client)(nil)
	_ meta.XAttrs = (*Client)(nil)
)

func (c *Client) acl(ctx context.Context, u meta.User, op api.AclRequest_Op, path string, es []meta.AclEntry) (*api.Response, error) {
	return c.call(ctx, rpc.MethodAcl, path, u, &api.Request{Body: &api.Request_Acl{Acl: &api.AclRequest{
		Op: op, Path: path, Entries: rpc.AclEntriesToProto(es)}}})
}

// ModifyAclEntries implements meta.ACLs.
func (c *Client) ModifyAclEntries(ctx context.Context, u meta.User, path string, entries []meta.AclEntry) error {
	_, err := c.acl(ctx, u, api.AclRequest_OP_MODIFY_ENTRIES, path, entries)
	return err
}

// RemoveAclEntries implements meta.ACLs.
func (c *Client) RemoveAclEntries(ctx context.Context, u meta.User, path string, entries []meta.AclEntry) error {
	_, err := c.acl(ctx, u, api.AclRequest_OP_REMOVE_ENTRIES, path, entries)
	return err
}

// RemoveDefaultAcl implements meta.ACLs.
func (c *Client) RemoveDefaultAcl(ctx context.Context, u meta.User, path string) error {
	_, err := c.acl(ctx, u, api.AclRequest_OP_REMOVE_DEFAULT, path, nil)
	return err
}

// RemoveAcl implements meta.ACLs.
func (c *Client) RemoveAcl(ctx context.Context, u meta.User, path string) error {
	_, err := c.acl(ctx, u, api.AclRequest_OP_REMOVE_ALL, path, nil)
	return err
}

// SetAcl implements meta.ACLs.
func (c *Client) SetAcl(ctx context.Context, u meta.User, path string, entries []meta.AclEntry) error {
	_, err := c.acl(ctx, u, api.AclRequest_OP_SET, path, entries)
	return err
}

// GetAclStatus implements meta.ACLs.
func (c *Client) GetAclStatus(ctx context.Context, u meta.User, path string) (*meta.AclStatus, error) {
	resp, err := c.acl(ctx, u, api.AclRequest_OP_GET_STATUS, path, nil)
	if err != nil {
		return nil, err
	}
	p := resp.GetAclStatus()
	es, err := rpc.AclEntriesFromProto("getAclStatus", path, p.GetEntries())
	if err != nil {
		return nil, err
	}
	return &meta.AclStatus{Owner: p.GetOwner(), Group: p.GetGroup(), Perm: meta.Perm(p.GetPerm()), StickyBit: p.GetStickyBit(), Entries: es}, nil
}

func (c *Client) xattr(ctx context.Context, u meta.User, r *api.XAttrRequest) (*api.Response, error) {
	return c.call(ctx, rpc.MethodXAttr, r.Path, u, &api.Request{Body: &api.Request_Xattr{Xattr: r}})
}

// SetXAttr implements meta.XAttrs.
func (c *Client) SetXAttr(ctx context.Context, u meta.User, path string, x meta.XAttr, flag meta.XAttrSetFlag) error {
	_, err := c.xattr(ctx, u, &api.XAttrRequest{Op: api.XAttrRequest_OP_SET, Path: path,
		Xattr: &api.XAttr{Name: x.Name, Value: x.Value}, Flag: uint32(flag)})
	return err
}

// GetXAttrs implements meta.XAttrs.
func (c *Client) GetXAttrs(ctx context.Context, u meta.User, path string, names []string) ([]meta.XAttr, error) {
	resp, err := c.xattr(ctx, u, &api.XAttrRequest{Op: api.XAttrRequest_OP_GET, Path: path, Names: names})
	if err != nil {
		return nil, err
	}
	var out []meta.XAttr
	for _, x := range resp.GetXattrs().GetXattrs() {
		out = append(out, meta.XAttr{Name: x.GetName(), Value: x.GetValue()})
	}
	return out, nil
}

// ListXAttrs implements meta.XAttrs.
func (c *Client) ListXAttrs(ctx context.Context, u meta.User, path string) ([]string, error) {
	resp, err := c.xattr(ctx, u, &api.XAttrRequest{Op: api.XAttrRequest_OP_LIST, Path: path})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, x := range resp.GetXattrs().GetXattrs() {
		out = append(out, x.GetName())
	}
	return out, nil
}

// RemoveXAttr implements meta.XAttrs.
func (c *Client) RemoveXAttr(ctx context.Context, u meta.User, path, name string) error {
	_, err := c.xattr(ctx, u, &api.XAttrRequest{Op: api.XAttrRequest_OP_REMOVE, Path: path, Names: []string{name}})
	return err
}
