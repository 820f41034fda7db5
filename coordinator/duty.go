package coordinator

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nimbus-fs/nimbus/internal/backoff"
)

// Duty is work that one member at a time may do (lease recovery, orphan
// removal): RunDuty campaigns for it and runs it while this member leads.
type Duty struct {
	// Election names the duty's election (ValidElection).
	Election string
	// Run does the work while this member leads. Its ctx is done as soon
	// as the leadership may have ended: Leadership.Done, Session.Lost, the
	// session's Deadline passed on Clock, or RunDuty's own ctx done. Run
	// must return once ctx is done and must check ctx before each action;
	// since a pause can still fall between that check and the action's
	// write, each action must also be safe when a later leader has begun
	// (conditional in its store transaction, or fenced).
	Run func(ctx context.Context)
	// Clock reads the time that Session.Deadline is on: the coordinator's
	// clock. Nil is Real.
	Clock Clock
	// Logger may be nil (discard).
	Logger *slog.Logger
	// Leading, if set, is called with true when Run starts and false once it
	// returned (for a gauge).
	Leading func(bool)
}

// RunDuty campaigns in d.Election through sess and runs d.Run while sess
// leads it, campaigning again after a leadership ends while the session
// lives. It returns nil once ctx is done (having resigned, if it led), and
// the session's error (ErrSessionLost, ErrClosed) once the session ended:
// the caller joins again and calls RunDuty with the new session.
func RunDuty(ctx context.Context, sess Session, d Duty) error {
	if err := ValidElection(d.Election); err != nil {
		return err
	}
	if d.Clock == nil {
		d.Clock = Real{}
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	log := d.Logger.With("duty", d.Election, "member", sess.Member().ID)
	retry := backoff.New(backoff.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second})
	for {
		l, err := sess.Campaign(ctx, d.Election)
		switch {
		case ctx.Err() != nil:
			if err == nil {
				resign(l, log)
			}
			return nil
		case sess.Err() != nil:
			return sess.Err()
		case err != nil:
			// Retryable (ErrUnavailable) or a backend error: try again.
			log.Warn("campaigning for an elected duty", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-sess.Lost():
				return sess.Err()
			case <-time.After(retry.Next()):
			}
			continue
		}
		retry.Reset()
		runLeading(ctx, sess, l, d, log)
		if ctx.Err() != nil {
			resign(l, log)
			return nil
		}
		if sess.Err() != nil {
			return sess.Err()
		}
		select {
		case <-l.Done():
		default:
			// Run returned by itself or the deadline passed while the
			// leadership still stands: give it up so that another member
			// (or this one, campaigning again) takes the duty over.
			resign(l, log)
		}
	}
}

// runLeading runs d.Run under a context that is cancelled when the
// leadership may have ended.
func runLeading(ctx context.Context, sess Session, l Leadership, d Duty, log *slog.Logger) {
	lctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-l.Done():
			cancel(errors.New("leadership ended"))
		case <-sess.Lost():
			cancel(sess.Err())
		case <-lctx.Done():
		}
	}()
	// The deadline rule, checked on the coordinator's clock: the backend's
	// Lost fires at the deadline too, but this does not depend on it.
	var mu sync.Mutex
	var timer Timer
	stopped := false
	var arm func()
	arm = func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		left := sess.Deadline().Sub(d.Clock.Now())
		if left <= 0 {
			cancel(ErrSessionLost)
			return
		}
		timer = d.Clock.AfterFunc(left, arm)
	}
	arm()
	defer func() {
		mu.Lock()
		stopped = true
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
	}()

	if lctx.Err() == nil {
		log.Info("elected: this member now runs the duty", "deadline_in", sess.Deadline().Sub(d.Clock.Now()).Round(time.Millisecond))
		if d.Leading != nil {
			d.Leading(true)
		}
		d.Run(lctx)
		if d.Leading != nil {
			d.Leading(false)
		}
		why := context.Cause(lctx)
		if why == nil {
			why = errors.New("the duty returned")
		}
		log.Info("this member stopped running the duty", "why", why.Error())
	}
	cancel(nil)
	wg.Wait()
}

func resign(l Leadership, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Resign(ctx); err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrSessionLost) {
		log.Warn("resigning an elected duty", "err", err)
	}
}
