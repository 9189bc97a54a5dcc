package schedule

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/robfig/cron/v3"
)

// rfc parses an RFC 3339 time or fails the test.
func rfc(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("bad test time %q: %v", s, err)
	}
	return v
}

// nextN formats the n fire times after from, as RFC 3339 in loc.
func nextN(t *testing.T, expr, tz, from string, n int) []string {
	t.Helper()
	spec, err := Parse(expr)
	if err != nil {
		t.Fatalf("Parse(%q): %v", expr, err)
	}
	loc, err := LoadLocation(tz)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", tz, err)
	}
	at := rfc(t, from)
	var out []string
	for i := 0; i < n; i++ {
		at = Next(spec, loc, at)
		if at.IsZero() {
			break
		}
		out = append(out, at.Format(time.RFC3339))
	}
	return out
}

// transitions returns the instants in [from, to) at which loc's UTC offset
// changes, found with ZoneBounds.
func transitions(loc *time.Location, from, to time.Time) []time.Time {
	var out []time.Time
	t := from.In(loc)
	for {
		_, end := t.ZoneBounds()
		if end.IsZero() || !end.Before(to) {
			return out
		}
		_, before := end.Add(-time.Second).Zone()
		_, after := end.Zone()
		if before != after {
			out = append(out, end)
		}
		t = end
	}
}

// TestDST2026Transitions pins the transition instants the DST tables below
// are built around, from Go's embedded tzdata rather than from memory.
func TestDST2026Transitions(t *testing.T) {
	t.Parallel()
	y0, y1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		tz   string
		want []string
	}{
		// Berlin: 02:00 CET → 03:00 CEST on 29 March; 03:00 CEST → 02:00 CET on 25 October.
		{"Europe/Berlin", []string{"2026-03-29T03:00:00+02:00", "2026-10-25T02:00:00+01:00"}},
		// New York: 02:00 EST → 03:00 EDT on 8 March; 02:00 EDT → 01:00 EST on 1 November.
		{"America/New_York", []string{"2026-03-08T03:00:00-04:00", "2026-11-01T01:00:00-05:00"}},
	} {
		loc, err := LoadLocation(tc.tz)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tr := range transitions(loc, y0, y1) {
			got = append(got, tr.In(loc).Format(time.RFC3339))
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s transitions in 2026 (-want,+got):\n%s", tc.tz, diff)
		}
	}
}

