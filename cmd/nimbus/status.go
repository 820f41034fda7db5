package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/platform"
	"github.com/nimbus-fs/nimbus/server"
	"github.com/nimbus-fs/nimbus/tenant"
)

// cmdStatus is `nimbus status [--tenants] [--json]`: it asks the running
// server at NIMBUS_ADDR what this instance did and costs (GET
// /status/instance) and which deployments and instances the cluster has
// (GET /status/cluster; on the local platform's gateway, only that) or,
// with --tenants, who loads it (GET
// /status/tenants): the tenants counted by name, heaviest first, then
// everyone else as "other".
func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("status", flag.ContinueOnError)
	fl.SetOutput(stderr)
	tenants := fl.Bool("tenants", false, "the tenants (users, user/job) loading the server: requests, errors, throttled, busy time, rate, limit")
	jsonOut := fl.Bool("json", false, "print the server's answer as JSON")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: nimbus status [--tenants] [--json]")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fl.NArg() != 0 {
		fl.Usage()
		return 2
	}
	addr := client.AddrFromEnv()
	base := addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if !*tenants {
		return printStatus(ctx, strings.TrimSuffix(base, "/"), *jsonOut, addr, stdout, stderr)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/status/tenants", nil)
	if err != nil {
		fmt.Fprintf(stderr, "nimbus status: %v\n", err)
		return 1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "nimbus status: %v\n", dialError(addr, err))
		return 1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "nimbus status: %s answered %s\n", addr, resp.Status)
		return 1
	}
	var doc struct {
		Tenants []tenant.Stat `json:"tenants"`
		Limited []string      `json:"limited"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		fmt.Fprintf(stderr, "nimbus status: reading the answer of %s: %v\n", addr, err)
		return 1
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			return 1
		}
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tenant\trequests\terrors\tthrottled\tbusy s\trate/s\tlimit/s\t")
	for _, t := range doc.Tenants {
		limit := "-"
		if t.Limit > 0 {
			limit = fmt.Sprintf("%g", t.Limit)
		}
		rate := fmt.Sprintf("%.1f", t.RateOpsS)
		if t.Tenant == tenant.Other {
			rate = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.3f\t%s\t%s\t\n", t.Tenant, t.Ops, t.Errors, t.Throttled, t.BusyS, rate, limit)
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	return 0
}

// instanceStatus is GET /status/instance.
type instanceStatus struct {
	Address string          `json:"address"`
	Usage   platform.Usage  `json:"usage"`
	Prices  platform.Prices `json:"prices"`
	Cost    platform.Cost   `json:"cost"`
}

// statusDoc is `nimbus status --json`: the instance's activity and cost
// (GET /status/instance; absent on the local platform's gateway, which is
// no instance) and the cluster's deployments and instances (GET
// /status/cluster; absent on servers older than it).
type statusDoc struct {
	*instanceStatus
	Deployments []platform.DeploymentStatus `json:"deployments"`
	Totals      *platform.ClusterTotals     `json:"totals,omitempty"`
	DataNodes   []server.DataNodeStatus     `json:"datanodes,omitempty"`
}

// getJSON GETs base+path into v; found is false on 404.
func getJSON(ctx context.Context, base, path string, v any) (found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return false, nil
	case resp.StatusCode != http.StatusOK:
		return false, fmt.Errorf("%s answered %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return false, fmt.Errorf("reading the answer to %s: %w", path, err)
	}
	return true, nil
}

// printStatus prints the instance's activity and cost, then the cluster.
func printStatus(ctx context.Context, base string, jsonOut bool, addr string, stdout, stderr io.Writer) int {
	var in instanceStatus
	hasInstance, err := getJSON(ctx, base, "/status/instance", &in)
	if err != nil {
		fmt.Fprintf(stderr, "nimbus status: %v\n", dialError(addr, err))
		return 1
	}
	var cs platform.ClusterStatus
	hasCluster, err := getJSON(ctx, base, "/status/cluster", &cs)
	if err != nil {
		fmt.Fprintf(stderr, "nimbus status: %v\n", dialError(addr, err))
		return 1
	}
	var dns server.DataNodesStatus
	if _, err := getJSON(ctx, base, "/status/datanodes", &dns); err != nil {
		fmt.Fprintf(stderr, "nimbus status: %v\n", dialError(addr, err))
		return 1
	}
	if !hasInstance && !hasCluster {
		fmt.Fprintf(stderr, "nimbus status: %s has neither /status/instance nor /status/cluster: is it a Nimbus server?\n", addr)
		return 1
	}
	if jsonOut {
		doc := statusDoc{Deployments: cs.Deployments, DataNodes: dns.DataNodes}
		if hasInstance {
			doc.instanceStatus = &in
		}
		if hasCluster {
			doc.Totals = &cs.Totals
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			return 1
		}
		return 0
	}
	if hasInstance {
		printInstance(in, stdout)
	}
	if hasCluster {
		printCluster(cs, stdout)
	}
	if len(dns.DataNodes) > 0 {
		printDataNodes(dns, stdout)
	}
	return 0
}

// printDataNodes prints the store's DataNodes.
func printDataNodes(dns server.DataNodesStatus, stdout io.Writer) {
	c := dns.Counts
	fmt.Fprintf(stdout, "datanodes: %d live, %d stale, %d dead; live capacity %s, used %s, remaining %s\n",
		c.Live, c.Stale, c.Dead, humanSize(c.Capacity), humanSize(c.Used), humanSize(c.Remaining))
	if b := dns.Blocks; b != nil {
		fmt.Fprintf(stdout, "blocks: %d, %d healthy, %d under-replicated, %d missing, %d over-replicated, %d mis-replicated, %d corrupt replicas; last replication round: %d copied, %d deleted, %d orphans deleted, %d failed\n",
			b.Blocks, b.Healthy, b.UnderReplicated, b.Missing, b.OverReplicated, b.MisReplicated, b.CorruptReplicas,
			b.Replicated, b.Deleted, b.OrphansDeleted, b.Failed)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "id\taddress\tzone\tcapacity\tused\tblocks\tlast heartbeat\tstate\t")
	for _, n := range dns.DataNodes {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t\n", n.ID, n.Address, n.Zone, humanSize(n.Capacity), humanSize(n.Used),
			n.Blocks, n.LastHeartbeat, n.State)
	}
	_ = tw.Flush()
}

// printCluster prints the deployments and their instances.
func printCluster(cs platform.ClusterStatus, stdout io.Writer) {
	fmt.Fprintf(stdout, "cluster: %d deployments, %d instances, %d invocations, %d cold starts\n",
		len(cs.Deployments), cs.Totals.Instances, cs.Totals.Invocations, cs.Totals.ColdStarts)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "deployment\tinstance\taddress\tstate\tage s\tin flight\tcold start ms\tcache hits\t")
	num := func(f *float64, format string) string {
		if f == nil {
			return "-"
		}
		return fmt.Sprintf(format, *f)
	}
	for _, d := range cs.Deployments {
		if len(d.Instances) == 0 {
			fmt.Fprintf(tw, "%s\t(none)\t\t\t\t\t\t\t\n", d.Name)
		}
		for _, in := range d.Instances {
			inflight := "-"
			if in.Inflight != nil {
				inflight = fmt.Sprint(*in.Inflight)
			}
			hits := "-"
			if in.CacheHitRatio != nil {
				hits = fmt.Sprintf("%.1f%%", 100**in.CacheHitRatio)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", d.Name, in.ID, in.Address, in.State,
				num(in.AgeSeconds, "%.1f"), inflight, num(in.ColdStartMS, "%.1f"), hits)
		}
	}
	_ = tw.Flush()
}

// printInstance prints the instance's activity and cost.
func printInstance(st instanceStatus, stdout io.Writer) {
	u, c, p := st.Usage, st.Cost, st.Prices
	conns := "" // a plain server counts them among its invocations (platform.Meter)
	if !u.ConnInvocations && u.ConnRequests > 0 {
		conns = fmt.Sprintf(" (and %d requests on connections, billed as active time only)", u.ConnRequests)
	}
	fmt.Fprintf(stdout, "instance %s: up %.1f s, active %.3f s (%.1f%%), %d invocations%s\n", st.Address, u.UptimeS, u.ActiveS,
		100*u.ActiveS/max(u.UptimeS, 1e-9), u.Invocations, conns)
	fmt.Fprintf(stdout, "cost at $%g per GB-second (%g GB) and $%g per million invocations: serverless $%.6f, serverful $%.6f\n",
		p.PerGBSecond, p.MemoryGB, p.PerMillionInvocation, c.ServerlessUSD, c.ServerfulUSD)
}
