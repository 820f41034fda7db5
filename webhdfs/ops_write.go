package webhdfs

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
)

// cleanupTimeout bounds the calls that release a lease after a failed upload;
// they run even when the client has gone.
const cleanupTimeout = 30 * time.Second

// create serves CREATE. First step: refuse early what the data step would
// refuse (an existing directory, an existing file without overwrite), then
// redirect. Data step: Create, stream the body, Complete; 201 Created.
func (h *Handler) create(rq *request) error {
	op, p := rq.op.lower, rq.path
	overwrite, err := createOverwrite(rq)
	if err != nil {
		return err
	}
	perm, err := rq.q.perm(op, p, "permission", meta.DefaultFile)
	if err != nil {
		return err
	}
	unmasked, hasUnmasked, err := rq.q.unmasked(op, p)
	if err != nil {
		return err
	}
	repl, err := rq.q.replication(op, p)
	if err != nil {
		return err
	}
	blockSize, err := rq.q.int64(op, p, "blocksize", 0, 0)
	if err != nil {
		return err
	}
	if _, err := rq.q.int64(op, p, "buffersize", 0, 1); err != nil {
		return err
	}
	createParent, err := rq.q.boolean(op, p, "createparent", true)
	if err != nil {
		return err
	}
	data, err := isDataStep(rq)
	if err != nil {
		return err
	}
	if !data {
		st, err := h.fs.Stat(rq.ctx(), rq.user, p)
		switch {
		case err == nil && st.Type == meta.TypeDir:
			return meta.Errorf(op, p, meta.ErrExists, "already exists as a directory")
		case err == nil && !overwrite:
			return meta.Errorf(op, p, meta.ErrExists, "and overwrite is false")
		case err != nil && meta.KindOf(err) != meta.KindNotFound:
			return err
		}
		return h.redirect(rq)
	}
	client := h.leaseHolder()
	opts := meta.CreateOptions{
		Client: client, Perm: perm, Overwrite: overwrite, CreateParent: createParent,
		Replication: repl, BlockSize: blockSize, Unmasked: unmasked, HasUnmasked: hasUnmasked,
	}
	stop := h.watchBody(rq)
	defer stop()
	if small, ok, err := h.smallBody(rq); err != nil {
		return err
	} else if ok {
		stop()
		// The whole body fits one write: create, write and close it in one
		// step where the file system can (one transaction in Nimbus's engine).
		if _, err = meta.CreateFile(rq.ctx(), h.fs, rq.user, p, opts, small); err != nil {
			if meta.KindOf(err) == meta.KindIsDir {
				return meta.Errorf(op, p, meta.ErrExists, "already exists as a directory")
			}
			return err
		}
		return h.created(rq, p)
	}
	// A larger body is streamed into a file under construction. Over an
	// existing file it goes to a staging file beside it, renamed over the
	// target once complete: a failed upload must not destroy what it was
	// meant to replace (HDFS deletes the old file at create; see
	// docs/WEBHDFS.md).
	target := p
	if overwrite {
		if target, err = h.stagingPath(rq, client); err != nil {
			return err
		}
		if target != p {
			opts.Overwrite, opts.CreateParent = false, false
		}
	}
	st, err := h.fs.Create(rq.ctx(), rq.user, target, opts)
	if meta.KindOf(err) == meta.KindIsDir {
		// HDFS: "<path> already exists as a directory".
		return meta.Errorf(op, p, meta.ErrExists, "already exists as a directory")
	}
	if err != nil {
		return err
	}
	err = h.upload(rq, target, client, 0)
	stop()
	if err == nil {
		_, err = h.fs.Complete(rq.ctx(), rq.user, target, client)
	}
	if err == nil && target != p {
		err = h.replace(rq, target, p)
	}
	if err != nil {
		// Nothing of a failed upload stays visible, and its lease goes with
		// it, so that the client can retry at once.
		h.discard(rq, target, st.FileID)
		return err
	}
	return h.created(rq, p)
}

