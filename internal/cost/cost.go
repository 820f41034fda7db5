// Package cost measures what work costs the process, for the benchmarks:
// CPU time, which says more than wall time on a noisy machine, and the pause
// a full collection takes with a cache full.
package cost

import (
	"runtime"
	"syscall"
	"time"
)

// ProcessCPU returns the CPU time (user and system) the process has used.
func ProcessCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// FullGC collects once to settle the heap, then times a second full
// collection: what the collector pays to follow every pointer that is live.
func FullGC() time.Duration {
	runtime.GC()
	start := time.Now()
	runtime.GC()
	return time.Since(start)
}
