package schedule

import (
	"fmt"
	"time"
)

// DST gap and repeat policies (DSTPolicy).
const (
	// GapShift fires a wall time that a spring-forward gap skips at the
	// first instant after the gap (the default).
	GapShift = "shift"
	// GapSkip does not fire a wall time that does not exist that day.
	GapSkip = "skip"
	// RepeatOnceFirst fires a wall time that a fall-back hour repeats at
	// its first occurrence (the default).
	RepeatOnceFirst = "once-first"
	// RepeatOnceLast fires it at its second occurrence.
	RepeatOnceLast = "once-last"
	// RepeatBoth fires it at both.
	RepeatBoth = "both"
)

// DSTPolicy says what a schedule's field expression does on the days its
// time zone changes offset. The zero value is the default, shift and
// once-first: every fire time exists once a day, never twice.
type DSTPolicy struct {
	// Gap is shift (default) or skip.
	Gap string `bson:"gap,omitempty" json:"gap,omitempty"`
	// Repeat is once-first (default), once-last or both.
	Repeat string `bson:"repeat,omitempty" json:"repeat,omitempty"`
}

// isDefault reports whether p is shift and once-first.
func (p DSTPolicy) isDefault() bool {
	return (p.Gap == "" || p.Gap == GapShift) && (p.Repeat == "" || p.Repeat == RepeatOnceFirst)
}

func (p DSTPolicy) validate() error {
	switch p.Gap {
	case "", GapShift, GapSkip:
	default:
		return fieldErr("dst.gap", "is %q; want %s or %s", p.Gap, GapShift, GapSkip)
	}
	switch p.Repeat {
	case "", RepeatOnceFirst, RepeatOnceLast, RepeatBoth:
	default:
		return fieldErr("dst.repeat", "is %q; want %s, %s or %s", p.Repeat, RepeatOnceFirst, RepeatOnceLast, RepeatBoth)
	}
	return nil
}

// maxDSTShift bounds how far a zone's offset moves at one transition
// (two hours historically; one, or half an hour, today).
const maxDSTShift = 3 * time.Hour

// dstSpec is a field expression under a non-default DST policy. The
// default policy is cronSpec's own walk, untouched, which the oracle tests
// hold to.
type dstSpec struct {
	c   *cronSpec
	pol DSTPolicy
}

func (d *dstSpec) String() string { return d.c.String() }

func (d *dstSpec) next(loc *time.Location, after time.Time) time.Time {
	if d.pol.Repeat != RepeatBoth {
		return d.nextWith(loc, after, d.pol.Repeat)
	}
	// Both passes: each policy alone maps wall times to instants in order,
	// and their union is both; the earlier of the two nexts is the next.
	a := d.nextWith(loc, after, RepeatOnceFirst)
	b := d.nextWith(loc, after, RepeatOnceLast)
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

// nextWith walks matching wall times from wall(after) and maps each onto
// its instant under the gap policy and repeat (once-first or once-last),
// returning the first instant after `after`. The map is non-decreasing in
// the wall time, so the first hit is the earliest; under once-last a wall
// time before wall(after) can map after it (the second pass of an
// overlap), so near a transition the walk starts maxDSTShift earlier.
func (d *dstSpec) nextWith(loc *time.Location, after time.Time, repeat string) time.Time {
	after = after.In(loc)
	a := civil(after)
	w := time.Date(a.Year(), a.Month(), a.Day(), a.Hour(), a.Minute(), a.Second(), 0, time.UTC)
	if repeat == RepeatOnceLast && transitionWithin(after, loc, maxDSTShift) {
		w = w.Add(-maxDSTShift)
	}
	limit := w.Year() + searchYears
	for {
		m, ok := d.c.nextWall(w, limit)
		if !ok {
			return time.Time{}
		}
		if t, fires := occurrence(m, loc, d.pol.Gap, repeat); fires && t.After(after) {
			return t
		}
		w = m.Add(time.Second)
	}
}

// transitionWithin reports whether loc changes offset within d of t.
func transitionWithin(t time.Time, loc *time.Location, d time.Duration) bool {
	_, off0 := t.Add(-d).In(loc).Zone()
	_, off1 := t.Add(d).In(loc).Zone()
	_, off := t.In(loc).Zone()
	return off0 != off || off1 != off
}

// occurrence maps the wall time w (fields in UTC) to the instant it fires
// at in loc under the policy, or false when it does not fire.
func occurrence(w time.Time, loc *time.Location, gap, repeat string) (time.Time, bool) {
	first := resolve(w, loc) // the first occurrence, or the end of a gap
	if !civil(first).Equal(w) {
		return first, gap != GapSkip
	}
	if repeat != RepeatOnceLast {
		return first, true
	}
	// A second occurrence exists when the next transition moves the clock
	// back over w.
	_, end := first.ZoneBounds()
	if end.IsZero() {
		return first, true
	}
	_, offBefore := first.Zone()
	_, offAfter := end.Zone()
	if offAfter >= offBefore {
		return first, true
	}
	second := first.Add(time.Duration(offBefore-offAfter) * time.Second)
	if !second.Before(end) && civil(second).Equal(w) {
		return second, true
	}
	return first, true
}

// withDST applies a non-default policy to a field expression. An @every
// spec is absolute time and has no DST; validation refuses the pairing.
func withDST(spec Spec, p DSTPolicy) (Spec, error) {
	if p.isDefault() {
		return spec, nil
	}
	base := spec
	var hashed *hashedSpec
	if h, ok := spec.(*hashedSpec); ok {
		hashed, base = h, h.Spec
	}
	c, ok := base.(*cronSpec)
	if !ok {
		return nil, fieldErr("dst", "applies to field expressions; %q runs in absolute time and never meets a DST change", spec.String())
	}
	var out Spec = &dstSpec{c: c, pol: p}
	if hashed != nil {
		out = &hashedSpec{Spec: out, expr: hashed.expr}
	}
	return out, nil
}

// String names the policy, as describe and the docs write it.
func (p DSTPolicy) String() string {
	g, r := p.Gap, p.Repeat
	if g == "" {
		g = GapShift
	}
	if r == "" {
		r = RepeatOnceFirst
	}
	return fmt.Sprintf("gap %s, repeat %s", g, r)
}
