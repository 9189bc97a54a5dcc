package tests

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/shared/schedule"
)

// TestPauseUntil is #16's pause acceptance on the local stack: :pause with
// a reason and an until; get shows the reason, who paused it and until
// when; nothing fires meanwhile; and the schedule fires again after until
// with no other call.
func TestPauseUntil(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: time.Second})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	sched := map[string]any{"id": "migr", "cron": "* * * * * *", "target": map[string]any{"type": "builtin", "builtin": map[string]any{"name": "noop"}}}
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", sched, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	until := time.Now().Add(5 * time.Second).UTC().Truncate(time.Second)
	var paused schedule.Schedule
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules/migr:pause", map[string]any{"reason": "db migration", "until": until.Format(time.RFC3339)}, &paused); code != http.StatusOK {
		t.Fatalf("pause: %d", code)
	}
	pausedAt := time.Now()
	var got schedule.Schedule
	api(t, s.URL, s.Token, "GET", "/Schedules/schedules/migr", nil, &got)
	if got.Enabled || got.PauseReason != "db migration" || got.PausedBy != "local" || !got.PausedUntil.Equal(until) || got.PausedAt.IsZero() {
		t.Fatalf("get while paused: enabled %v reason %q by %q until %s at %s; want paused, the reason, local, %s", got.Enabled, got.PauseReason, got.PausedBy, got.PausedUntil, got.PausedAt, until)
	}
	// Fires again after until, with no other call.
	deadline := until.Add(20 * time.Second)
	var first time.Time
	for first.IsZero() {
		var page struct{ Runs []schedule.Run }
		api(t, s.URL, s.Token, "GET", "/Schedules/schedules/migr/runs?pageSize=100", nil, &page)
		for _, r := range page.Runs {
			// Runs decided before the pause landed may exist; a run of a
			// fire time inside the pause may not.
			if r.FireTime.After(pausedAt.Add(time.Second)) && r.FireTime.Before(until) && r.Status != schedule.RunSkipped {
				t.Fatalf("run %s fired during the pause (%s, until %s)", r.ID, r.Status, until)
			}
			if !r.FireTime.Before(until) && (first.IsZero() || r.FireTime.Before(first)) {
				first = r.FireTime
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run after until %s within 20 s", until)
		}
		time.Sleep(300 * time.Millisecond)
	}
	got = schedule.Schedule{} // decode afresh: omitted fields would keep the old values
	api(t, s.URL, s.Token, "GET", "/Schedules/schedules/migr", nil, &got)
	if !got.Enabled || got.PauseReason != "" || !got.PausedUntil.IsZero() || got.Version != paused.Version+1 {
		t.Errorf("after until: enabled %v reason %q until %s version %d; want enabled, no pause fields, version %d", got.Enabled, got.PauseReason, got.PausedUntil, got.Version, paused.Version+1)
	}
	for _, tc := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"until": time.Now().Add(-time.Minute).Format(time.RFC3339)}, "until"},
		{map[string]any{"until": "tomorrow"}, "until"},
		{map[string]any{"untill": "x"}, "untill"},
	} {
		var e struct{ Error struct{ Field string } }
		if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules/migr:pause", tc.body, &e); code != http.StatusBadRequest || e.Error.Field != tc.field {
			t.Errorf("pause %v: %d field %q; want 400 naming %s", tc.body, code, e.Error.Field, tc.field)
		}
	}
	got = schedule.Schedule{}
	api(t, s.URL, s.Token, "GET", "/Schedules/schedules/migr", nil, &got)
	if !got.Enabled {
		t.Error("a refused pause paused the schedule")
	}
}
