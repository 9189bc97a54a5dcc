package scheduler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// putCalendar stores c (version 1) straight into the bundle's store.
func (b *bundle) putCalendar(t *testing.T, c schedule.Calendar) {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Version, c.CreatedAt, c.UpdatedAt = 1, b.clock.Now(), b.clock.Now()
	if err := b.store.Calendars().CreateCalendar(context.Background(), &c); err != nil {
		t.Fatal(err)
	}
}

// runLines is each run as "id status reason".
func runLines(runs []schedule.Run) []string {
	var out []string
	for _, r := range runs {
		out = append(out, strings.TrimSpace(r.ID+" "+string(r.Status)+" "+r.Reason))
	}
	return out
}

// day10 is 10:00:30 UTC on 2026-03-(2+d): just after a daily 10:00 fire.
func day10(d int) time.Time {
	return t0.Add(time.Duration(d)*24*time.Hour + time.Hour + 30*time.Second)
}

// TestCalendarExcludedDay: a fire time on an excluded day is recorded
// skipped with the calendar as its reason and never executed; the next
// day fires. A tick that crashed after recording it and a duplicated tick
// record it once (and count it once).
func TestCalendarExcludedDay(t *testing.T) {
	b := setup(t)
	key, g := newGate(t, 0)
	b.putCalendar(t, schedule.Calendar{ID: "holidays-de", TimeZone: "Europe/Berlin", Dates: []string{"2026-03-02"}})
	b.addSchedule(t, schedule.Schedule{ID: "cal", Cron: "0 10 * * *", ExcludeCalendars: []string{"holidays-de"}, Target: gateTarget(key)})
	b.clock.Set(day10(0))
	crash := true
	scheduler.SetAfterInsert(b.eng, func(string) error {
		if crash {
			crash = false
			return errors.New("crash after the inserts")
		}
		return nil
	})
	_, _ = b.eng.Tick(context.Background(), b.clock.Now()) // dies before its advance
	if s := b.getSchedule(t, "cal"); !s.NextRunAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("nextRunAt %s: the crashed tick advanced", s.NextRunAt)
	}
	if sum := b.tick(t); sum.Skipped != 0 {
		t.Errorf("the repeated tick counted %d skipped; the record was already there", sum.Skipped)
	}
	b.tick(t) // and a duplicate of it
	b.eng.Wait()
	want := []string{"cal@20260302T100000Z skipped excluded by calendar holidays-de"}
	if diff := cmp.Diff(want, runLines(b.allRuns(t, "cal"))); diff != "" {
		t.Fatalf("runs (-want,+got):\n%s", diff)
	}
	if n := g.calls.Load(); n != 0 {
		t.Fatalf("%d executions on the excluded day", n)
	}
	b.clock.Set(day10(1))
	b.tick(t)
	b.eng.Wait()
	want = append(want, "cal@20260303T100000Z succeeded")
	if diff := cmp.Diff(want, runLines(b.allRuns(t, "cal"))); diff != "" {
		t.Errorf("runs (-want,+got):\n%s", diff)
	}
	if n := g.calls.Load(); n != 1 {
		t.Errorf("%d executions, want 1 (the next day)", n)
	}
}

// TestCalendarOnly: with onlyCalendars, a fire outside the calendar's
// days is skipped with a reason naming it, and a day in it fires. A
// calendar that is gone excludes nothing and admits nothing, and the
// schedule keeps advancing.
func TestCalendarOnly(t *testing.T) {
	b := setup(t)
	key, g := newGate(t, 0)
	// 2026-03-03 is the first Tuesday of March.
	b.putCalendar(t, schedule.Calendar{ID: "first-tue", Rules: []schedule.YearlyRule{{Month: 3, Weekday: "tue", Nth: 1}}})
	b.addSchedule(t, schedule.Schedule{ID: "only", Cron: "0 10 * * *", OnlyCalendars: []string{"first-tue"}, Target: gateTarget(key)})
	b.addSchedule(t, schedule.Schedule{ID: "gone-ex", Cron: "0 10 * * *", ExcludeCalendars: []string{"gone"}, Target: gateTarget(key)})
	b.addSchedule(t, schedule.Schedule{ID: "gone-only", Cron: "0 10 * * *", OnlyCalendars: []string{"gone"}, Target: gateTarget(key)})
	for d := 0; d < 2; d++ {
		b.clock.Set(day10(d))
		b.tick(t)
		b.eng.Wait()
	}
	for id, want := range map[string][]string{
		"only":    {"only@20260302T100000Z skipped not in onlyCalendars first-tue", "only@20260303T100000Z succeeded"},
		"gone-ex": {"gone-ex@20260302T100000Z succeeded", "gone-ex@20260303T100000Z succeeded"},
		"gone-only": {"gone-only@20260302T100000Z skipped not in onlyCalendars gone (calendar gone not found)",
			"gone-only@20260303T100000Z skipped not in onlyCalendars gone (calendar gone not found)"},
	} {
		if diff := cmp.Diff(want, runLines(b.allRuns(t, id))); diff != "" {
			t.Errorf("%s runs (-want,+got):\n%s", id, diff)
		}
	}
	if n := g.calls.Load(); n != 3 {
		t.Errorf("%d executions, want 3", n)
	}
	if s := b.getSchedule(t, "gone-only"); !s.NextRunAt.Equal(day10(2).Add(-30 * time.Second)) {
		t.Errorf("gone-only nextRunAt %s: a missing calendar stalled the schedule", s.NextRunAt)
	}
}

