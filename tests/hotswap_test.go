package tests

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/clock"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/functions"
	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// apiCaller calls one running server with the bearer token and decodes
// JSON answers.
type apiCaller struct {
	t     *testing.T
	base  string
	token string
}

func (c apiCaller) call(method, path, body string, out any) int {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		c.t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			c.t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
	return res.StatusCode
}

func (c apiCaller) tick() scheduler.Summary {
	c.t.Helper()
	var sum scheduler.Summary
	c.call(http.MethodPost, "/Tick", "", &sum)
	if sum.Status != "ok" || sum.Errors != 0 {
		c.t.Fatalf("tick: %+v", sum)
	}
	return sum
}

func (c apiCaller) runIDs(scheduleID string) []string {
	c.t.Helper()
	var page catalog.RunPage
	c.call(http.MethodGet, "/Schedules/schedules/"+scheduleID+"/runs", "", &page)
	ids := []string{}
	for _, r := range page.Runs {
		ids = append(ids, r.ID+" "+string(r.Source)+" "+string(r.Status))
	}
	return ids
}

// TestHotSwapExactTimes edits a schedule through the Schedules API between
// two calls of the Tick function, in one process with one mux built once:
// the next tick follows the new cron expression and time zone, with no
// restart and no redeploy. A manual clock makes every time exact.
func TestHotSwapExactTimes(t *testing.T) {
	st := emutest.Store(t)
	gcs, bucket := emutest.GCS(t)
	if err := st.EnsureIndexes(context.Background(), mongostore.SchedulerIndexes...); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Date(2026, 3, 2, 9, 0, 30, 0, time.UTC)
	setNow := func(t time.Time) { mu.Lock(); now = t; mu.Unlock() }
	d := &functions.Deps{Store: st, Storage: gcs, Bucket: bucket, Token: "secret",
		Clock:  clock.Func(func() time.Time { mu.Lock(); defer mu.Unlock(); return now }),
		Logger: slog.New(slog.DiscardHandler), TickLeaseTTL: 10 * time.Second, ClockSkew: 2 * time.Second}
	mux, err := functions.Mux(d) // built once: the "process" of this test
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	api := apiCaller{t: t, base: srv.URL, token: "secret"}

	var sc schedule.Schedule
	api.call(http.MethodPost, "/Schedules/schedules", `{"id":"swap","cron":"*/15 * * * *","target":{"type":"builtin","builtin":{"name":"noop"}}}`, &sc)
	if want := time.Date(2026, 3, 2, 9, 15, 0, 0, time.UTC); !sc.NextRunAt.Equal(want) {
		t.Fatalf("created nextRunAt %s, want %s", sc.NextRunAt, want)
	}

	setNow(time.Date(2026, 3, 2, 9, 15, 5, 0, time.UTC))
	if sum := api.tick(); sum.Fired != 1 {
		t.Fatalf("tick at 09:15:05 fired %d, want 1: %+v", sum.Fired, sum)
	}
	api.call(http.MethodGet, "/Schedules/schedules/swap", "", &sc)
	if want := time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC); !sc.NextRunAt.Equal(want) {
		t.Fatalf("after the first tick nextRunAt %s, want %s (old expression)", sc.NextRunAt, want)
	}

	// Hot swap 1: every 5 minutes instead of 15. The old expression would
	// next fire at 09:30; the new one at 09:20.
	setNow(time.Date(2026, 3, 2, 9, 16, 0, 0, time.UTC))
	api.call(http.MethodPatch, "/Schedules/schedules/swap", `{"cron":"*/5 * * * *"}`, &sc)
	if want := time.Date(2026, 3, 2, 9, 20, 0, 0, time.UTC); !sc.NextRunAt.Equal(want) || sc.Version != 2 {
		t.Fatalf("PATCH answered nextRunAt %s version %d, want %s version 2", sc.NextRunAt, sc.Version, want)
	}
	setNow(time.Date(2026, 3, 2, 9, 20, 3, 0, time.UTC))
	if sum := api.tick(); sum.Fired != 1 {
		t.Fatalf("tick at 09:20:03 fired %d, want 1 (the new expression's 09:20): %+v", sum.Fired, sum)
	}

	// Hot swap 2: a daily time in another zone. 15:00 in Kolkata (UTC+5:30)
	// is 09:30 UTC; 09:25 (the */5 time) must not fire.
	api.call(http.MethodPatch, "/Schedules/schedules/swap", `{"cron":"0 15 * * *","timeZone":"Asia/Kolkata"}`, &sc)
	if want := time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC); !sc.NextRunAt.Equal(want) {
		t.Fatalf("PATCH tz answered nextRunAt %s, want %s", sc.NextRunAt, want)
	}
	setNow(time.Date(2026, 3, 2, 9, 25, 10, 0, time.UTC))
	if sum := api.tick(); sum.Fired != 0 {
		t.Fatalf("tick at 09:25:10 fired %d, want 0 (the */5 expression is gone): %+v", sum.Fired, sum)
	}
	setNow(time.Date(2026, 3, 2, 9, 30, 1, 0, time.UTC))
	if sum := api.tick(); sum.Fired != 1 {
		t.Fatalf("tick at 09:30:01 fired %d, want 1: %+v", sum.Fired, sum)
	}
	api.call(http.MethodGet, "/Schedules/schedules/swap", "", &sc)
	if want := time.Date(2026, 3, 3, 9, 30, 0, 0, time.UTC); !sc.NextRunAt.Equal(want) {
		t.Errorf("after the last tick nextRunAt %s, want %s (tomorrow 15:00 Kolkata)", sc.NextRunAt, want)
	}

	want := []string{
		"swap@20260302T093000Z scheduled succeeded",
		"swap@20260302T092000Z scheduled succeeded",
		"swap@20260302T091500Z scheduled succeeded",
	}
	if diff := cmp.Diff(want, api.runIDs("swap")); diff != "" {
		t.Errorf("run history (-want,+got):\n%s", diff)
	}
}

