package schedule_test

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
)

// dstCase is one zone's spring-forward and fall-back days, with a cron for
// each that hits the skipped and the repeated wall time, and the instants
// each policy must give (worked out by hand from the zones' offsets).
type dstCase struct {
	zone string
	// The gap: cron firing daily at a wall time the change skips.
	gapCron     string
	gapFrom     time.Time // a little before the change day's fire
	shiftFire   time.Time // gap: shift fires at the end of the gap
	skipFire    time.Time // gap: skip fires the next day
	repeatCron  string
	repeatFrom  time.Time
	first, last time.Time // the two occurrences of the repeated wall time
}

var dstCases = []dstCase{
	{
		// CET +1 / CEST +2: 2026-03-29 02:00 → 03:00; 2026-10-25 03:00 → 02:00.
		zone:       "Europe/Berlin",
		gapCron:    "30 2 * * *",
		gapFrom:    time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC),
		shiftFire:  time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC),  // 03:00 CEST
		skipFire:   time.Date(2026, 3, 30, 0, 30, 0, 0, time.UTC), // 30 March 02:30 CEST
		repeatCron: "30 2 * * *",
		repeatFrom: time.Date(2026, 10, 24, 12, 0, 0, 0, time.UTC),
		first:      time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), // 02:30 CEST
		last:       time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC), // 02:30 CET
	},
	{
		// EST -5 / EDT -4: 2026-03-08 02:00 → 03:00; 2026-11-01 02:00 → 01:00.
		zone:       "America/New_York",
		gapCron:    "30 2 * * *",
		gapFrom:    time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC),
		shiftFire:  time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC),  // 03:00 EDT
		skipFire:   time.Date(2026, 3, 9, 6, 30, 0, 0, time.UTC), // 9 March 02:30 EDT
		repeatCron: "30 1 * * *",
		repeatFrom: time.Date(2026, 10, 31, 12, 0, 0, 0, time.UTC),
		first:      time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC), // 01:30 EDT
		last:       time.Date(2026, 11, 1, 6, 30, 0, 0, time.UTC), // 01:30 EST
	},
	{
		// LHST +10:30 / LHDT +11, a half-hour change: 2026-10-04 02:00 →
		// 02:30; 2026-04-05 02:00 → 01:30.
		zone:       "Australia/Lord_Howe",
		gapCron:    "15 2 * * *",
		gapFrom:    time.Date(2026, 10, 3, 0, 0, 0, 0, time.UTC),
		shiftFire:  time.Date(2026, 10, 3, 15, 30, 0, 0, time.UTC), // 02:30 LHDT on the 4th
		skipFire:   time.Date(2026, 10, 4, 15, 15, 0, 0, time.UTC), // 5 October 02:15 LHDT
		repeatCron: "45 1 * * *",
		repeatFrom: time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC),
		first:      time.Date(2026, 4, 4, 14, 45, 0, 0, time.UTC), // 01:45 LHDT on the 5th
		last:       time.Date(2026, 4, 4, 15, 15, 0, 0, time.UTC), // 01:45 LHST
	},
}

// fires lists the first n fire times of a schedule after from.
func dstFires(t *testing.T, s schedule.Schedule, from time.Time, n int) []time.Time {
	t.Helper()
	spec, err := s.Spec()
	if err != nil {
		t.Fatalf("%s: %v", s.Cron, err)
	}
	loc, err := schedule.LoadLocation(s.TimeZone)
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Time
	for t0 := from; len(out) < n; {
		t0 = schedule.Next(spec, loc, t0)
		out = append(out, t0.UTC())
	}
	return out
}