// TestCalendarEditTakesEffect: the tick keeps no calendar across ticks,
// so a day added between two ticks is excluded by the second.
func TestCalendarEditTakesEffect(t *testing.T) {
	b := setup(t)
	key, _ := newGate(t, 0)
	b.putCalendar(t, schedule.Calendar{ID: "hol", Dates: []string{"2026-12-25"}})
	b.addSchedule(t, schedule.Schedule{ID: "edit", Cron: "0 10 * * *", ExcludeCalendars: []string{"hol"}, Target: gateTarget(key)})
	b.clock.Set(day10(0))
	b.tick(t)
	b.eng.Wait()
	next := schedule.Calendar{ID: "hol", Dates: []string{"2026-03-03", "2026-12-25"}, Version: 2, UpdatedAt: b.clock.Now()}
	if err := b.store.Calendars().ReplaceCalendar(context.Background(), &next, 1); err != nil {
		t.Fatal(err)
	}
	b.clock.Set(day10(1))
	b.tick(t)
	b.eng.Wait()
	want := []string{"edit@20260302T100000Z succeeded", "edit@20260303T100000Z skipped excluded by calendar hol"}
	if diff := cmp.Diff(want, runLines(b.allRuns(t, "edit"))); diff != "" {
		t.Errorf("runs (-want,+got):\n%s", diff)
	}
}

// TestCalendarReadOncePerTick: two due schedules naming the same calendar
// read it once in a tick (calendarCache), and a schedule naming none
// reads no calendar.
func TestCalendarReadOncePerTick(t *testing.T) {
	b := setup(t)
	key, _ := newGate(t, 0)
	b.putCalendar(t, schedule.Calendar{ID: "hol", Dates: []string{"2026-12-25"}})
	for _, id := range []string{"a", "b"} {
		b.addSchedule(t, schedule.Schedule{ID: id, Cron: "0 10 * * *", ExcludeCalendars: []string{"hol"}, Target: gateTarget(key)})
	}
	b.addSchedule(t, schedule.Schedule{ID: "plain", Cron: "0 10 * * *", Target: gateTarget(key)})
	b.clock.Set(day10(0))
	op := schedule.CalendarsCollection + ".find"
	before := b.store.Meter().Op(op)
	b.tick(t)
	b.eng.Wait()
	if n := b.store.Meter().Op(op) - before; n != 1 {
		t.Errorf("calendar documents read in one tick: %d, want 1", n)
	}
}

// TestCalendarSkipRecordFaults: the skipped record's insert fails (refused,
// or landed with its answer lost). Nothing is lost: the schedule is not
// advanced past a record that was not written, the next tick writes it,
// and the next day fires.
func TestCalendarSkipRecordFaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		arm  func(t *testing.T, b *bundle)
	}{
		{"refused", func(t *testing.T, b *bundle) {
			emutest.FailCommand(t, b.store, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, "insert")
		}},
		{"dropped connection", func(t *testing.T, b *bundle) {
			emutest.FailCommandDrop(t, b.store, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, "insert")
		}},
		{"the calendar read fails", func(t *testing.T, b *bundle) {
			emutest.FailCommand(t, b.store, schedule.CalendarsCollection, bson.D{{Key: "times", Value: 1}}, "find")
		}},
		{"landed, answer lost", func(t *testing.T, b *bundle) {
			emutest.FailCommandAfterWrite(t, b.store, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, "insert")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			key, g := newGate(t, 0)
			b.putCalendar(t, schedule.Calendar{ID: "hol", Dates: []string{"2026-03-02"}})
			b.addSchedule(t, schedule.Schedule{ID: "f", Cron: "0 10 * * *", ExcludeCalendars: []string{"hol"}, Target: gateTarget(key)})
			b.clock.Set(day10(0))
			tc.arm(t, b)
			_, _ = b.eng.Tick(context.Background(), b.clock.Now())
			emutest.FailCommandOff(t, b.store)
			if tc.name != "landed, answer lost" {
				// Nothing recorded, so nothing advanced past it.
				if s := b.getSchedule(t, "f"); !s.NextRunAt.Equal(t0.Add(time.Hour)) {
					t.Errorf("nextRunAt %s after the failed tick; want it left at 10:00", s.NextRunAt)
				}
				if n := len(b.allRuns(t, "f")); n != 0 {
					t.Errorf("%d runs after the failed tick, want 0", n)
				}
			}
			b.tick(t)
			b.eng.Wait()
			b.clock.Set(day10(1))
			b.tick(t)
			b.eng.Wait()
			want := []string{"f@20260302T100000Z skipped excluded by calendar hol", "f@20260303T100000Z succeeded"}
			if diff := cmp.Diff(want, runLines(b.allRuns(t, "f"))); diff != "" {
				t.Errorf("runs (-want,+got):\n%s", diff)
			}
			if n := g.calls.Load(); n != 1 {
				t.Errorf("%d executions, want 1", n)
			}
		})
	}
}
