// Package clock is the one clock baton's packages take, the way gocron
// takes WithClock: scheduler.Config, gpu.Config, catalog.Options,
// lease.Options and functions.Deps each have a Clock field, and a caller
// that sets one clock there (a test's fake, baton bench's frozen instant)
// moves every package's idea of now together. Nil means the wall clock.
//
// Clock asks only for Now, which is all these packages read; a
// github.com/jonboulle/clockwork Clock (gocron's) satisfies it, so a test
// that needs timers too can pass one.
package clock
