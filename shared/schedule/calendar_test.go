package schedule_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
)

// TestCalendarContains covers each kind of day: a date, a range (both
// ends in), a fixed yearly day, an nth weekday, the last weekday, and
// weekdays.
func TestCalendarContains(t *testing.T) {
	c := schedule.Calendar{
		ID:       "c",
		Dates:    []string{"2026-07-14"},
		Ranges:   []schedule.DateRange{{From: "2026-12-24", To: "2026-12-31"}},
		Rules:    []schedule.YearlyRule{{Month: 1, Day: 1}, {Month: 11, Weekday: "thu", Nth: 4}, {Month: 5, Weekday: "mon", Nth: -1}},
		Weekdays: []string{"sun"},
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	day := func(s string) time.Time {
		d, err := time.Parse("2006-01-02 15:04", s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for s, want := range map[string]bool{
		"2026-07-14 12:00": true,  // date
		"2026-07-15 12:00": false, // the day after
		"2026-12-24 00:00": true,  // range start
		"2026-12-31 23:59": true,  // range end, included
		"2027-01-01 08:00": true,  // yearly 1 January, another year
		"2026-11-26 08:00": true,  // 4th Thursday of November 2026
		"2026-11-19 08:00": false, // 3rd Thursday
		"2027-11-25 08:00": true,  // 4th Thursday of November 2027
		"2026-05-25 08:00": true,  // last Monday of May 2026
		"2026-05-18 08:00": false, // the Monday before
		"2026-03-01 08:00": true,  // a Sunday
		"2026-03-02 08:00": false, // a Monday
	} {
		if got := c.Contains(day(s)); got != want {
			t.Errorf("Contains(%s) = %v, want %v", s, got, want)
		}
	}
}

// TestCalendarZone: a calendar's day is its date in the calendar's zone,
// not in the schedule's. A UTC schedule at 23:30 fires on 24 December
// at 00:30 on 25 December in Berlin: a Berlin Christmas calendar excludes
// it, and does not exclude the 25 December 23:30 UTC fire (26 December
// in Berlin). The same calendar in UTC does the opposite.
func TestCalendarZone(t *testing.T) {
	sc := &schedule.Schedule{ID: "s", Cron: "30 23 * * *", TimeZone: "UTC", ExcludeCalendars: []string{"xmas"}}
	spec, err := sc.Spec()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 23, 23, 40, 0, 0, time.UTC)
	for _, tc := range []struct {
		zone string
		want []bool // 24, 25, 26 December at 23:30 UTC
	}{
		{"Europe/Berlin", []bool{true, false, false}},
		{"UTC", []bool{false, true, false}},
		{"", []bool{false, true, false}},
	} {
		cals := map[string]*schedule.Calendar{"xmas": {ID: "xmas", TimeZone: tc.zone, Dates: []string{"2026-12-25"}}}
		got := sc.UpcomingMarked(spec, time.UTC, start, 3, cals)
		for i, m := range got {
			if m.Skipped != tc.want[i] {
				t.Errorf("zone %q: %s skipped=%v, want %v", tc.zone, m.Time.Format(time.RFC3339), m.Skipped, tc.want[i])
			}
			if m.Skipped && m.Reason != "excluded by calendar xmas" {
				t.Errorf("zone %q: reason %q", tc.zone, m.Reason)
			}
		}
	}
}

// TestCalendarVerdict: exclusions win over onlyCalendars; any one of the
// onlyCalendars admits a day; missing calendars have no days.
func TestCalendarVerdict(t *testing.T) {
	mon := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	cals := map[string]*schedule.Calendar{
		"weekdays": {ID: "weekdays", Weekdays: []string{"mon", "tue", "wed", "thu", "fri"}},
		"hol":      {ID: "hol", Dates: []string{"2026-03-02"}},
		"sat":      {ID: "sat", Weekdays: []string{"sat"}},
	}
	for _, tc := range []struct {
		ex, only []string
		skip     bool
		reason   string
	}{
		{nil, nil, false, ""},
		{[]string{"hol"}, []string{"weekdays"}, true, "excluded by calendar hol"},
		{nil, []string{"sat", "weekdays"}, false, ""},
		{nil, []string{"sat"}, true, "not in onlyCalendars sat"},
		{[]string{"gone"}, nil, false, ""},
		{nil, []string{"gone", "sat"}, true, "not in onlyCalendars gone, sat (calendar gone not found)"},
	} {
		sc := &schedule.Schedule{ExcludeCalendars: tc.ex, OnlyCalendars: tc.only}
		skip, reason := sc.CalendarVerdict(mon, cals)
		if skip != tc.skip || reason != tc.reason {
			t.Errorf("exclude %v only %v: (%v, %q), want (%v, %q)", tc.ex, tc.only, skip, reason, tc.skip, tc.reason)
		}
	}
}

// TestCalendarValidate: every bad entry is refused naming its field.
func TestCalendarValidate(t *testing.T) {
	for field, c := range map[string]schedule.Calendar{
		"id":               {ID: "Bad Id"},
		"timeZone":         {ID: "c", TimeZone: "Mars/Olympus"},
		"dates[1]":         {ID: "c", Dates: []string{"2026-12-25", "2026-13-01"}},
		"dates[0]":         {ID: "c", Dates: []string{"2026-2-01"}},
		"ranges[0].from":   {ID: "c", Ranges: []schedule.DateRange{{From: "x", To: "2026-01-01"}}},
		"ranges[0].to":     {ID: "c", Ranges: []schedule.DateRange{{From: "2026-02-01", To: "2026-01-01"}}},
		"rules[0].month":   {ID: "c", Rules: []schedule.YearlyRule{{Month: 13, Day: 1}}},
		"rules[0].day":     {ID: "c", Rules: []schedule.YearlyRule{{Month: 2, Day: 30}}},
		"rules[1].nth":     {ID: "c", Rules: []schedule.YearlyRule{{Month: 2, Day: 29}, {Month: 11, Weekday: "thu", Nth: 6}}},
		"rules[0].weekday": {ID: "c", Rules: []schedule.YearlyRule{{Month: 11, Weekday: "thursday", Nth: 4}}},
		"weekdays[0]":      {ID: "c", Weekdays: []string{"funday"}},
	} {
		err := c.Validate()
		var fe *schedule.FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("want a FieldError for %s, got %v", field, err)
		}
	}
	for field, sc := range map[string]schedule.Schedule{
		"excludeCalendars[1]": {ExcludeCalendars: []string{"a", "a"}},
		"onlyCalendars[0]":    {OnlyCalendars: []string{"NOT OK"}},
		"excludeCalendars":    {ExcludeCalendars: strings.Split("a b c d e f g h i j k", " ")},
	} {
		sc.ID, sc.Cron = "s", "* * * * *"
		sc.Target = schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}
		err := sc.Normalize(schedule.ValidateOptions{Builtins: []string{"noop"}})
		var fe *schedule.FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("want a FieldError for %s, got %v", field, err)
		}
	}
}

// TestDecodeCalendarStrict: an unknown field is refused by name.
func TestDecodeCalendarStrict(t *testing.T) {
	_, err := schedule.DecodeCalendar(strings.NewReader(`{"dates":["2026-12-25"],"holidays":[]}`))
	var fe *schedule.FieldError
	if !errors.As(err, &fe) || fe.Field != "holidays" {
		t.Errorf("want a FieldError for holidays, got %v", err)
	}
}
