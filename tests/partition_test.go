package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/functions"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// TestLocalPartitionedTick: baton local --partitions 4 takes the deployed
// partitioned path end to end: POST /Tick is a coordinator that creates
// four partition tasks on the tasks emulator's baton-ticks queue (a
// duplicated tick creates none twice), the emulator delivers each to
// /Tick, and the partitions decide and hand the runs to baton-runs and
// /Run. A partition task whose numbers do not fit is a 400 naming the
// field.
func TestLocalPartitionedTick(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Every coordinating tick creates its partition tasks: the path of a
	// busy minute (a quiet one is decided in the tick, below).
	never := 0
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: -1, Partitions: 4, InlineShards: &never})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	sched := map[string]any{"id": "every-2s", "cron": "*/2 * * * * *", "target": map[string]any{"type": "builtin", "builtin": map[string]any{"name": "noop"}}}
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", sched, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	tick := func(at time.Time, body string) (int, map[string]any) { t.Helper(); return postTick(t, s, at, body) }
	for _, c := range []struct{ body, field string }{
		{`{"partition":4,"partitions":4}`, "partition"},
		{`{"partition":0,"partitions":0}`, "partitions"},
		{`{"partition":0,"partitions":100000}`, "partitions"},
	} {
		code, out := tick(time.Now(), c.body)
		e, _ := out["error"].(map[string]any)
		if code != http.StatusBadRequest || e["field"] != c.field {
			t.Errorf("partition task %s: %d %v; want 400 naming %s", c.body, code, out, c.field)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		at := time.Now().UTC().Truncate(time.Second)
		for i := range 2 { // Cloud Scheduler's duplicate delivery
			code, out := tick(at, "")
			if code != http.StatusOK || out["partitions"] != float64(4) || out["created"] != float64(4) {
				t.Fatalf("coordinating tick %d: %d %v; want 4 partition tasks created", i, code, out)
			}
		}
		runs, done := succeededRuns(t, s, "every-2s")
		if done >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no two runs succeeded within 60s through the partitions: %+v", runs)
		}
		// The next tick is worth sending only once a new second has come.
		next := at.Add(time.Second)
		time.Sleep(time.Until(next)) //nolint:forbidigo // waiting for the wall clock's next second, which is what the schedule fires on; there is no signal for it
	}
	// The decider shard's lease is the one the partitions took.
	v := schedule.DeciderShardOf("every-2s", schedule.DeciderShards())
	if names := leaseNames(t, s); !slices.Contains(names, scheduler.TickShardLease(v)) {
		t.Errorf("leases %v; want %s among them", names, scheduler.TickShardLease(v))
	}
}

// postTick posts to the stack's /Tick as Cloud Scheduler (schedule time
// at) or as a partition task (body), and decodes the answer.
func postTick(t *testing.T, s *stack.Stack, at time.Time, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/Tick", strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	req.Header.Set(functions.HeaderScheduleTime, at.Format(time.RFC3339Nano))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestLocalQuietTickDecidesInline: with baton local --partitions 4 and
// BATON_INLINE_SHARDS at its default (16), a coordinating tick with one
// busy decider shard decides it itself and creates no partition task;
// the runs go through baton-runs and /Run as a partition's would, and the
// shard's lease is the one taken.
func TestLocalQuietTickDecidesInline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: -1, Partitions: 4})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	sched := map[string]any{"id": "quiet-2s", "cron": "*/2 * * * * *", "target": map[string]any{"type": "builtin", "builtin": map[string]any{"name": "noop"}}}
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", sched, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	deadline := time.Now().Add(60 * time.Second)
	inline := 0
	for {
		at := time.Now().UTC().Truncate(time.Second)
		code, out := postTick(t, s, at, "")
		if code != http.StatusOK || out["created"] != float64(0) {
			t.Fatalf("coordinating tick: %d %v; want it decided inline, no partition task", code, out)
		}
		if busy, _ := out["busyShards"].(float64); busy > 1 {
			t.Fatalf("coordinating tick: %v busy shards with one schedule", out)
		}
		if in, _ := out["inline"].([]any); len(in) == 1 {
			inline++
		}
		runs, done := succeededRuns(t, s, "quiet-2s")
		if done >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no two runs succeeded within 60s from inline decides: %+v", runs)
		}
		next := at.Add(time.Second)
		time.Sleep(time.Until(next)) //nolint:forbidigo // waiting for the wall clock's next second, which is what the schedule fires on; there is no signal for it
	}
	if inline == 0 {
		t.Error("no coordinating tick reported an inline decide")
	}
	v := schedule.DeciderShardOf("quiet-2s", schedule.DeciderShards())
	if names := leaseNames(t, s); !slices.Contains(names, scheduler.TickShardLease(v)) {
		t.Errorf("leases %v; want %s among them", names, scheduler.TickShardLease(v))
	}
}

// leaseNames lists the stack's leases (GET /Schedules/leases).
func leaseNames(t *testing.T, s *stack.Stack) []string {
	t.Helper()
	var leases struct {
		Leases []struct {
			Name string `json:"name"`
		} `json:"leases"`
	}
	api(t, s.URL, s.Token, "GET", "/Schedules/leases", nil, &leases)
	var names []string
	for _, l := range leases.Leases {
		names = append(names, l.Name)
	}
	return names
}

// succeededRuns lists schedule id's runs (the first page) and counts those
// that succeeded; a run listed twice fails the test.
func succeededRuns(t *testing.T, s *stack.Stack, id string) ([]schedule.Run, int) {
	t.Helper()
	var page struct{ Runs []schedule.Run }
	api(t, s.URL, s.Token, "GET", "/Schedules/runs?schedule="+id+"&pageSize=50", nil, &page)
	seen, done := map[string]bool{}, 0
	for _, r := range page.Runs {
		if seen[r.ID] {
			t.Fatalf("run %s listed twice", r.ID)
		}
		seen[r.ID] = true
		if r.Status == schedule.RunSucceeded {
			done++
		}
	}
	return page.Runs, done
}
