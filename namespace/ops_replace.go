package namespace

import (
	"context"

	"github.com/nimbus-fs/nimbus/meta"
)

// CompleteAt closes the file client is writing, as Complete does, but at
// length bytes: whatever was written after length is discarded in the same
// transaction, so that no reader ever sees it. The WebHDFS gateway undoes a
// failed APPEND with it (length being the file's length when the append
// opened it); Complete followed by Truncate would publish the partial append
// between the two and let another writer in. length may not exceed what
// the file holds once closed. A block stream that failed (a bad disk) is
// recovered first, keeping what its replicas hold durably, as lease
// recovery does.
// Locks: the file exclusive (and directories with a space quota above it).
func (e *Engine) CompleteAt(ctx context.Context, u meta.User, path, client string, length int64) (*meta.FileStatus, error) {
	const op = "complete"
	p, err := clean(op, path)
	if err != nil {
		return nil, err
	}
	// A block file's stream is finished first, in a transaction of its own
	// that keeps the file open (its length, what readers see, unchanged):
	// the cut below reads the block rows, and a transaction does not read
	// its own writes. Both read the request's record; the second writes it.
	dup, err := e.runOnce(ctx, op, p, u, func(t *tx) error {
		t.unfinished()
		r, n, err := t.writerFile(ctx, op, p, client)
		if err != nil || !n.Blocks {
			return err
		}
		fw := t.e.writers.get(n.ID)
		if fw == nil {
			// Lost in a restart: recover as Complete does.
			if err := t.recoverBlocks(ctx, op, r, n); err != nil {
				return err
			}
		} else if err := t.finishBlocks(ctx, op, r, n, fw); meta.KindOf(err) == meta.KindBusy {
			return err
		} else if err != nil {
			// The stream failed: keep what its replicas hold durably.
			if err := t.recoverBlocks(ctx, op, r, n); err != nil {
				return err
			}
		}
		t.put(n)
		return nil
	})
	if dup != nil {
		return dup.Status, nil
	}
	if err != nil {
		return nil, err
	}
	var out *meta.FileStatus
	err = e.runOnceStatus(ctx, op, p, u, &out, func(t *tx) error {
		r, n, err := t.writerFile(ctx, op, p, client)
		if err != nil {
			return err
		}
		if n.Blocks && t.e.writers.get(n.ID) != nil {
			return meta.Errorf(op, r.path, meta.ErrBusy, "a write to the file is in progress")
		}
		if length < 0 || length > n.Written {
			return meta.Errorf(op, r.path, meta.ErrInvalidArgument, "length %d not in [0, %d]", length, n.Written)
		}
		if cut := n.Written - length; cut > 0 {
			if err := t.charge(op, r.path, r.chain[:r.depth()], 0, -cut*int64(n.Replication)); err != nil {
				return err
			}
			if n.Blocks {
				err = t.truncateBlocks(ctx, r.path, n, length)
			} else {
				err = t.cutContent(ctx, n, length)
			}
			if err != nil {
				return err
			}
		}
		t.closeFile(n)
		out = status(r.path, n)
		t.answer(out)
		return nil
	})
	return out, err
}
