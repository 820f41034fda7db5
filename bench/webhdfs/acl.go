package webhdfs

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/nimbus-fs/nimbus/meta"
)

// MkdirsUnmasked is MKDIRS with unmaskedpermission (HDFS-6962).
func (c *Client) MkdirsUnmasked(ctx context.Context, u meta.User, dir string, perm, unmasked meta.Perm) error {
	var r struct{ Boolean bool }
	if err := c.getJSON(ctx, http.MethodPut, dir, "MKDIRS", u.Name, &r, "permission", octal(perm), "unmaskedpermission", octal(unmasked)); err != nil {
		return err
	}
	if !r.Boolean {
		return meta.Errorf("mkdirs", dir, meta.ErrExists, "MKDIRS returned false")
	}
	return nil
}

// ModifyAclEntries is MODIFYACLENTRIES.
func (c *Client) ModifyAclEntries(ctx context.Context, u meta.User, path string, entries []meta.AclEntry) error {
	return c.getJSON(ctx, http.MethodPut, path, "MODIFYACLENTRIES", u.Name, nil, "aclspec", meta.FormatAclSpec(entries, true))
}

// RemoveAclEntries is REMOVEACLENTRIES.
func (c *Client) RemoveAclEntries(ctx context.Context, u meta.User, path string, entries []meta.AclEntry) error {
	return c.getJSON(ctx, http.MethodPut, path, "REMOVEACLENTRIES", u.Name, nil, "aclspec", meta.FormatAclSpec(entries, false))
}

// RemoveDefaultAcl is REMOVEDEFAULTACL.
func (c *Client) RemoveDefaultAcl(ctx context.Context, u meta.User, path string) error {
	return c.getJSON(ctx, http.MethodPut, path, "REMOVEDEFAULTACL", u.Name, nil)
}

// RemoveAcl is REMOVEACL.
func (c *Client) RemoveAcl(ctx context.Context, u meta.User, path string) error {
	return c.getJSON(ctx, http.MethodPut, path, "REMOVEACL", u.Name, nil)
}

// SetAcl is SETACL.
func (c *Client) SetAcl(ctx context.Context, u meta.User, path string, entries []meta.AclEntry) error {
	return c.getJSON(ctx, http.MethodPut, path, "SETACL", u.Name, nil, "aclspec", meta.FormatAclSpec(entries, true))
}

// GetAclStatus is GETACLSTATUS.
func (c *Client) GetAclStatus(ctx context.Context, u meta.User, path string) (*meta.AclStatus, error) {
	var r struct {
		AclStatus struct {
			Entries    []string `json:"entries"`
			Group      string   `json:"group"`
			Owner      string   `json:"owner"`
			Permission string   `json:"permission"`
			StickyBit  bool     `json:"stickyBit"`
		} `json:"AclStatus"`
	}
	if err := c.getJSON(ctx, http.MethodGet, path, "GETACLSTATUS", u.Name, &r); err != nil {
		return nil, err
	}
	a := r.AclStatus
	perm, err := strconv.ParseUint(a.Permission, 8, 32)
	if err != nil {
		return nil, meta.Errorf("getAclStatus", path, meta.ErrInternal, "permission %q: %v", a.Permission, err)
	}
	st := &meta.AclStatus{Owner: a.Owner, Group: a.Group, Perm: meta.Perm(perm), StickyBit: a.StickyBit}
	for _, s := range a.Entries {
		e, err := meta.ParseAclEntry(s, true)
		if err != nil {
			return nil, meta.Errorf("getAclStatus", path, meta.ErrInternal, "entry %q: %v", s, err)
		}
		st.Entries = append(st.Entries, e)
	}
	return st, nil
}

// SetXAttr is SETXATTR, the value sent in hex.
func (c *Client) SetXAttr(ctx context.Context, u meta.User, path string, x meta.XAttr, flag meta.XAttrSetFlag) error {
	var fl []string
	if flag&meta.XAttrCreate != 0 {
		fl = append(fl, "CREATE")
	}
	if flag&meta.XAttrReplace != 0 {
		fl = append(fl, "REPLACE")
	}
	return c.getJSON(ctx, http.MethodPut, path, "SETXATTR", u.Name, nil, "xattr.name", x.Name,
		"xattr.value", meta.EncodeXAttrValue(x.Value, meta.XAttrHex), "flag", strings.Join(fl, ","))
}

// GetXAttrs is GETXATTRS with encoding=hex, xattr.name repeated.
func (c *Client) GetXAttrs(ctx context.Context, u meta.User, path string, names []string) ([]meta.XAttr, error) {
	kv := []string{"encoding", "hex"}
	for _, n := range names {
		kv = append(kv, "xattr.name", n)
	}
	var r struct {
		XAttrs []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"XAttrs"`
	}
	if err := c.getJSON(ctx, http.MethodGet, path, "GETXATTRS", u.Name, &r, kv...); err != nil {
		return nil, err
	}
	out := make([]meta.XAttr, len(r.XAttrs))
	for i, x := range r.XAttrs {
		v, err := meta.DecodeXAttrValue(x.Value)
		if err != nil {
			return nil, meta.Errorf("getXAttrs", path, meta.ErrInternal, "value of %s: %v", x.Name, err)
		}
		out[i] = meta.XAttr{Name: x.Name, Value: v}
	}
	return out, nil
}

// ListXAttrs is LISTXATTRS, whose answer is a JSON string holding a JSON
// array.
func (c *Client) ListXAttrs(ctx context.Context, u meta.User, path string) ([]string, error) {
	var r struct {
		XAttrNames string `json:"XAttrNames"`
	}
	if err := c.getJSON(ctx, http.MethodGet, path, "LISTXATTRS", u.Name, &r); err != nil {
		return nil, err
	}
	var names []string
	if err := decodeJSON([]byte(r.XAttrNames), &names); err != nil {
		return nil, meta.Errorf("listXAttrs", path, meta.ErrInternal, "XAttrNames %q: %v", r.XAttrNames, err)
	}
	return names, nil
}

// RemoveXAttr is REMOVEXATTR.
func (c *Client) RemoveXAttr(ctx context.Context, u meta.User, path, name string) error {
	return c.getJSON(ctx, http.MethodPut, path, "REMOVEXATTR", u.Name, nil, "xattr.name", name)
}