// TestNextDST is the DST table: Europe/Berlin and America/New_York,
// both 2026 transitions, for "30 2 * * *", "*/15 * * * *" and "0 * * * *",
// tested to the second. Gaps fire once at the end of the gap; a repeated
// fall-back time fires at its first occurrence only.
func TestNextDST(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, tz, expr, from string
		want                 []string
	}{
		// Berlin, spring forward 2026-03-29: 02:00–02:59 CET does not exist.
		{"berlin spring */15", "Europe/Berlin", "*/15 * * * *", "2026-03-29T01:30:00+01:00",
			[]string{"2026-03-29T01:45:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:15:00+02:00", "2026-03-29T03:30:00+02:00"}},
		{"berlin spring 30 2", "Europe/Berlin", "30 2 * * *", "2026-03-28T00:00:00+01:00",
			[]string{"2026-03-28T02:30:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"}},
		{"berlin spring hourly", "Europe/Berlin", "0 * * * *", "2026-03-29T00:30:00+01:00",
			[]string{"2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"}},
		// Berlin, fall back 2026-10-25: 02:00–02:59 happens in CEST, then again in CET.
		{"berlin fall */15", "Europe/Berlin", "*/15 * * * *", "2026-10-25T01:30:00+02:00",
			[]string{"2026-10-25T01:45:00+02:00", "2026-10-25T02:00:00+02:00", "2026-10-25T02:15:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T02:45:00+02:00", "2026-10-25T03:00:00+01:00", "2026-10-25T03:15:00+01:00"}},
		{"berlin fall 30 2", "Europe/Berlin", "30 2 * * *", "2026-10-24T00:00:00+02:00",
			[]string{"2026-10-24T02:30:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"}},
		{"berlin fall hourly", "Europe/Berlin", "0 * * * *", "2026-10-25T00:30:00+02:00",
			[]string{"2026-10-25T01:00:00+02:00", "2026-10-25T02:00:00+02:00", "2026-10-25T03:00:00+01:00", "2026-10-25T04:00:00+01:00"}},
		// New York, spring forward 2026-03-08: 02:00–02:59 EST does not exist.
		{"new york spring */15", "America/New_York", "*/15 * * * *", "2026-03-08T01:30:00-05:00",
			[]string{"2026-03-08T01:45:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:15:00-04:00"}},
		{"new york spring 30 2", "America/New_York", "30 2 * * *", "2026-03-07T00:00:00-05:00",
			[]string{"2026-03-07T02:30:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"new york spring hourly", "America/New_York", "0 * * * *", "2026-03-08T00:30:00-05:00",
			[]string{"2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"}},
		// New York, fall back 2026-11-01: 01:00–01:59 happens in EDT, then in EST.
		{"new york fall */15", "America/New_York", "*/15 * * * *", "2026-11-01T00:30:00-04:00",
			[]string{"2026-11-01T00:45:00-04:00", "2026-11-01T01:00:00-04:00", "2026-11-01T01:15:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T01:45:00-04:00", "2026-11-01T02:00:00-05:00", "2026-11-01T02:15:00-05:00"}},
		// 02:30 is not repeated in New York (the repeated hour is 01:xx).
		{"new york fall 30 2", "America/New_York", "30 2 * * *", "2026-10-31T00:00:00-04:00",
			[]string{"2026-10-31T02:30:00-04:00", "2026-11-01T02:30:00-05:00", "2026-11-02T02:30:00-05:00"}},
		{"new york fall 30 1", "America/New_York", "30 1 * * *", "2026-10-31T00:00:00-04:00",
			[]string{"2026-10-31T01:30:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"}},
		{"new york fall hourly", "America/New_York", "0 * * * *", "2026-10-31T23:30:00-04:00",
			[]string{"2026-11-01T00:00:00-04:00", "2026-11-01T01:00:00-04:00", "2026-11-01T02:00:00-05:00", "2026-11-01T03:00:00-05:00"}},

		// Starting points inside the transitions.
		{"from second pass of overlap", "Europe/Berlin", "*/15 * * * *", "2026-10-25T02:10:00+01:00",
			[]string{"2026-10-25T03:00:00+01:00", "2026-10-25T03:15:00+01:00"}},
		{"from the last first-pass time", "Europe/Berlin", "*/15 * * * *", "2026-10-25T02:45:00+02:00",
			[]string{"2026-10-25T03:00:00+01:00"}},
		{"from the gap's end instant", "Europe/Berlin", "*/15 * * * *", "2026-03-29T03:00:00+02:00",
			[]string{"2026-03-29T03:15:00+02:00"}},
		{"from just before the gap, sub-second", "Europe/Berlin", "*/15 * * * *", "2026-03-29T01:59:59.999+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-29T03:15:00+02:00"}},
		{"sub-second after a fire", "Europe/Berlin", "*/15 * * * *", "2026-03-29T01:45:00.5+01:00",
			[]string{"2026-03-29T03:00:00+02:00"}},
		// Every 20 s during hour 2: the whole hour collapses into one fire.
		{"seconds in the gap", "Europe/Berlin", "*/20 * 2 * * *", "2026-03-29T00:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00", "2026-03-30T02:00:20+02:00"}},
		{"seconds in the overlap", "Europe/Berlin", "0 59 2 * * *", "2026-10-25T00:00:00+02:00",
			[]string{"2026-10-25T02:59:00+02:00", "2026-10-26T02:59:00+01:00"}},
		// Only matching gap times fire: 02:30 is in the gap, 03:xx never matches.
		{"only matching gap times fire", "Europe/Berlin", "30 2 29 3 *", "2026-01-01T00:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2027-03-29T02:30:00+02:00"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := nextN(t, tc.expr, tc.tz, tc.from, len(tc.want))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Next(%q, %s) from %s (-want,+got):\n%s", tc.expr, tc.tz, tc.from, diff)
			}
		})
	}
}

