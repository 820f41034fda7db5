package linmodel

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/nimbus-fs/nimbus/meta"
)

// Recorder collects the operations of concurrent clients with their
// invocation and response times on one monotonic clock. Safe for concurrent
// use.
type Recorder struct {
	start time.Time
	mu    struct {
		sync.Mutex
		ops []porcupine.Operation
	}
}

// NewRecorder returns an empty recorder whose clock starts now.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Now is the recorder's clock, in ns since it started.
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// Do runs in on fs as client (a small number, one per goroutine) and
// records it: invoked before the call starts, returned after it ended.
func (r *Recorder) Do(ctx context.Context, fs meta.FileSystem, base string, client int, in Input) Output {
	call := r.Now()
	out := Run(ctx, fs, base, in)
	r.Add(client, in, call, r.Now(), out)
	return out
}

// Add records an operation whose times were taken with Now.
func (r *Recorder) Add(client int, in Input, call, ret int64, out Output) {
	r.mu.Lock()
	r.mu.ops = append(r.mu.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	r.mu.Unlock()
}

// History returns the operations recorded so far.
func (r *Recorder) History() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]porcupine.Operation(nil), r.mu.ops...)
}

// Faults returns the results that fell outside the contract (see
// Output.Fault): a history holding one cannot be checked.
func Faults(h []porcupine.Operation) []string {
	var out []string
	for _, op := range h {
		if o := op.Output.(Output); o.Fault != "" {
			out = append(out, op.Input.(Input).String()+": "+o.Fault)
		}
	}
	return out
}

// Result is the verdict on one history.
type Result struct {
	Verdict porcupine.CheckResult
	// Viz is the path of porcupine's HTML visualization, written when the
	// history is not linearizable (or the check timed out).
	Viz string
}

// Check checks h against the model starting at init, giving up after
// timeout (Verdict Unknown). Unless the history is linearizable it writes
// the visualization into dir (the system's temporary directory when empty),
// in a file named after name.
func Check(init *State, h []porcupine.Operation, timeout time.Duration, dir, name string) (Result, error) {
	m := Model(init)
	verdict, info := porcupine.CheckOperationsVerbose(m, h, timeout)
	res := Result{Verdict: verdict}
	if verdict == porcupine.Ok {
		return res, nil
	}
	if dir == "" {
		dir = os.TempDir()
	}
	f, err := os.CreateTemp(dir, "nimbus-lin-"+name+"-*.html")
	if err != nil {
		return res, fmt.Errorf("linmodel: writing the visualization: %w", err)
	}
	defer f.Close()
	if err := porcupine.Visualize(m, info, f); err != nil {
		return res, fmt.Errorf("linmodel: writing the visualization %s: %w", f.Name(), err)
	}
	res.Viz, _ = filepath.Abs(f.Name())
	return res, f.Close()
}
