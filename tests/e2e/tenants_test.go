package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
)

// TestTenants: a real server counts requests per tenant (user, user/job)
// over the RPC and WebHDFS, throttles the one over its --tenant-limit with
// a retryable busy error while another tenant is never refused, names at
// most --tenant-top tenants on /metrics, and shows them on `nimbus status
// --tenants`.
func TestTenants(t *testing.T) {
	s := startServer(t, "", "", "--tenant-limit", "mallory/flood=20", "--tenant-limit", "bob/cli=1", "--tenant-top", "3")
	ctx := context.Background()
	dial := func(job string) *client.Client {
		// No waiting for a throttled request: the refusals are the test.
		c, err := client.Dial(ctx, s.url(), client.Options{Job: job, ThrottleWait: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	alice, flood := dial(""), dial("flood")
	if err := alice.Mkdirs(ctx, meta.User{Name: "root"}, "/d", 0o777); err != nil {
		t.Fatal(err)
	}
	// The flood: as fast as it can, for half a second.
	ok, busy := 0, 0
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); {
		_, err := flood.Stat(ctx, meta.User{Name: "mallory"}, "/d")
		switch {
		case err == nil:
			ok++
		case errors.Is(err, meta.ErrBusy) && strings.Contains(err.Error(), "mallory/flood is limited to 20 requests/s"):
			busy++
		default:
			t.Fatalf("flood: %v", err)
		}
	}
	// A burst of 20, then 20 a second: at most 31 in half a second.
	if ok < 20 || ok > 31 || busy == 0 {
		t.Fatalf("flood: %d admitted, %d refused in 0.5 s at a limit of 20/s", ok, busy)
	}
	// Over WebHDFS, job=flood is the same tenant: 503 RetriableException,
	// once the bucket is empty again.
	webOK, webBusy := 0, 0
	for webBusy == 0 && webOK < 100 {
		resp, err := http.Get(s.url() + "/webhdfs/v1/d?op=GETFILESTATUS&user.name=mallory&job=flood")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK:
			webOK++
		case resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), "RetriableException"):
			webBusy++
		default:
			t.Fatalf("WebHDFS for the throttled tenant: %d %s", resp.StatusCode, body)
		}
	}
	if webBusy == 0 {
		t.Fatalf("WebHDFS: 100 requests of the throttled tenant admitted")
	}
	// alice meanwhile is never refused, nor is mallory without the job.
	for i := 0; i < 50; i++ {
		if _, err := alice.Stat(ctx, meta.User{Name: "alice"}, "/d"); err != nil {
			t.Fatalf("alice: %v", err)
		}
	}
	other := dial("")
	for i := 0; i < 40; i++ {
		if _, err := other.Stat(ctx, meta.User{Name: "mallory"}, "/d"); err != nil {
			t.Fatalf("mallory without the job: %v", err)
		}
	}
	// More users than --tenant-top: the rest count as other.
	for i := 0; i < 10; i++ {
		if _, err := other.Stat(ctx, meta.User{Name: fmt.Sprintf("user%d", i)}, "/d"); err != nil {
			t.Fatal(err)
		}
	}

	var doc struct {
		Tenants []struct {
			Tenant    string  `json:"tenant"`
			Ops       int64   `json:"ops"`
			Errors    int64   `json:"errors"`
			Throttled int64   `json:"throttled"`
			Limit     float64 `json:"limit_ops_s"`
		} `json:"tenants"`
	}
	r := s.nimbus("", "status", "--tenants", "--json")
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil {
		t.Fatalf("nimbus status --tenants --json: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if len(doc.Tenants) != 4 || doc.Tenants[3].Tenant != "other" {
		t.Fatalf("tenants: %+v", doc.Tenants)
	}
	var total int64
	seen := map[string]bool{}
	for _, tn := range doc.Tenants {
		total += tn.Ops
		seen[tn.Tenant] = true
		// The server counts requests, the test calls: a call whose
		// connection broke is sent again (client.Options.Resubmits), and
		// counts twice. A few, at most.
		if tn.Tenant == "mallory/flood" && (tn.Throttled < int64(busy+webBusy) || tn.Throttled > int64(busy+webBusy)+3 || tn.Limit != 20) {
			t.Errorf("mallory/flood: %+v, want %d throttled (up to 3 more for resubmissions)", tn, busy+webBusy)
		}
		if tn.Tenant == "alice" && tn.Errors != 0 {
			t.Errorf("alice: %+v", tn)
		}
	}
	// Every request counted once (root's mkdirs, the flood, alice, mallory,
	// the WebHDFS request, the ten users).
	if want := int64(1 + ok + busy + webOK + webBusy + 50 + 40 + 10); total < want || total > want+3 || !seen["mallory/flood"] || !seen["alice"] {
		t.Errorf("%d requests counted, want %d (up to 3 more for resubmissions): %+v", total, want, doc.Tenants)
	}
	r = s.nimbus("", "status", "--tenants")
	if r.code != 0 || !strings.Contains(r.stdout, "mallory/flood") || !strings.Contains(r.stdout, "throttled") {
		t.Errorf("nimbus status --tenants:\n%s%s", r.stdout, r.stderr)
	}
	// /metrics: at most three named tenants and other.
	resp, err := http.Get(s.url() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if n := strings.Count(string(metrics), "nimbus_tenant_requests_total{"); n != 4 || !strings.Contains(string(metrics), `nimbus_tenant_throttled_total{tenant="mallory/flood"}`) {
		t.Errorf("%d request series on /metrics:\n%s", n, grepLines(string(metrics), "nimbus_tenant_"))
	}
	// The instance's metered activity, and its price (nimbus status).
	var inst struct {
		Usage struct {
			ActiveS     float64 `json:"active_s"`
			Invocations int64   `json:"invocations"`
			UptimeS     float64 `json:"uptime_s"`
		} `json:"usage"`
		Cost struct {
			ServerlessUSD float64 `json:"serverless_usd"`
			ServerfulUSD  float64 `json:"serverful_usd"`
		} `json:"cost"`
	}
	r = s.nimbus("", "status", "--json")
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &inst) != nil {
		t.Fatalf("nimbus status --json: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	u := inst.Usage
	if u.Invocations < total || u.ActiveS <= 0 || u.ActiveS > u.UptimeS {
		t.Errorf("instance usage %+v, after %d requests", u, total)
	}
	// The paper's prices, 2 GB: the cost follows from the usage.
	want := u.ActiveS*2*0.0000166667 + float64(u.Invocations)*0.20/1e6
	if d := inst.Cost.ServerlessUSD - want; d > want*0.01 || d < -want*0.01 || inst.Cost.ServerfulUSD <= 0 {
		t.Errorf("cost %+v for usage %+v, want serverless %v", inst.Cost, u, want)
	}
	if r := s.nimbus("", "status"); r.code != 0 || !strings.Contains(r.stdout, "serverless $") {
		t.Errorf("nimbus status:\n%s%s", r.stdout, r.stderr)
	}
	// A client that waits as the server says (the default) gets every
	// call through, at the limit's pace: the CLI, whose job is NIMBUS_JOB,
	// as bob/cli, limited to one request a second.
	start := time.Now()
	for i := 0; i < 3; i++ {
		cmd := exec.Command(binary, "fs", "stat", "/d")
		cmd.Env = append(os.Environ(), "NIMBUS_ADDR="+s.url(), "NIMBUS_USER=bob", "NIMBUS_JOB=cli")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nimbus fs as bob/cli, call %d: %v\n%s", i+1, err, out)
		}
	}
	// The second call may go at 1 s, the third at 2 s.
	if d := time.Since(start); d < 1500*time.Millisecond {
		t.Errorf("three calls of a tenant limited to 1/s took %v: the limit did not hold", d)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
