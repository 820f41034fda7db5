package bench

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
)

// Ledger records what a run's clients were told about the namespace
// changes they asked for, so that the namespace can be checked against it
// afterwards (the fault run: instances killed under load,
// every acknowledged operation in the namespace, nothing applied twice).
//
// A path's expected state follows its acknowledged operations: present
// after an acknowledged create or mkdirs (or as a rename's destination),
// absent after an acknowledged delete (or as a rename's source). An
// operation that failed leaves its paths unknown — it may or may not have
// been applied, as after a lost reply — and they are not checked. The run
// never operates again on a path whose outcome is unknown (spotifyRun does
// not give it back to the pool), so that a later "not found" is not
// mistaken for a double application.
//
// Every name a run creates is new (spotifyRun.newName), so an error that
// only a second application of an acknowledged or retried operation can
// explain is counted as a double application: a create or rename answered
// "already exists", a delete or rename of a file the ledger holds present
// answered "not found".
//
// Safe for concurrent use.
type Ledger struct {
	mu struct {
		sync.Mutex
		state   map[string]pathState
		dir     map[string]bool // paths that are directories
		doubles []string        // samples
		nDouble int64
		errs    map[string]int64 // failed operations by error kind
	}
}

type pathState uint8

const (
	statePresent pathState = iota + 1
	stateAbsent
	stateUnknown
)

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	l := &Ledger{}
	l.mu.state = map[string]pathState{}
	l.mu.dir = map[string]bool{}
	l.mu.errs = map[string]int64{}
	return l
}

const maxDoubleSamples = 20

// errKind names err's meta kind for the ledger's error counts.
func errKind(err error) string {
	for _, k := range []struct {
		err  error
		name string
	}{{meta.ErrOutcomeUnknown, "outcome_unknown"}, {meta.ErrBusy, "busy"}, {meta.ErrExists, "exists"},
		{meta.ErrNotFound, "not_found"}, {context.Canceled, "canceled"}, {context.DeadlineExceeded, "deadline"}} {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return "other"
}

// failedLocked counts a failed operation and marks paths unknown.
func (l *Ledger) failedLocked(op string, err error, paths ...string) {
	l.mu.errs[errKind(err)]++
	for _, p := range paths {
		l.mu.state[p] = stateUnknown
	}
}

func (l *Ledger) doubleLocked(op, path string, err error) {
	l.mu.nDouble++
	if len(l.mu.doubles) < maxDoubleSamples {
		l.mu.doubles = append(l.mu.doubles, fmt.Sprintf("%s %s: %v", op, path, err))
	}
}

// Created records a create of the new file p and what it returned.
func (l *Ledger) Created(p string, err error) { l.made(MixCreate, p, false, err) }

// Mkdir records a mkdirs of the new directory p. Mkdirs of an existing
// directory succeeds, so it betrays no double application.
func (l *Ledger) Mkdir(p string, err error) { l.made(MixMkdirs, p, true, err) }

func (l *Ledger) made(op, p string, dir bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.dir[p] = dir
	if err == nil {
		l.mu.state[p] = statePresent
		return
	}
	if !dir && errors.Is(err, meta.ErrExists) {
		l.doubleLocked(op, p, err)
	}
	l.failedLocked(op, err, p)
}

// Deleted records a delete of p, a file the ledger holds present.
func (l *Ledger) Deleted(p string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		l.mu.state[p] = stateAbsent
		return
	}
	if errors.Is(err, meta.ErrNotFound) && l.mu.state[p] == statePresent {
		l.doubleLocked(MixDelete, p, err)
	}
	l.failedLocked(MixDelete, err, p)
}

// Renamed records a rename of src, a file the ledger holds present, to
// the new name dst.
func (l *Ledger) Renamed(src, dst string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.dir[dst] = false
	if err == nil {
		l.mu.state[src], l.mu.state[dst] = stateAbsent, statePresent
		return
	}
	if errors.Is(err, meta.ErrExists) || (errors.Is(err, meta.ErrNotFound) && l.mu.state[src] == statePresent) {
		l.doubleLocked(MixRename, src+" -> "+dst, err)
	}
	l.failedLocked(MixRename, err, src, dst)
}

// Failed counts a failed read (stat, read, ls): it changes nothing.
func (l *Ledger) Failed(op string, err error) {
	l.mu.Lock()
	l.mu.errs[errKind(err)]++
	l.mu.Unlock()
}

