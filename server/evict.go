package server

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nimbus-fs/nimbus/coordinator"
	"github.com/nimbus-fs/nimbus/coordinator/etcdcoord"
	"github.com/nimbus-fs/nimbus/platform"
)

// The local platform's gateway evicts the coordinator member of an
// instance it has seen die (docs/ELASTIC.md, "Leases and fencing": an
// evicted member leaves exactly as an expired one does, and its peers
// fence it; what makes it safe before its lease expires is that its
// process was reaped). Without this, the writes of its peers that must
// invalidate its cache wait for the lease to expire, a TTL after the kill.

// OpenSharedCoordinator opens a client of the coordinator cfg.Coordinator
// names when servers share it (etcd), for a process that is no member: the
// platform's gateway. nil, nil for the in-process coordinator, which a
// server shares with nobody (there is nothing to evict from).
func OpenSharedCoordinator(ctx context.Context, cfg Config, log *slog.Logger) (coordinator.Coordinator, error) {
	if !cfg.sharedCoordinator() {
		return nil, nil
	}
	ec, err := etcdcoord.ParseURL(cfg.Coordinator)
	if err != nil {
		return nil, fmt.Errorf("server: coordinator: %w", err)
	}
	if cfg.CoordinatorTTL != 0 {
		ec.TTL = cfg.CoordinatorTTL
	}
	ec.Logger = log
	c, err := etcdcoord.New(ctx, ec)
	if err != nil {
		return nil, fmt.Errorf("server: coordinator %s: %w", cfg.Coordinator, err)
	}
	return c, nil
}

// EvictExited returns a platform.LocalOptions.Exited that evicts the
// member of an instance that exited (platform.MemberID), and every later
// incarnation of it (ID.N, after its session was lost): its process is
// dead, so none of them serves. An instance that reports no member ID is
// left to its lease's expiry; so is one whose eviction fails (the
// coordinator unreachable: logged).
func EvictExited(c coordinator.Coordinator, log *slog.Logger) func(platform.Instance) {
	return func(inst platform.Instance) {
		id := platform.MemberID(inst)
		if id == "" {
			return
		}
		begun := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ids := []string{id}
		if v, err := c.Members(ctx, coordinator.All); err == nil {
			for _, m := range v.Members {
				if strings.HasPrefix(m.ID, id+".") {
					ids = append(ids, m.ID)
				}
			}
		}
		for _, m := range ids {
			if err := c.Evict(ctx, m); err != nil {
				log.Warn("evicting the member of an instance that exited; its lease expires by itself", "member", m, "addr", inst.Addr(), "err", err)
				continue
			}
			log.Info("evicted the member of an instance that exited", "member", m, "addr", inst.Addr(), "took", time.Since(begun))
		}
	}
}
