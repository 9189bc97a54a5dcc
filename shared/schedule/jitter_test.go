package schedule_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
)

func TestJitterOffsetIsStableAndSpread(t *testing.T) {
	const j = 5 * time.Minute
	a1, a2 := schedule.JitterOffset("nightly", j), schedule.JitterOffset("nightly", j)
	if a1 != a2 {
		t.Fatalf("same id, two offsets: %s and %s", a1, a2)
	}
	seen := map[time.Duration]bool{}
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		o := schedule.JitterOffset(id, j)
		if o < 0 || o >= j || o%time.Second != 0 {
			t.Errorf("offset of %s = %s; want whole seconds in [0, %s)", id, o, j)
		}
		seen[o] = true
	}
	if len(seen) < 6 {
		t.Errorf("8 ids gave only %d distinct offsets: the hash does not spread", len(seen))
	}
	if o := schedule.JitterOffset("x", 500*time.Millisecond); o != 0 {
		t.Errorf("sub-second jitter gave %s; want 0", o)
	}
}

// TestJitterShiftsEveryFire: every fire time moves by the same offset, and
// a schedule without jitter keeps its exact times.
func TestJitterShiftsEveryFire(t *testing.T) {
	from := time.Date(2026, 3, 28, 23, 0, 0, 0, time.UTC)
	plain := schedule.Schedule{ID: "nightly", Cron: "30 * * * *", TimeZone: "Europe/Berlin"}
	jit := plain
	jit.Jitter = schedule.Duration(30 * time.Second)
	off := schedule.JitterOffset("nightly", 30*time.Second)
	if off == 0 {
		t.Fatal("test needs a non-zero offset for this id")
	}
	ps, err := plain.Spec()
	if err != nil {
		t.Fatal(err)
	}
	js, err := jit.Spec()
	if err != nil {
		t.Fatal(err)
	}
	loc, _ := schedule.LoadLocation("Europe/Berlin")
	want := schedule.FireTimes(ps, loc, from, from.Add(6*time.Hour), 0)
	got := schedule.FireTimes(js, loc, from.Add(off), from.Add(6*time.Hour).Add(off), 0)
	if len(want) != len(got) || len(want) == 0 {
		t.Fatalf("%d plain fires, %d jittered", len(want), len(got))
	}
	for i := range want {
		if !got[i].Equal(want[i].Add(off)) {
			t.Errorf("fire %d: %s; want %s + %s", i, got[i], want[i], off)
		}
	}
	// Next from just before a jittered time finds it, and from it the next.
	if n := schedule.Next(js, loc, got[0].Add(-time.Second)); !n.Equal(got[0]) {
		t.Errorf("Next just before %s = %s", got[0], n)
	}
	if n := schedule.Next(js, loc, got[0]); !n.Equal(got[1]) {
		t.Errorf("Next at %s = %s; want %s", got[0], n, got[1])
	}
	if s, _ := plain.Spec(); s.String() != "30 * * * *" {
		t.Errorf("String() = %q", s.String())
	}
}

func TestHashedFields(t *testing.T) {
	from := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	fires := func(id, cron string, n int) []time.Time {
		t.Helper()
		s := schedule.Schedule{ID: id, Cron: cron}
		spec, err := s.Spec()
		if err != nil {
			t.Fatalf("%s %q: %v", id, cron, err)
		}
		return schedule.FireTimes(spec, time.UTC, from, from.Add(48*time.Hour), n)
	}
	// H: one hashed minute, the same each hour and for each create.
	a, a2 := fires("a", "H * * * *", 3), fires("a", "H * * * *", 3)
	if !a[0].Equal(a2[0]) || a[1].Sub(a[0]) != time.Hour || a[0].Minute() != a[1].Minute() {
		t.Errorf("H * * * * for a: %v / %v; want one stable minute per hour", a, a2)
	}
	minutes := map[int]bool{}
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		minutes[fires(id, "H * * * *", 1)[0].Minute()] = true
	}
	if len(minutes) < 4 {
		t.Errorf("6 ids share %d minutes: H does not spread them", len(minutes))
	}
	// H/15: every 15 minutes from a hashed start below 15.
	q := fires("b", "H/15 * * * *", 5)
	if q[0].Minute() >= 15 || q[1].Sub(q[0]) != 15*time.Minute {
		t.Errorf("H/15: %v", q)
	}
	// H(0-29) 3 * * *: once a day at 03:MM with MM < 30.
	d := fires("c", "H(0-29) 3 * * *", 2)
	if d[0].Hour() != 3 || d[0].Minute() >= 30 || d[1].Sub(d[0]) != 24*time.Hour {
		t.Errorf("H(0-29) 3: %v", d)
	}
	// A day name with an H in it is not an H item.
	if _, err := schedule.Parse("0 9 * * MON-THU"); err != nil {
		t.Errorf("MON-THU: %v", err)
	}
}

func TestHashedFieldErrors(t *testing.T) {
	for _, tc := range []struct{ cron, want string }{
		{"H(50-10) * * * *", "minute field \"H(50-10)\": the range must be within 0-59"},
		{"H/0 * * * *", "minute field \"H/0\": the step must be from 1 to 60"},
		{"0 H(0-30) * * *", "hour field \"H(0-30)\": the range must be within 0-23"},
		{"Hx * * * *", "minute field"},
	} {
		s := schedule.Schedule{ID: "x", Cron: tc.cron}
		_, err := s.Spec()
		var fe *schedule.FieldError
		if !errors.As(err, &fe) || fe.Field != "cron" || !strings.Contains(fe.Reason, tc.want) {
			t.Errorf("%q: %v; want a cron error containing %q", tc.cron, err, tc.want)
		}
	}
	// Without a schedule there is no id to hash.
	if _, err := schedule.Parse("H * * * *"); err == nil || !strings.Contains(err.Error(), "only allowed in a schedule's cron") {
		t.Errorf("Parse(H): %v", err)
	}
}

func TestJitterValidation(t *testing.T) {
	base := func() schedule.Schedule {
		return schedule.Schedule{ID: "v", Cron: "* * * * *", Target: schedule.Target{Type: "builtin", Builtin: &schedule.BuiltinTarget{Name: "noop"}}}
	}
	for _, bad := range []time.Duration{-time.Second, 1500 * time.Millisecond, 25 * time.Hour} {
		s := base()
		s.Jitter = schedule.Duration(bad)
		err := s.Normalize(schedule.ValidateOptions{})
		var fe *schedule.FieldError
		if !errors.As(err, &fe) || fe.Field != "jitter" {
			t.Errorf("jitter %s: %v; want a jitter field error", bad, err)
		}
	}
	s := base()
	s.Jitter = schedule.Duration(30 * time.Second)
	if err := s.Normalize(schedule.ValidateOptions{}); err != nil {
		t.Errorf("jitter 30s: %v", err)
	}
	// Seconds-level detection sees through jitter and H.
	spec, _ := (&schedule.Schedule{ID: "v", Cron: "H/5 * * * * *", Jitter: schedule.Duration(time.Second)}).Spec()
	if !schedule.SubMinute(spec) {
		t.Error("a jittered six-field H/5 seconds cron is sub-minute")
	}
}
