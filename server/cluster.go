package server

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/nimbus-fs/nimbus/coordinator"
	"github.com/nimbus-fs/nimbus/platform"
)

// clusterJSON answers GET /status/cluster on a plain server, in the shape
// the local platform's gateway gives (platform.ClusterStatus), so that
// `nimbus status` reads either: the coordinator's members by deployment,
// this server among them (with the in-process coordinator, only this
// server). What a member does not say (its age, requests in flight) is
// known only for this server; the others' are null. The cache hit ratios
// are asked of every member's /metrics, each within 300 ms. Totals count
// the members and this server's own invocations; a plain server has no
// cold starts.
func (s *Server) clusterJSON(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	n := max(s.cfg.Deployments, 1)
	cs := platform.NewClusterStatus(n)
	self := ""
	if sess := s.Member(); sess != nil {
		self = sess.Member().ID
	}
	var members []coordinator.Member
	if s.coord != nil {
		if v, err := s.coord.Members(ctx, coordinator.All); err == nil {
			members = v.Members
		} else {
			s.log.Warn("status: reading the members", "err", err)
		}
	}
	if len(members) == 0 && self != "" {
		members = []coordinator.Member{s.Member().Member()}
	}
	for _, m := range members {
		ci := platform.ClusterInstance{ID: m.ID, Address: m.Addr, State: platform.StateServing}
		if m.ID == self {
			age := time.Since(s.start).Seconds()
			inflight := s.meter.InFlight()
			ci.AgeSeconds, ci.Inflight = &age, &inflight
		}
		d := m.Deployment
		if d < 0 || d >= n {
			continue
		}
		cs.Deployments[d].Instances = append(cs.Deployments[d].Instances, ci)
		cs.Totals.Instances++
	}
	cs.Totals.Invocations = s.meter.Usage().Invocations
	platform.FillHitRatios(ctx, http.DefaultClient, &cs, 300*time.Millisecond)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(cs)
}
