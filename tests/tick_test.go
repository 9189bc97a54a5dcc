package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/clock"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/functions"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

var tickCalls sync.Map // key → *atomic.Int64

func init() {
	// A builtin that counts its executions per key, so the test can tell
	// "recorded once" from "executed once".
	scheduler.RegisterBuiltin("test-count", func(_ context.Context, args map[string]string) (string, error) {
		v, _ := tickCalls.LoadOrStore(args["key"], new(atomic.Int64))
		return fmt.Sprint(v.(*atomic.Int64).Add(1)), nil
	})
}

// TestTickExactlyOnceOverHTTP drives the Tick function the way Cloud
// Scheduler does, over HTTP, for a scripted hour: each minute 20 concurrent
// POST /Tick, then two duplicate deliveries with the same
// X-CloudScheduler-ScheduleTime. The runs equal the fire times: none twice,
// none missing.
func TestTickExactlyOnceOverHTTP(t *testing.T) {
	st := emutest.Store(t)
	gcs, bucket := emutest.GCS(t)
	if err := st.EnsureIndexes(context.Background(), mongostore.SchedulerIndexes...); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := start
	frozen := clock.Func(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	d := &functions.Deps{Store: st, Storage: gcs, Bucket: bucket, Token: "secret", Clock: frozen,
		Logger: slog.New(slog.DiscardHandler), TickLeaseTTL: 10 * time.Second, ClockSkew: 2 * time.Second}
	mux, err := functions.Mux(d)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()

	crons := map[string]string{"minutely": "* * * * *", "quarterly": "*/15 * * * *"}
	for id, cron := range crons {
		s := schedule.Schedule{ID: id, Cron: cron, Target: schedule.Target{Type: schedule.TargetBuiltin,
			Builtin: &schedule.BuiltinTarget{Name: "test-count", Args: map[string]string{"key": t.Name() + id}}}}
		if err := s.Normalize(schedule.ValidateOptions{Builtins: scheduler.Builtins()}); err != nil {
			t.Fatal(err)
		}
		next, _ := schedule.NextFire(cron, "", start)
		s.NextRunAt, s.Enabled, s.Version, s.CreatedAt, s.UpdatedAt = next, true, 1, start, start
		if _, err := st.Collection(schedule.SchedulesCollection).InsertIdempotent(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}

	post := func(scheduleTime time.Time) (int, scheduler.Summary) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/Tick", nil)
		req.Header.Set("Authorization", "Bearer secret")
		req.Header.Set(functions.HeaderScheduleTime, scheduleTime.Format(time.RFC3339))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, scheduler.Summary{}
		}
		defer resp.Body.Close()
		var sum scheduler.Summary
		_ = json.NewDecoder(resp.Body).Decode(&sum)
		return resp.StatusCode, sum
	}
	var skipped atomic.Int64
	for m := 1; m <= 60; m++ {
		at := start.Add(time.Duration(m) * time.Minute)
		mu.Lock()
		now = at.Add(3 * time.Second)
		mu.Unlock()
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, sum := post(at)
				if code != http.StatusOK {
					t.Errorf("minute %d: status %d", m, code)
				}
				if sum.Status == "skipped" {
					if sum.Holder == "" || sum.Reason == "" {
						t.Errorf("skipped tick without holder or reason: %+v", sum)
					}
					skipped.Add(1)
				}
			}()
		}
		wg.Wait()
		for range 2 {
			if code, _ := post(at); code != http.StatusOK {
				t.Errorf("duplicate delivery: status %d", code)
			}
		}
	}
	t.Logf("%d of %d concurrent ticks found the tick lease busy", skipped.Load(), 60*20)

	for id, cron := range crons {
		spec, _ := schedule.Parse(cron)
		var want, got []string
		for _, ft := range schedule.FireTimes(spec, time.UTC, start, start.Add(time.Hour), 0) {
			want = append(want, schedule.RunID(id, ft, schedule.SourceScheduled, 1)+" succeeded")
		}
		var runs []schedule.Run
		if err := st.Collection(schedule.RunsCollection).Find(context.Background(), bson.D{{Key: "scheduleId", Value: id}}, &runs); err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			got = append(got, r.ID+" "+string(r.Status))
		}
		sort.Strings(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s runs (-want,+got):\n%s", id, diff)
		}
		v, _ := tickCalls.LoadOrStore(t.Name()+id, new(atomic.Int64))
		if n := v.(*atomic.Int64).Load(); n != int64(len(want)) {
			t.Errorf("%s: executed %d times for %d fire times", id, n, len(want))
		}
	}

	// Unauthenticated and malformed deliveries are refused.
	resp, err := http.Post(srv.URL+"/Tick", "", nil)
	if err != nil {
		t.Fatalf("without the token: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: status %d, want %d", resp.StatusCode, http.StatusUnauthorized)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/Tick", nil)
	req.Header.Set("Authorization", "Bearer secret")
	req.Header.Set(functions.HeaderScheduleTime, "yesterday")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("bad ScheduleTime: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad ScheduleTime: status %d, want %d", resp.StatusCode, http.StatusBadRequest)
	}
}