// stagingPath returns where CREATE with overwrite streams its data: p itself
// when there is nothing to keep there (no file, or a file still being
// written, for which the engine applies HDFS's lease rules), else a hidden
// sibling named after p and the request's lease holder.
func (h *Handler) stagingPath(rq *request, client string) (string, error) {
	p := rq.path
	st, err := h.fs.Stat(rq.ctx(), rq.user, p)
	switch {
	case meta.KindOf(err) == meta.KindNotFound:
		return p, nil
	case err != nil:
		return "", err
	case st.Type == meta.TypeDir:
		return "", meta.Errorf(rq.op.lower, p, meta.ErrExists, "already exists as a directory")
	case st.UnderConstruction:
		return p, nil
	}
	dir, name := meta.ParentPath(p)
	tmp := "." + name + "." + client + stagingSuffix
	if len(tmp) > meta.MaxNameLen {
		tmp = "." + client + stagingSuffix
	}
	return meta.JoinPath(dir, tmp), nil
}

// stagingSuffix ends the name of the file a CREATE with overwrite writes
// before renaming it over its target.
const stagingSuffix = "._UPLOADING_"

// replace renames the complete staging file tmp over p, unless p has been
// reopened for writing meanwhile (an APPEND, a CREATE that replaced it):
// that writer's file is not destroyed.
func (h *Handler) replace(rq *request, tmp, p string) error {
	st, err := h.fs.Stat(rq.ctx(), rq.user, p)
	if err == nil && st.UnderConstruction {
		return meta.Errorf(rq.op.lower, p, meta.ErrLease, "opened for writing by another client during the upload, which was not kept")
	}
	if err != nil && meta.KindOf(err) != meta.KindNotFound {
		return err
	}
	return h.fs.Rename(rq.ctx(), rq.user, tmp, p, meta.RenameOptions{Overwrite: true})
}

// discard removes the file of a failed upload, lease and all, if path still
// names it (id): another client may have renamed it away, and put another
// file there, meanwhile. It runs on a context of its own, bounded by
// cleanupTimeout: the request's is cancelled when the client that cut its
// upload short goes away.
func (h *Handler) discard(rq *request, path string, id uint64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(rq.ctx()), cleanupTimeout)
	defer cancel()
	st, err := h.fs.Stat(ctx, rq.user, path)
	if err == nil && st.FileID != id {
		h.log.Debug("webhdfs: the file of a failed upload was replaced", "path", path)
		return
	}
	if err == nil {
		err = h.fs.Delete(ctx, rq.user, path, false)
	}
	if err != nil && meta.KindOf(err) != meta.KindNotFound {
		h.log.Warn("webhdfs: removing the file of a failed upload", "path", path, "err", err)
	}
}

// created answers a successful CREATE.
func (h *Handler) created(rq *request, p string) error {
	host, port := h.hostPort(rq)
	rq.w.Header().Set("Location", "webhdfs://"+joinHostPort(host, port)+p)
	rq.w.Header().Set("Content-Length", "0")
	rq.w.WriteHeader(http.StatusCreated)
	return nil
}

// smallBody reads the request body when it fits in one write chunk and
// returns it with ok set. A larger body is left readable from the start
// (what was read is put back in front), and ok is false.
func (h *Handler) smallBody(rq *request) ([]byte, bool, error) {
	if _, ok := h.fs.(meta.FileCreator); !ok {
		return nil, false, nil
	}
	if rq.r.ContentLength > int64(h.cfg.WriteChunk) {
		return nil, false, nil
	}
	buf := make([]byte, h.cfg.WriteChunk+1)
	n, err := fill(rq.r.Body, buf)
	switch {
	case err == io.EOF:
		return buf[:n], true, nil
	case err != nil:
		return nil, false, readError(rq, rq.path, err)
	}
	rq.r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(buf[:n]), rq.r.Body), rq.r.Body}
	return nil, false, nil
}

// createOverwrite reads overwrite=, or createflag= (Hadoop's createNonRecursive
// sends CREATE,OVERWRITE flags instead of overwrite=true; HDFS's DataNode
// prefers the flags when present).
func createOverwrite(rq *request) (bool, error) {
	op, p := rq.op.lower, rq.path
	flags := rq.q["createflag"]
	if flags == "" {
		return rq.q.boolean(op, p, "overwrite", false)
	}
	overwrite := false
	for _, f := range strings.Split(flags, ",") {
		switch strings.ToUpper(strings.TrimSpace(f)) {
		case "OVERWRITE":
			overwrite = true
		case "APPEND":
			return false, meta.Errorf(op, p, meta.ErrUnsupported, "createflag APPEND: use op=APPEND")
		case "", "CREATE", "SYNC_BLOCK", "LAZY_PERSIST", "NEW_BLOCK", "NO_LOCAL_WRITE",
			"SHOULD_REPLICATE", "IGNORE_CLIENT_LOCALITY", "NO_LOCAL_RACK":
			// Placement and durability hints with no meaning here.
		default:
			return false, argError(op, p, "createflag", flags, "unknown flag "+f)
		}
	}
	return overwrite, nil
}

