package schedule

import (
	"fmt"
	"math/bits"
	"time"
)

// MaxFireTimes caps FireTimes when the caller asks for no limit, so a
// per-second expression over a long outage cannot allocate without bound.
const MaxFireTimes = 10000

// searchYears bounds the wall-clock walk. Nine years covers the longest gap
// between two 29 Februaries (2096 to 2104), so a valid expression always
// finds its next time within it.
const searchYears = 9

// Next returns the first fire time strictly after `after`, evaluated in loc
// (nil means UTC), as a time in loc. Fire times are whole seconds. It returns
// the zero time if the expression never fires again (it cannot happen for a
// Spec from Parse within the years time.Time can represent, short of year
// 9999).
//
// Field expressions follow the wall clock of loc, with these DST rules:
//
//   - Every matching wall-clock time inside a spring-forward gap (a time that
//     does not exist) fires ONCE, at the first instant after the gap. If a
//     time right after the gap matches as well, that is the same instant and
//     it fires once.
//   - A wall-clock time that occurs twice in a fall-back hour fires only at
//     its FIRST occurrence (the one with the earlier, summer-time offset).
//
// "@every d" is a fixed interval in absolute time, unaffected by DST and by
// loc: it fires at the instants that are a whole multiple of d after the Unix
// epoch (1970-01-01T00:00:00Z). So "@every 1h" fires on the hour in UTC, and
// "@every 90s" fires at the same instants on every replica.
//
// Next is pure: the result depends only on its arguments.
func Next(spec Spec, loc *time.Location, after time.Time) time.Time {
	if loc == nil {
		loc = time.UTC
	}
	t := spec.next(loc, after)
	if t.IsZero() {
		return t
	}
	return t.In(loc)
}

// NextFire is Parse, LoadLocation and Next in one call. It fails if the
// expression or the zone is invalid, or if nothing fires after `after`.
func NextFire(expr, tz string, after time.Time) (time.Time, error) {
	spec, err := Parse(expr)
	if err != nil {
		return time.Time{}, err
	}
	loc, err := LoadLocation(tz)
	if err != nil {
		return time.Time{}, err
	}
	t := Next(spec, loc, after)
	if t.IsZero() {
		return t, &FieldError{Field: "cron", Reason: fmt.Sprintf("never fires after %s", after.Format(time.RFC3339))}
	}
	return t, nil
}

// FireTimes lists the fire times t with from < t <= to, oldest first, at most
// max of them; max <= 0 means MaxFireTimes.
func FireTimes(spec Spec, loc *time.Location, from, to time.Time, max int) []time.Time {
	if max <= 0 || max > MaxFireTimes {
		max = MaxFireTimes
	}
	var out []time.Time
	for t := from; len(out) < max; {
		t = Next(spec, loc, t)
		if t.IsZero() || t.After(to) {
			break
		}
		out = append(out, t)
	}
	return out
}

// next walks the wall clock of loc forward, field by field like the library's
// own Next, over calendar dates held in UTC (which has no DST, so the
// arithmetic is purely civil). Each matching wall time W is mapped to its
// instant by resolve; the first instant after `after` wins.
//
// Why this finds the earliest fire: resolve is non-decreasing in W (a gap
// maps onto the instant where it ends, an overlap onto its first pass), so
// the wall times whose instant lies after `after` form a tail of the wall
// order, and no wall time before wall(after) can resolve to an instant after
// `after`.
func (c *cronSpec) next(loc *time.Location, after time.Time) time.Time {
	after = after.In(loc)
	a := civil(after)
	w := time.Date(a.Year(), a.Month(), a.Day(), a.Hour(), a.Minute(), a.Second(), 0, time.UTC)
	// In the second pass of a fall-back overlap, every wall time until the
	// overlap ends already fired on the first pass: skip to its end.
	if start, _ := after.ZoneBounds(); !start.IsZero() {
		_, offNow := after.Zone()
		_, offBefore := start.Add(-time.Second).Zone()
		if offBefore > offNow {
			end := civil(start).Add(time.Duration(offBefore-offNow) * time.Second)
			if w.Before(end) {
				w = end
			}
		}
	}
	limit := w.Year() + searchYears
	for {
		m, ok := c.nextWall(w, limit)
		if !ok {
			return time.Time{}
		}
		if t := resolve(m, loc); t.After(after) {
			return t
		}
		w = m.Add(time.Second)
	}
}

