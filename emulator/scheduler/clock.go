package scheduler

import (
	"sort"
	"sync"
	"time"
)

// Clock is the emulator's source of time. Tests inject a ManualClock so
// schedules, backoff and deadlines advance without sleeping.
type Clock interface {
	Now() time.Time
	// NewTimer fires once, d from now.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer from a Clock.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// RealClock is the wall clock.
type RealClock struct{}

// Now implements Clock.
func (RealClock) Now() time.Time { return time.Now() }

// NewTimer implements Clock.
func (RealClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// ManualClock is a Clock that moves only when told to. It is a test double
// for time itself (there is no emulator for time); everything else the
// emulator touches is real.
type ManualClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*manualTimer
	changed chan struct{} // closed and replaced whenever timers change
}

// NewManualClock returns a clock standing at start.
func NewManualClock(start time.Time) *ManualClock {
	return &ManualClock{now: start, changed: make(chan struct{})}
}

type manualTimer struct {
	c     *ManualClock
	at    time.Time
	ch    chan time.Time
	fired bool
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, x := range t.c.timers {
		if x == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			t.c.signal()
			return true
		}
	}
	return false
}

// Now implements Clock.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer implements Clock. A timer for d ≤ 0 fires at once.
func (c *ManualClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.fired = true
		t.ch <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	c.signal()
	return t
}

func (c *ManualClock) signal() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Advance moves the clock by d and fires every timer that falls due.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.fireLocked()
}

// AdvanceToNext moves the clock to the earliest pending timer and fires it
// (and any other due then). It returns the step taken, or false when no
// timer is pending.
func (c *ManualClock) AdvanceToNext() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return 0, false
	}
	sort.Slice(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	step := c.timers[0].at.Sub(c.now)
	if step > 0 {
		c.now = c.timers[0].at
	}
	c.fireLocked()
	return step, true
}

func (c *ManualClock) fireLocked() {
	kept := c.timers[:0]
	for _, t := range c.timers {
		if !t.at.After(c.now) {
			t.fired = true
			t.ch <- c.now
			continue
		}
		kept = append(kept, t)
	}
	c.timers = kept
	c.signal()
}

// Pending is the number of timers waiting to fire.
func (c *ManualClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// WaitPending blocks until at least n timers are waiting, or done closes
// (then it returns false). Tests use it to know the emulator is parked on
// its clock before they advance it.
func (c *ManualClock) WaitPending(done <-chan struct{}, n int) bool {
	for {
		c.mu.Lock()
		have, ch := len(c.timers), c.changed
		c.mu.Unlock()
		if have >= n {
			return true
		}
		select {
		case <-ch:
		case <-done:
			return false
		}
	}
}