// TestNextAcrossDateLineSkip: Samoa skipped 30 December 2011 entirely (a
// 24-hour gap). Every time of that day fires once, at the first instant of 31
// December.
func TestNextAcrossDateLineSkip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{"0 12 * * *", []string{"2011-12-29T12:00:00-10:00", "2011-12-31T00:00:00+14:00", "2011-12-31T12:00:00+14:00"}},
		{"0 0 * * *", []string{"2011-12-29T00:00:00-10:00", "2011-12-31T00:00:00+14:00", "2012-01-01T00:00:00+14:00"}},
		{"0 12 30 12 *", []string{"2011-12-31T00:00:00+14:00", "2012-12-30T12:00:00+14:00"}},
	} {
		got := nextN(t, tc.expr, "Pacific/Apia", "2011-12-28T23:00:00-10:00", len(tc.want))
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Next(%q, Pacific/Apia) (-want,+got):\n%s", tc.expr, diff)
		}
	}
}

// TestNextMatchesOracle compares Next with a brute-force oracle that scans
// every minute of absolute time around each 2026 transition of zones with
// unusual DST (half-hour shifts, negative DST, southern hemisphere, a day
// skipped), and applies the DST rules to instants directly.
func TestNextMatchesOracle(t *testing.T) {
	t.Parallel()
	zones := []struct {
		tz   string
		year int
	}{
		{"Europe/Berlin", 2026}, {"America/New_York", 2026}, {"Australia/Lord_Howe", 2026},
		{"America/St_Johns", 2026}, {"Europe/Dublin", 2026}, {"Australia/Sydney", 2026},
		{"America/Santiago", 2026}, {"Pacific/Apia", 2011}, {"Asia/Kolkata", 2026},
	}
	exprs := []string{
		"*/15 * * * *", "30 2 * * *", "0 * * * *", "30 1 * * *", "*/7 1-3 * * *",
		"0,30 0-4 * * SUN", "45 23 * * *", "0 0 * * *", "15 2 1 * MON", "*/5 2 * * *", "59 * * * *",
	}
	for _, z := range zones {
		loc, err := LoadLocation(z.tz)
		if err != nil {
			t.Fatal(err)
		}
		y0 := time.Date(z.year, 1, 1, 0, 0, 0, 0, time.UTC)
		trs := transitions(loc, y0, y0.AddDate(1, 0, 0))
		if len(trs) == 0 { // no DST: check an ordinary window
			trs = []time.Time{time.Date(z.year, 3, 1, 0, 0, 0, 0, time.UTC)}
		}
		for _, tr := range trs {
			for _, expr := range exprs {
				spec, err := Parse(expr)
				if err != nil {
					t.Fatal(err)
				}
				from, to := tr.Add(-30*time.Hour), tr.Add(30*time.Hour)
				want := oracle(spec.(*cronSpec), loc, from, to)
				got := fmtTimes(FireTimes(spec, loc, from, to, 0))
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s around %s, %q (-oracle,+Next):\n%s", z.tz, tr.Format(time.RFC3339), expr, diff)
				}
			}
		}
	}
}

func fmtTimes(ts []time.Time) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Format(time.RFC3339))
	}
	return out
}

