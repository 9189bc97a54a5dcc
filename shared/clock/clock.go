package clock

import (
	"context"
	"time"
)

// Clock tells the time.
type Clock interface {
	// Now is the current time.
	Now() time.Time
}

// System is the wall clock, time.Now.
var System Clock = Func(time.Now)

// Func is a function used as a Clock.
type Func func() time.Time

// Now calls f.
func (f Func) Now() time.Time { return f() }

// Or returns c, or System when c is nil: what each package does with an
// unset Clock field.
func Or(c Clock) Clock {
	if c == nil {
		return System
	}
	return c
}

// Sleep waits d, or less when ctx ends first, and then returns ctx's
// error. A d of zero or less returns at once. The benchmarks and the
// in-memory store's modelled latencies pace themselves with it.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
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
