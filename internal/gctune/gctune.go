// Package gctune keeps the Go collector's heap goal under a fixed share of
// the process's memory limit, by adjusting GOGC after each collection.
//
// A server with a small live heap and a high allocation rate wants a high
// GOGC (few collections). But GOGC sets the goal as a multiple of what is
// live, and what is live grows as caches fill: at GOGC=400 the goal soon
// reaches the soft memory limit, and near the limit the runtime returns
// memory to the operating system that the next cycle faults back in, page by
// page (a profile of a long-lived Nimbus server spent a tenth of its CPU in
// those faults). Tune lowers GOGC just enough that the goal stays at share ×
// limit, and raises it back to max when the live heap shrinks.
package gctune

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Percent returns the GOGC that puts the heap goal, live × (1 + GOGC/100),
// at target bytes, within [lo, hi]. A live heap of 0 gets hi.
func Percent(live, target uint64, lo, hi int) int {
	if live == 0 {
		return hi
	}
	p := (float64(target)/float64(live) - 1) * 100
	switch {
	case math.IsNaN(p) || p < float64(lo):
		return lo
	case p > float64(hi):
		return hi
	}
	return int(p)
}

// Config says how to tune.
type Config struct {
	Share  float64       // of the memory limit the heap goal may reach, e.g. 0.6
	Min    int           // GOGC never goes below this
	Max    int           // nor above this (the GOGC to use while the heap is small)
	Every  time.Duration // how often to look for a finished collection
	OnTune func(gogc int, live uint64)
}

// Run tunes GOGC after every collection until ctx ends, then leaves GOGC at
// Max. It reads the limit once (debug.SetMemoryLimit(-1)); with no limit it
// returns at once.
func Run(ctx context.Context, cfg Config) {
	limit := debug.SetMemoryLimit(-1)
	if limit <= 0 || limit == math.MaxInt64 {
		return
	}
	target := uint64(float64(limit) * cfg.Share)
	samples := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/live:bytes"}}
	var cycles uint64
	cur := cfg.Max
	t := time.NewTicker(cfg.Every)
	defer t.Stop()
	defer debug.SetGCPercent(cfg.Max)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(samples)
		if samples[0].Value.Kind() != metrics.KindUint64 || samples[1].Value.Kind() != metrics.KindUint64 {
			return // this runtime does not have them
		}
		c := samples[0].Value.Uint64()
		if c == cycles {
			continue // no collection since the last look: live is unchanged
		}
		cycles = c
		live := samples[1].Value.Uint64()
		if p := Percent(live, target, cfg.Min, cfg.Max); p != cur {
			cur = p
			debug.SetGCPercent(p)
			if cfg.OnTune != nil {
				cfg.OnTune(p, live)
			}
		}
	}
}
