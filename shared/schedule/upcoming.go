package schedule

import "time"

// Upcoming returns at most count fire times of spec in loc strictly after
// start, in order (fewer when the expression stops firing). It is what
// `baton next`, `schedules describe` and the console show; computing them
// needs no server, only the cron and the time zone.
func Upcoming(spec Spec, loc *time.Location, start time.Time, count int) []time.Time {
	times := []time.Time{}
	for len(times) < count {
		t := Next(spec, loc, start)
		if t.IsZero() {
			break
		}
		times = append(times, t)
		start = t
	}
	return times
}

// OffsetChanged reports whether t has another UTC offset than prev: between
// two fire times a daylight-saving change happened, which an operator wants
// marked next to the times (a 02:30 job does not run on the spring-forward
// night, a 01:30 one may run twice).
func OffsetChanged(prev, t time.Time) bool {
	_, a := prev.Zone()
	_, b := t.Zone()
	return a != b
}
