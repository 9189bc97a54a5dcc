package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/functions"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// TestShards is #16's sharded-jobs acceptance on the local stack: a
// schedule with shards: 3 yields 3 runs per fire, and each target request
// carries its own X-Baton-Shard (0/3, 1/3, 2/3) and X-Baton-Shard-Param.
// The ticks are delivered twice (the same X-CloudScheduler-ScheduleTime,
// concurrently): no fire gets a fourth run, and no run is called twice.
// The receiver is an httptest server: a target is the edge.
func TestShards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	calls := map[string][]string{} // run id → "shard param" per call
	recv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		id := r.Header.Get(scheduler.HeaderRunID)
		calls[id] = append(calls[id], r.Header.Get(schedule.ShardHeader)+" "+r.Header.Get(schedule.ShardParamHeader))
	}))
	t.Cleanup(recv.Close)
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: -1}) // the test delivers the ticks
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })

	// Bad input first: 400s naming the field, nothing written.
	for field, bad := range map[string]map[string]any{
		"shards":      {"shards": 101},
		"shardParams": {"shards": 3, "shardParams": []string{"a"}},
		"overlap":     {"shards": 3, "overlap": "buffer_one"},
	} {
		body := map[string]any{"id": "bad", "cron": "* * * * *", "target": map[string]any{"type": "builtin", "builtin": map[string]any{"name": "noop"}}}
		for k, v := range bad {
			body[k] = v
		}
		var e struct {
			Error struct {
				Field string `json:"field"`
			} `json:"error"`
		}
		if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", body, &e); code != http.StatusBadRequest || e.Error.Field != field {
			t.Errorf("%v: %d naming %q; want 400 naming %q", bad, code, e.Error.Field, field)
		}
	}
	if code := api(t, s.URL, s.Token, "GET", "/Schedules/schedules/bad", nil, nil); code != http.StatusNotFound {
		t.Errorf("a refused schedule was written: GET answers %d", code)
	}

	sched := map[string]any{"id": "sharded", "cron": "* * * * * *", "shards": 3, "shardParams": []string{"eu", "us", "ap"},
		"target": map[string]any{"type": "http", "http": map[string]any{"url": recv.URL + "/work"}}}
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", sched, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	time.Sleep(1500 * time.Millisecond) // a fire time or two comes due (not a timing assertion)
	tick := func(at time.Time) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/Tick", nil)
		req.Header.Set("Authorization", "Bearer "+s.Token)
		req.Header.Set(functions.HeaderScheduleTime, at.Format(time.RFC3339))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		_ = resp.Body.Close()
	}
	at := time.Now().UTC().Truncate(time.Second)
	var wg sync.WaitGroup
	for range 3 { // one tick, delivered three times at once
		wg.Add(1)
		go func() { defer wg.Done(); tick(at) }()
	}
	wg.Wait()
	tick(at) // and once more, late
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules/sharded:pause", map[string]any{"reason": "test done"}, nil); code != http.StatusOK {
		t.Fatalf("pause: %d", code)
	}

	var runs []schedule.Run
	deadline := time.Now().Add(60 * time.Second)
	for {
		var page struct{ Runs []schedule.Run }
		api(t, s.URL, s.Token, "GET", "/Schedules/schedules/sharded/runs?pageSize=100", nil, &page)
		runs = page.Runs
		done := len(runs) > 0
		for _, r := range runs {
			if r.Status == schedule.RunPending || r.Status == schedule.RunRunning {
				done = false
			}
		}
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	byFire := map[string][]string{}
	for _, r := range runs {
		if r.Status != schedule.RunSucceeded {
			t.Errorf("run %s is %s (%s); want succeeded", r.ID, r.Status, r.Reason)
		}
		byFire[schedule.FireID(r.ID)] = append(byFire[schedule.FireID(r.ID)], r.ID)
	}
	if len(byFire) == 0 {
		t.Fatal("no fires decided")
	}
	mu.Lock()
	defer mu.Unlock()
	params := []string{"eu", "us", "ap"}
	for fire, ids := range byFire {
		sort.Strings(ids)
		if len(ids) != 3 {
			t.Errorf("fire %s has runs %v; want exactly 3", fire, ids)
			continue
		}
		for i, id := range ids {
			want := fmt.Sprintf("%d/3 %s", i, params[i])
			if id != schedule.ShardRunID(fire, i) || len(calls[id]) != 1 || calls[id][0] != want {
				t.Errorf("run %s: target calls %q; want one carrying %q", id, calls[id], want)
			}
		}
		// The fire's aggregate: succeeded, every shard listed.
		var agg schedule.Run
		if code := api(t, s.URL, s.Token, "GET", "/Schedules/runs/"+fire, nil, &agg); code != http.StatusOK || agg.Status != schedule.RunSucceeded || len(agg.ShardRuns) != 3 {
			t.Errorf("GET /runs/%s: %d %+v; want succeeded with 3 shards", fire, code, agg)
		}
	}
	if len(calls) != len(runs) {
		t.Errorf("%d runs, but the target saw %d run ids: %v", len(runs), len(calls), calls)
	}
	// The console's schedule page shows each fire's aggregate.
	res, err := http.Get(s.URL + "/console/schedules/sharded")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	page, _ := io.ReadAll(res.Body)
	for fire := range byFire {
		if !strings.Contains(string(page), "Recent fires") || !strings.Contains(string(page), fire+"</a></th><td>") ||
			!strings.Contains(string(page), "3/3 shard(s) succeeded") {
			t.Errorf("console schedule page lacks fire %s's aggregate; page:\n%s", fire, page)
		}
	}
	t.Logf("%d fire(s), %d runs", len(byFire), len(runs))
}
