package server

import (
	"context"
	"time"

	"github.com/nimbus-fs/nimbus/coordinator"
)

// Duties that one server at a time runs among those sharing a store and a
// coordinator (docs/ELASTIC.md, "Elected duties"):
//
//   - the lease monitor (namespace.Engine.RunLeaseMonitor), while this
//     server leads the coordinator's LeaseMonitorElection;
//   - in the DataNode mode, the replication duty (datapath/maintain:
//     re-replication, trimming, corrupt replicas, orphans,
//     decommissions), while it leads MaintenanceElection. One Maintainer
//     at a time keeps its pending copies and its orphan clock coherent;
//     a new leader starts both afresh, which costs at most a copy made
//     twice (trimmed later) and an orphan grace waited again.
//
// Orphan-block removal in the local mode is not elected: each server's
// DataNode (blocks/local under --data) is its own, so each server looks after its
// own replicas, with the rule of namespace.Engine.RemoveOrphanBlocks that
// makes it safe while peers run.

// LeaseMonitorElection is the election whose leader runs the lease monitor.
const LeaseMonitorElection = "lease-monitor"

// MaintenanceElection is the election whose leader runs the replication
// duty of the DataNode mode.
const MaintenanceElection = "block-maintenance"

// startDuties starts the elected duties and, on a shared store, the
// orphan-block removal (Start); stopDuties ends them.
func (s *Server) startDuties() {
	ctx, cancel := context.WithCancel(context.Background())
	s.duties.cancel = cancel
	if s.pebble == nil && (s.cfg.Coordinator == "" || s.cfg.Coordinator == CoordinatorInProcess) {
		// Safe (each recovery is conditional in its transaction), only
		// more work: every such server scans the lease table.
		s.log.Info("the store is shared but the coordinator is this process's own: this server runs the lease monitor whatever the others do; pass --coordinator etcd://... to elect one")
		if s.maintainer != nil {
			// Not safe in the same way: two Maintainers could each delete
			// a different excess replica of one block.
			s.log.Warn("the store is shared but the coordinator is this process's own: this server runs the replication duty whatever the others do, and two such duties may delete more excess replicas than they should; pass --coordinator etcd://... when several servers share the store")
		}
	}
	s.duties.wg.Add(1)
	go func() {
		defer s.duties.wg.Done()
		s.runElected(ctx, coordinator.Duty{
			Election: LeaseMonitorElection,
			Run:      s.ns.RunLeaseMonitor,
			Logger:   s.log.With("component", "duties"),
		})
	}()
	if m := s.maintainer; m != nil {
		s.duties.wg.Add(1)
		go func() {
			defer s.duties.wg.Done()
			s.runElected(ctx, coordinator.Duty{
				Election: MaintenanceElection,
				Run: func(ctx context.Context) {
					s.duties.maintaining.Store(true)
					defer s.duties.maintaining.Store(false)
					_ = m.Run(ctx)
				},
				Logger: s.log.With("component", "duties"),
			})
		}()
	}
	if s.pebble == nil {
		s.duties.wg.Add(1)
		go func() {
			defer s.duties.wg.Done()
			s.removeOrphansLater(ctx)
		}()
	}
}

// stopDuties stops the duties (resigning their elections) and waits for
// them, before the server leaves the coordinator.
func (s *Server) stopDuties() {
	if s.duties.cancel == nil {
		return
	}
	s.duties.cancel()
	s.duties.wg.Wait()
}

// runElected runs d through every session of this server's membership in
// turn (a lost session is replaced by a new incarnation), until ctx is done.
func (s *Server) runElected(ctx context.Context, d coordinator.Duty) {
	for {
		sess, changed := s.member.current()
		err := coordinator.RunDuty(ctx, sess, d)
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("elected duty: the coordinator session ended; waiting for the next", "duty", d.Election, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// removeOrphansLater removes this server's orphaned block replicas on a
// shared store, where it may not happen before serving (RemoveOrphanBlocks
// waits Config.OrphanBlockGrace for rows that may still be landing).
func (s *Server) removeOrphansLater(ctx context.Context) {
	settle := func(ctx context.Context) error {
		t := time.NewTimer(s.cfg.OrphanBlockGrace)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	n, err := s.ns.RemoveOrphanBlocks(ctx, settle)
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Warn("looking for orphaned blocks", "err", err)
	case n > 0:
		s.log.Info("removed orphaned block replicas", "count", n)
	}
}
