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
	"github.com/nimbus-fs/nimbus/tenant"
)

// cmdStatus is `nimbus status [--tenants] [--json]`: it asks the running
// server at NIMBUS_ADDR what this instance did and costs (GET
// /status/instance) or, with --tenants, who loads it (GET
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
	what := "/status/instance"
	if *tenants {
		what = "/status/tenants"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+what, nil)
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
	if !*tenants {
		return printInstance(resp.Body, *jsonOut, addr, stdout, stderr)
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

// printInstance prints the instance's activity and cost.
func printInstance(body io.Reader, jsonOut bool, addr string, stdout, stderr io.Writer) int {
	var st instanceStatus
	if err := json.NewDecoder(body).Decode(&st); err != nil {
		fmt.Fprintf(stderr, "nimbus status: reading the answer of %s: %v\n", addr, err)
		return 1
	}
	if jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			return 1
		}
		return 0
	}
	u, c, p := st.Usage, st.Cost, st.Prices
	fmt.Fprintf(stdout, "instance %s: up %.1f s, active %.3f s (%.1f%%), %d invocations\n", st.Address, u.UptimeS, u.ActiveS,
		100*u.ActiveS/max(u.UptimeS, 1e-9), u.Invocations)
	fmt.Fprintf(stdout, "cost at $%g per GB-second (%g GB) and $%g per million invocations: serverless $%.6f, serverful $%.6f\n",
		p.PerGBSecond, p.MemoryGB, p.PerMillionInvocation, c.ServerlessUSD, c.ServerfulUSD)
	return 0
}
