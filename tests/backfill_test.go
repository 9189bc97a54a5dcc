package tests

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/shared/schedule"
)

// TestBackfill is #16's backfill acceptance on the local stack, through
// the API: over 10 past fire times of a */1 schedule, a dry run lists 10,
// the real call creates 10 runs with source backfill (which then run), and
// repeating it creates 0. Bad windows are 400s naming the field, writing
// nothing.
func TestBackfill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: -1}) // no ticks: every run here is the backfill's
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	sched := map[string]any{"id": "minutely", "cron": "*/1 * * * *", "target": map[string]any{"type": "builtin", "builtin": map[string]any{"name": "noop"}}}
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", sched, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	end := time.Now().UTC().Truncate(time.Minute)
	start := end.Add(-10 * time.Minute)
	window := map[string]any{"start": start.Format(time.RFC3339), "end": end.Format(time.RFC3339)}
	backfill := func(body map[string]any) (int, schedule.BackfillResult) {
		t.Helper()
		var res schedule.BackfillResult
		code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules/minutely:backfill", body, &res)
		return code, res
	}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range window {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}

	code, dry := backfill(with(map[string]any{"dryRun": true}))
	if code != http.StatusOK || len(dry.Fires) != 10 || dry.Created != 0 || dry.Existing != 0 || !dry.DryRun {
		t.Fatalf("dry run: %d %+v; want 10 fire times, none existing, none created", code, dry)
	}
	if !dry.Fires[0].FireTime.Equal(start) || !dry.Fires[9].FireTime.Equal(end.Add(-time.Minute)) {
		t.Errorf("dry run covers %s..%s; want [%s, %s)", dry.Fires[0].FireTime, dry.Fires[9].FireTime, start, end)
	}
	var none struct{ Runs []schedule.Run }
	api(t, s.URL, s.Token, "GET", "/Schedules/schedules/minutely/runs", nil, &none)
	if len(none.Runs) != 0 {
		t.Fatalf("a dry run wrote %d runs", len(none.Runs))
	}

	code, real := backfill(window)
	if code != http.StatusOK || real.Created != 10 || real.Existing != 0 {
		t.Fatalf("backfill: %d %+v; want 10 created", code, real)
	}
	// They run, through the same hand-off as scheduled runs.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var page struct{ Runs []schedule.Run }
		api(t, s.URL, s.Token, "GET", "/Schedules/runs?schedule=minutely&pageSize=50", nil, &page)
		done := 0
		for _, r := range page.Runs {
			if r.Source != schedule.SourceBackfill {
				t.Fatalf("run %s has source %s; want backfill", r.ID, r.Source)
			}
			if r.Status == schedule.RunSucceeded {
				done++
			}
		}
		if len(page.Runs) == 10 && done == 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s: %d runs, %d succeeded; want 10 and 10", len(page.Runs), done)
		}
		time.Sleep(300 * time.Millisecond)
	}

	code, again := backfill(window)
	if code != http.StatusOK || again.Created != 0 || again.Existing != 10 {
		t.Fatalf("repeat: %d %+v; want 0 created, 10 existing", code, again)
	}
	for _, f := range again.Fires {
		if !f.Existed || f.Status != schedule.RunSucceeded {
			t.Errorf("repeat: fire %s: existed %v status %s; want an existing succeeded run", f.FireTime, f.Existed, f.Status)
		}
	}

	for _, tc := range []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"no start", map[string]any{"end": end.Format(time.RFC3339)}, "start"},
		{"end before start", map[string]any{"start": end.Format(time.RFC3339), "end": start.Format(time.RFC3339)}, "end"},
		{"future end", map[string]any{"start": start.Format(time.RFC3339), "end": time.Now().Add(time.Hour).Format(time.RFC3339)}, "end"},
		{"foreign token", with(map[string]any{"pageToken": "2001-01-01T00:00:00Z"}), "pageToken"},
		{"unknown field", with(map[string]any{"overlapp": "skip"}), "overlapp"},
	} {
		var e struct {
			Error struct{ Field, Message string }
		}
		if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules/minutely:backfill", tc.body, &e); code != http.StatusBadRequest || e.Error.Field != tc.field {
			t.Errorf("%s: %d field %q (%s); want 400 naming %s", tc.name, code, e.Error.Field, e.Error.Message, tc.field)
		}
	}
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules/nope:backfill", window, nil); code != http.StatusNotFound {
		t.Errorf("unknown schedule: %d; want 404", code)
	}
}

// TestBackfillPages: a window of more fire times than one call covers
// answers the first MaxBackfillFires and a token, and the token continues
// exactly after them.
func TestBackfillPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: -1})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	sched := map[string]any{"id": "secondly", "cron": "* * * * * *", "target": map[string]any{"type": "builtin", "builtin": map[string]any{"name": "noop"}}}
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", sched, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	end := time.Now().UTC().Truncate(time.Minute)
	start := end.Add(-20 * time.Minute) // 1200 fire times
	body := map[string]any{"start": start.Format(time.RFC3339), "end": end.Format(time.RFC3339), "dryRun": true}
	var first, second schedule.BackfillResult
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules/secondly:backfill", body, &first); code != http.StatusOK {
		t.Fatalf("first page: %d", code)
	}
	if len(first.Fires) != schedule.MaxBackfillFires || first.NextPageToken == "" {
		t.Fatalf("first page: %d fires, token %q; want %d and a token", len(first.Fires), first.NextPageToken, schedule.MaxBackfillFires)
	}
	body["pageToken"] = first.NextPageToken
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules/secondly:backfill", body, &second); code != http.StatusOK {
		t.Fatalf("second page: %d", code)
	}
	if len(second.Fires) != 200 || second.NextPageToken != "" {
		t.Fatalf("second page: %d fires, token %q; want 200 and none", len(second.Fires), second.NextPageToken)
	}
	if got, want := second.Fires[0].FireTime, first.Fires[len(first.Fires)-1].FireTime.Add(time.Second); !got.Equal(want) {
		t.Errorf("second page starts at %s; want %s, right after the first", got, want)
	}
	if !strings.HasPrefix(second.Fires[0].Run, "secondly@") {
		t.Errorf("run id %q", second.Fires[0].Run)
	}
}
