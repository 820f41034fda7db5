package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/nimbus-fs/nimbus/meta"
)

// SpotifyConfig is one run of the mixed, bursty workload of the λFS
// evaluation (its section 5): an open loop that offers operations of a mix
// at a target rate, the rate drawn anew every Interval from a Pareto
// distribution (shape Shape, scale BaseRate, capped at MaxBurst times
// BaseRate), whatever the system answers. Operations a second could not
// issue are carried over to the next.
type SpotifyConfig struct {
	Mix      Mix
	BaseRate float64       // ops/s: the scale of the Pareto draws
	Shape    float64       // the Pareto shape (λFS: 2)
	MaxBurst float64       // a draw's cap, in multiples of BaseRate (λFS: 7)
	Interval time.Duration // how long one drawn rate lasts (λFS: 15 s); whole seconds
	Duration time.Duration // whole seconds
	Seed     int64         // the rates, the operations and their paths
	// Workers is the most operations in flight: the open loop's pool of
	// clients. An operation due while all are busy waits for one (its
	// response time counts the wait), or is carried over when its second
	// ends first.
	Workers   int
	ReadSize  int64 // bytes asked for by read
	ListLimit int   // entries asked for by ls
	PoolSize  int   // random files pre-chosen for read and stat
	Keep      bool  // keep the files and directories the run made
	// HotWriters, from 0 to 1, adds that fraction of Workers as closed-loop
	// clients creating files in one directory for the whole run, beside
	// the open loop (a mixed run where, say, a tenth of the clients
	// write into one directory). Their creates are reported apart, as
	// per_op "create-hot", and are not in the run's totals.
	HotWriters float64
	// Schedule, when set, is the target rate of each interval in turn
	// (the last one repeats), instead of the Pareto draws: a step or any
	// other shape of load (bench elastic's).
	Schedule []float64
	// Verify records every namespace change the clients were told of in a
	// Ledger and, after the run (before the clean-up), checks the
	// namespace against it and runs fsck: SpotifyStats.Verdict.
	Verify bool
	// OnStart, when set, is called with the time the schedule's first
	// second begins (after the spares are made).
	OnStart func(t0 time.Time)
}

// DefaultSpotifyConfig returns the paper's mix at 1,000 ops/s for 60 s.
func DefaultSpotifyConfig() SpotifyConfig {
	m, _ := LookupMix("paper")
	return SpotifyConfig{Mix: m, BaseRate: 1000, Shape: 2, MaxBurst: 7, Interval: 15 * time.Second,
		Duration: 60 * time.Second, Seed: 1, Workers: 128, ReadSize: 64 << 10, ListLimit: 1000, PoolSize: 1 << 16}
}

// Validate reports a configuration the driver cannot run.
func (c SpotifyConfig) Validate() error {
	switch {
	case len(c.Mix.Ops) == 0:
		return errors.New("bench: spotify: no mix")
	case !(c.BaseRate > 0) || c.BaseRate > 1e7:
		return fmt.Errorf("bench: spotify: base rate %v ops/s, want more than 0 and at most 1e7", c.BaseRate)
	case !(c.Shape > 0):
		return fmt.Errorf("bench: spotify: Pareto shape %v, want more than 0", c.Shape)
	case !(c.MaxBurst >= 1):
		return fmt.Errorf("bench: spotify: burst cap %v, want at least 1", c.MaxBurst)
	case c.Interval < time.Second || c.Interval%time.Second != 0:
		return fmt.Errorf("bench: spotify: interval %v, want whole seconds", c.Interval)
	case c.Duration < time.Second || c.Duration%time.Second != 0:
		return fmt.Errorf("bench: spotify: duration %v, want whole seconds", c.Duration)
	case c.Workers < 1:
		return errors.New("bench: spotify: at least one worker is needed")
	case !(c.HotWriters >= 0 && c.HotWriters <= 1):
		return fmt.Errorf("bench: spotify: hot writers %v, want a fraction from 0 to 1", c.HotWriters)
	case c.ReadSize < 1 || c.ListLimit < 1 || c.PoolSize < 1:
		return errors.New("bench: spotify: read size, list limit and pool size must be positive")
	}
	return nil
}

