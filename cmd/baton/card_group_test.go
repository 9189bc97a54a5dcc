package main

import (
	"strings"
	"testing"

	"github.com/baton-cron/baton/shared/schedule"
)

// TestScheduleCardShowsConcurrencyGroup: describe shows a schedule's
// concurrency group and limit, and no row for a schedule without one.
func TestScheduleCardShowsConcurrencyGroup(t *testing.T) {
	sc := schedule.Schedule{ID: "a", Cron: "* * * * *", Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}},
		Concurrency: &schedule.Concurrency{Group: "etl", Limit: 3}}
	var b strings.Builder
	if err := scheduleCard(&b, &sc); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "group etl, at most 3 at once") {
		t.Errorf("card has no concurrency row:\n%s", b.String())
	}
	sc.Concurrency = nil
	b.Reset()
	if err := scheduleCard(&b, &sc); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "Concurrency") {
		t.Errorf("card shows a concurrency row for a schedule without a group:\n%s", b.String())
	}
}
