package platform

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

// Load that bypasses the platform (docs/ELASTIC.md, "The local platform
// and its hosting"): a hybrid client's requests travel over TCP
// connections straight to an instance, and its gateway sees only the
// invocations. Local polls every serving instance's GET /status/load
// every LocalOptions.LoadPoll, all at once, each bounded by twice that,
// and feeds each answer to Policy.Load: the requests in flight on the
// instance's connections, and those begun since the previous answer
// (growth of the cumulative count: short requests between two polls are
// activity too).
//
// Polling rather than instances reporting: the platform already knows
// every instance's address and when it starts and stops, so a poll needs
// no registration, no endpoint on the gateway and no authentication of
// reports; it costs a GET on a kept-alive connection per instance per
// interval, answered from two atomic counters; an instance that stops
// answering is noticed by the poller (its report is cleared after
// loadFailsToForget failures in a row) instead of by the absence of
// pushes; and the rate is the platform's to choose, in one place.

// loadClient polls instances' load: one kept-alive connection each.
var loadClient = &http.Client{Transport: &http.Transport{
	MaxIdleConnsPerHost: 1,
	IdleConnTimeout:     30 * time.Second,
	DisableCompression:  true,
}}

// loadFailsToForget is how many polls in a row may fail before an
// instance's reported load is cleared (reported 0): a stale report would
// keep an unreachable instance from ever being idle.
const loadFailsToForget = 3

// ReadConnLoad reads the load on connections of the instance at base (its
// GET /status/load), with hc (nil: a client keeping one connection per
// instance).
func ReadConnLoad(ctx context.Context, hc *http.Client, base string) (ConnLoad, error) {
	if hc == nil {
		hc = loadClient
	}
	url := strings.TrimSuffix(base, "/") + "/status/load"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return ConnLoad{}, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return ConnLoad{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096)) // keep the connection
		return ConnLoad{}, fmt.Errorf("platform: %s: %s", url, resp.Status)
	}
	var cl ConnLoad
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&cl); err != nil {
		return ConnLoad{}, fmt.Errorf("platform: %s: %w", url, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	return cl, nil
}

func readLoadHTTP(ctx context.Context, inst Instance) (ConnLoad, error) {
	return ReadConnLoad(ctx, loadClient, inst.Addr())
}

// pollLoad reads every serving instance's load at once and reports each
// answer to the policy as it comes.
func (l *Local) pollLoad() {
	l.mu.Lock()
	var recs []*instanceRec
	for _, rec := range l.mu.insts {
		if rec.state == StateServing && !rec.stopping && rec.inst != nil {
			recs = append(recs, rec)
		}
	}
	l.mu.Unlock()
	if len(recs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(l.ctx, 2*l.opts.LoadPoll)
	defer cancel()
	var wg sync.WaitGroup
	for _, rec := range recs {
		wg.Go(func() {
			cl, err := l.opts.ReadLoad(ctx, rec.inst)
			l.reportLoad(rec, cl, err)
		})
	}
	wg.Wait()
}

// reportLoad feeds one poll's answer (or failure) on rec to the policy.
func (l *Local) reportLoad(rec *instanceRec, cl ConnLoad, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed || rec.stopping || l.mu.insts[rec.id] != rec {
		return
	}
	served := 0
	if err != nil {
		rec.loadFails++
		if rec.loadFails != loadFailsToForget {
			return // the previous report stands for now
		}
		l.log.Debug("polling an instance's load", "instance", rec.id, "addr", rec.inst.Addr(), "fails", rec.loadFails, "err", err)
		cl.InFlight = 0
	} else {
		rec.loadFails = 0
		switch {
		case !rec.loadRead || cl.Requests < rec.connRequests: // the first answer, or a restarted count
			served = int(min(cl.Requests, 1<<30))
		default:
			served = int(min(cl.Requests-rec.connRequests, 1<<30))
		}
		rec.connRequests, rec.loadRead = cl.Requests, true
	}
	rec.connInflight = cl.InFlight
	if l.mu.p.Load(l.opts.Now(), rec.id, cl.InFlight, served) == nil {
		l.applyLocked()
	}
}
