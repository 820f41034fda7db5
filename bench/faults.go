package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The fault run (λFS's Figure 15): an
// elastic run with ElasticConfig.KillEvery set kills one serving instance
// every KillEvery, round robin over the deployments, through the gateway's
// POST /platform/kill (`nimbus serve --fault-injection`), while the open
// loop offers its load; the run keeps a Ledger of what the clients were
// told and checks the namespace against it afterwards (SpotifyStats's
// Verdict). FaultStats are the kills and the dip and recovery of the
// served rate.

// Kill is one instance killed by the run.
type Kill struct {
	T          float64 `json:"t_s"` // since the schedule began (the throughput's seconds)
	Deployment int     `json:"deployment"`
	Instance   string  `json:"instance,omitempty"`
	Error      string  `json:"error,omitempty"` // the kill failed: nothing was killed
}

// FaultStats are a fault run's kills and what they did to the served rate.
type FaultStats struct {
	KillEveryS float64 `json:"kill_every_s"`
	Kills      []Kill  `json:"kills"`
	Killed     int     `json:"killed"` // kills that killed an instance
	// Over the seconds from the first kill's to the last kill's: the
	// served rate over the offered one (mean and lowest), the seconds
	// below 90% of it, and the longest run of such seconds (how long a
	// dip lasted before the rate recovered).
	MeanServedRatio float64 `json:"mean_served_ratio"`
	MinServedRatio  float64 `json:"min_served_ratio"`
	SecondsBelow90  int     `json:"seconds_below_90"`
	LongestDipS     int     `json:"longest_dip_s"`
	// RecoveryS is the time from the last kill to the end of the first
	// second after it in which the served rate reached 90% of the offered
	// one; -1: not before the load ended.
	RecoveryS float64 `json:"recovery_s"`
}

// killer kills an instance every cfg.KillEvery, round robin over the
// deployments, from the schedule's start until stop.
type killer struct {
	url   string
	every time.Duration
	deps  int
	hc    *http.Client

	mu    sync.Mutex
	kills []Kill
}

// run kills until ctx ends; t0 is the schedule's start.
func (k *killer) run(ctx context.Context, t0 time.Time, until time.Duration) {
	t := time.NewTicker(k.every)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if time.Since(t0) >= until {
			return
		}
		dep := i % k.deps
		kl := Kill{T: time.Since(t0).Seconds(), Deployment: dep}
		id, err := k.kill(ctx, dep)
		if ctx.Err() != nil {
			return
		}
		kl.Instance = id
		if err != nil {
			kl.Error = err.Error()
		}
		k.mu.Lock()
		k.kills = append(k.kills, kl)
		k.mu.Unlock()
	}
}

// kill asks the gateway to kill one instance of dep and returns its id.
func (k *killer) kill(ctx context.Context, dep int) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	url := fmt.Sprintf("%s/platform/kill?deployment=%d", strings.TrimSuffix(k.url, "/"), dep)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := k.hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	var ans struct {
		Instance json.Number `json:"instance"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return "", fmt.Errorf("%s: %w", url, err)
	}
	return ans.Instance.String(), nil
}

// faultStats summarises the kills against the seconds of the schedule;
// load is how many seconds offered load.
func faultStats(every time.Duration, kills []Kill, secs []SpotifySecond, load int) *FaultStats {
	fs := &FaultStats{KillEveryS: every.Seconds(), Kills: kills, RecoveryS: -1}
	first, last := -1.0, -1.0
	for _, k := range kills {
		if k.Error == "" {
			fs.Killed++
			if first < 0 {
				first = k.T
			}
			last = k.T
		}
	}
	if first < 0 {
		return fs
	}
	ratio := func(i int) (float64, bool) {
		if i >= len(secs) || secs[i].TargetOpsS <= 0 {
			return 0, false
		}
		return float64(secs[i].Served) / secs[i].TargetOpsS, true
	}
	n, sum, run := 0, 0.0, 0
	fs.MinServedRatio = -1
	for i := int(first); i <= int(last) && i < load; i++ {
		r, ok := ratio(i)
		if !ok {
			continue
		}
		n++
		sum += r
		if fs.MinServedRatio < 0 || r < fs.MinServedRatio {
			fs.MinServedRatio = r
		}
		if r < 0.9 {
			fs.SecondsBelow90++
			run++
			fs.LongestDipS = max(fs.LongestDipS, run)
		} else {
			run = 0
		}
	}
	if n > 0 {
		fs.MeanServedRatio = sum / float64(n)
	} else {
		fs.MinServedRatio = 0
	}
	for i := int(last) + 1; i < load; i++ {
		if r, ok := ratio(i); ok && r >= 0.9 {
			fs.RecoveryS = float64(i+1) - last
			break
		}
	}
	return fs
}
