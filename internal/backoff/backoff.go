// Package backoff computes and waits the delays of exponential backoff,
// for the retry loops of the client, the coordinator, the coherence loop,
// the engine and the server.
//
// A Policy says how the delay grows: retry n (counting from 0) waits
// min(Max, Initial·Factor^n), with an optional jitter. A Backoff is one
// retry loop's position in that sequence. Neither holds a timer or a
// goroutine: Wait and Sleep return when the delay has passed or the
// context ends, and a loop that also waits for channels of its own
// selects on time.After(b.Next()).
package backoff

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// Jitter is how a delay is spread at random, so that the retries of many
// callers that failed together do not come back together.
type Jitter uint8

const (
	// None waits the delay d itself.
	None Jitter = iota
	// Full waits a uniform random time in [0, d).
	Full
	// Equal waits d/2 plus a uniform random time in [0, d/2]: at least
	// half the delay, so a retry never comes back at once.
	Equal
)

// Policy is an exponential backoff. The zero Factor means 2. Initial and
// Max must be positive, Max at least Initial, and Factor at least 1 (or
// 0); a Policy is a value, safe for concurrent use.
type Policy struct {
	Initial time.Duration // the delay before the first retry (n = 0)
	Max     time.Duration // the most any delay grows to
	Factor  float64       // the growth from one retry to the next; 0: 2
	Jitter  Jitter
}

// Delay returns retry n's delay before jitter: min(Max, Initial·Factor^n).
// A negative n is 0. It does not overflow for any n.
func (p Policy) Delay(n int) time.Duration {
	f := p.Factor
	if f == 0 {
		f = 2
	}
	n = max(n, 0)
	// Initial·Factor^n in float64 is exact for Factor 2 (a power of two
	// scales the mantissa of an integer below 2^53 without rounding), and
	// compares with Max before any conversion can overflow.
	d := float64(p.Initial) * math.Pow(f, float64(n))
	if d >= float64(p.Max) {
		return p.Max
	}
	return time.Duration(d)
}

// Jittered returns retry n's delay with p's jitter applied, for a uniform
// random draw u in [0, 1).
func (p Policy) Jittered(n int, u float64) time.Duration {
	d := p.Delay(n)
	switch p.Jitter {
	case Full:
		return time.Duration(u * float64(d))
	case Equal:
		return d/2 + time.Duration(u*float64(d/2+1))
	default:
		return d
	}
}

// Sleep waits retry n's jittered delay, or until ctx ends; it returns
// ctx.Err() in that case, nil otherwise.
func (p Policy) Sleep(ctx context.Context, n int) error {
	return sleep(ctx, p.Jittered(n, rand.Float64()))
}

func sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Backoff is one retry loop's place in a Policy's sequence of delays. Its
// zero value is not usable: make one with New. It is not safe for
// concurrent use; each loop has its own.
type Backoff struct {
	p Policy
	n int
}

// New returns a Backoff at the first retry of p.
func New(p Policy) *Backoff { return &Backoff{p: p} }

// Next returns the jittered delay of the current retry and moves to the
// next one.
func (b *Backoff) Next() time.Duration {
	d := b.p.Jittered(b.n, rand.Float64())
	if b.n < math.MaxInt {
		b.n++
	}
	return d
}

// Wait waits Next(), or until ctx ends; it returns ctx.Err() in that case
// (the retry is used up either way).
func (b *Backoff) Wait(ctx context.Context) error { return sleep(ctx, b.Next()) }

// Reset starts the sequence again from Initial: after a success, the next
// failure is met with the shortest delay.
func (b *Backoff) Reset() { b.n = 0 }

// Retries returns how many delays Next has handed out since New or Reset.
func (b *Backoff) Retries() int { return b.n }
