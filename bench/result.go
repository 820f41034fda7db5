package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"
)

// SchemaVersion is the version of the JSON document; bump it when a field
// changes meaning (adding a field does not).
const SchemaVersion = 1

// Document is what --json writes: every result of one command.
type Document struct {
	Schema  int       `json:"schema"`
	Tool    string    `json:"tool"`    // "nimbus bench"
	Command []string  `json:"command"` // the arguments after "nimbus bench"
	Started time.Time `json:"started"`
	Host    HostInfo  `json:"host"`
	Results []Result  `json:"results"`
}

// HostInfo describes the machine the driver ran on.
type HostInfo struct {
	OS   string `json:"os"`
	Arch string `json:"arch"`
	CPUs int    `json:"cpus"`
	Go   string `json:"go"`
}

// Result is one measured point: one workload and operation at one client
// count against one target.
type Result struct {
	Workload       string        `json:"workload"`                // prepare, micro, echo, bigdir
	Op             string        `json:"op"`                      // create, stat, echo-rpc, ls-bigdir, ...
	Target         string        `json:"target"`                  // embedded, nimbus://h:p, webhdfs://h:p
	System         string        `json:"system"`                  // nimbus-rpc, nimbus-webhdfs, hdfs-webhdfs, or --label
	Clients        int           `json:"clients"`                 //
	HotDir         bool          `json:"hot_dir,omitempty"`       // create/mkdir: all clients in one directory
	ThroughputOpsS float64       `json:"throughput_ops_s"`        // successful operations per second
	Latency        LatencyMs     `json:"latency_ms"`              // of successful operations
	Ops            int64         `json:"ops"`                     // successful operations
	Errors         int64         `json:"errors"`                  // failed operations
	DurationS      float64       `json:"duration_s"`              // wall time of the measured phase
	Series         []SecondPoint `json:"series"`                  // per second of the run
	EchoOpsS       float64       `json:"echo_ops_s,omitempty"`    // echo throughput at the same client count, same run
	EchoFraction   float64       `json:"echo_fraction,omitempty"` // throughput_ops_s / echo_ops_s
	CDF            []CDFPoint    `json:"latency_cdf,omitempty"`   // for latency CDF charts
	ErrorSamples   []string      `json:"error_samples,omitempty"` // up to five distinct errors
	Files          int           `json:"files,omitempty"`         // size of the prepared tree used
	Bigdir         *BigdirStats  `json:"bigdir,omitempty"`        // bigdir only
	// Profile and ServerFlags: the server configuration measured (Env).
	Profile     string   `json:"profile,omitempty"`
	ServerFlags []string `json:"server_flags,omitempty"`
	// PerOp splits a mixed workload's figures by operation (spotify).
	PerOp   map[string]OpStats `json:"per_op,omitempty"`
	Spotify *SpotifyStats      `json:"spotify,omitempty"` // spotify only: the schedule
	Elastic *ElasticStats      `json:"elastic,omitempty"` // elastic only: instances over time
	// The driver's own CPU (this process, all clients) per successful
	// operation, and what the server counted over the same run when its
	// metrics endpoint is known (ServerStats).
	DriverCPUUsPerOp float64      `json:"driver_cpu_us_per_op,omitempty"`
	Server           *ServerStats `json:"server,omitempty"`
	ServerError      string       `json:"server_error,omitempty"`
}

// LatencyMs are latency percentiles in milliseconds, from an HDR histogram
// with three significant digits.
type LatencyMs struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// SecondPoint counts the operations that finished in second T of a run
// (T = 1 is the first second).
type SecondPoint struct {
	T      int   `json:"t"`
	Ops    int64 `json:"ops"`
	Errors int64 `json:"errors"`
}

// CDFPoint says that a fraction Q (0..1) of operations took at most Ms.
type CDFPoint struct {
	Q  float64 `json:"q"`
	Ms float64 `json:"ms"`
}

// cdfQuantiles are the points of latency_cdf, dense in the tail.
var cdfQuantiles = []float64{0, 1, 5, 10, 20, 30, 40, 50, 60, 70, 75, 80, 85, 90, 92.5, 95, 97.5, 98, 99, 99.5, 99.9, 99.95, 99.99, 100}

