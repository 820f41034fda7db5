package pebblestore

import (
	"errors"
	"fmt"
	"log/slog"
)

// pebbleLogger adapts slog to Pebble's Logger.
type pebbleLogger struct {
	log   *slog.Logger
	fatal func(error) // fails the store; nil in tools that open none
}

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf must not return (Pebble's contract). It fails the store first
// (failstop.go). Under a store operation it panics, which the store's commit
// path recovers into an error; on one of Pebble's own goroutines (a flush, a
// compaction, holding Pebble's mutex) a panic would kill the process before
// the server could log why and stop cleanly, so that goroutine parks instead:
// the store is failed, nothing enters Pebble again, and the server exits.
func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.log.Error(msg, "component", "pebble", "fatal", true)
	if l.fatal == nil || onStorePath() {
		if l.fatal != nil {
			l.fatal(errors.New(msg))
		}
		panic("pebble: " + msg)
	}
	l.fatal(errors.New(msg))
	select {}
}