// Rates returns the target rate of each of the first n intervals: draws of
// the Pareto distribution from the seed alone, so that two systems run with
// one seed are offered the same load.
func (c SpotifyConfig) Rates(n int) []float64 {
	if len(c.Schedule) > 0 {
		out := make([]float64, n)
		for i := range out {
			out[i] = c.Schedule[min(i, len(c.Schedule)-1)]
		}
		return out
	}
	rng := rand.New(rand.NewPCG(uint64(c.Seed), 0x5b0f))
	out := make([]float64, n)
	for i := range out {
		u := 1 - rng.Float64() // (0, 1]
		out[i] = min(c.BaseRate/math.Pow(u, 1/c.Shape), c.MaxBurst*c.BaseRate)
	}
	return out
}

// SpotifyStats is what a spotify result adds to the common fields.
type SpotifyStats struct {
	Mix        string             `json:"mix"`
	Shares     map[string]float64 `json:"shares"` // of each operation, 0..1
	BaseRate   float64            `json:"base_rate_ops_s"`
	Shape      float64            `json:"pareto_shape"`
	MaxBurst   float64            `json:"max_burst"`
	IntervalS  float64            `json:"interval_s"`
	Seed       int64              `json:"seed"`
	Workers    int                `json:"workers"`
	Rates      []float64          `json:"interval_rates_ops_s"` // the drawn target of each interval
	OfferedOpS float64            `json:"offered_ops_s"`        // mean target over the run
	Offered    int64              `json:"offered"`              // operations the schedule asked for
	Issued     int64              `json:"issued"`               // operations sent
	Unissued   int64              `json:"unissued"`             // still carried over when the run ended
	// Response is the latency from each operation's scheduled time, so it
	// counts the time it waited for a free worker: what a client of an
	// overloaded system sees (latency_ms counts from the send).
	Response LatencyMs `json:"response_ms"`
	// Seconds in which operations were carried over, by who fell behind:
	// the server (every worker was waiting for an answer) or the driver
	// (workers were free but it did not send in time: its own CPU).
	ServerBehindS int             `json:"server_behind_s"`
	DriverBehindS int             `json:"driver_behind_s"`
	Seconds       []SpotifySecond `json:"seconds"`
	// Fallbacks counts mv and delete turned into create because no file
	// made by the run was left to rename or delete.
	Fallbacks int64 `json:"fallbacks,omitempty"`
	// What the run cost, when the target is a Nimbus server that meters
	// itself (GET /status/instance, docs/ELASTIC.md "What an instance
	// costs"): the instances' active time and invocations over the run,
	// priced at the server's prices. Nil otherwise.
	Cost *RunCost `json:"cost,omitempty"`
	// Verdict: the namespace checked against what the clients were told
	// (SpotifyConfig.Verify).
	Verdict *Verdict `json:"verdict,omitempty"`
}

// RunCost is what a run cost, serverless (active time and invocations)
// and serverful (every instance for the whole run), and the operations it
// served per dollar of each.
type RunCost struct {
	InstancesMax           int     `json:"instances_max"`
	ActiveS                float64 `json:"active_s"`
	Invocations            int64   `json:"invocations"`
	ServerlessUSD          float64 `json:"cost_usd"`
	ServerfulUSD           float64 `json:"serverful_cost_usd"`
	PerfPerDollar          float64 `json:"perf_per_dollar"`           // operations served per serverless dollar
	ServerfulPerfPerDollar float64 `json:"serverful_perf_per_dollar"` // per serverful dollar
}

