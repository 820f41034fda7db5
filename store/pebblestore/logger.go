package pebblestore

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// pebbleLogger adapts slog to Pebble's Logger.
type pebbleLogger struct {
	log   *slog.Logger
	fatal func(error) // fails the store; nil in tools that open none
	limit *logLimiter
}

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

// Errorf logs at ERROR, at most once per logLimiter.every for one format:
// Pebble logs some errors on every retry of what failed.
func (l pebbleLogger) Errorf(format string, args ...any) {
	if ok, skipped := l.limit.allow(format); ok {
		l.log.Error(fmt.Sprintf(format, args...), "component", "pebble", "repeats_not_logged", skipped)
	}
}

// Fatalf must not return (Pebble's contract). It fails the store, then
// parks the calling goroutine for good (failstop.go): a panic would unwind
// through Pebble's locks (and may unlock one twice, a fatal error of the
// runtime), and on one of Pebble's own goroutines it would kill the process
// before the server could log why and stop cleanly. The store is failed,
// nothing enters Pebble again, and the server exits; an operation parked
// here is one of the requests it abandons.
func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.log.Error(msg, "component", "pebble", "fatal", true)
	if l.fatal == nil { // a tool with no store: nothing to fail, no one to stop
		panic("pebble: " + msg)
	}
	l.fatal(errors.New(msg))
	park()
}

// logLimiter lets one line of each kind through at most once per every, and
// counts the ones it held back, which the next line reports. A disk that
// fails makes Pebble retry (and report) the same thing in a loop: unlimited,
// that filled the log with hundreds of thousands of lines.
type logLimiter struct {
	every time.Duration
	now   func() time.Time

	mu    sync.Mutex
	kinds map[string]*logKind
}

type logKind struct {
	last    time.Time
	skipped int
}

// maxLogKinds bounds the kinds remembered: they are Pebble's format strings
// and a few of the store's own, a small set, but a bug must not grow it.
const maxLogKinds = 256

func newLogLimiter(every time.Duration, now func() time.Time) *logLimiter {
	return &logLimiter{every: every, now: now, kinds: map[string]*logKind{}}
}

// allow reports whether a line of kind may be logged now, and how many of
// that kind were held back since the last one logged.
func (l *logLimiter) allow(kind string) (ok bool, skipped int) {
	if l == nil {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.kinds[kind]
	if k == nil {
		if len(l.kinds) >= maxLogKinds {
			clear(l.kinds)
		}
		l.kinds[kind] = &logKind{last: now}
		return true, 0
	}
	if now.Sub(k.last) < l.every {
		k.skipped++
		return false, 0
	}
	skipped = k.skipped
	k.last, k.skipped = now, 0
	return true, skipped
}