// appendOp serves APPEND; the data URL may be reused for many appends.
func (h *Handler) appendOp(rq *request) error {
	op, p := rq.op.lower, rq.path
	if _, err := rq.q.int64(op, p, "buffersize", 0, 1); err != nil {
		return err
	}
	data, err := isDataStep(rq)
	if err != nil {
		return err
	}
	if !data {
		if _, err := h.fileOnly(rq); err != nil {
			return err
		}
		return h.redirect(rq)
	}
	client := h.leaseHolder()
	st, err := h.fs.Append(rq.ctx(), rq.user, p, client)
	if err != nil {
		return err
	}
	stop := h.watchBody(rq)
	defer stop()
	err = h.upload(rq, p, client, st.Length)
	stop()
	if err == nil {
		_, err = h.fs.Complete(rq.ctx(), rq.user, p, client)
	}
	if err != nil {
		h.undoAppend(rq, client, st.Length)
		return err
	}
	return writeEmpty(rq.w)
}

// completerAt is an optional capability of the file system (Nimbus's engine
// has it): close a file at length bytes, discarding what was written after,
// in one step.
type completerAt interface {
	CompleteAt(ctx context.Context, u meta.User, path, client string, length int64) (*meta.FileStatus, error)
}

// undoAppend closes a file whose APPEND failed at length, the length it had
// before. With a completerAt nobody ever sees the appended bytes; otherwise
// the file is closed, then truncated, and they are visible in between (and
// stay if another writer opens the file first). When the file cannot be
// closed, it stays open until lease recovery, which keeps what was durably
// written (docs/WEBHDFS.md).
func (h *Handler) undoAppend(rq *request, client string, length int64) {
	p := rq.path
	ctx, cancel := context.WithTimeout(context.WithoutCancel(rq.ctx()), cleanupTimeout)
	defer cancel()
	if ca, ok := h.fs.(completerAt); ok {
		if _, err := ca.CompleteAt(ctx, rq.user, p, client, length); err != nil {
			h.log.Warn("webhdfs: undoing a failed append", "path", p, "length", length, "err", err)
		}
		return
	}
	st, err := h.fs.Complete(ctx, rq.user, p, client)
	if err != nil {
		h.log.Warn("webhdfs: closing the file of a failed append", "path", p, "err", err)
		return
	}
	if st.Length > length {
		if err := h.fs.Truncate(ctx, rq.user, st.Path, length); err != nil {
			h.log.Warn("webhdfs: cutting a failed append", "path", st.Path, "length", length, "err", err)
		}
	}
}

// upload feeds the request body to Write on path in pieces of at most
// WriteChunk bytes, starting at offset. The buffer is reused: Write must not
// keep it. A body cut short, stalled or over a limit fails the upload.
func (h *Handler) upload(rq *request, path, client string, offset int64) error {
	if rq.r.Body == nil {
		return nil
	}
	buf := make([]byte, h.cfg.WriteChunk)
	for {
		n, rerr := fill(rq.r.Body, buf)
		if rerr != nil && rerr != io.EOF {
			// The upload has failed: what came before the error is not
			// worth writing (and net/http has cancelled the context).
			return readError(rq, path, rerr)
		}
		if n > 0 {
			if err := h.fs.Write(rq.ctx(), rq.user, path, client, offset, buf[:n]); err != nil {
				return err
			}
			offset += int64(n)
			h.m.bytesWritten.Add(float64(n))
		}
		if rerr == io.EOF {
			return nil
		}
	}
}

