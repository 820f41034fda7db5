package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
)

// BigdirConfig is the large-directory listing workload.
type BigdirConfig struct {
	Root        string        // the directory is Root/.bigdir-<Entries>
	Entries     int           // files in the directory
	Clients     int           // parallel writers while filling it
	PageSize    int           // entries asked for per page (the server may cap it)
	SampleEvery time.Duration // memory sampling period while listing
}

// DefaultBigdirConfig lists a million entries under /bench, filled by 64 writers.
func DefaultBigdirConfig() BigdirConfig {
	return BigdirConfig{Root: "/bench", Entries: 1000000, Clients: 64, PageSize: 1000, SampleEvery: 100 * time.Millisecond}
}

// Validate reports a configuration bigdir cannot run.
func (c BigdirConfig) Validate() error {
	if _, err := meta.CleanPath("bench", c.Root); err != nil {
		return fmt.Errorf("bench: bigdir root: %w", err)
	}
	if c.Entries < 1 || c.Clients < 1 || c.PageSize < 1 || c.SampleEvery <= 0 {
		return errors.New("bench: bigdir needs positive entries, clients, page size and sampling period")
	}
	return nil
}

// BigdirStats is what bigdir adds to its Result.
type BigdirStats struct {
	Dir            string      `json:"dir"`
	Entries        int64       `json:"entries"`          // entries listed
	Pages          int64       `json:"pages"`            //
	FillS          float64     `json:"fill_s"`           // time to create the entries (0 when reused)
	FirstPageMs    float64     `json:"first_page_ms"`    // time to the first page
	TotalS         float64     `json:"total_s"`          // time to list every page
	EntriesPerS    float64     `json:"entries_per_s"`    //
	MemBytesBefore int64       `json:"mem_bytes_before"` // server memory before listing (0: not sampled)
	MemBytesMax    int64       `json:"mem_bytes_max"`    // highest sample while listing
	MemSource      string      `json:"mem_source,omitempty"`
	MemSamples     []MemSample `json:"mem_samples,omitempty"`
	MemError       string      `json:"mem_error,omitempty"` // why memory could not be sampled
}

// Bigdir fills a directory with cfg.Entries files (unless a previous run left
// exactly that many), then lists it page by page with one client while
// sampling the server's memory from env.MetricsURL. The directory is kept for
// the next run.
func Bigdir(ctx context.Context, env *Env, cfg BigdirConfig, progress *Progress) (Result, error) {
	if err := env.Validate(); err != nil {
		return Result{}, err
	}
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	root, _ := meta.CleanPath("bench", cfg.Root)
	dir := meta.JoinPath(root, ".bigdir-"+strconv.Itoa(cfg.Entries))
	stats := &BigdirStats{Dir: dir}
	st, err := env.FS.Stat(ctx, env.User, dir)
	needFill := err != nil || st.ChildrenNum != int64(cfg.Entries)
	if err == nil && needFill {
		// Some servers (WebHDFS) report no child count: list to be sure.
		if n, lerr := countEntries(ctx, env, dir, cfg.PageSize); lerr == nil && n == int64(cfg.Entries) {
			needFill = false
		}
	}
	if needFill {
		if err := fillDir(ctx, env, dir, cfg, progress, stats); err != nil {
			return Result{}, err
		}
	}
	var sampler *memSampler
	if env.MetricsURL != "" {
		stats.MemSource = env.MetricsURL
		if v, err := SampleMemory(ctx, httpClientForSamples, env.MetricsURL); err == nil {
			stats.MemBytesBefore = v
		} else {
			stats.MemError = err.Error()
		}
		sampler = startMemSampler(ctx, env.MetricsURL, cfg.SampleEvery)
	} else {
		stats.MemError = "the target has no metrics endpoint"
	}
	op := &pageOp{env: env, dir: dir, limit: cfg.PageSize}
	begin := time.Now()
	m, err := Run(ctx, RunConfig{Clients: 1, Unbounded: true}, func(int) Op { return op })
	total := time.Since(begin)
	if sampler != nil {
		samples, serr := sampler.Stop()
		stats.MemSamples = samples
		for _, s := range samples {
			stats.MemBytesMax = max(stats.MemBytesMax, s.Bytes)
		}
		if serr != nil && stats.MemError == "" {
			stats.MemError = serr.Error()
		}
	}
	stats.Entries, stats.Pages = op.entries, m.Ops
	stats.FirstPageMs = float64(op.first.Microseconds()) / 1000
	stats.TotalS = total.Seconds()
	stats.EntriesPerS = float64(op.entries) / total.Seconds()
	r := NewResult("bigdir", "ls-bigdir", env, m)
	r.Bigdir = stats
	if err == nil && op.err != nil {
		err = fmt.Errorf("bench: bigdir: listing %s: %w", dir, op.err)
	}
	if err == nil && op.entries != int64(cfg.Entries) {
		err = fmt.Errorf("bench: bigdir: listed %d entries in %s, want %d", op.entries, dir, cfg.Entries)
	}
	return r, err
}

