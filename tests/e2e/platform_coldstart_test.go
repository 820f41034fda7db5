package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/internal/etcdtest"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/platform"
	"github.com/nimbus-fs/nimbus/rpc"
)

// TestPlatformColdStart measures the cold start of a `nimbus namenode`
// on PostgreSQL and etcd with an empty cache, as the local platform's
// ProcessHost starts it: from the fork+exec to the ready line (the
// instance answers /readyz), and to the first request served (a stat of
// / over POST /rpc/call). It records the figures (t.Log, and JSON in a
// temporary file whose name it logs) and the server's own startup phases
// ("nimbus serving" line); it asserts nothing about time, which depends on
// the machine. NIMBUS_COLDSTART_RUNS sets the number of starts (default
// 15); the first, which creates the schema, is reported apart.
func TestPlatformColdStart(t *testing.T) {
	runs := 15
	if s := os.Getenv("NIMBUS_COLDSTART_RUNS"); s != "" {
		runs, _ = strconv.Atoi(s)
	}
	db := pgtest.DB(t)
	coord := fmt.Sprintf("etcd://%s/e2e-cold-%d", strings.Join(etcdtest.Endpoints(t), ","), time.Now().UnixNano())
	log := &testproc.Log{}
	h := &platform.ProcessHost{Binary: binary, DataDir: t.TempDir(), Stderr: log,
		Args: []string{"--superuser", "root", "--store", db, "--coordinator", coord, "--cache-bytes", "4m", "--log-level", "info"}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type sample struct {
		ReadyMS, FirstMS float64
		Phases           map[string]float64
	}
	var samples []sample
	phaseRE := regexp.MustCompile(`(\w+)_ms=([0-9.]+)`)
	for i := 1; i <= runs+1; i++ {
		mark := len(log.String())
		begun := time.Now()
		inst, err := h.Start(ctx, platform.Spec{ID: platform.InstanceID(i), Deployment: 0, Deployments: 1})
		if err != nil {
			t.Fatalf("start %d: %v\n%s", i, err, log.String())
		}
		ready := time.Since(begun)
		resp, err := rpc.CallHTTP(ctx, nil, inst.Addr(), &api.Request{RequestId: 1, User: "root", Body: &api.Request_Stat{Stat: &api.StatRequest{Path: "/"}}}, 0)
		first := time.Since(begun)
		if err != nil || resp.GetError() != nil {
			t.Fatalf("first request of instance %d: %v %v", i, err, resp.GetError())
		}
		s := sample{ReadyMS: ms(ready), FirstMS: ms(first), Phases: map[string]float64{}}
		for _, line := range strings.Split(log.String()[mark:], "\n") {
			if strings.Contains(line, "nimbus serving") {
				for _, m := range phaseRE.FindAllStringSubmatch(line, -1) {
					s.Phases[m[1]], _ = strconv.ParseFloat(m[2], 64)
				}
			}
		}
		samples = append(samples, s)
		if err := inst.Stop(ctx); err != nil {
			t.Fatalf("stop %d: %v", i, err)
		}
	}
	warm := samples[1:]
	q := func(get func(sample) float64, p float64) float64 {
		v := make([]float64, len(warm))
		for i, s := range warm {
			v[i] = get(s)
		}
		slices.Sort(v)
		return v[min(len(v)-1, int(p*float64(len(v))))]
	}
	report := map[string]any{
		"runs":                  len(warm),
		"first_start_ready_ms":  samples[0].ReadyMS,
		"first_start_phases":    samples[0].Phases,
		"ready_p50_ms":          q(func(s sample) float64 { return s.ReadyMS }, 0.5),
		"ready_p90_ms":          q(func(s sample) float64 { return s.ReadyMS }, 0.9),
		"first_request_p50_ms":  q(func(s sample) float64 { return s.FirstMS }, 0.5),
		"first_request_p90_ms":  q(func(s sample) float64 { return s.FirstMS }, 0.9),
		"first_request_min_ms":  q(func(s sample) float64 { return s.FirstMS }, 0),
		"first_request_max_ms":  q(func(s sample) float64 { return s.FirstMS }, 1),
		"phases_p50_ms":         map[string]float64{},
		"measured_on":           time.Now().UTC().Format(time.RFC3339),
		"instances_one_by_one":  true,
		"cache_bytes":           "4m",
		"store_and_coordinator": "PostgreSQL (pgtest) and etcd (etcdtest)",
	}
	var phaseSum []float64
	for name := range warm[0].Phases {
		report["phases_p50_ms"].(map[string]float64)[name] = q(func(s sample) float64 { return s.Phases[name] }, 0.5)
	}
	for _, s := range warm {
		sum := 0.0
		for _, v := range s.Phases {
			sum += v
		}
		phaseSum = append(phaseSum, s.ReadyMS-sum)
	}
	slices.Sort(phaseSum)
	report["outside_server_p50_ms"] = phaseSum[len(phaseSum)/2] // exec, runtime and flag set-up, the ready line's trip
	b, _ := json.MarshalIndent(report, "", "  ")
	f, err := os.CreateTemp("", "nimbus-coldstart-*.json")
	if err == nil {
		_, _ = f.Write(b)
		f.Close()
		t.Logf("written to %s", f.Name())
	}
	t.Logf("cold start of nimbus namenode (PostgreSQL + etcd, empty cache), %d runs:\n%s", len(warm), b)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

// TestGatewayHopCost measures what the gateway's hop costs a request: 500
// sequential stats over POST /rpc/call through the gateway and straight to
// its one instance, interleaved, p50 and p99 of each (t.Log only).
func TestGatewayHopCost(t *testing.T) {
	gw := testproc.Start(t, binary, "", "", platformArgs(t, "--platform", "local", "--min-instances", "1")...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var inst string
	waitFor(ctx, t, "the instance", func() bool {
		if s := serving(clusterStatus(t, gw.URL()), 0); len(s) == 1 {
			inst = s[0].Address
			return true
		}
		return false
	})
	stat := func() *api.Request {
		return rootReq(&api.Request{Body: &api.Request_Stat{Stat: &api.StatRequest{Path: "/"}}})
	}
	var via, direct []float64
	for range 500 {
		begun := time.Now()
		if _, _, err := gatewayCall(ctx, gw.URL(), 0, stat()); err != nil {
			t.Fatal(err)
		}
		via = append(via, ms(time.Since(begun)))
		begun = time.Now()
		if _, err := rpc.CallHTTP(ctx, nil, inst, stat(), 0); err != nil {
			t.Fatal(err)
		}
		direct = append(direct, ms(time.Since(begun)))
	}
	slices.Sort(via)
	slices.Sort(direct)
	t.Logf("stat over POST /rpc/call, 500 each: through the gateway p50 %.3f ms p99 %.3f ms; straight to the instance p50 %.3f ms p99 %.3f ms",
		via[250], via[495], direct[250], direct[495])
}