func (h *Handler) mkdirs(rq *request) error {
	perm, err := rq.q.perm(rq.op.lower, rq.path, "permission", meta.DefaultDir)
	if err != nil {
		return err
	}
	unmasked, hasUnmasked, err := rq.q.unmasked(rq.op.lower, rq.path)
	if err != nil {
		return err
	}
	if hasUnmasked {
		err = h.fs.MkdirsUnmasked(rq.ctx(), rq.user, rq.path, perm, unmasked)
	} else {
		err = h.fs.Mkdirs(rq.ctx(), rq.user, rq.path, perm)
	}
	if err != nil {
		return err
	}
	return writeBoolean(rq.w, true)
}

// createSymlink: the URL path is the link, destination its target.
func (h *Handler) createSymlink(rq *request) error {
	target := rq.q["destination"]
	if target == "" {
		return meta.Errorf(rq.op.lower, rq.path, meta.ErrInvalidArgument, "missing parameter \"destination\"")
	}
	createParent, err := rq.q.boolean(rq.op.lower, rq.path, "createparent", false)
	if err != nil {
		return err
	}
	if err := h.fs.CreateSymlink(rq.ctx(), rq.user, target, rq.path, createParent); err != nil {
		return err
	}
	return writeEmpty(rq.w)
}

// rename implements both of HDFS's renames. Without renameoptions it is
// rename1: {"boolean": false} for the failures HDFS reports that way (missing
// source or destination parent, existing destination file, a directory into
// itself); with renameoptions=NONE|OVERWRITE it is rename2, whose failures are
// exceptions.
func (h *Handler) rename(rq *request) error {
	op := rq.op.lower
	dst, err := destPath(op, "destination", rq.q["destination"])
	if err != nil {
		return err
	}
	if !rq.q.has("renameoptions") {
		if dst == rq.path {
			st, err := h.fs.Stat(rq.ctx(), rq.user, rq.path)
			if err != nil && meta.KindOf(err) != meta.KindNotFound {
				return err
			}
			return writeBoolean(rq.w, err == nil && st.Type != meta.TypeDir)
		}
		err := h.fs.Rename(rq.ctx(), rq.user, rq.path, dst, meta.RenameOptions{})
		switch meta.KindOf(err) {
		case meta.KindUnknown:
			if err != nil {
				return err
			}
			return writeBoolean(rq.w, true)
		case meta.KindNotFound, meta.KindExists, meta.KindNotDir, meta.KindIsDir, meta.KindNotEmpty, meta.KindInvalidArgument:
			return writeBoolean(rq.w, false)
		}
		return err
	}
	overwrite := false
	for _, o := range strings.Split(rq.q["renameoptions"], ",") {
		switch strings.ToUpper(strings.TrimSpace(o)) {
		case "", "NONE":
		case "OVERWRITE":
			overwrite = true
		default:
			return argError(op, rq.path, "renameoptions", rq.q["renameoptions"], "want NONE or OVERWRITE")
		}
	}
	if !overwrite {
		// rename2 without OVERWRITE never moves into an existing directory.
		if _, err := h.fs.Stat(rq.ctx(), rq.user, dst); err == nil {
			return meta.Errorf(op, dst, meta.ErrExists, "rename destination exists")
		} else if meta.KindOf(err) != meta.KindNotFound {
			return err
		}
	}
	if err := h.fs.Rename(rq.ctx(), rq.user, rq.path, dst, meta.RenameOptions{Overwrite: overwrite}); err != nil {
		return err
	}
	return writeEmpty(rq.w)
}

// deleteOp: a missing path is {"boolean": false}, as HDFS; so is the root,
// which HDFS never deletes.
func (h *Handler) deleteOp(rq *request) error {
	recursive, err := rq.q.boolean(rq.op.lower, rq.path, "recursive", false)
	if err != nil {
		return err
	}
	if rq.path == meta.RootPath {
		l, err := h.fs.List(rq.ctx(), rq.user, rq.path, "", 1)
		if err != nil {
			return err
		}
		if len(l.Entries) > 0 && !recursive {
			return meta.Errorf(rq.op.lower, rq.path, meta.ErrNotEmpty, "")
		}
		return writeBoolean(rq.w, false)
	}
	err = h.fs.Delete(rq.ctx(), rq.user, rq.path, recursive)
	if k := meta.KindOf(err); k == meta.KindNotFound || k == meta.KindNotDir {
		return writeBoolean(rq.w, false)
	}
	if err != nil {
		return err
	}
	return writeBoolean(rq.w, true)
}

