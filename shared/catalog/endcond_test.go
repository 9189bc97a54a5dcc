package catalog_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
)

// TestEndConditionsThroughTheAPI: startAt sets the first nextRunAt, and
// bad bounds are 400s naming the field, writing nothing.
func TestEndConditionsThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	start := t0.Add(48 * time.Hour).Truncate(time.Hour)
	res := b.do(t, http.MethodPost, "/schedules", `{"id":"later","cron":"0 * * * *","startAt":"`+start.Format(time.RFC3339)+`","remainingRuns":5,"target":{"type":"builtin","builtin":{"name":"noop"}}}`)
	if res.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	var s schedule.Schedule
	res.json(t, &s)
	if !s.NextRunAt.Equal(start) || s.RemainingRuns == nil || *s.RemainingRuns != 5 {
		t.Errorf("nextRunAt %s remaining %v; want %s and 5", s.NextRunAt, s.RemainingRuns, start)
	}
	past := t0.Add(-time.Hour).Format(time.RFC3339)
	for body, field := range map[string]string{
		`{"id":"b1","cron":"0 * * * *","startAt":"` + start.Format(time.RFC3339) + `","endAt":"` + past + `","target":{"type":"builtin","builtin":{"name":"noop"}}}`: "endAt",
		`{"id":"b2","cron":"0 * * * *","endAt":"` + past + `","target":{"type":"builtin","builtin":{"name":"noop"}}}`:                                                  "endAt",
		`{"id":"b3","cron":"0 * * * *","remainingRuns":-1,"target":{"type":"builtin","builtin":{"name":"noop"}}}`:                                                       "remainingRuns",
	} {
		res := b.do(t, http.MethodPost, "/schedules", body)
		if res.Status != http.StatusBadRequest || !strings.Contains(string(res.Body), `"field":"`+field+`"`) {
			t.Errorf("%s: %d %s; want 400 naming %s", body, res.Status, res.Body, field)
		}
	}
	if n := b.count(t, schedule.SchedulesCollection); n != 1 {
		t.Errorf("%d schedules stored; the refused ones were written", n)
	}
}
