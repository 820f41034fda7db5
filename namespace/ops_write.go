package namespace

import (
	"context"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// Append implements meta.FileSystem.
// Locks: the file exclusive.
func (e *Engine) Append(ctx context.Context, u meta.User, path, client string) (*meta.FileStatus, error) {
	const op = "append"
	p, err := clean(op, path)
	if err != nil {
		return nil, err
	}
	if err := checkName(op, p, "client", client); err != nil {
		return nil, err
	}
	var out *meta.FileStatus
	err = e.runOnceStatus(ctx, op, p, u, &out, func(t *tx) error {
		r, n, err := t.regularFile(ctx, op, p, store.Exclusive, permW)
		if err != nil {
			return err
		}
		if n.UnderConstruction() {
			if holds(n.LeaseHolder, client, t.user) {
				return meta.Errorf(op, p, meta.ErrLease, "already open for writing by this client (%s)", client)
			}
			exp, err := t.e.leaseExpired(ctx, t.st, n.LeaseHolder, t.e.cfg.LeaseSoftLimit, t.e.cfg.Now())
			if err != nil {
				return err
			}
			if !exp {
				return t.leaseConflict(op, p, n.LeaseHolder)
			}
			if err := t.recoverFile(ctx, op, r, n); err != nil { // the old writer is gone: recover, then take over
				return err
			}
		}
		holder := holderKey(client, t.user)
		n.LeaseHolder = holder
		n.LeaseRenewed = t.now
		n.Written = n.Length
		if n.Blocks && t.e.cfg.DataNodes != nil {
			if err := t.dnAppendBlocks(ctx, n); err != nil {
				return err
			}
		} else if n.Blocks {
			if err := t.appendBlocks(ctx, n, holder); err != nil {
				return err
			}
		}
		t.put(n)
		t.putLease(n, p)
		t.renewLease(holder)
		out = status(p, n)
		t.answer(out)
		return nil
	})
	return out, err
}

// Write implements meta.FileSystem.
// Locks: the file exclusive (and directories with a space quota above it).
func (e *Engine) Write(ctx context.Context, u meta.User, path, client string, offset int64, data []byte) error {
	const op = "write"
	p, err := clean(op, path)
	if err != nil {
		return err
	}
	// A block file's bytes go to its open block stream, outside any
	// transaction; an inline file's go to its content rows in one.
	var bf *store.Inode
	var fw *fileWriter
	err = e.run(ctx, op, p, u, func(t *tx) error {
		bf, fw = nil, nil
		r, n, err := t.writerFile(ctx, op, p, client)
		if err != nil {
			return err
		}
		if n.Blocks && t.e.cfg.DataNodes != nil {
			return dnWriteBlocks(p)
		}
		if n.Blocks {
			bf, fw = n, t.e.writers.get(n.ID)
			if fw == nil {
				if !t.e.alone {
					// Several NameNodes share the store: the stream is in
					// the process that opened it. No byte is written here.
					return meta.Errorf(op, p, meta.ErrLease,
						"this NameNode holds no block stream for the file: its writes go to the NameNode it was created or appended through (send them there); if that NameNode restarted or died, recover the lease and append")
				}
				return meta.Errorf(op, p, meta.ErrLease, "the file's block stream is gone (the server restarted); recover the lease and append")
			}
			return nil
		}
		if t.e.rewritten(ctx, offset, len(data), n.Written) {
			return nil // a resubmission of the write that ended there (once.go)
		}
		if offset != n.Written {
			return meta.Errorf(op, p, meta.ErrInvalidArgument,
				"writes are sequential: offset %d, but %d bytes are written", offset, n.Written)
		}
		if n.Written+int64(len(data)) > t.e.cfg.InlineThreshold {
			if t.e.cfg.DataNodes != nil {
				return t.dnTooLarge(p, n, len(data))
			}
			if t.e.blocks != nil {
				bf = n
				fw, err = t.toBlocks(ctx, n, n.LeaseHolder)
				return err
			}
			return meta.Errorf(op, p, meta.ErrTooLarge,
				"this server keeps file contents in its metadata store up to %d bytes and has no block storage",
				t.e.cfg.InlineThreshold)
		}
		if err := t.charge(op, p, r.chain[:r.depth()], 0, int64(len(data))*int64(n.Replication)); err != nil {
			return err
		}
		if err := t.appendContent(ctx, n, data); err != nil {
			return err
		}
		t.put(n)
		t.renewLease(n.LeaseHolder)
		return nil
	})
	if err != nil || fw == nil {
		return err
	}
	if err := e.writeBlocks(ctx, u, p, bf, fw, offset, data); err != nil {
		return e.finish(op, p, err)
	}
	return nil
}

// writerFile locks the file client is writing for the caller, named p when
// it was opened. When p no longer names it (the file, or a directory above
// it, was renamed while it was open — HDFS allows that), the client's lease
// row knows the file's current path, and the operation restarts there.
func (t *tx) writerFile(ctx context.Context, op, p, client string) (*resolved, *store.Inode, error) {
	path := p
	if t.op.movedTo != "" {
		path = t.op.movedTo
	}
	rs, err := t.resolve(ctx, want{path: path, last: store.Exclusive})
	if err != nil {
		return nil, nil, err
	}
	r := rs[0]
	n, err := t.existing(op, r)
	if err == nil && n.Type == meta.TypeFile && holds(n.LeaseHolder, client, t.user) {
		return r, n, nil
	}
	if err == nil || meta.KindOf(err) == meta.KindNotFound {
		ls, lerr := t.leases(ctx, holderKey(client, t.user))
		if lerr != nil {
			return nil, nil, lerr
		}
		if len(ls) == 1 && ls[0].Path != path {
			t.op.movedTo = ls[0].Path
			return nil, nil, errRetry
		}
	}
	if err != nil {
		return nil, nil, err
	}
	return r, n, t.checkWriter(op, p, n, client)
}

// checkWriter fails unless n is a file under construction leased to client
// for the caller. A caller who is not the user that opened the file gets a
// permission error whatever client it names: writing, adding a block and
// closing are that user's (HDFS trusts the client name alone).
func (t *tx) checkWriter(op, path string, n *store.Inode, client string) error {
	if err := checkFile(op, path, n); err != nil {
		return err
	}
	if !n.UnderConstruction() {
		return meta.Errorf(op, path, meta.ErrLease, "the file is not open for writing")
	}
	if holds(n.LeaseHolder, client, t.user) {
		return nil
	}
	hc, hu := splitHolder(n.LeaseHolder)
	if hu != t.user {
		return meta.Errorf(op, path, meta.ErrPermission,
			"user %s may not %s the file: it is open for writing by %s", t.user, op, describeHolder(n.LeaseHolder))
	}
	return meta.Errorf(op, path, meta.ErrLease, "the lease is held by client %s, not %s", hc, client)
}

// appendContent writes data after the n.Written bytes of n's content, in
// fixed-size chunks, and advances n.Written. The caller holds n exclusive.
func (t *tx) appendContent(ctx context.Context, n *store.Inode, data []byte) error {
	c := int64(t.e.cfg.ChunkSize)
	for len(data) > 0 {
		k := n.Written / c
		fill := n.Written - k*c // bytes already in chunk k
		var chunk []byte
		if fill > 0 {
			old, err := t.chunk(ctx, store.DataKey(n.ID, k*c))
			if err != nil {
				return err
			}
			if int64(len(old)) != fill {
				return meta.Errorf("write", "", meta.ErrInternal, "content chunk %d of inode %d has %d bytes, want %d",
					k, n.ID, len(old), fill)
			}
			chunk = old
		}
		take := min(int64(len(data)), c-fill)
		chunk = append(chunk[:fill:fill], data[:take]...)
		t.setChunk(store.DataKey(n.ID, k*c), chunk)
		data = data[take:]
		n.Written += take
	}
	return nil
}

// cutContent drops n's content after size bytes (size <= n.Written).
func (t *tx) cutContent(ctx context.Context, n *store.Inode, size int64) error {
	c := int64(t.e.cfg.ChunkSize)
	if size%c != 0 {
		k := size / c
		old, err := t.chunk(ctx, store.DataKey(n.ID, k*c))
		if err != nil {
			return err
		}
		if int64(len(old)) < size-k*c {
			return meta.Errorf("truncate", "", meta.ErrInternal, "content chunk %d of inode %d is short", k, n.ID)
		}
		t.setChunk(store.DataKey(n.ID, k*c), old[:size-k*c:size-k*c])
	}
	for k := (size + c - 1) / c; k*c < n.Written; k++ {
		t.setChunk(store.DataKey(n.ID, k*c), nil)
	}
	n.Written = size
	return nil
}

// removeFile deletes a file or symlink row with its content and lease.
func (t *tx) removeFile(ctx context.Context, n *store.Inode) error {
	if err := t.dropOwnRows(ctx, n); err != nil {
		return err
	}
	t.del(n)
	return nil
}

// dropOwnRows deletes the rows an inode owns outside its own row: its
// extended attributes, content chunks or blocks, and lease. (A recursive
// delete removes the inode rows themselves by range: ops_delete.go.)
func (t *tx) dropOwnRows(ctx context.Context, n *store.Inode) error {
	if n.XAttrs {
		if err := t.dropXAttrs(ctx, n); err != nil {
			return err
		}
	}
	if n.Type == meta.TypeFile && n.Blocks {
		if err := t.dropBlocks(ctx, n); err != nil {
			return err
		}
		if n.UnderConstruction() {
			t.delRaw(store.LeaseKey(n.ID))
		}
	} else if n.Type == meta.TypeFile {
		if err := t.cutContent(ctx, n, 0); err != nil {
			return err
		}
		if n.UnderConstruction() {
			t.delRaw(store.LeaseKey(n.ID))
		}
	}
	return nil
}

// Complete implements meta.FileSystem.
// Locks: the file exclusive.
func (e *Engine) Complete(ctx context.Context, u meta.User, path, client string) (*meta.FileStatus, error) {
	if e.cfg.DataNodes != nil {
		return e.CompleteBlock(ctx, u, path, client, nil)
	}
	const op = "complete"
	p, err := clean(op, path)
	if err != nil {
		return nil, err
	}
	var out *meta.FileStatus
	err = e.runOnceStatus(ctx, op, p, u, &out, func(t *tx) error {
		r, n, err := t.writerFile(ctx, op, p, client)
		if err != nil {
			return err
		}
		if n.Blocks {
			if fw := t.e.writers.get(n.ID); fw != nil {
				if err := t.finishBlocks(ctx, op, r, n, fw); err != nil {
					return err
				}
			} else if err := t.recoverBlocks(ctx, op, r, n); err != nil {
				return err // the stream was lost: keep what is durable
			}
		}
		t.closeFile(n)
		out = status(r.path, n)
		t.answer(out)
		return nil
	})
	return out, err
}

// Truncate implements meta.FileSystem.
// Locks: the file exclusive (and directories with a space quota above it).
func (e *Engine) Truncate(ctx context.Context, u meta.User, path string, newLength int64) error {
	const op = "truncate"
	p, err := clean(op, path)
	if err != nil {
		return err
	}
	_, err = e.runOnce(ctx, op, p, u, func(t *tx) error {
		r, n, err := t.regularFile(ctx, op, p, store.Exclusive, permW)
		if err != nil {
			return err
		}
		if n.UnderConstruction() {
			return meta.Errorf(op, p, meta.ErrLease, "open for writing by %s", describeHolder(n.LeaseHolder))
		}
		if newLength < 0 || newLength > n.Length {
			return meta.Errorf(op, p, meta.ErrInvalidArgument, "new length %d not in [0, %d]", newLength, n.Length)
		}
		if newLength == n.Length {
			return nil
		}
		if err := t.charge(op, p, r.chain[:r.depth()], 0, -(n.Written-newLength)*int64(n.Replication)); err != nil {
			return err
		}
		if n.Blocks {
			err = t.truncateBlocks(ctx, p, n, newLength)
		} else {
			err = t.cutContent(ctx, n, newLength)
		}
		if err != nil {
			return err
		}
		n.Length = newLength
		n.Mtime = t.now
		t.put(n)
		return nil
	})
	return err
}

// Concat implements meta.FileSystem.
// Locks: the directory exclusive (it loses entries), the target and every
// source exclusive.
func (e *Engine) Concat(ctx context.Context, u meta.User, target string, srcs []string) error {
	const op = "concat"
	p, err := clean(op, target)
	if err != nil {
		return err
	}
	if len(srcs) == 0 {
		return meta.Errorf(op, p, meta.ErrInvalidArgument, "no source files")
	}
	dir, _ := meta.ParentPath(p)
	wants := []want{{path: p, last: store.Exclusive, parent: store.Exclusive}}
	seen := map[string]bool{p: true}
	for _, s := range srcs {
		sp, err := clean(op, s)
		if err != nil {
			return err
		}
		if seen[sp] {
			return meta.Errorf(op, sp, meta.ErrInvalidArgument, "named twice, or is the target")
		}
		seen[sp] = true
		if d, _ := meta.ParentPath(sp); d != dir {
			return meta.Errorf(op, sp, meta.ErrInvalidArgument, "sources must be in the target's directory %s", dir)
		}
		wants = append(wants, want{path: sp, last: store.Exclusive, parent: store.Exclusive})
	}
	_, err = e.runOnce(ctx, op, p, u, func(t *tx) error {
		rs, err := t.resolve(ctx, wants...)
		if err != nil {
			return err
		}
		var tn *store.Inode
		var total int64
		files := make([]*store.Inode, len(rs))
		for i, r := range rs {
			n, err := t.existing(op, r)
			if err != nil {
				return err
			}
			if err := checkFile(op, r.path, n); err != nil {
				return err
			}
			if n.UnderConstruction() {
				return meta.Errorf(op, r.path, meta.ErrLease, "open for writing by %s", describeHolder(n.LeaseHolder))
			}
			bits := permR | permW
			if i == 0 {
				tn, bits = n, permW
			}
			if err := t.require(op, r.path, n, bits); err != nil {
				return err
			}
			files[i] = n
			total += n.Length
		}
		parent := rs[0].parent()
		if err := t.require(op, dir, parent, permW|permX); err != nil {
			return err
		}
		inline := total <= t.e.cfg.InlineThreshold
		for _, f := range files {
			inline = inline && !f.Blocks
		}
		if !inline {
			if err := t.checkConcatBlocks(op, rs, files); err != nil {
				return err
			}
		}
		var dSpace int64
		for _, s := range files[1:] {
			dSpace += s.Length*int64(tn.Replication) - s.Written*int64(s.Replication)
		}
		if err := t.charge(op, p, rs[0].chain[:rs[0].depth()], -int64(len(srcs)), dSpace); err != nil {
			return err
		}
		var nextBlock uint32
		if !inline {
			trows, err := t.blockRows(ctx, tn.ID)
			if err != nil {
				return err
			}
			nextBlock = uint32(len(trows))
		}
		for _, s := range files[1:] {
			if !inline {
				// HDFS's way: the sources' blocks become the target's.
				if err := t.moveBlocks(ctx, s, tn, &nextBlock); err != nil {
					return err
				}
				if s.XAttrs {
					if err := t.dropXAttrs(ctx, s); err != nil {
						return err
					}
				}
				t.del(s)
				continue
			}
			data, err := t.readContent(ctx, s, 0, s.Length, s.Length)
			if err != nil {
				return err
			}
			if err := t.appendContent(ctx, tn, data); err != nil {
				return err
			}
			if err := t.removeFile(ctx, s); err != nil {
				return err
			}
		}
		tn.Length = tn.Written
		tn.Mtime = t.now
		t.put(tn)
		parent.Children -= int64(len(srcs))
		parent.Mtime = t.now
		t.put(parent)
		return nil
	})
	return err
}

// chunk returns a content chunk as this transaction sees it: its own writes
// first, then the store. The caller holds the file's lock.
func (t *tx) chunk(ctx context.Context, key []byte) ([]byte, error) {
	if v, ok := t.chunks[string(key)]; ok {
		return v, nil
	}
	vals, err := t.st.Read(ctx, []store.ReadReq{{Key: key}})
	if err != nil {
		return nil, err
	}
	return vals[0], nil
}

// setChunk buffers a content chunk write (nil deletes it).
func (t *tx) setChunk(key, v []byte) {
	if t.chunks == nil {
		t.chunks = make(map[string][]byte)
	}
	t.chunks[string(key)] = v
	if v == nil {
		t.delRaw(key)
	} else {
		t.putRaw(key, v)
	}
}
