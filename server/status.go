package server

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/nimbus-fs/nimbus/internal/statuspage"
	"github.com/nimbus-fs/nimbus/platform"
	"github.com/nimbus-fs/nimbus/tenant"
	"net/http"
	"time"

	"github.com/nimbus-fs/nimbus/coordinator"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
)

// The status page at / says what this server is and where to go next. It
// reads only what is at hand (configuration, clocks, the store's counters,
// the root's row): nothing on it walks the namespace, so it costs the same
// on a store of a billion files.

// statusData is what the page's details block shows (statuspage.Data's
// Details); html/template escapes every field.
type statusData struct {
	Version         string
	Addr            string
	DataDir         string
	BlocksDir       string
	Started         string
	Uptime          string
	Superuser       string
	InlineThreshold int64
	Commits         uint64
	DiskUsage       string
	RootEntries     string // entries in /, or why they are unknown
	Coordinator     string // which, and this server's membership
	DataNodes       []dataNodeRow
	DataNodesErr    string // why they could not be read
}

// dataNodeRow is a DataNode as the page's table shows it.
type dataNodeRow struct {
	DataNodeStatus
	CapacityH, UsedH string
}

func (s *Server) statusPage(w http.ResponseWriter, r *http.Request) {
	cfg := s.ns.Config()
	var st pebblestore.Stats // zero on PostgreSQL: the database has its own
	if s.pebble != nil {
		st = s.pebble.Stats()
	}
	// One row read: the root's entry count. Counting the whole namespace
	// would walk it.
	root := "entries unknown"
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if fs, err := s.ns.Stat(ctx, meta.User{Name: cfg.Superuser}, meta.RootPath); err == nil {
		root = fmt.Sprintf("%d entries", fs.ChildrenNum)
		if fs.ChildrenNum == 1 {
			root = "1 entry"
		}
	}
	coord := "none"
	if sess := s.Member(); sess != nil {
		m := sess.Member()
		coord = fmt.Sprintf("%s; this server is member %s of deployment %d", s.coordinatorName(), m.ID, m.Deployment)
		if v, err := s.coord.Members(ctx, coordinator.All); err == nil {
			coord += fmt.Sprintf(" (%d members in all)", len(v.Members))
		} else {
			coord += fmt.Sprintf(" (members unknown: %v)", err)
		}
		switch l, ok, err := s.coord.Leader(ctx, LeaseMonitorElection); {
		case err != nil:
			coord += fmt.Sprintf("; lease monitor: unknown (%v)", err)
		case !ok:
			coord += "; lease monitor: no leader"
		case l.ID == m.ID:
			coord += "; lease monitor: this server"
		default:
			coord += fmt.Sprintf("; lease monitor: member %s at %s", l.ID, l.Addr)
		}
	}
	d := statuspage.Data{Version: s.cfg.Version, Role: "one process serving", Addr: s.Addr(),
		Started: s.start.UTC().Format(time.RFC3339), Uptime: time.Since(s.start).Round(time.Second).String(),
		Cluster: s.clusterForPage(ctx)}
	d.Totals = statuspage.TotalsOf(d.Cluster, s.page.series.Series(time.Now().Add(-time.Minute), 1))
	details := statusData{
		Version:         s.cfg.Version,
		Addr:            s.Addr(),
		DataDir:         s.cfg.DataDir,
		BlocksDir:       BlocksDir(s.cfg.DataDir),
		Started:         s.start.UTC().Format(time.RFC3339),
		Uptime:          time.Since(s.start).Round(time.Second).String(),
		Superuser:       cfg.Superuser,
		InlineThreshold: cfg.InlineThreshold,
		Commits:         st.Commits,
		DiskUsage:       humanBytes(st.DiskUsage),
		RootEntries:     root,
		Coordinator:     coord,
	}
	if dn, err := s.dnodes.list(ctx); err != nil {
		details.DataNodesErr = err.Error()
	} else {
		for _, n := range dn.DataNodes {
			details.DataNodes = append(details.DataNodes, dataNodeRow{DataNodeStatus: n,
				CapacityH: humanBytes(uint64(n.Capacity)), UsedH: humanBytes(uint64(n.Used))})
		}
	}
	d.Details = details
	if d.Version == "" {
		d.Version = "(version unknown)"
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := statusTemplate.Execute(w, d); err != nil {
		s.log.Warn("status page", "err", err)
	}
}

// rpcInfo answers GET /rpc/ (a browser following the status page): the RPC
// lives at /rpc/conn and /rpc/call, a protocol over an upgraded connection,
// not a page.
func rpcInfo(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "This is Nimbus's RPC endpoint: `nimbus fs` and the Go client (package client) speak a")
	fmt.Fprintln(w, "binary protocol under /rpc/ over an upgraded HTTP connection; there is nothing to read here.")
	fmt.Fprintln(w, "Browse / for the status page or /webhdfs/v1/?op=LISTSTATUS for the namespace.")
}

func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// tenantsJSON answers GET /status/tenants: the tenants counted by name,
// heaviest first, then "other", with their limits (`nimbus status
// --tenants`).
func (s *Server) tenantsJSON(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		Tenants []tenant.Stat `json:"tenants"`
		Limited []string      `json:"limited"`
	}{s.tenants.Snapshot(), s.tenants.Limited()})
}

// instanceJSON answers GET /status/instance: this instance's metered
// activity and what it costs at the configured prices, serverless (active
// time and invocations) and serverful (its whole uptime), for `nimbus status
// --json` and the benchmark's cost figures.
func (s *Server) instanceJSON(w http.ResponseWriter, r *http.Request) {
	u := s.meter.Usage()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		Addr   string          `json:"address"`
		Usage  platform.Usage  `json:"usage"`
		Prices platform.Prices `json:"prices"`
		Cost   platform.Cost   `json:"cost"`
	}{s.Addr(), u, s.cfg.Prices, s.cfg.Prices.CostOf(u)})
}

// loadJSON answers GET /status/load: the requests this instance is serving
// on connections (connect-backs, /rpc/conn) and has served so far, which
// the platform polls a few times a second to see the load its gateway
// does not (docs/ELASTIC.md, "The local platform and its hosting"). Two
// atomic loads and a few dozen bytes.
func (s *Server) loadJSON(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.meter.ConnLoad())
}
