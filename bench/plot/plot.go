// Package plot draws the charts of `nimbus bench plot` from result documents
// with gonum.org/v1/plot: throughput against clients per operation (one line
// per system), latency CDFs per operation (one line per system and client
// count), for bigdir runs the server's memory while it lists, and for
// spotify runs the served throughput against the offered rate over time.
//
//	docs := []*bench.Document{...}
//	files, err := plot.Write(plot.Collect(docs), "out/")
package plot

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/nimbus-fs/nimbus/bench"
)

// Collect concatenates the results of several documents.
func Collect(docs []*bench.Document) []bench.Result {
	var out []bench.Result
	for _, d := range docs {
		out = append(out, d.Results...)
	}
	return out
}

// Write draws every chart the results allow into dir (created if needed) and
// returns the files written, sorted. A result set with nothing to draw is an
// error.
func Write(results []bench.Result, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plot: %w", err)
	}
	var files []string
	add := func(name string, p *plot.Plot, err error) error {
		if err != nil {
			return err
		}
		if p == nil {
			return nil
		}
		path := filepath.Join(dir, name)
		if err := p.Save(20*vg.Centimeter, 13*vg.Centimeter, path); err != nil {
			return fmt.Errorf("plot: %s: %w", path, err)
		}
		files = append(files, path)
		return nil
	}
	for _, op := range ops(results) {
		p, err := throughputChart(results, op)
		if err := add("throughput-"+op+".png", p, err); err != nil {
			return files, err
		}
		p, err = cdfChart(results, op)
		if err := add("latency-cdf-"+op+".png", p, err); err != nil {
			return files, err
		}
	}
	p, err := memoryChart(results)
	if err := add("bigdir-memory.png", p, err); err != nil {
		return files, err
	}
	for _, mix := range spotifyMixes(results) {
		p, err := spotifyChart(results, mix)
		if err := add("spotify-"+mix+"-throughput.png", p, err); err != nil {
			return files, err
		}
		p, err = spotifyLatencyChart(results, mix)
		if err := add("spotify-"+mix+"-latency.png", p, err); err != nil {
			return files, err
		}
	}
	seen := map[string]int{} // elastic and fault runs numbered apart
	for i := range results {
		r := &results[i]
		if r.Elastic == nil || r.Spotify == nil {
			continue
		}
		name := "elastic"
		if r.Elastic.Faults != nil {
			name = "faults"
		}
		if seen[name]++; seen[name] > 1 {
			name = fmt.Sprintf("%s-%d", name, seen[name])
		}
		for _, c := range []struct {
			suffix string
			draw   func(*bench.Result) (*plot.Plot, error)
		}{{"throughput", elasticThroughput}, {"instances", elasticInstances}, {"latency", elasticLatency}} {
			p, err := c.draw(r)
			if err := add(name+"-"+c.suffix+".png", p, err); err != nil {
				return files, err
			}
		}
	}
	if len(files) == 0 {
		return nil, errors.New("plot: nothing to draw: no micro, echo, bigdir, spotify or elastic results")
	}
	sort.Strings(files)
	return files, nil
}

// opName is the chart key of a result: its op, with "-hot" for hot-dir runs.
func opName(r *bench.Result) string {
	if r.HotDir {
		return r.Op + "-hot"
	}
	return r.Op
}

