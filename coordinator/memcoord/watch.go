package memcoord

import (
	"context"
	"fmt"
	"time"

	"github.com/nimbus-fs/nimbus/coordinator"
)

// watcher queues the events of one watch without bound, so that a slow
// reader never holds back the coordinator (or other watchers); its pump
// goroutine hands them on in order.
type watcher struct {
	deployment int
	wake       chan struct{}       // 1-buffered: events were queued
	queue      []coordinator.Event // guarded by Coordinator.mu
}

// Watch reports the membership of deployment: a Snapshot, then each change.
func (c *Coordinator) Watch(ctx context.Context, deployment int) (_ <-chan coordinator.Event, err error) {
	defer func(t time.Time) { c.op("watch", t, err) }(time.Now())
	if deployment < coordinator.All {
		return nil, fmt.Errorf("%w: deployment %d", coordinator.ErrInvalid, deployment)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return nil, coordinator.ErrClosed
	}
	w := &watcher{deployment: deployment, wake: make(chan struct{}, 1)}
	w.queue = append(w.queue, coordinator.Event{Kind: coordinator.Snapshot, Rev: c.mu.rev, Members: c.membersLocked(deployment)})
	w.wake <- struct{}{}
	c.mu.watchers[w] = struct{}{}
	c.mu.Unlock()

	out := make(chan coordinator.Event)
	go c.pump(ctx, w, out)
	return out, nil
}

// emitLocked queues ev for every watcher of its member's deployment.
func (c *Coordinator) emitLocked(ev coordinator.Event) {
	for w := range c.mu.watchers {
		if w.deployment != coordinator.All && w.deployment != ev.Member.Deployment {
			continue
		}
		w.queue = append(w.queue, ev)
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (c *Coordinator) pump(ctx context.Context, w *watcher, out chan<- coordinator.Event) {
	defer close(out)
	defer func() {
		c.mu.Lock()
		delete(c.mu.watchers, w)
		c.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.closed:
			return
		case <-w.wake:
		}
		c.mu.Lock()
		batch := w.queue
		w.queue = nil
		c.mu.Unlock()
		for _, ev := range batch {
			select {
			case out <- ev:
				c.met.Delivered(ev.Kind)
			case <-ctx.Done():
				return
			case <-c.closed:
				return
			}
		}
	}
}