// TestDSTPolicies: every gap and repeat policy, in Berlin, New York and
// Lord Howe (whose clocks move half an hour), on the change days.
func TestDSTPolicies(t *testing.T) {
	for _, tc := range dstCases {
		for _, gap := range []string{"", schedule.GapShift, schedule.GapSkip} {
			for _, repeat := range []string{"", schedule.RepeatOnceFirst, schedule.RepeatOnceLast, schedule.RepeatBoth} {
				pol := &schedule.DSTPolicy{Gap: gap, Repeat: repeat}
				name := tc.zone + "/" + pol.String()
				t.Run(name, func(t *testing.T) {
					s := schedule.Schedule{ID: "d", TimeZone: tc.zone, DST: pol}
					// The gap day.
					s.Cron = tc.gapCron
					got := dstFires(t, s, tc.gapFrom, 1)[0]
					want := tc.shiftFire
					if gap == schedule.GapSkip {
						want = tc.skipFire
					}
					if !got.Equal(want) {
						t.Errorf("gap day: first fire %s; want %s", got, want)
					}
					// The repeat day: the two fires after repeatFrom.
					s.Cron = tc.repeatCron
					two := dstFires(t, s, tc.repeatFrom, 2)
					var wantTwo [2]time.Time
					switch repeat {
					case schedule.RepeatOnceLast:
						wantTwo = [2]time.Time{tc.last, tc.last.Add(24 * time.Hour)}
					case schedule.RepeatBoth:
						wantTwo = [2]time.Time{tc.first, tc.last}
					default:
						wantTwo = [2]time.Time{tc.first, tc.last.Add(24 * time.Hour)}
					}
					// The day after the change has the new offset all day:
					// the same wall time is last+24h.
					if !two[0].Equal(wantTwo[0]) || !two[1].Equal(wantTwo[1]) {
						t.Errorf("repeat day: fires %v; want %v", two, wantTwo)
					}
				})
			}
		}
	}
}

// TestDSTBerlinSkipAcceptance is the line: dst.gap skip on
// "30 2 * * *" in Europe/Berlin skips 2026-03-29.
func TestDSTBerlinSkipAcceptance(t *testing.T) {
	s := schedule.Schedule{ID: "b", Cron: "30 2 * * *", TimeZone: "Europe/Berlin", DST: &schedule.DSTPolicy{Gap: schedule.GapSkip}}
	got := dstFires(t, s, time.Date(2026, 3, 27, 12, 0, 0, 0, time.UTC), 3)
	berlin, _ := time.LoadLocation("Europe/Berlin")
	for _, f := range got {
		if f.In(berlin).Day() == 29 {
			t.Errorf("fired on 29 March: %v", got)
		}
	}
	if d := got[1].In(berlin); d.Day() != 30 || d.Hour() != 2 || d.Minute() != 30 {
		t.Errorf("after the 28th, the next fire is %s; want 30 March 02:30", d)
	}
}

func TestDSTValidation(t *testing.T) {
	base := schedule.Schedule{ID: "v", Cron: "30 2 * * *", TimeZone: "Europe/Berlin", Target: schedule.Target{Type: "builtin", Builtin: &schedule.BuiltinTarget{Name: "noop"}}}
	for _, tc := range []struct {
		cron  string
		pol   schedule.DSTPolicy
		field string
	}{
		{"30 2 * * *", schedule.DSTPolicy{Gap: "jump"}, "dst.gap"},
		{"30 2 * * *", schedule.DSTPolicy{Repeat: "twice"}, "dst.repeat"},
		{"@every 1h", schedule.DSTPolicy{Gap: schedule.GapSkip}, "dst"},
	} {
		s := base
		s.Cron, s.DST = tc.cron, &tc.pol
		err := s.Normalize(schedule.ValidateOptions{})
		var fe *schedule.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s %+v: %v; want a field error on %s", tc.cron, tc.pol, err, tc.field)
		}
	}
	s := base
	s.DST = &schedule.DSTPolicy{Gap: schedule.GapSkip, Repeat: schedule.RepeatBoth}
	if err := s.Normalize(schedule.ValidateOptions{}); err != nil {
		t.Errorf("a valid policy: %v", err)
	}
}