// oracle lists the fire times in (from, to] by scanning absolute time minute
// by minute (the zones tested have whole-minute offsets): an instant fires if
// its wall time matches and was never seen on the wall clock before (the
// first occurrence), or if the wall clock just jumped forward over a matching
// time (the first instant after a gap). The scan starts a day early so
// "seen" knows the first pass of an overlap.
func oracle(c *cronSpec, loc *time.Location, from, to time.Time) []string {
	matches := func(w time.Time) bool {
		s := &c.s
		domRestricted, dowRestricted := s.Dom&starBit == 0, s.Dow&starBit == 0
		dom := s.Dom&(1<<uint(w.Day())) != 0
		dow := s.Dow&(1<<uint(w.Weekday())) != 0
		day := dom && dow
		if domRestricted && dowRestricted {
			day = dom || dow
		}
		return day && s.Month&(1<<uint(w.Month())) != 0 && s.Hour&(1<<uint(w.Hour())) != 0 &&
			s.Minute&(1<<uint(w.Minute())) != 0 && s.Second&1 != 0
	}
	seen := map[time.Time]bool{}
	var out []string
	start := from.Add(-24 * time.Hour).Truncate(time.Minute)
	prev := civil(start.In(loc))
	for u := start.Add(time.Minute); !u.After(to); u = u.Add(time.Minute) {
		w := civil(u.In(loc))
		fire := matches(w) && !seen[w]
		// A forward jump: the wall times strictly between prev and w never
		// existed; if one matches, u is the first instant after the gap.
		for g := prev.Add(time.Minute); !fire && g.Before(w); g = g.Add(time.Minute) {
			fire = matches(g)
		}
		seen[w] = true
		prev = w
		if fire && u.After(from) {
			out = append(out, u.In(loc).Format(time.RFC3339))
		}
	}
	return out
}

// TestLibraryNextIsNotDSTExact pins why baton does not use robfig/cron's own
// Next (see doc.go): it skips a daily time that falls in a gap and fires a
// repeated time twice. If the library ever changes this, revisit the choice.
func TestLibraryNextIsNotDSTExact(t *testing.T) {
	t.Parallel()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	lib, err := cron.ParseStandard("30 2 * * *")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	at := rfc(t, "2026-03-28T12:00:00+01:00").In(loc)
	at = lib.Next(at)
	got = append(got, at.Format(time.RFC3339))
	at = rfc(t, "2026-10-25T00:00:00+02:00").In(loc)
	for i := 0; i < 2; i++ {
		at = lib.Next(at)
		got = append(got, at.Format(time.RFC3339))
	}
	want := []string{"2026-03-30T02:30:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T02:30:00+01:00"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("robfig/cron Next around Berlin 2026 transitions changed (-want,+got):\n%s", diff)
	}
}

// TestEveryIgnoresDST: "@every" is absolute time, anchored on the Unix epoch.
func TestEveryIgnoresDST(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr, tz, from string
		want           []string
	}{
		// The Berlin fall-back day has 25 hours; @every 1h fires in both passes.
		{"@every 1h", "Europe/Berlin", "2026-10-25T01:30:00+02:00",
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T03:00:00+01:00"}},
		// Anchored on whole UTC hours, so :30 in a half-hour zone.
		{"@every 1h", "Asia/Kolkata", "2026-01-01T00:00:00+05:30",
			[]string{"2026-01-01T00:30:00+05:30", "2026-01-01T01:30:00+05:30"}},
		{"@every 90s", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T00:01:30Z", "2026-01-01T00:03:00Z", "2026-01-01T00:04:30Z"}},
		// 7 minutes do not divide a day: the grid runs from the epoch.
		// (2026-01-02T00:00Z is 300 s past a multiple of 420 s.)
		{"@every 7m", "", "2026-01-02T00:00:00Z",
			[]string{"2026-01-02T00:02:00Z", "2026-01-02T00:09:00Z"}},
		{"@every 90s", "", "2026-01-01T00:01:29.999Z", []string{"2026-01-01T00:01:30Z"}},
		{"@every 90s", "", "2026-01-01T00:01:30Z", []string{"2026-01-01T00:03:00Z"}},
		{"@every 1s", "", "1969-12-31T23:59:58.5Z", []string{"1969-12-31T23:59:59Z", "1970-01-01T00:00:00Z"}},
	} {
		got := nextN(t, tc.expr, tc.tz, tc.from, len(tc.want))
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Next(%q, %q) from %s (-want,+got):\n%s", tc.expr, tc.tz, tc.from, diff)
		}
	}
}