func ops(results []bench.Result) []string {
	seen := map[string]bool{}
	var out []string
	for i := range results {
		r := &results[i]
		if r.Workload != "micro" && r.Workload != "echo" && r.Workload != "bigdir" && r.Workload != "spotify" {
			continue
		}
		if n := opName(r); !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

// throughputChart: one line per system, clients on a log axis. Nil when the
// operation was measured at a single client count for every system.
func throughputChart(results []bench.Result, op string) (*plot.Plot, error) {
	bySys := map[string]map[int]float64{}
	for i := range results {
		r := &results[i]
		if opName(r) != op || r.Workload == "bigdir" || r.Workload == "spotify" {
			continue
		}
		if bySys[r.System] == nil {
			bySys[r.System] = map[int]float64{}
		}
		bySys[r.System][r.Clients] = r.ThroughputOpsS // a later run at the same count wins
	}
	if len(bySys) == 0 {
		return nil, nil
	}
	// The legend stays at the top left (newPlot): throughput rises with
	// clients, so that corner is the one no line reaches.
	p := newPlot(op+": throughput against clients", "clients", "operations / s")
	p.X.Scale = plot.LogScale{}
	counts := map[int]float64{}
	var args []any
	for _, sys := range sortedKeys(bySys) {
		pts := bySys[sys]
		for c := range pts {
			counts[c] = 0
		}
		var xy plotter.XYs
		for _, c := range sortedInts(pts) {
			xy = append(xy, plotter.XY{X: float64(c), Y: pts[c]})
		}
		args = append(args, sys, xy)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return nil, fmt.Errorf("plot: %s: %w", op, err)
	}
	// Label exactly the client counts measured (1, 4, 16, ...).
	var ticks []plot.Tick
	for _, c := range sortedInts(counts) {
		ticks = append(ticks, plot.Tick{Value: float64(c), Label: fmt.Sprint(c)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = float64(sortedInts(counts)[0])/1.2, float64(sortedInts(counts)[len(counts)-1])*1.2
	p.Y.Min, p.Y.Max = 0, p.Y.Max*1.08
	return p, nil
}

// cdfChart: one line per (system, clients), latency on a log axis.
func cdfChart(results []bench.Result, op string) (*plot.Plot, error) {
	var args []any
	for i := range results {
		r := &results[i]
		if opName(r) != op || len(r.CDF) == 0 {
			continue
		}
		var xy plotter.XYs
		for _, c := range r.CDF {
			xy = append(xy, plotter.XY{X: math.Max(c.Ms, 0.001), Y: c.Q})
		}
		args = append(args, fmt.Sprintf("%s, %d clients", r.System, r.Clients), xy)
	}
	if len(args) == 0 {
		return nil, nil
	}
	p := newPlot(op+": latency CDF", "latency (ms)", "fraction of operations")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Left = false
	p.Legend.Top = false
	if err := plotutil.AddLines(p, args...); err != nil {
		return nil, fmt.Errorf("plot: %s: %w", op, err)
	}
	p.Y.Min, p.Y.Max = 0, 1
	return p, nil
}

// spotifyMixes lists the mixes of the spotify results, sorted.
func spotifyMixes(results []bench.Result) []string {
	seen := map[string]bool{}
	for i := range results {
		if r := &results[i]; r.Spotify != nil && r.Elastic == nil {
			seen[r.Spotify.Mix] = true
		}
	}
	return sortedKeys(seen)
}

// spotifyChart: the λFS evaluation's throughput figure for one mix, the
// offered rate (the schedule of the first run: runs with one seed share
// it) and each run's served operations per second, over the seconds of
// the run.
func spotifyChart(results []bench.Result, mix string) (*plot.Plot, error) {
	var args []any
	offered := false
	for i := range results {
		r := &results[i]
		if r.Spotify == nil || r.Spotify.Mix != mix || r.Elastic != nil {
			continue
		}
		if !offered {
			var xy plotter.XYs
			for _, s := range r.Spotify.Seconds {
				xy = append(xy, plotter.XY{X: float64(s.T), Y: s.TargetOpsS})
			}
			args = append(args, fmt.Sprintf("offered (seed %d)", r.Spotify.Seed), xy)
			offered = true
		}
		var xy plotter.XYs
		for _, s := range r.Series {
			if s.T > len(r.Spotify.Seconds) {
				break // operations finished after the last second
			}
			xy = append(xy, plotter.XY{X: float64(s.T), Y: float64(s.Ops)})
		}
		args = append(args, fmt.Sprintf("%s, served", r.System), xy)
	}
	if len(args) == 0 {
		return nil, nil
	}
	p := newPlot("spotify ("+mix+"): throughput against the offered rate", "seconds", "operations per second")
	if err := plotutil.AddLines(p, args...); err != nil {
		return nil, fmt.Errorf("plot: spotify %s: %w", mix, err)
	}
	p.Y.Min = 0
	return p, nil
}

// spotifyLatencyChart: each operation's p50 and p99 in one mix, a group of
// bars per run (system and profile): the per-operation latency the paper's
// comparisons show.
func spotifyLatencyChart(results []bench.Result, mix string) (*plot.Plot, error) {
	var runs []*bench.Result
	opSet := map[string]bool{}
	for i := range results {
		r := &results[i]
		if r.Spotify == nil || r.Spotify.Mix != mix || len(r.PerOp) == 0 || r.Elastic != nil {
			continue
		}
		runs = append(runs, r)
		for op := range r.PerOp {
			opSet[op] = true
		}
	}
	if len(runs) == 0 {
		return nil, nil
	}
	ops := sortedKeys(opSet)
	p := newPlot("spotify ("+mix+"): latency per operation, p50 (light) and p99 (dark)", "", "ms")
	p.Legend.Left = false
	w := vg.Points(6)
	for i, r := range runs {
		p50, p99 := make(plotter.Values, len(ops)), make(plotter.Values, len(ops))
		for j, op := range ops {
			s := r.PerOp[op]
			p50[j], p99[j] = math.Max(s.Latency.P50, 0.001), math.Max(s.Latency.P99, 0.001)
		}
		label := r.System
		if r.Profile != "" {
			label += " (" + r.Profile + ")"
		}
		offset := w * vg.Length(2*i-len(runs))
		for k, vals := range []plotter.Values{p50, p99} {
			b, err := plotter.NewBarChart(vals, w)
			if err != nil {
				return nil, fmt.Errorf("plot: spotify %s latency: %w", mix, err)
			}
			b.Offset = offset + w*vg.Length(k)
			b.Color = plotutil.Color(i)
			if k == 0 {
				b.Color = lighten(b.Color)
			}
			b.LineStyle.Width = 0
			p.Add(b)
			if k == 1 {
				p.Legend.Add(label, b)
			}
		}
	}
	p.NominalX(ops...)
	return p, nil
}

// lighten mixes c halfway with white.
func lighten(c color.Color) color.Color {
	r, g, b, _ := c.RGBA()
	return color.NRGBA{R: uint8(r>>9) + 127, G: uint8(g>>9) + 127, B: uint8(b>>9) + 127, A: 255}
}

// memoryChart: the server's memory while bigdir listed, one line per run.
func memoryChart(results []bench.Result) (*plot.Plot, error) {
	var args []any
	for i := range results {
		r := &results[i]
		if r.Bigdir == nil || len(r.Bigdir.MemSamples) == 0 {
			continue
		}
		var xy plotter.XYs
		for _, s := range r.Bigdir.MemSamples {
			xy = append(xy, plotter.XY{X: s.TMs / 1000, Y: float64(s.Bytes) / (1 << 20)})
		}
		// The two sources measure different things: say which one each line is.
		what := "resident"
		if strings.Contains(r.Bigdir.MemSource, "/jmx") {
			what = "Java heap used"
		}
		args = append(args, fmt.Sprintf("%s, %d entries (%s)", r.System, r.Bigdir.Entries, what), xy)
	}
	if len(args) == 0 {
		return nil, nil
	}
	p := newPlot("bigdir: server memory while listing", "seconds", "MiB")
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return nil, fmt.Errorf("plot: bigdir: %w", err)
	}
	p.Y.Min = 0
	return p, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return strings.ToLower(out[i]) < strings.ToLower(out[j]) })
	return out
}

func sortedInts(m map[int]float64) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

// elasticThroughput: an elastic run's offered and served operations per
// second (the λFS evaluation's Figure 8, top).
func elasticThroughput(r *bench.Result) (*plot.Plot, error) {
	var offered, served plotter.XYs
	for _, s := range r.Spotify.Seconds {
		offered = append(offered, plotter.XY{X: float64(s.T), Y: s.TargetOpsS})
		served = append(served, plotter.XY{X: float64(s.T), Y: float64(s.Served)})
	}
	title := fmt.Sprintf("elastic (%s): a %g× step of load, then idle", r.System, r.Elastic.Step)
	if f := r.Elastic.Faults; f != nil {
		title = fmt.Sprintf("faults (%s): an instance killed every %g s (dashed), round robin", r.System, f.KillEveryS)
	}
	p := newPlot(title, "seconds", "operations per second")
	if err := plotutil.AddLines(p, "offered", offered, "served", served); err != nil {
		return nil, fmt.Errorf("plot: elastic: %w", err)
	}
	p.Y.Min = 0
	if f := r.Elastic.Faults; f != nil {
		// Figure 15: each kill a dashed vertical line at the time it was
		// asked for; a second's served point is drawn at its end (T), so
		// the first point right of a line is the second the kill fell in.
		top := p.Y.Max * 1.05
		var first *plotter.Line
		for _, k := range f.Kills {
			if k.Error != "" {
				continue
			}
			l, err := plotter.NewLine(plotter.XYs{{X: k.T, Y: 0}, {X: k.T, Y: top}})
			if err != nil {
				return nil, fmt.Errorf("plot: faults: %w", err)
			}
			l.Color = color.Gray{Y: 150}
			l.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
			l.Width = vg.Points(0.6)
			p.Add(l)
			if first == nil {
				first = l
			}
		}
		if first != nil {
			p.Legend.Add("kill", first)
		}
		p.Y.Max = top
	}
	return p, nil
}

// elasticInstances: instances (serving or starting) of each deployment
// over the run (Figure 8, bottom; Figure 14).
func elasticInstances(r *bench.Result) (*plot.Plot, error) {
	deps := map[string]bool{}
	for _, s := range r.Elastic.Samples {
		for d := range s.Instances {
			deps[d] = true
		}
	}
	if len(deps) == 0 {
		return nil, nil
	}
	var args []any
	total := plotter.XYs{}
	for _, d := range sortedKeys(deps) {
		var xy plotter.XYs
		for _, s := range r.Elastic.Samples {
			xy = append(xy, plotter.XY{X: s.T, Y: float64(s.Instances[d])})
		}
		args = append(args, "deployment "+d, xy)
	}
	for _, s := range r.Elastic.Samples {
		n := 0
		for _, v := range s.Instances {
			n += v
		}
		total = append(total, plotter.XY{X: s.T, Y: float64(n)})
	}
	if len(deps) > 1 {
		args = append(args, "all", total)
	}
	p := newPlot("elastic: NameNode instances over time", "seconds", "instances")
	if err := plotutil.AddLines(p, args...); err != nil {
		return nil, fmt.Errorf("plot: elastic instances: %w", err)
	}
	p.Y.Min = 0
	return p, nil
}

// elasticLatency: p50 and p99 of each second's operations (from the send)
// and the p99 from their scheduled time (what a client waits, queueing
// included).
func elasticLatency(r *bench.Result) (*plot.Plot, error) {
	var p50, p99, resp plotter.XYs
	for _, s := range r.Spotify.Seconds {
		if s.Served == 0 {
			continue
		}
		x := float64(s.T)
		p50 = append(p50, plotter.XY{X: x, Y: math.Max(s.P50Ms, 0.001)})
		p99 = append(p99, plotter.XY{X: x, Y: math.Max(s.P99Ms, 0.001)})
		resp = append(resp, plotter.XY{X: x, Y: math.Max(s.ResponseP99Ms, 0.001)})
	}
	if len(p50) == 0 {
		return nil, nil
	}
	p := newPlot("elastic: latency per second", "seconds", "ms (log)")
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	if err := plotutil.AddLines(p, "p50", p50, "p99", p99, "p99 from the schedule", resp); err != nil {
		return nil, fmt.Errorf("plot: elastic latency: %w", err)
	}
	return p, nil
}
