package clock

import "time"

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