// SpotifySecond is the schedule of one second of a spotify run.
type SpotifySecond struct {
	T          int     `json:"t"` // 1 is the first second
	TargetOpsS float64 `json:"target_ops_s"`
	Due        int64   `json:"due"`     // the second's share of the target plus what was carried in
	Issued     int64   `json:"issued"`  // sent in the second
	Carried    int64   `json:"carried"` // left for the next second
	Behind     string  `json:"behind,omitempty"`
	// Of the operations that finished in the second: how many, and their
	// latency from the send (p50, p99) and from their scheduled time.
	Served        int64   `json:"served"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
	ResponseP99Ms float64 `json:"response_p99_ms"`
}

// OpStats is one operation's share of a mixed result.
type OpStats struct {
	Ops     int64     `json:"ops"`
	Errors  int64     `json:"errors"`
	Latency LatencyMs `json:"latency_ms"`
}

// Spotify runs cfg against the prepared tree and returns one result:
// throughput and latency over all operations, per operation (PerOp), and
// the schedule (Spotify). What the run created is deleted afterwards,
// untimed, unless cfg.Keep.
func Spotify(ctx context.Context, env *Env, cfg SpotifyConfig, tree *Tree, progress *Progress) (Result, error) {
	if err := env.Validate(); err != nil {
		return Result{}, err
	}
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	secs := int(cfg.Duration / time.Second)
	perInterval := int(cfg.Interval / time.Second)
	r := &spotifyRun{env: env, cfg: cfg, tree: tree, ctx: ctx,
		run:     strconv.FormatInt(time.Now().UnixNano(), 36),
		files:   filePool(tree, cfg.PoolSize, uint64(cfg.Seed)),
		rates:   cfg.Rates((secs + perInterval - 1) / perInterval),
		done:    make([]SecondPoint, secs+1),
		secHist: make([]*hdrhistogram.Histogram, secs+1),
		secResp: make([]*hdrhistogram.Histogram, secs+1),
		perOp:   make(map[string]*opAcc, len(cfg.Mix.Ops))}
	if cfg.Verify {
		r.led = NewLedger()
	}
	r.dirs = append(r.dirs, tree.Root())
	for i := 0; i < tree.NumDirs(); i++ {
		r.dirs = append(r.dirs, tree.DirPath(i))
	}
	for _, op := range append(MixOps, hotCreate) {
		r.perOp[op] = &opAcc{hist: hdrhistogram.New(histMinUs, histMaxUs, histSig)}
	}
	if err := r.makeSpares(); err != nil {
		return Result{}, err
	}
	defer func() {
		if !cfg.Keep {
			r.cleanUp()
		}
	}()

	probe := env.serverProbe()
	var before counters
	var probeErr error
	if probe != nil {
		before, probeErr = probe.read(ctx)
	}
	meterBefore, meterErr := readInstance(ctx, env)
	progress.Start("spotify", int64(secs))
	cpu0 := processCPU()
	m, stats := r.drive(secs, progress)
	m.DriverCPU = processCPU() - cpu0
	progress.Stop()
	if probe != nil && probeErr == nil {
		var after counters
		if after, probeErr = probe.read(ctx); probeErr == nil {
			m.Server = probe.stats(before, after, m.Ops)
		}
	}
	if probeErr != nil {
		m.ServerError = probeErr.Error()
	}
	res := NewResult("spotify", cfg.Mix.Name, env, m)
	res.Files = tree.NumFiles()
	res.PerOp = make(map[string]OpStats)
	for _, op := range append(MixOps, hotCreate) {
		a := r.perOp[op]
		if a.ops+a.errs == 0 {
			continue
		}
		res.PerOp[op] = OpStats{Ops: a.ops, Errors: a.errs, Latency: latencyOf(a.hist)}
	}
	res.Spotify = stats
	if r.led != nil {
		stats.Verdict = r.led.Verify(context.WithoutCancel(ctx), env, min(cfg.Workers, 16))
	}
	if meterErr == nil {
		if after, err := readInstance(ctx, env); err == nil {
			stats.Cost = runCost(meterBefore, after, m.Duration, res.Ops)
		}
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("bench: spotify: run interrupted: %w", err)
	}
	return res, nil
}

// driverLate is how late after its time an operation may be sent, with a
// worker free for it, before the driver counts itself behind.
const driverLate = 10 * time.Millisecond

// spotifyRun is the state of one run.
type spotifyRun struct {
	env   *Env
	cfg   SpotifyConfig
	tree  *Tree
	ctx   context.Context
	run   string // unique in the names of what the run creates
	files []string
	dirs  []string
	rates []float64
	led   *Ledger // nil unless cfg.Verify

	inflight atomic.Int64
	seq      atomic.Int64 // names of new entries

	mu        sync.Mutex
	created   []string // files the run made and still has, for mv and delete
	madeDirs  []string // directories the run made
	allFiles  map[string]bool
	fallbacks int64
	done      []SecondPoint // by second of completion
	perOp     map[string]*opAcc
	hist      *hdrhistogram.Histogram // from the send
	resp      *hdrhistogram.Histogram // from the scheduled time
	// By second of completion: latency from the send and from the
	// scheduled time (made on first use).
	secHist, secResp []*hdrhistogram.Histogram
	firstErr         []string
}

type opAcc struct {
	ops, errs int64
	hist      *hdrhistogram.Histogram
}

// spotifyJob is one scheduled operation.
type spotifyJob struct {
	op   string
	path string // the tree file or directory, or the directory of a new entry
	at   time.Time
}

// makeSpares creates, untimed, the files that delete will need beyond what
// the run's creates provide, when the mix deletes faster than it creates.
func (r *spotifyRun) makeSpares() error {
	r.allFiles = make(map[string]bool)
	r.hist = hdrhistogram.New(histMinUs, histMaxUs, histSig)
	r.resp = hdrhistogram.New(histMinUs, histMaxUs, histSig)
	expected := 0.0
	for _, rate := range r.rates {
		expected += rate * r.cfg.Interval.Seconds()
	}
	need := 16
	if d := r.cfg.Mix.Share(MixDelete) - r.cfg.Mix.Share(MixCreate); d > 0 {
		need += int(math.Ceil(d * expected * 1.2))
	}
	rng := rand.New(rand.NewPCG(uint64(r.cfg.Seed), 0x5a4e))
	paths := make([]string, need)
	for i := range paths {
		paths[i] = r.newName(r.dirs[rng.IntN(len(r.dirs))], "s")
	}
	return parallel(len(paths), min(r.cfg.Workers, 16), func(i int) error {
		if err := createFile(r.ctx, r.env, paths[i], nil, false); err != nil {
			return fmt.Errorf("bench: spotify: creating spare %s: %w", paths[i], err)
		}
		r.addCreated(paths[i])
		if r.led != nil {
			r.led.Created(paths[i], nil)
		}
		return nil
	})
}

// parallel calls fn(0..n-1) from workers goroutines and returns the first
// error; a worker that meets one stops, the others go on with what is left.
func parallel(n, workers int, fn func(i int) error) error {
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		next     atomic.Int64
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				if err := fn(int(i)); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

func (r *spotifyRun) newName(dir, kind string) string {
	return meta.JoinPath(dir, "sp"+kind+"-"+r.run+"-"+strconv.FormatInt(r.seq.Add(1), 36))
}

func (r *spotifyRun) addCreated(p string) {
	r.mu.Lock()
	r.created = append(r.created, p)
	r.allFiles[p] = true
	r.mu.Unlock()
}

// takeCreated removes and returns a file the run made at random position
// u, or "" when none is left.
func (r *spotifyRun) takeCreated(u float64) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.created)
	if n == 0 {
		return ""
	}
	i := min(int(u*float64(n)), n-1)
	p := r.created[i]
	r.created[i] = r.created[n-1]
	r.created = r.created[:n-1]
	return p
}

// drive runs the schedule: it sends the operations due, second by second,
// to the workers, and returns what they measured.
func (r *spotifyRun) drive(secs int, progress *Progress) (*Measurement, *SpotifyStats) {
	cfg := r.cfg
	st := &SpotifyStats{Mix: cfg.Mix.Name, Shares: map[string]float64{}, BaseRate: cfg.BaseRate, Shape: cfg.Shape,
		MaxBurst: cfg.MaxBurst, IntervalS: cfg.Interval.Seconds(), Seed: cfg.Seed, Workers: cfg.Workers, Rates: r.rates}
	for _, op := range cfg.Mix.Ops {
		st.Shares[op] = cfg.Mix.Share(op)
	}
	jobs := make(chan spotifyJob)
	var wg sync.WaitGroup
	t0 := time.Now()
	if cfg.OnStart != nil {
		cfg.OnStart(t0)
	}
	for w := 0; w < cfg.Workers; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 0x3014))
			for j := range jobs {
				r.work(j, t0, rng)
			}
		}(uint64(cfg.Seed)*1000 + uint64(w))
	}
	hotStop := make(chan struct{})
	var hotWG sync.WaitGroup
	if n := int(math.Ceil(cfg.HotWriters * float64(cfg.Workers))); n > 0 {
		dir := meta.JoinPath(r.tree.Root(), ".hot-"+r.run)
		if err := r.env.FS.Mkdirs(r.ctx, r.env.User, dir, meta.DefaultDir); err != nil {
			r.mu.Lock()
			r.firstErr = append(r.firstErr, fmt.Sprintf("hot directory %s: %v", dir, err))
			r.mu.Unlock()
		} else {
			r.mu.Lock()
			r.madeDirs = append(r.madeDirs, dir)
			r.mu.Unlock()
			for w := 0; w < n; w++ {
				hotWG.Add(1)
				go func() {
					defer hotWG.Done()
					r.hotWriter(dir, t0, hotStop)
				}()
			}
		}
	}
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x09))
	perInterval := int(cfg.Interval / time.Second)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var carry int64
	frac := 0.0
	for s := 0; s < secs && r.ctx.Err() == nil; s++ {
		target := r.rates[s/perInterval]
		frac += target
		share := int64(frac)
		frac -= float64(share)
		sec := SpotifySecond{T: s + 1, TargetOpsS: target, Due: share + carry}
		st.Offered += share
		start := t0.Add(time.Duration(s) * time.Second)
		end := start.Add(time.Second)
		at := func(i int64) time.Time {
			return start.Add(time.Duration(float64(time.Second) * float64(i) / float64(sec.Due)))
		}
		late := int64(0) // sent more than driverLate after their time, with a worker free
		for sec.Issued < sec.Due && r.ctx.Err() == nil {
			now := time.Now()
			if !now.Before(end) {
				break
			}
			// Operations are spread evenly over the second; those due by
			// now go at once, then the driver sleeps until the next.
			if next := at(sec.Issued); now.Before(next) {
				time.Sleep(min(next.Sub(now), time.Millisecond))
				continue
			}
			j := r.schedule(rng, at(sec.Issued))
			select {
			case jobs <- j: // a worker was free
				sec.Issued++
				if time.Since(j.at) > driverLate {
					late++
				}
				continue
			default:
			}
			timer.Reset(time.Until(end)) // every worker busy: wait for one, to the second's end
			select {
			case jobs <- j:
				sec.Issued++
			case <-timer.C:
			case <-r.ctx.Done():
			}
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
		// What is still due goes now to the workers that are free; the
		// rest is carried over, for want of a worker.
		for sec.Issued < sec.Due && r.ctx.Err() == nil {
			j := r.schedule(rng, at(sec.Issued))
			select {
			case jobs <- j:
				sec.Issued++
				continue
			default:
			}
			break
		}
		// A second with nothing (more) to send still lasts its second: an
		// idle phase of the schedule (bench elastic's) must pass in time.
		if d := time.Until(end); d > 0 && r.ctx.Err() == nil {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-r.ctx.Done():
				if !timer.Stop() {
					<-timer.C
				}
			}
		}
		sec.Carried = sec.Due - sec.Issued
		carry = sec.Carried
		switch {
		case carry > 0:
			sec.Behind = "server"
			st.ServerBehindS++
		case late > sec.Issued/10:
			sec.Behind = "driver"
			st.DriverBehindS++
		}
		st.Issued += sec.Issued
		st.Seconds = append(st.Seconds, sec)
		progress.Add(1)
	}
	st.Unissued = carry
	if secs > 0 {
		st.OfferedOpS = float64(st.Offered) / float64(secs)
	}
	close(jobs)
	close(hotStop)
	wg.Wait()
	hotWG.Wait()

	m := &Measurement{Clients: cfg.Workers, Duration: time.Since(t0), Hist: r.hist}
	for op, a := range r.perOp {
		if op != hotCreate {
			m.Ops += a.ops
			m.Errors += a.errs
		}
	}
	for i, p := range r.done {
		if p.Ops+p.Errors > 0 || i < secs {
			p.T = i + 1
			m.Series = append(m.Series, p)
		}
	}
	m.ErrorSamples = r.firstErr
	for i := range st.Seconds {
		sec := &st.Seconds[i]
		sec.Served = r.done[i].Ops
		if h := r.secHist[i]; h != nil {
			sec.P50Ms = float64(h.ValueAtQuantile(50)) / 1000
			sec.P99Ms = float64(h.ValueAtQuantile(99)) / 1000
			sec.ResponseP99Ms = float64(r.secResp[i].ValueAtQuantile(99)) / 1000
		}
	}
	st.Response = latencyOf(r.resp)
	st.Fallbacks = r.fallbacks
	return m, st
}

// hotCreate is the per_op name of the hot writers' creates.
const hotCreate = "create-hot"

// hotWriter creates files in dir, one after the other, until stop. Its
// files are not the run's to rename or delete; they go with dir.
func (r *spotifyRun) hotWriter(dir string, t0 time.Time, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		if r.ctx.Err() != nil {
			return
		}
		p := r.newName(dir, "h")
		begin := time.Now()
		err := createFile(r.ctx, r.env, p, nil, false)
		end := time.Now()
		if r.led != nil {
			r.led.Created(p, err)
		}
		r.mu.Lock()
		a := r.perOp[hotCreate]
		if err != nil {
			a.errs++
			if len(r.firstErr) < 5 {
				r.firstErr = append(r.firstErr, err.Error())
			}
		} else {
			a.ops++
			_ = a.hist.RecordValue(clampUs(end.Sub(begin).Microseconds()))
		}
		r.mu.Unlock()
	}
}

// schedule draws the next operation and its path.
func (r *spotifyRun) schedule(rng *rand.Rand, at time.Time) spotifyJob {
	j := spotifyJob{op: r.cfg.Mix.pick(rng.Float64()), at: at}
	switch j.op {
	case MixRead, MixStat:
		j.path = r.files[rng.IntN(len(r.files))]
	default: // directories: listed, stated, or where a new entry goes
		j.path = r.dirs[rng.IntN(len(r.dirs))]
	}
	return j
}

// work performs one scheduled operation and records it.
func (r *spotifyRun) work(j spotifyJob, t0 time.Time, rng *rand.Rand) {
	r.inflight.Add(1)
	begin := time.Now()
	op, err := r.do(j, rng)
	end := time.Now()
	r.inflight.Add(-1)
	sec := int(end.Sub(t0) / time.Second)
	us := clampUs(end.Sub(begin).Microseconds())
	resp := clampUs(end.Sub(j.at).Microseconds())
	r.mu.Lock()
	defer r.mu.Unlock()
	if sec >= len(r.done) {
		sec = len(r.done) - 1 // finished after the end: counted in the last point
	}
	a := r.perOp[op]
	if err != nil {
		a.errs++
		r.done[sec].Errors++
		if len(r.firstErr) < 5 {
			r.firstErr = append(r.firstErr, err.Error())
		}
		return
	}
	a.ops++
	r.done[sec].Ops++
	if r.secHist[sec] == nil {
		r.secHist[sec] = hdrhistogram.New(histMinUs, histMaxUs, 2)
		r.secResp[sec] = hdrhistogram.New(histMinUs, histMaxUs, 2)
	}
	_ = r.secHist[sec].RecordValue(us)
	_ = r.secResp[sec].RecordValue(resp)
	_ = a.hist.RecordValue(us)
	_ = r.hist.RecordValue(us)
	_ = r.resp.RecordValue(resp)
}

func clampUs(us int64) int64 { return min(max(us, histMinUs), histMaxUs) }

// do performs j and returns the operation it performed (mv and delete
// become create when the run has no file of its own left).
func (r *spotifyRun) do(j spotifyJob, rng *rand.Rand) (string, error) {
	ctx, env := r.ctx, r.env
	switch j.op {
	case MixRead:
		_, err := env.FS.Read(ctx, env.User, j.path, 0, r.cfg.ReadSize)
		r.readFailed(j.op, err)
		return j.op, err
	case MixStat, MixStatDir:
		_, err := env.FS.Stat(ctx, env.User, j.path)
		r.readFailed(j.op, err)
		return j.op, err
	case MixLs:
		_, err := env.FS.List(ctx, env.User, j.path, "", r.cfg.ListLimit)
		r.readFailed(j.op, err)
		return j.op, err
	case MixEcho:
		return j.op, env.FS.Echo(ctx)
	case MixMkdirs:
		p := r.newName(j.path, "d")
		err := env.FS.Mkdirs(ctx, env.User, p, meta.DefaultDir)
		if r.led != nil {
			r.led.Mkdir(p, err)
		}
		if err == nil || r.led != nil { // with a ledger, perhaps made: cleaned up at the end
			r.mu.Lock()
			r.madeDirs = append(r.madeDirs, p)
			r.mu.Unlock()
		}
		return j.op, err
	case MixRename, MixDelete:
		if src := r.takeCreated(rng.Float64()); src != "" {
			if j.op == MixDelete {
				err := env.FS.Delete(ctx, env.User, src, false)
				if r.led != nil {
					r.led.Deleted(src, err)
				}
				if err != nil {
					r.giveBack(src) // still there, or its fate unknown: cleaned up at the end
				} else {
					r.mu.Lock()
					delete(r.allFiles, src)
					r.mu.Unlock()
				}
				return j.op, err
			}
			dir, _ := meta.ParentPath(src)
			dst := r.newName(dir, "m")
			err := env.FS.Rename(ctx, env.User, src, dst, meta.RenameOptions{})
			if r.led != nil {
				r.led.Renamed(src, dst, err)
			}
			if err != nil {
				r.giveBack(src)
				if r.led != nil {
					r.mu.Lock()
					r.allFiles[dst] = true // perhaps renamed: cleaned up at the end
					r.mu.Unlock()
				}
				return j.op, err
			}
			r.mu.Lock()
			delete(r.allFiles, src)
			r.mu.Unlock()
			r.addCreated(dst)
			return j.op, nil
		}
		r.mu.Lock()
		r.fallbacks++
		r.mu.Unlock()
	}
	// create, or an mv or delete with nothing of the run's to work on
	p := r.newName(j.path, "f")
	err := createFile(ctx, env, p, nil, false)
	if r.led != nil {
		r.led.Created(p, err)
	}
	if err == nil {
		r.addCreated(p)
	} else if r.led != nil {
		r.mu.Lock()
		r.allFiles[p] = true // perhaps created: cleaned up at the end
		r.mu.Unlock()
	}
	return MixCreate, err
}

// giveBack returns src, whose rename or delete failed, to the files the
// run may rename or delete; with a ledger it does not, since the failed
// operation may have been applied (see Ledger). It stays in allFiles
// either way, for the clean-up.
func (r *spotifyRun) giveBack(src string) {
	if r.led != nil {
		return
	}
	r.addCreated(src)
}

// readFailed tells the ledger of a failed read.
func (r *spotifyRun) readFailed(op string, err error) {
	if err != nil && r.led != nil {
		r.led.Failed(op, err)
	}
}

// cleanUp deletes, untimed, every file and directory the run made, so that
// the tree is as prepared for the next run.
func (r *spotifyRun) cleanUp() {
	ctx := context.WithoutCancel(r.ctx)
	r.mu.Lock()
	var todo []string
	for p := range r.allFiles {
		todo = append(todo, p)
	}
	todo = append(todo, r.madeDirs...)
	r.mu.Unlock()
	_ = parallel(len(todo), min(r.cfg.Workers, 16), func(i int) error {
		_ = r.env.FS.Delete(ctx, r.env.User, todo[i], true) // gone already is fine
		return nil
	})
}

// latencyOf reads the percentiles of h (microseconds) in milliseconds.
func latencyOf(h *hdrhistogram.Histogram) LatencyMs {
	if h == nil || h.TotalCount() == 0 {
		return LatencyMs{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return LatencyMs{P50: ms(h.ValueAtQuantile(50)), P90: ms(h.ValueAtQuantile(90)), P99: ms(h.ValueAtQuantile(99)),
		P999: ms(h.ValueAtQuantile(99.9)), Max: ms(h.Max()), Mean: h.Mean() / 1000}
}

// instanceStatus is a Nimbus server's GET /status/instance.
type instanceStatus struct {
	Usage struct {
		ActiveS     float64 `json:"active_s"`
		Invocations int64   `json:"invocations"`
		// InstancesMax: a platform's gateway answers for all its
		// instances, and says how many there were at most at once.
		InstancesMax int `json:"instances_max"`
	} `json:"usage"`
	Prices struct {
		PerGBSecond          float64 `json:"per_gb_second_usd"`
		PerMillionInvocation float64 `json:"per_million_invocations_usd"`
		MemoryGB             float64 `json:"memory_gb"`
	} `json:"prices"`
}

// readInstance reads the target's meter, when it is a Nimbus server (its
// metrics URL's /status/instance).
func readInstance(ctx context.Context, env *Env) (*instanceStatus, error) {
	base, ok := strings.CutSuffix(env.MetricsURL, "/metrics")
	if !ok || base == "" {
		return nil, errors.New("bench: no Nimbus status endpoint")
	}
	var st instanceStatus
	if err := getJSON(ctx, base+"/status/instance", 5*time.Second, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// getJSON fetches url (getOK, within timeout) and decodes its JSON answer
// into v.
func getJSON(ctx context.Context, url string, timeout time.Duration, v any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := getOK(ctx, httpClientForSamples, url)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("bench: %s: %w", url, err)
	}
	return nil
}

// runCost prices what the target did between two readings, for a run of
// duration d that served ops operations: one server, or a platform's
// instances together (its gateway's answer). Serverless: the active time
// and the invocations; serverful: the most instances there were at once,
// provisioned for the whole run.
func runCost(before, after *instanceStatus, d time.Duration, ops int64) *RunCost {
	p := after.Prices
	c := &RunCost{InstancesMax: max(1, after.Usage.InstancesMax), ActiveS: after.Usage.ActiveS - before.Usage.ActiveS,
		Invocations: after.Usage.Invocations - before.Usage.Invocations}
	c.ServerlessUSD = c.ActiveS*p.MemoryGB*p.PerGBSecond + float64(c.Invocations)*p.PerMillionInvocation/1e6
	c.ServerfulUSD = d.Seconds() * float64(c.InstancesMax) * p.MemoryGB * p.PerGBSecond
	if c.ServerlessUSD > 0 {
		c.PerfPerDollar = float64(ops) / c.ServerlessUSD
	}
	if c.ServerfulUSD > 0 {
		c.ServerfulPerfPerDollar = float64(ops) / c.ServerfulUSD
	}
	return c
}