// nextWall returns the first wall time at or after w (fields in UTC) that
// matches the expression, jumping field by field; false past year limit.
func (c *cronSpec) nextWall(w time.Time, limit int) (time.Time, bool) {
	s := &c.s
	for w.Year() <= limit {
		if s.Month&(1<<uint(w.Month())) == 0 {
			w = time.Date(w.Year(), w.Month()+1, 1, 0, 0, 0, 0, time.UTC)
			continue
		}
		if !dayMatches(s.Dom, s.Dow, w) {
			w = time.Date(w.Year(), w.Month(), w.Day()+1, 0, 0, 0, 0, time.UTC)
			continue
		}
		// Within a matching day, jump straight to the next set bit of each
		// time field rather than stepping one unit at a time.
		h := nextBit(s.Hour, w.Hour())
		if h < 0 {
			w = time.Date(w.Year(), w.Month(), w.Day()+1, 0, 0, 0, 0, time.UTC)
			continue
		}
		if h != w.Hour() {
			w = time.Date(w.Year(), w.Month(), w.Day(), h, 0, 0, 0, time.UTC)
		}
		m := nextBit(s.Minute, w.Minute())
		if m < 0 {
			w = time.Date(w.Year(), w.Month(), w.Day(), w.Hour()+1, 0, 0, 0, time.UTC)
			continue
		}
		if m != w.Minute() {
			w = time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), m, 0, 0, time.UTC)
		}
		sec := nextBit(s.Second, w.Second())
		if sec < 0 {
			w = time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute()+1, 0, 0, time.UTC)
			continue
		}
		if sec != w.Second() {
			w = time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), sec, 0, time.UTC)
		}
		return w, true
	}
	return time.Time{}, false
}

// nextBit returns the lowest set bit of mask at position i or above (the
// star bit excluded), or -1 if there is none.
func nextBit(mask uint64, i int) int {
	m := (mask &^ starBit) >> uint(i) << uint(i)
	if m == 0 {
		return -1
	}
	return bits.TrailingZeros64(m)
}

// starBit is the library's marker for a field written as "*" or "?".
const starBit = 1 << 63

// dayMatches applies the Vixie rule: if either day field is unrestricted the
// day must match both, otherwise it may match either.
func dayMatches(dom, dow uint64, w time.Time) bool {
	domMatch := dom&(1<<uint(w.Day())) != 0
	dowMatch := dow&(1<<uint(w.Weekday())) != 0
	if dom&starBit != 0 || dow&starBit != 0 {
		return domMatch && dowMatch
	}
	return domMatch || dowMatch
}

// civil returns t's wall clock in its own location as a UTC time with the
// same fields.
func civil(t time.Time) time.Time {
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	return time.Date(y, mo, d, h, mi, s, t.Nanosecond(), time.UTC)
}

// resolve maps the wall time w (fields in UTC) onto an instant in loc:
//   - a time that exists once: that instant;
//   - a time that exists twice (fall-back overlap): the first one;
//   - a time that does not exist (spring-forward gap): the first instant
//     after the gap, i.e. the transition itself.
//
// time.Date leaves the choice in both ambiguous cases unspecified, so resolve
// only uses it as a first guess and then decides with the zone's transitions
// (ZoneBounds).
func resolve(w time.Time, loc *time.Location) time.Time {
	guess := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0, loc)
	if civil(guess).Equal(w) {
		// w exists. Look for an earlier occurrence in the zone period before
		// this one (it exists when that period had a larger offset).
		t := guess
		for i := 0; i < 4; i++ {
			start, _ := t.ZoneBounds()
			if start.IsZero() {
				break
			}
			prev := start.Add(-time.Second)
			_, off := prev.Zone()
			cand := w.Add(-time.Duration(off) * time.Second) // w read at the earlier offset
			cand = time.Unix(cand.Unix(), 0).In(loc)
			if !cand.Before(start) || !civil(cand).Equal(w) {
				break
			}
			t = cand
		}
		return t
	}
	// w falls in a gap. The gap ends at the transition that moved the clock
	// forward across w: the first instant whose wall clock is later than w.
	t := guess
	if civil(t).After(w) {
		// guess lies after the gap: walk back to the first instant of the
		// run of periods whose wall clock is still after w.
		for i := 0; i < 4; i++ {
			start, _ := t.ZoneBounds()
			if start.IsZero() {
				break
			}
			if !civil(start.Add(-time.Second)).After(w) {
				return start
			}
			t = start.Add(-time.Second)
		}
		return t
	}
	// guess lies before the gap: walk forward to the period whose start is
	// after w on the wall clock.
	for i := 0; i < 4; i++ {
		_, end := t.ZoneBounds()
		if end.IsZero() {
			break
		}
		if civil(end).After(w) {
			return end
		}
		t = end
	}
	return t
}