func (h *Handler) setPermission(rq *request) error {
	perm, err := rq.q.perm(rq.op.lower, rq.path, "permission", meta.DefaultDir)
	if err != nil {
		return err
	}
	if err := h.fs.SetPermission(rq.ctx(), rq.user, rq.path, perm); err != nil {
		return err
	}
	return writeEmpty(rq.w)
}

func (h *Handler) setOwner(rq *request) error {
	owner, group := rq.q["owner"], rq.q["group"]
	if owner == "" && group == "" {
		return meta.Errorf(rq.op.lower, rq.path, meta.ErrInvalidArgument, "Both owner and group are empty.")
	}
	if err := h.fs.SetOwner(rq.ctx(), rq.user, rq.path, owner, group); err != nil {
		return err
	}
	return writeEmpty(rq.w)
}

func (h *Handler) setTimes(rq *request) error {
	mtime, err := rq.q.int64(rq.op.lower, rq.path, "modificationtime", -1, -1)
	if err != nil {
		return err
	}
	atime, err := rq.q.int64(rq.op.lower, rq.path, "accesstime", -1, -1)
	if err != nil {
		return err
	}
	if err := h.fs.SetTimes(rq.ctx(), rq.user, rq.path, mtime, atime); err != nil {
		return err
	}
	return writeEmpty(rq.w)
}

// setReplication answers false for a directory, as HDFS does.
func (h *Handler) setReplication(rq *request) error {
	repl, err := rq.q.replication(rq.op.lower, rq.path)
	if err != nil {
		return err
	}
	if repl == 0 {
		d, err := h.fs.Defaults(rq.ctx())
		if err != nil {
			return err
		}
		repl = d.Replication
	}
	err = h.fs.SetReplication(rq.ctx(), rq.user, rq.path, repl)
	if meta.KindOf(err) == meta.KindIsDir {
		return writeBoolean(rq.w, false)
	}
	if err != nil {
		return err
	}
	return writeBoolean(rq.w, true)
}

// quotaParam maps HDFS's quota values onto meta's: absent or Long.MAX_VALUE
// (QUOTA_DONT_SET) is 0 (unchanged), -1 (QUOTA_RESET) clears, others set.
func quotaParam(rq *request, name string) (int64, error) {
	v, err := rq.q.int64(rq.op.lower, rq.path, name, math.MaxInt64, -1)
	switch {
	case err != nil:
		return 0, err
	case v == math.MaxInt64:
		return 0, nil
	case v == 0:
		return 0, argError(rq.op.lower, rq.path, name, "0", "a quota must be positive, or -1 to clear it")
	}
	return v, nil
}

func (h *Handler) setQuota(rq *request) error {
	ns, err := quotaParam(rq, "namespacequota")
	if err != nil {
		return err
	}
	ss, err := quotaParam(rq, "storagespacequota")
	if err != nil {
		return err
	}
	if err := h.fs.SetQuota(rq.ctx(), rq.user, rq.path, ns, ss); err != nil {
		return err
	}
	return writeEmpty(rq.w)
}

// truncate answers true: inline content is cut at once, no block recovery.
func (h *Handler) truncate(rq *request) error {
	if !rq.q.has("newlength") {
		return meta.Errorf(rq.op.lower, rq.path, meta.ErrInvalidArgument, "missing parameter \"newlength\"")
	}
	n, err := rq.q.int64(rq.op.lower, rq.path, "newlength", 0, 0)
	if err != nil {
		return err
	}
	if err := h.fs.Truncate(rq.ctx(), rq.user, rq.path, n); err != nil {
		return err
	}
	return writeBoolean(rq.w, true)
}

func (h *Handler) concat(rq *request) error {
	raw := rq.q["sources"]
	if raw == "" {
		return meta.Errorf(rq.op.lower, rq.path, meta.ErrInvalidArgument, "missing parameter \"sources\"")
	}
	var srcs []string
	for _, s := range strings.Split(raw, ",") {
		p, err := destPath(rq.op.lower, "sources", s)
		if err != nil {
			return err
		}
		srcs = append(srcs, p)
	}
	if err := h.fs.Concat(rq.ctx(), rq.user, rq.path, srcs); err != nil {
		return err
	}
	return writeEmpty(rq.w)
}
