package etcdcoord

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nimbus-fs/nimbus/coordinator"
	"github.com/nimbus-fs/nimbus/internal/backoff"
)

// Watch reports the membership of deployment: a Snapshot read at one
// revision, then etcd's watch from the next revision on. When etcd
// cancels the watch (no leader, connection lost) it is resumed from the
// last revision delivered; when the revisions it needs were compacted, a
// new Snapshot replaces them.
func (c *Coordinator) Watch(ctx context.Context, deployment int) (_ <-chan coordinator.Event, err error) {
	defer func(t time.Time) { c.met.Op("watch", t, err) }(time.Now())
	if deployment < coordinator.All {
		return nil, fmt.Errorf("%w: deployment %d", coordinator.ErrInvalid, deployment)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	snap, err := c.snapshot(ctx, deployment)
	if err != nil {
		return nil, err
	}
	out := make(chan coordinator.Event, 1)
	out <- snap
	c.met.Delivered(coordinator.Snapshot)
	if !c.track(func() { c.watch(ctx, deployment, snap.Rev, out) }) {
		close(out)
	}
	return out, nil
}

func (c *Coordinator) snapshot(ctx context.Context, deployment int) (coordinator.Event, error) {
	v, err := c.Members(ctx, deployment)
	if err != nil {
		return coordinator.Event{}, err
	}
	return coordinator.Event{Kind: coordinator.Snapshot, Rev: v.Rev, Members: v.Members}, nil
}

func (c *Coordinator) watch(ctx context.Context, deployment int, rev int64, out chan<- coordinator.Event) {
	defer close(out)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.life, cancel)()
	send := func(ev coordinator.Event) bool {
		select {
		case out <- ev:
			c.met.Delivered(ev.Kind)
			return true
		case <-ctx.Done():
			return false
		}
	}
	retry := backoff.New(backoff.Policy{Initial: 50 * time.Millisecond, Max: time.Second})
	for ctx.Err() == nil {
		// WithRequireLeader: a member cut off from its cluster cancels the
		// watch instead of going silent; it is resumed on another.
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := c.cli.Watch(wctx, c.membersPrefix(deployment), clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithPrevKV())
		resync := false
		for wr := range wch {
			if wr.CompactRevision != 0 {
				resync = true
				break
			}
			if err := wr.Err(); err != nil {
				c.log.Debug("membership watch cancelled; resuming", "rev", rev, "err", err)
				break
			}
			for _, e := range wr.Events {
				ev := coordinator.Event{Rev: e.Kv.ModRevision}
				var err error
				switch e.Type {
				case mvccpb.PUT:
					ev.Kind = coordinator.Joined
					ev.Member, err = decodeMember(e.Kv.Key, e.Kv.Value, c.cfg.Prefix)
				case mvccpb.DELETE:
					ev.Kind = coordinator.Left
					var prev []byte
					if e.PrevKv != nil {
						prev = e.PrevKv.Value
					}
					ev.Member, err = decodeMember(e.Kv.Key, prev, c.cfg.Prefix)
				}
				rev = e.Kv.ModRevision
				if err != nil {
					c.log.Warn("skipping a malformed member key", "key", string(e.Kv.Key), "err", err)
					continue
				}
				if !send(ev) {
					wcancel()
					return
				}
			}
			retry.Reset()
		}
		wcancel()
		if ctx.Err() != nil {
			return
		}
		if resync {
			snap, err := c.snapshot(ctx, deployment)
			if err == nil {
				c.log.Info("membership watch fell behind a compaction; sent a new snapshot", "from", rev, "to", snap.Rev)
				rev = snap.Rev
				if !send(snap) {
					return
				}
				continue
			}
			c.log.Debug("membership snapshot failed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry.Next()):
		}
	}
}
