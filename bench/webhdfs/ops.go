package webhdfs

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/webhdfs/wire"
)

func octal(p meta.Perm) string { return strconv.FormatUint(uint64(p&meta.PermMask), 8) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Echo is a GETFILESTATUS of "/": the cheapest request WebHDFS has.
func (c *Client) Echo(ctx context.Context) error {
	return c.getJSON(ctx, http.MethodGet, "/", "GETFILESTATUS", "", nil)
}

// Stat is GETFILESTATUS.
func (c *Client) Stat(ctx context.Context, u meta.User, path string) (*meta.FileStatus, error) {
	var r wire.FileStatusReply
	if err := c.getJSON(ctx, http.MethodGet, path, "GETFILESTATUS", u.Name, &r); err != nil {
		return nil, err
	}
	st := r.FileStatus.Meta(path)
	return &st, nil
}

// List is LISTSTATUS_BATCH from startAfter; the server chooses the page size
// (HDFS: dfs.ls.limit), and limit only truncates what it returns.
func (c *Client) List(ctx context.Context, u meta.User, dir, startAfter string, limit int) (*meta.Listing, error) {
	var r wire.DirectoryListingReply
	kv := []string(nil)
	if startAfter != "" {
		kv = []string{"startAfter", startAfter}
	}
	if err := c.getJSON(ctx, http.MethodGet, dir, "LISTSTATUS_BATCH", u.Name, &r, kv...); err != nil {
		return nil, err
	}
	fs := r.DirectoryListing.PartialListing.FileStatuses.FileStatus
	l := &meta.Listing{Entries: make([]meta.FileStatus, 0, len(fs)), Remaining: r.DirectoryListing.RemainingEntries}
	for i := range fs {
		p := dir
		if fs[i].PathSuffix != "" {
			p = meta.JoinPath(dir, fs[i].PathSuffix)
		}
		l.Entries = append(l.Entries, fs[i].Meta(p))
	}
	if limit > 0 && len(l.Entries) > limit {
		l.Remaining += int64(len(l.Entries) - limit)
		l.Entries = l.Entries[:limit]
	}
	return l, nil
}

// ListAll is LISTSTATUS: the whole directory in one answer.
func (c *Client) ListAll(ctx context.Context, u meta.User, dir string) ([]meta.FileStatus, error) {
	var r wire.ListStatusReply
	if err := c.getJSON(ctx, http.MethodGet, dir, "LISTSTATUS", u.Name, &r); err != nil {
		return nil, err
	}
	out := make([]meta.FileStatus, 0, len(r.FileStatuses.FileStatus))
	for i := range r.FileStatuses.FileStatus {
		f := &r.FileStatuses.FileStatus[i]
		out = append(out, f.Meta(meta.JoinPath(dir, f.PathSuffix)))
	}
	return out, nil
}

// Mkdirs is MKDIRS.
func (c *Client) Mkdirs(ctx context.Context, u meta.User, dir string, perm meta.Perm) error {
	if perm == 0 {
		perm = meta.DefaultDir
	}
	var r wire.BooleanReply
	if err := c.getJSON(ctx, http.MethodPut, dir, "MKDIRS", u.Name, &r, "permission", octal(perm)); err != nil {
		return err
	}
	if !r.Boolean {
		return meta.Errorf("mkdirs", dir, meta.ErrExists, "MKDIRS returned false")
	}
	return nil
}

// CreateFile is CREATE in two steps with data as the body: the file is
// complete when it returns. It implements meta.FileCreator.
func (c *Client) CreateFile(ctx context.Context, u meta.User, path string, opts meta.CreateOptions, data []byte) (*meta.FileStatus, error) {
	perm := opts.Perm
	if perm == 0 {
		perm = meta.DefaultFile
	}
	opts.Perm = perm
	if err := c.twoStep(ctx, http.MethodPut, path, "CREATE", u.Name, data, createParams(opts)...); err != nil {
		return nil, err
	}
	return &meta.FileStatus{Path: path, Type: meta.TypeFile, Perm: perm, Length: int64(len(data))}, nil
}

// Create is CREATE with no data: WebHDFS has no open-for-write state, so the
// file is complete and empty at once; Write appends to it.
func (c *Client) Create(ctx context.Context, u meta.User, path string, opts meta.CreateOptions) (*meta.FileStatus, error) {
	if err := c.twoStep(ctx, http.MethodPut, path, "CREATE", u.Name, nil, createParams(opts)...); err != nil {
		return nil, err
	}
	return &meta.FileStatus{Path: path, Type: meta.TypeFile, Perm: opts.Perm}, nil
}

// createParams are CREATE's parameters for opts.
func createParams(opts meta.CreateOptions) []string {
	kv := []string{"overwrite", strconv.FormatBool(opts.Overwrite)}
	if opts.Perm != 0 {
		kv = append(kv, "permission", octal(opts.Perm))
	}
	if opts.HasUnmasked {
		kv = append(kv, "unmaskedpermission", octal(opts.Unmasked))
	}
	if opts.Replication != 0 {
		kv = append(kv, "replication", strconv.Itoa(int(opts.Replication)))
	}
	if opts.BlockSize != 0 {
		kv = append(kv, "blocksize", itoa(opts.BlockSize))
	}
	return kv
}

// Append checks the file exists and is a file; the data comes with Write.
func (c *Client) Append(ctx context.Context, u meta.User, path, _ string) (*meta.FileStatus, error) {
	st, err := c.Stat(ctx, u, path)
	if err == nil && st.Type == meta.TypeDir {
		return nil, meta.Errorf("append", path, meta.ErrIsDir, "")
	}
	return st, err
}

// Write is APPEND in two steps (offset is not sent: WebHDFS appends at the
// end, which is what meta's sequential writes require).
func (c *Client) Write(ctx context.Context, u meta.User, path, _ string, _ int64, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	return c.twoStep(ctx, http.MethodPost, path, "APPEND", u.Name, data)
}

// Complete returns the file's status: WebHDFS closes files at the end of
// each CREATE or APPEND.
func (c *Client) Complete(ctx context.Context, u meta.User, path, _ string) (*meta.FileStatus, error) {
	return c.Stat(ctx, u, path)
}

// Read is OPEN with offset and length, following the redirect to the
// DataNode.
func (c *Client) Read(ctx context.Context, u meta.User, path string, offset, length int64) ([]byte, error) {
	const op = "OPEN"
	var b []byte
	keep := func(body []byte) error {
		b = append([]byte(nil), body[:min(int64(len(body)), max(length, 0))]...)
		return nil
	}
	resp, err := c.do(ctx, http.MethodGet, c.opURL(path, op, u.Name, "offset", itoa(offset), "length", itoa(length)), nil, op, path, keep)
	if err == nil && resp.status == http.StatusTemporaryRedirect {
		_, err = c.do(ctx, http.MethodGet, resp.location, nil, op, path, keep)
	}
	if err != nil {
		var oe *meta.OpError
		if errors.As(err, &oe) && strings.HasPrefix(oe.Detail, "EOFException:") {
			// HDFS refuses an offset past the end ("Cannot seek after
			// EOF"); meta's Read returns nothing there.
			return []byte{}, nil
		}
		return nil, err
	}
	return b, nil
}

// Delete is DELETE; a false answer means there was nothing to delete.
func (c *Client) Delete(ctx context.Context, u meta.User, path string, recursive bool) error {
	var r wire.BooleanReply
	if err := c.getJSON(ctx, http.MethodDelete, path, "DELETE", u.Name, &r, "recursive", strconv.FormatBool(recursive)); err != nil {
		return err
	}
	if !r.Boolean {
		return meta.Errorf("delete", path, meta.ErrNotFound, "DELETE returned false")
	}
	return nil
}

// Rename is RENAME (with renameoptions=OVERWRITE when asked). HDFS answers a
// plain rename that cannot happen with false and no reason; the source is
// then looked up to tell "not found" from "destination exists".
func (c *Client) Rename(ctx context.Context, u meta.User, src, dst string, opts meta.RenameOptions) error {
	kv := []string{"destination", dst}
	if opts.Overwrite {
		kv = append(kv, "renameoptions", "OVERWRITE")
	}
	if opts.Overwrite {
		// rename2 (OVERWRITE) answers 200 with an empty body (HDFS) or an
		// empty object: either way nothing to read.
		return c.getJSON(ctx, http.MethodPut, src, "RENAME", u.Name, nil, kv...)
	}
	var r wire.BooleanReply
	if err := c.getJSON(ctx, http.MethodPut, src, "RENAME", u.Name, &r, kv...); err != nil {
		return err
	}
	if r.Boolean {
		return nil
	}
	// A bare false: find out why, as far as the namespace tells.
	if _, err := c.Stat(ctx, u, src); err != nil {
		return meta.Errorf("rename", src, meta.ErrNotFound, "RENAME returned false")
	}
	if _, err := c.Stat(ctx, u, dst); err == nil {
		return meta.Errorf("rename", dst, meta.ErrExists, "RENAME returned false")
	}
	if parent, _ := meta.ParentPath(dst); parent != "" {
		if _, err := c.Stat(ctx, u, parent); err != nil {
			return meta.Errorf("rename", dst, meta.ErrNotFound, "RENAME returned false: no parent directory")
		}
	}
	return meta.Errorf("rename", dst, meta.ErrInvalidArgument, "RENAME returned false")
}

// SetPermission is SETPERMISSION.
func (c *Client) SetPermission(ctx context.Context, u meta.User, path string, perm meta.Perm) error {
	return c.getJSON(ctx, http.MethodPut, path, "SETPERMISSION", u.Name, nil, "permission", octal(perm))
}

// SetOwner is SETOWNER.
func (c *Client) SetOwner(ctx context.Context, u meta.User, path, owner, group string) error {
	var kv []string
	if owner != "" {
		kv = append(kv, "owner", owner)
	}
	if group != "" {
		kv = append(kv, "group", group)
	}
	return c.getJSON(ctx, http.MethodPut, path, "SETOWNER", u.Name, nil, kv...)
}

// SetTimes is SETTIMES.
func (c *Client) SetTimes(ctx context.Context, u meta.User, path string, mtime, atime int64) error {
	return c.getJSON(ctx, http.MethodPut, path, "SETTIMES", u.Name, nil, "modificationtime", itoa(mtime), "accesstime", itoa(atime))
}

// SetReplication is SETREPLICATION.
func (c *Client) SetReplication(ctx context.Context, u meta.User, path string, replication uint16) error {
	return c.getJSON(ctx, http.MethodPut, path, "SETREPLICATION", u.Name, nil, "replication", strconv.Itoa(int(replication)))
}

// Truncate is TRUNCATE.
func (c *Client) Truncate(ctx context.Context, u meta.User, path string, newLength int64) error {
	return c.getJSON(ctx, http.MethodPost, path, "TRUNCATE", u.Name, nil, "newlength", itoa(newLength))
}

// Concat is CONCAT.
func (c *Client) Concat(ctx context.Context, u meta.User, target string, srcs []string) error {
	return c.getJSON(ctx, http.MethodPost, target, "CONCAT", u.Name, nil, "sources", strings.Join(srcs, ","))
}

// ContentSummary is GETCONTENTSUMMARY.
func (c *Client) ContentSummary(ctx context.Context, u meta.User, path string) (*meta.ContentSummary, error) {
	var r wire.ContentSummaryReply
	if err := c.getJSON(ctx, http.MethodGet, path, "GETCONTENTSUMMARY", u.Name, &r); err != nil {
		return nil, err
	}
	s := r.ContentSummary
	return &meta.ContentSummary{Length: s.Length, FileCount: s.FileCount, DirectoryCount: s.DirectoryCount,
		NsQuota: s.Quota, NsConsumed: s.FileCount + s.DirectoryCount, SpaceQuota: s.SpaceQuota, SpaceConsumed: s.SpaceConsumed}, nil
}

// SetQuota is SETQUOTA (namespace and storage-space quota).
func (c *Client) SetQuota(ctx context.Context, u meta.User, dir string, nsQuota, spaceQuota int64) error {
	return c.getJSON(ctx, http.MethodPut, dir, "SETQUOTA", u.Name, nil, "namespacequota", itoa(nsQuota), "storagespacequota", itoa(spaceQuota))
}

// CreateSymlink is CREATESYMLINK.
func (c *Client) CreateSymlink(ctx context.Context, u meta.User, target, link string, createParent bool) error {
	return c.getJSON(ctx, http.MethodPut, link, "CREATESYMLINK", u.Name, nil, "destination", target, "createParent", strconv.FormatBool(createParent))
}

// RenewLease does nothing: WebHDFS holds no lease between requests.
func (c *Client) RenewLease(context.Context, meta.User, string) error { return nil }

// Defaults is GETSERVERDEFAULTS.
func (c *Client) Defaults(ctx context.Context) (*meta.ServerDefaults, error) {
	var r defaultsReply
	if err := c.getJSON(ctx, http.MethodGet, "/", "GETSERVERDEFAULTS", "", &r); err != nil {
		return nil, err
	}
	return &meta.ServerDefaults{BlockSize: r.FsServerDefaults.BlockSize, Replication: r.FsServerDefaults.Replication}, nil
}

var _ meta.FileSystem = (*Client)(nil)