// Verdict is a namespace checked against a ledger.
type Verdict struct {
	// OK: nothing acknowledged is missing or undone, no double
	// application, fsck clean (and run).
	OK bool `json:"ok"`
	// Paths the ledger holds present and found (files and directories),
	// and absent and not found.
	Present int `json:"present"`
	Absent  int `json:"absent"`
	// Unknown: operations that failed, their paths not checked.
	Unknown int `json:"unknown"`
	// Missing: acknowledged present, not found (an acknowledged create or
	// rename lost). Resurrected: acknowledged absent, found (an
	// acknowledged delete or rename undone, or applied again after it).
	// WrongType: a file found a directory or the reverse.
	Missing     int      `json:"missing"`
	Resurrected int      `json:"resurrected"`
	WrongType   int      `json:"wrong_type"`
	Samples     []string `json:"samples,omitempty"`
	// Unchecked: stats that failed with something else than not found,
	// after retries.
	Unchecked int `json:"unchecked"`
	// DoubleApplied counts errors only a second application explains
	// (Ledger), with samples.
	DoubleApplied int64    `json:"double_applied"`
	DoubleSamples []string `json:"double_samples,omitempty"`
	// Errors counts the run's failed operations by kind (outcome_unknown,
	// busy, exists, not_found, canceled, deadline, other).
	Errors map[string]int64 `json:"errors"`
	// Fsck: the namespace's fsck after the run; nil when the target has
	// none.
	FsckClean    *bool    `json:"fsck_clean,omitempty"`
	FsckInodes   int64    `json:"fsck_inodes,omitempty"`
	FsckProblems []string `json:"fsck_problems,omitempty"`
	FsckError    string   `json:"fsck_error,omitempty"`
	TookS        float64  `json:"took_s"`
}

// Fscker is a target that checks its namespace (Nimbus's client).
type Fscker interface {
	Fsck(ctx context.Context) (*meta.FsckReport, error)
}

const maxVerdictSamples = 20

// Verify stats every path the ledger knows the state of on env's target,
// with workers callers, then runs fsck when the target has it.
func (l *Ledger) Verify(ctx context.Context, env *Env, workers int) *Verdict {
	begun := time.Now()
	l.mu.Lock()
	paths := make([]string, 0, len(l.mu.state))
	want := make([]pathState, 0, len(l.mu.state))
	dir := make([]bool, 0, len(l.mu.state))
	v := &Verdict{Errors: map[string]int64{}, DoubleApplied: l.mu.nDouble, DoubleSamples: append([]string(nil), l.mu.doubles...)}
	for k, n := range l.mu.errs {
		v.Errors[k] = n
	}
	keys := make([]string, 0, len(l.mu.state))
	for p := range l.mu.state {
		keys = append(keys, p)
	}
	sort.Strings(keys)
	for _, p := range keys {
		st := l.mu.state[p]
		if st == stateUnknown {
			v.Unknown++
			continue
		}
		paths, want, dir = append(paths, p), append(want, st), append(dir, l.mu.dir[p])
	}
	l.mu.Unlock()

	var mu sync.Mutex
	note := func(f func()) { mu.Lock(); f(); mu.Unlock() }
	sample := func(s string) {
		if len(v.Samples) < maxVerdictSamples {
			v.Samples = append(v.Samples, s)
		}
	}
	_ = parallel(len(paths), max(workers, 1), func(i int) error {
		p := paths[i]
		var st *meta.FileStatus
		var err error
		for try := 0; try < 5; try++ {
			if st, err = env.FS.Stat(ctx, env.User, p); err == nil || errors.Is(err, meta.ErrNotFound) || ctx.Err() != nil {
				break
			}
			time.Sleep(time.Duration(50<<try) * time.Millisecond)
		}
		switch {
		case err != nil && !errors.Is(err, meta.ErrNotFound):
			note(func() { v.Unchecked++; sample(fmt.Sprintf("unchecked %s: %v", p, err)) })
		case want[i] == statePresent && err != nil:
			note(func() { v.Missing++; sample("missing (acknowledged): " + p) })
		case want[i] == statePresent && st.IsDir() != dir[i]:
			note(func() { v.WrongType++; sample("wrong type: " + p) })
		case want[i] == statePresent:
			note(func() { v.Present++ })
		case err == nil:
			note(func() { v.Resurrected++; sample("present, acknowledged gone: " + p) })
		default:
			note(func() { v.Absent++ })
		}
		return nil
	})
	if f, ok := env.FS.(Fscker); ok {
		rep, err := f.Fsck(ctx)
		if err != nil {
			v.FsckError = err.Error()
		} else {
			clean := rep.Clean()
			v.FsckClean, v.FsckInodes = &clean, rep.Inodes
			if len(rep.Problems) > maxVerdictSamples {
				v.FsckProblems = append(rep.Problems[:maxVerdictSamples:maxVerdictSamples], fmt.Sprintf("... %d problems in all", len(rep.Problems)))
			} else {
				v.FsckProblems = rep.Problems
			}
		}
	}
	v.OK = v.Missing == 0 && v.Resurrected == 0 && v.WrongType == 0 && v.Unchecked == 0 && v.DoubleApplied == 0 &&
		v.FsckClean != nil && *v.FsckClean
	v.TookS = time.Since(begun).Seconds()
	return v
}
