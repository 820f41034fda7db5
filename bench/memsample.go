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

// MemSample is the server's memory at a moment of a run.
type MemSample struct {
	TMs   float64 `json:"t_ms"` // since the sampler started
	Bytes int64   `json:"bytes"`
}

// SampleMemory reads the server's memory once from url: a Prometheus text
// endpoint (process_resident_memory_bytes: the resident set) or a Hadoop JMX
// endpoint (/jmx?qry=java.lang:type=Memory: HeapMemoryUsage.used, the Java
// heap, since the JVM publishes no resident set there).
func SampleMemory(ctx context.Context, hc *http.Client, url string) (int64, error) {
	resp, err := getOK(ctx, hc, url)
	if err != nil {
		return 0, fmt.Errorf("bench: memory sample: %w", err)
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
			return 0, fmt.Errorf("bench: memory sample: %w", err)
		}
		for _, b := range jmx.Beans {
			if b.HeapMemoryUsage.Used > 0 {
				return b.HeapMemoryUsage.Used, nil
			}
		}
		return 0, fmt.Errorf("bench: memory sample: no HeapMemoryUsage in %s", url)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "process_resident_memory_bytes "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				return 0, fmt.Errorf("bench: memory sample: %q: %w", line, err)
			}
			return int64(v), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("bench: memory sample: %w", err)
	}
	return 0, fmt.Errorf("bench: memory sample: no process_resident_memory_bytes in %s", url)
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
			v, err := SampleMemory(ctx, hc, url)
			s.mu.Lock()
			if err != nil && s.err == nil {
				s.err = err
			} else if err == nil {
				s.samples = append(s.samples, MemSample{TMs: float64(time.Since(start).Microseconds()) / 1000, Bytes: v})
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
