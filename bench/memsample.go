package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MemSample is the server's memory at a moment of a run. Bytes is the
// resident set (the Java heap for HDFS); the parts beside it are read from
// a Nimbus server's /metrics, zero where the endpoint has none: the Go heap
// in use or kept for reuse (heap_sys - heap_released: what the Go heap
// holds resident, at most), and Pebble's block cache and memtables, which
// live outside the Go heap.
type MemSample struct {
	TMs             float64 `json:"t_ms"` // since the sampler started
	Bytes           int64   `json:"bytes"`
	GoHeapBytes     int64   `json:"go_heap_bytes,omitempty"`
	BlockCacheBytes int64   `json:"block_cache_bytes,omitempty"`
	MemtableBytes   int64   `json:"memtable_bytes,omitempty"`
}

// SampleMemory reads the server's memory once from url: a Prometheus text
// endpoint (process_resident_memory_bytes: the resident set) or a Hadoop JMX
// endpoint (/jmx?qry=java.lang:type=Memory: HeapMemoryUsage.used, the Java
// heap, since the JVM publishes no resident set there).
func SampleMemory(ctx context.Context, hc *http.Client, url string) (int64, error) {
	m, err := sampleMemory(ctx, hc, url)
	return m.Bytes, err
}

// sampleMemory is SampleMemory with the parts of a Nimbus server's memory.
func sampleMemory(ctx context.Context, hc *http.Client, url string) (MemSample, error) {
	var m MemSample
	resp, err := getOK(ctx, hc, url)
	if err != nil {
		return m, fmt.Errorf("bench: memory sample: %w", err)
	}
	defer resp.Body.Close()
	if strings.Contains(url, "/jmx") {
		var jmx struct {
			Beans []struct {
				HeapMemoryUsage struct {
					Used int64 `json:"used"`
				} `json:"HeapMemoryUsage"`
			} `json:"beans"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&jmx); err != nil {
			return m, fmt.Errorf("bench: memory sample: %w", err)
		}
		for _, b := range jmx.Beans {
			if b.HeapMemoryUsage.Used > 0 {
				m.Bytes = b.HeapMemoryUsage.Used
				return m, nil
			}
		}
		return m, fmt.Errorf("bench: memory sample: no HeapMemoryUsage in %s", url)
	}
	var heapSys, heapReleased int64
	gauges := map[string]*int64{
		"process_resident_memory_bytes":        &m.Bytes,
		"go_memstats_heap_sys_bytes":           &heapSys,
		"go_memstats_heap_released_bytes":      &heapReleased,
		"nimbus_pebblestore_block_cache_bytes": &m.BlockCacheBytes,
		"nimbus_pebblestore_memtable_bytes":    &m.MemtableBytes,
	}
	found := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, " ")
		dst := gauges[name]
		if !ok || dst == nil {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			return m, fmt.Errorf("bench: memory sample: %q: %w", line, err)
		}
		*dst = int64(v)
		found = found || name == "process_resident_memory_bytes"
	}
	if err := sc.Err(); err != nil {
		return m, fmt.Errorf("bench: memory sample: %w", err)
	}
	if !found {
		return m, fmt.Errorf("bench: memory sample: no process_resident_memory_bytes in %s", url)
	}
	m.GoHeapBytes = heapSys - heapReleased
	return m, nil
}

// memSampler samples in the background until stopped.
type memSampler struct {
	mu      sync.Mutex
	samples []MemSample
	err     error
	stop    chan struct{}
	done    chan struct{}
}

func startMemSampler(ctx context.Context, url string, every time.Duration) *memSampler {
	s := &memSampler{stop: make(chan struct{}), done: make(chan struct{})}
	hc := &http.Client{Timeout: 5 * time.Second}
	start := time.Now()
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			m, err := sampleMemory(ctx, hc, url)
			s.mu.Lock()
			if err != nil && s.err == nil {
				s.err = err
			} else if err == nil {
				m.TMs = float64(time.Since(start).Microseconds()) / 1000
				s.samples = append(s.samples, m)
			}
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *memSampler) Stop() ([]MemSample, error) {
	close(s.stop)
	<-s.done
	return s.samples, s.err
}

// httpClientForSamples reads servers' metrics endpoints (memory samples,
// ServerProbe).
var httpClientForSamples = &http.Client{Timeout: 5 * time.Second}

// getOK GETs url and returns the response if it is 200 OK; the caller
// closes its body.
func getOK(ctx context.Context, hc *http.Client, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("%s answered %s", url, resp.Status)
	}
	return resp, nil
}
