package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/datanode/registry"
	"github.com/nimbus-fs/nimbus/store"
)

// The DataNodes of the store (package datanode/registry), as `nimbus
// status` (GET /status/datanodes), the status page and /metrics
// (nimbus_datanodes{state}) show them. One registry serves them for the
// server's life: a DataNode's liveness is judged by how long its reader
// has seen its heartbeat counter stand still, so a reader made per request
// would take every DataNode for stale.

// DataNodeStatus is one DataNode as GET /status/datanodes lists it.
type DataNodeStatus struct {
	ID       uint64 `json:"id"`
	UUID     string `json:"uuid"`
	Host     string `json:"host"`
	Address  string `json:"address"`  // data transfer port
	HTTPAddr string `json:"httpAddr"` // HTTP port (commands, /metrics)
	Zone     string `json:"zone"`
	Capacity int64  `json:"capacity"`
	Used     int64  `json:"used"`
	// Remaining is the space left for blocks; Blocks the replicas held, as
	// last counted by the DataNode.
	Remaining int64 `json:"remaining"`
	Blocks    int64 `json:"blocks"`
	// LastHeartbeat is the time of its last heartbeat by its own clock
	// (RFC 3339); SilentSeconds how long this server has seen its
	// heartbeats stand still.
	LastHeartbeat string  `json:"lastHeartbeat"`
	SilentSeconds float64 `json:"silentSeconds"`
	// State is its liveness (live, stale, dead), or its admin state when
	// an operator changed it (decommissioning, decommissioned), with
	// "full" or "failed" added when it takes no new replicas.
	State   string `json:"state"`
	Version string `json:"version"`
}

// DataNodesStatus is GET /status/datanodes.
type DataNodesStatus struct {
	DataNodes []DataNodeStatus `json:"datanodes"`
	Counts    registry.Counts  `json:"counts"`
	// Blocks is the last round of the replication duty, present while
	// this server runs it (it leads the block-maintenance election).
	Blocks *BlockHealth `json:"blocks,omitempty"`
}

// BlockHealth is a replication round's report (datapath/maintain.Report):
// the blocks of complete files by class and the round's work.
type BlockHealth struct {
	Blocks          int `json:"blocks"`
	Healthy         int `json:"healthy"`
	UnderReplicated int `json:"underReplicated"`
	OverReplicated  int `json:"overReplicated"`
	MisReplicated   int `json:"misReplicated"`
	Missing         int `json:"missing"`
	CorruptReplicas int `json:"corruptReplicas"`
	// The round's work: copies made, replicas deleted (excess, corrupt),
	// orphaned replicas deleted, copies failed.
	Replicated     int `json:"replicated"`
	Deleted        int `json:"deleted"`
	OrphansDeleted int `json:"orphansDeleted"`
	Failed         int `json:"failed"`
}

// blockHealth is this server's Maintainer's last report while it runs
// the duty, else nil.
func (s *Server) blockHealth() *BlockHealth {
	if s.maintainer == nil || !s.duties.maintaining.Load() {
		return nil
	}
	r := s.maintainer.Last()
	return &BlockHealth{Blocks: r.Blocks, Healthy: r.Healthy, UnderReplicated: r.UnderReplicated, OverReplicated: r.OverReplicated,
		MisReplicated: r.MisReplicated, Missing: r.Missing, CorruptReplicas: r.CorruptReplicas,
		Replicated: r.Replicated, Deleted: r.Deleted, OrphansDeleted: r.OrphansDeleted, Failed: r.Failed}
}

// dataNodeView reads the DataNodes for the status views.
type dataNodeView struct {
	reg *registry.Registry
	log *slog.Logger

	mu     sync.Mutex
	at     time.Time // when counts were read
	counts registry.Counts
	err    error
}

// countsTTL bounds how often /metrics (and the status page's sampler,
// which gathers the registry every second) read the DataNode rows.
const countsTTL = 3 * time.Second

func newDataNodeView(st store.Store, live registry.Config, preg prometheus.Registerer, log *slog.Logger) (*dataNodeView, error) {
	reg, err := registry.New(st, live)
	if err != nil {
		return nil, err
	}
	v := &dataNodeView{reg: reg, log: log}
	if preg != nil {
		if err := preg.Register(v); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// list reads every DataNode, in id order.
func (v *dataNodeView) list(ctx context.Context) (DataNodesStatus, error) {
	nodes, err := v.reg.DataNodes(ctx)
	if err != nil {
		return DataNodesStatus{}, err
	}
	out := DataNodesStatus{DataNodes: make([]DataNodeStatus, 0, len(nodes)), Counts: registry.Count(nodes)}
	for _, n := range nodes {
		state := n.Liveness.String()
		if n.Admin != store.AdminNormal {
			state = n.Admin.String() + " (" + state + ")"
		}
		if n.Full {
			state += ", full"
		}
		if n.Failed {
			state += ", failed"
		}
		out.DataNodes = append(out.DataNodes, DataNodeStatus{
			ID: n.ID, UUID: n.UUID, Host: n.Host, Address: n.DataAddr, HTTPAddr: n.HTTPAddr, Zone: n.Zone,
			Capacity: n.Capacity, Used: n.Used, Remaining: n.Remaining, Blocks: n.Replicas,
			LastHeartbeat: time.UnixMilli(n.Updated).UTC().Format(time.RFC3339), SilentSeconds: n.Silent.Seconds(),
			State: state, Version: n.Version,
		})
	}
	v.mu.Lock()
	v.at, v.counts, v.err = time.Now(), out.Counts, nil
	v.mu.Unlock()
	return out, nil
}

var dataNodesDesc = prometheus.NewDesc("nimbus_datanodes", "DataNodes of the store by state (live, stale, dead by heartbeat; decommissioning and decommissioned by admin state, whatever their liveness).", []string{"state"}, nil)

// Describe implements prometheus.Collector.
func (v *dataNodeView) Describe(ch chan<- *prometheus.Desc) { ch <- dataNodesDesc }

// Collect implements prometheus.Collector: the counts, read again when
// older than countsTTL.
func (v *dataNodeView) Collect(ch chan<- prometheus.Metric) {
	v.mu.Lock()
	fresh := time.Since(v.at) < countsTTL
	v.mu.Unlock()
	if !fresh {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := v.list(ctx)
		cancel()
		if err != nil {
			v.mu.Lock()
			v.at, v.err = time.Now(), err
			v.mu.Unlock()
			v.log.Debug("metrics: reading the DataNodes", "err", err)
		}
	}
	v.mu.Lock()
	c := v.counts
	v.mu.Unlock()
	for _, s := range []struct {
		state string
		n     int
	}{{"live", c.Live}, {"stale", c.Stale}, {"dead", c.Dead}, {"decommissioning", c.Decommissioning}, {"decommissioned", c.Decommissioned}} {
		ch <- prometheus.MustNewConstMetric(dataNodesDesc, prometheus.GaugeValue, float64(s.n), s.state)
	}
}

// dataNodesJSON answers GET /status/datanodes.
func (s *Server) dataNodesJSON(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	out, err := s.dnodes.list(ctx)
	if err != nil {
		http.Error(w, "reading the DataNodes: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	out.Blocks = s.blockHealth()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