// NewResult labels a measurement.
func NewResult(workload, op string, env *Env, m *Measurement) Result {
	r := Result{
		Workload:       workload,
		Op:             op,
		Target:         env.Target,
		System:         env.label(),
		Clients:        m.Clients,
		ThroughputOpsS: m.Throughput(),
		Ops:            m.Ops,
		Errors:         m.Errors,
		DurationS:      m.Duration.Seconds(),
		Series:         m.Series,
		ErrorSamples:   m.ErrorSamples,
		Server:         m.Server,
		ServerError:    m.ServerError,
		Profile:        env.Profile,
		ServerFlags:    env.ServerFlags,
	}
	if m.Ops > 0 {
		r.DriverCPUUsPerOp = float64(m.DriverCPU.Microseconds()) / float64(m.Ops)
	}
	if r.Server != nil && env.Target == "embedded" {
		r.Server.SharedProcess = true
	}
	if r.Series == nil {
		r.Series = []SecondPoint{}
	}
	h := m.Hist
	if h != nil && h.TotalCount() > 0 {
		r.Latency = latencyOf(h)
		for _, q := range cdfQuantiles {
			r.CDF = append(r.CDF, CDFPoint{Q: q / 100, Ms: float64(h.ValueAtQuantile(q)) / 1000})
		}
	}
	return r
}

// SetEcho records the echo throughput measured at the same client count.
func (r *Result) SetEcho(echoOpsS float64) {
	r.EchoOpsS = echoOpsS
	if echoOpsS > 0 {
		r.EchoFraction = r.ThroughputOpsS / echoOpsS
	}
}

// NewDocument starts a document for the command args.
func NewDocument(args []string) *Document {
	return &Document{
		Schema:  SchemaVersion,
		Tool:    "nimbus bench",
		Command: args,
		Started: time.Now().UTC(),
		Host:    HostInfo{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version()},
		Results: []Result{},
	}
}

// WriteFile writes the document as indented JSON, atomically (temporary file
// and rename), so that a reader never sees half a document.
func (d *Document) WriteFile(path string) error { return writeJSONFile(path, d) }

// writeJSONFile writes v as indented JSON to path through a temporary file
// and a rename.
func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: encode results: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("bench: write results: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("bench: write results: %w", err)
	}
	return nil
}

// ReadDocument decodes a document written by WriteFile and checks its shape.
func ReadDocument(r io.Reader) (*Document, error) {
	var d Document
	dec := json.NewDecoder(r)
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("bench: decode results: %w", err)
	}
	if err := d.Check(); err != nil {
		return nil, err
	}
	return &d, nil
}

// ReadDocumentFile reads one results file.
func ReadDocumentFile(path string) (*Document, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer f.Close()
	d, err := ReadDocument(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// Check validates the invariants every result must hold; the smoke test and
// the plotter rely on it.
func (d *Document) Check() error {
	if d.Schema != SchemaVersion {
		return fmt.Errorf("bench: results schema %d, want %d", d.Schema, SchemaVersion)
	}
	var errs []error
	for i, r := range d.Results {
		bad := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("result %d (%s %s): %s", i, r.Workload, r.Op, fmt.Sprintf(format, a...)))
		}
		if r.Workload == "" || r.Op == "" || r.Target == "" || r.System == "" {
			bad("workload, op, target and system must be set")
		}
		if r.Clients < 1 {
			bad("clients = %d", r.Clients)
		}
		if r.Ops < 0 || r.Errors < 0 || r.DurationS < 0 || r.ThroughputOpsS < 0 {
			bad("negative count")
		}
		if r.Ops > 0 {
			l := r.Latency
			if !(l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max) {
				bad("latency percentiles out of order: %+v", l)
			}
		}
		var sum int64
		for _, p := range r.Series {
			sum += p.Ops
		}
		if sum != r.Ops {
			bad("series sums to %d ops, result says %d", sum, r.Ops)
		}
	}
	return errors.Join(errs...)
}
