package platform

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// What a deployment costs (docs/ELASTIC.md, "What an instance costs"):
// every instance meters itself (Meter: active time, invocations, uptime)
// and answers GET /status/instance. The platform adds them up: the
// instances serving now, asked when the total is asked for, and those
// already reclaimed, each asked just before its stop (a request that
// lands between that reading and the stop is not counted; an instance
// that crashed took its usage with it and is counted in "lost"). The
// gateway's GET /status/instance answers the total in the shape of an
// instance's, so that what reads one instance's cost (`nimbus bench`'s
// run cost, `nimbus status`) reads a platform's.

// usageClient reads instances' usage; each reading is bounded by its
// context.
var usageClient = &http.Client{Timeout: 5 * time.Second}

// ReadUsage reads the usage of the instance at base (its GET
// /status/instance).
func ReadUsage(ctx context.Context, hc *http.Client, base string) (Usage, error) {
	url := strings.TrimSuffix(base, "/") + "/status/instance"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Usage{}, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Usage{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Usage{}, fmt.Errorf("platform: %s: %s", url, resp.Status)
	}
	var doc struct {
		Usage Usage `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return Usage{}, fmt.Errorf("platform: %s: %w", url, err)
	}
	return doc.Usage, nil
}

// add returns u plus v.
func (u Usage) add(v Usage) Usage {
	return Usage{ActiveS: u.ActiveS + v.ActiveS, Invocations: u.Invocations + v.Invocations, UptimeS: u.UptimeS + v.UptimeS}
}

// retire adds the usage of inst, about to be stopped, to the platform's.
func (l *Local) retire(ctx context.Context, inst Instance) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	u, err := ReadUsage(rctx, usageClient, inst.Addr())
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.mu.lost++
		l.log.Debug("reading a reclaimed instance's usage", "addr", inst.Addr(), "err", err)
		return
	}
	l.mu.retired = l.mu.retired.add(u)
}

// PlatformUsage is what the platform's instances did so far.
type PlatformUsage struct {
	Usage
	Instances    int `json:"instances"`     // serving now
	InstancesMax int `json:"instances_max"` // the most at once
	Lost         int `json:"lost"`          // instances whose usage could not be read (crashed)
}

// Usage returns the platform's usage: the instances serving now (each
// asked, in parallel, within ctx) and the reclaimed ones.
func (l *Local) Usage(ctx context.Context) PlatformUsage {
	var addrs []string
	for _, s := range l.Instances() {
		if s.State == StateServing && s.Addr != "" {
			addrs = append(addrs, s.Addr)
		}
	}
	got := make([]Usage, len(addrs))
	ok := make([]bool, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() {
			u, err := ReadUsage(ctx, usageClient, a)
			got[i], ok[i] = u, err == nil
		})
	}
	wg.Wait()
	l.mu.Lock()
	out := PlatformUsage{Usage: l.mu.retired, Instances: len(addrs), InstancesMax: l.mu.most, Lost: l.mu.lost}
	l.mu.Unlock()
	for i := range got {
		if ok[i] {
			out.Usage = out.Usage.add(got[i])
		} else {
			out.Lost++
		}
	}
	return out
}

// instanceJSON answers the gateway's GET /status/instance: the
// platform's usage, priced (GatewayOptions.Prices), in the shape of an
// instance's answer.
func (g *Gateway) instanceJSON(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	u := g.l.Usage(ctx)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		Addr   string        `json:"address"`
		Usage  PlatformUsage `json:"usage"`
		Prices Prices        `json:"prices"`
		Cost   Cost          `json:"cost"`
	}{"http://" + r.Host, u, g.opts.Prices, g.opts.Prices.CostOf(u.Usage)})
}