func TestFireTimes(t *testing.T) {
	t.Parallel()
	spec, err := Parse("*/15 * * * *")
	if err != nil {
		t.Fatal(err)
	}
	from, to := rfc(t, "2026-01-01T00:00:00Z"), rfc(t, "2026-01-01T01:00:00Z")
	for _, tc := range []struct {
		max  int
		want []string
	}{
		// from excluded, to included.
		{0, []string{"2026-01-01T00:15:00Z", "2026-01-01T00:30:00Z", "2026-01-01T00:45:00Z", "2026-01-01T01:00:00Z"}},
		{2, []string{"2026-01-01T00:15:00Z", "2026-01-01T00:30:00Z"}},
	} {
		got := fmtTimes(FireTimes(spec, time.UTC, from, to, tc.max))
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("FireTimes(max=%d) (-want,+got):\n%s", tc.max, diff)
		}
	}
	every, err := Parse("@every 1s")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(FireTimes(every, time.UTC, from, from.Add(24*time.Hour), 0)); n != MaxFireTimes {
		t.Errorf("FireTimes with no limit over 86400 fire times: got %d, want the cap %d", n, MaxFireTimes)
	}
	if got := FireTimes(spec, time.UTC, to, from, 0); len(got) != 0 {
		t.Errorf("FireTimes with to before from: got %v, want none", got)
	}
}

func TestNextFire(t *testing.T) {
	t.Parallel()
	got, err := NextFire("30 2 * * *", "Europe/Berlin", rfc(t, "2026-03-29T00:00:00Z"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "2026-03-29T03:00:00+02:00"; got.Format(time.RFC3339) != want {
		t.Errorf("NextFire: got %s, want %s", got.Format(time.RFC3339), want)
	}
	for _, tc := range []struct{ expr, tz, field string }{
		{"61 * * * *", "UTC", "cron"},
		{"* * * * *", "Mars/Olympus_Mons", "timeZone"},
	} {
		_, err := NextFire(tc.expr, tc.tz, time.Now())
		if fe := (*FieldError)(nil); !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("NextFire(%q, %q): got %v, want a *FieldError on %q", tc.expr, tc.tz, err, tc.field)
		}
	}
}

// BenchmarkNext measures one Next over a DST transition, against the
// library's own Next as the baseline in the same run.
func BenchmarkNext(b *testing.B) {
	loc, _ := time.LoadLocation("Europe/Berlin")
	from := time.Date(2026, 10, 25, 0, 30, 0, 0, loc)
	for _, expr := range []string{"*/15 * * * *", "30 2 * * *", "0 9 * * MON-FRI"} {
		spec, err := Parse(expr)
		if err != nil {
			b.Fatal(err)
		}
		lib, _ := cron.ParseStandard(expr)
		b.Run(fmt.Sprintf("baton/%s", expr), func(b *testing.B) {
			for b.Loop() {
				Next(spec, loc, from)
			}
		})
		b.Run(fmt.Sprintf("robfig/%s", expr), func(b *testing.B) {
			for b.Loop() {
				lib.Next(from)
			}
		})
	}
}

// BenchmarkParse and BenchmarkLoadLocation: the tick parses each due
// schedule's expression and zone on every decision. "cached" is what it
// pays; "uncached" is the baseline without the caches, in the same run.
func BenchmarkParse(b *testing.B) {
	const expr = "*/15 9-17 * * MON-FRI"
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			if _, err := Parse(expr); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("uncached", func(b *testing.B) {
		for b.Loop() {
			if _, err := parse(expr); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkLoadLocation(b *testing.B) {
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			if _, err := LoadLocation("Europe/Berlin"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("uncached", func(b *testing.B) {
		for b.Loop() {
			if _, err := time.LoadLocation("Europe/Berlin"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