func countEntries(ctx context.Context, env *Env, dir string, page int) (int64, error) {
	var n int64
	after := ""
	for {
		l, err := env.FS.List(ctx, env.User, dir, after, page)
		if err != nil {
			return n, err
		}
		n += int64(len(l.Entries))
		if l.Remaining == 0 || len(l.Entries) == 0 {
			return n, nil
		}
		after = l.Entries[len(l.Entries)-1].Name()
	}
}

// fillDir recreates dir with exactly cfg.Entries empty files.
func fillDir(ctx context.Context, env *Env, dir string, cfg BigdirConfig, progress *Progress, stats *BigdirStats) error {
	if err := env.FS.Delete(ctx, env.User, dir, true); err != nil && !errors.Is(err, meta.ErrNotFound) {
		return fmt.Errorf("bench: bigdir: remove old %s: %w", dir, err)
	}
	if err := env.FS.Mkdirs(ctx, env.User, dir, meta.DefaultDir); err != nil {
		return fmt.Errorf("bench: bigdir: %w", err)
	}
	var next atomic.Int64
	progress.Start("bigdir fill", int64(cfg.Entries))
	begin := time.Now()
	m, err := Run(ctx, RunConfig{Clients: cfg.Clients, Unbounded: true}, func(int) Op {
		var path string
		return &funcOp{
			next: func(int64) bool {
				k := next.Add(1) - 1
				if k >= int64(cfg.Entries) {
					return false
				}
				path = fmt.Sprintf("%s/e%09d", dir, k)
				return true
			},
			do: func(ctx context.Context) error {
				err := createFile(ctx, env, path, nil, false)
				progress.Add(1)
				return err
			},
		}
	})
	progress.Stop()
	stats.FillS = time.Since(begin).Seconds()
	if err != nil {
		return err
	}
	if m.Errors > 0 {
		return fmt.Errorf("bench: bigdir: %d creates failed: %v", m.Errors, m.ErrorSamples)
	}
	return nil
}

// pageOp lists one page per operation until the directory is exhausted.
type pageOp struct {
	env     *Env
	dir     string
	limit   int
	after   string
	done    bool
	entries int64
	first   time.Duration
	start   time.Time
	err     error
}

func (o *pageOp) Next(seq int64) bool {
	if seq == 0 {
		o.start = time.Now()
	}
	return !o.done
}

func (o *pageOp) Do(ctx context.Context) error {
	l, err := o.env.FS.List(ctx, o.env.User, o.dir, o.after, o.limit)
	if o.first == 0 {
		o.first = time.Since(o.start)
	}
	if err != nil {
		o.err, o.done = err, true
		return err
	}
	o.entries += int64(len(l.Entries))
	if l.Remaining == 0 || len(l.Entries) == 0 {
		o.done = true
	} else {
		o.after = l.Entries[len(l.Entries)-1].Name()
	}
	return nil
}