// TestHotSwapLocalStack does the same on the stack `baton local` runs, with
// the wall clock: a schedule that would next fire on 1 January is patched to
// every 2 seconds, and the next tick of the same running stack fires it.
func TestHotSwapLocalStack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: -1}) // the test ticks by hand
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	defer func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	api := apiCaller{t: t, base: s.URL, token: s.Token}

	var sc schedule.Schedule
	api.call(http.MethodPost, "/Schedules/schedules", `{"id":"yearly","cron":"0 0 1 1 *","target":{"type":"builtin","builtin":{"name":"noop"}}}`, &sc)
	if sc.NextRunAt.Month() != time.January || sc.NextRunAt.Day() != 1 {
		t.Fatalf("created nextRunAt %s, want a 1 January", sc.NextRunAt)
	}
	if sum := api.tick(); sum.Decided != 0 || sum.Enqueued != 0 {
		t.Fatalf("first tick decided %d and handed off %d, want 0: %+v", sum.Decided, sum.Enqueued, sum)
	}

	api.call(http.MethodPatch, "/Schedules/schedules/yearly", `{"cron":"*/2 * * * * *"}`, &sc)
	due := sc.NextRunAt
	if due.Second()%2 != 0 || due.Sub(sc.UpdatedAt) > 2*time.Second || due.Before(sc.UpdatedAt) {
		t.Fatalf("PATCH answered nextRunAt %s (updated %s); want the next even second", due, sc.UpdatedAt)
	}
	// The stack runs on the wall clock, so wait for it to reach the new
	// fire time (at most 2 s) before the next tick.
	time.Sleep(time.Until(due) + 10*time.Millisecond)
	if sum := api.tick(); sum.Decided != 1 || sum.Enqueued != 1 {
		t.Fatalf("tick after the swap decided %d and handed off %d, want 1: %+v", sum.Decided, sum.Enqueued, sum)
	}
	// The run executes in /Run, delivered by the Cloud Tasks emulator.
	if _, err := s.Tasks.WaitAttempts(ctx, 1); err != nil {
		t.Fatalf("no delivery to /Run: %v", err)
	}
	var page catalog.RunPage
	api.call(http.MethodGet, "/Schedules/schedules/yearly/runs", "", &page)
	if len(page.Runs) != 1 || page.Runs[0].Status != schedule.RunSucceeded || page.Runs[0].FireTime.Before(due) || page.Runs[0].FireTime.Second()%2 != 0 {
		t.Fatalf("runs after the swap: %+v; want one run at an even second from %s", page.Runs, due)
	}
	api.call(http.MethodGet, "/Schedules/schedules/yearly", "", &sc)
	if sc.NextRunAt.Second()%2 != 0 || !sc.NextRunAt.After(page.Runs[0].FireTime) || sc.NextRunAt.Sub(page.Runs[0].FireTime) > time.Minute {
		t.Errorf("nextRunAt after the tick %s; want the new expression's next even second, not 1 January", sc.NextRunAt)
	}
}
