package scheduler_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-cron/baton/emulator/scheduler"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// target is a real HTTP server that records the headers of every request
// and answers with the status its respond function picks (request number
// from 1).
type target struct {
	srv     *httptest.Server
	mu      sync.Mutex
	headers []http.Header
	arrived chan int
}

func newTarget(t *testing.T, respond func(n int, r *http.Request) int) *target {
	t.Helper()
	tg := &target{arrived: make(chan int, 100)}
	tg.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tg.mu.Lock()
		tg.headers = append(tg.headers, r.Header.Clone())
		n := len(tg.headers)
		tg.mu.Unlock()
		tg.arrived <- n
		if code := respond(n, r); code != 0 {
			w.WriteHeader(code)
		}
	}))
	t.Cleanup(tg.srv.Close)
	return tg
}

func (tg *target) header(name string) []string {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	var out []string
	for _, h := range tg.headers {
		out = append(out, h.Get(name))
	}
	return out
}

type bundle struct {
	clock *scheduler.ManualClock
	emu   *scheduler.Emulator
	done  chan struct{}
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{clock: scheduler.NewManualClock(t0), done: make(chan struct{})}
	b.emu = scheduler.New(scheduler.Options{Clock: b.clock})
	t.Cleanup(func() { close(b.done); b.emu.Close() })
	return b
}

// trigger runs TriggerNow in the background and returns its result channel.
func (b *bundle) trigger(t *testing.T, name string) <-chan []scheduler.Attempt {
	t.Helper()
	out := make(chan []scheduler.Attempt, 1)
	go func() {
		as, err := b.emu.TriggerNow(context.Background(), name)
		if err != nil {
			t.Errorf("TriggerNow: %v", err)
		}
		out <- as
	}()
	return out
}

// step waits for n attempts and a parked timer, then jumps to it.
func (b *bundle) step(t *testing.T, name string, n int) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := b.emu.WaitAttempts(ctx, name, n); err != nil {
		t.Fatal(err)
	}
	if !b.clock.WaitPending(ctx.Done(), 1) {
		t.Fatalf("no timer parked after %d attempts", n)
	}
	d, _ := b.clock.AdvanceToNext()
	return d
}

func TestRetriesKeepScheduleTimeAndFollowBackoff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tg := newTarget(t, func(int, *http.Request) int { return http.StatusInternalServerError })
	err := b.emu.AddJob(scheduler.Job{
		Name: "tick", URL: tg.srv.URL + "/Tick", Every: time.Minute, Token: "tok",
		Retry: scheduler.RetryConfig{RetryCount: 5, MinBackoff: time.Second, MaxBackoff: 5 * time.Second, MaxDoublings: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	res := b.trigger(t, "tick")
	var steps []time.Duration
	for n := 1; n <= 5; n++ {
		steps = append(steps, b.step(t, "tick", n))
	}
	attempts := <-res

	// 1s, doubled once to 2s, then +2s linearly (4s), capped at 5s.
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	if diff := cmp.Diff(want, steps); diff != "" {
		t.Errorf("backoff waits (-want,+got):\n%s", diff)
	}
	if len(attempts) != 6 {
		t.Fatalf("got %d attempts, want 1 + retryCount 5", len(attempts))
	}
	var starts []time.Duration
	for i, a := range attempts {
		starts = append(starts, a.Start.Sub(t0))
		if a.Number != i+1 || a.OK() || a.Status != 500 || !a.ScheduleTime.Equal(t0) {
			t.Errorf("attempt %d = %+v, want number %d, HTTP 500, schedule time %s", i, a, i+1, t0)
		}
	}
	wantStarts := []time.Duration{0, 1 * time.Second, 3 * time.Second, 7 * time.Second, 12 * time.Second, 17 * time.Second}
	if diff := cmp.Diff(wantStarts, starts); diff != "" {
		t.Errorf("attempt start offsets (-want,+got):\n%s", diff)
	}

	same := func(v string) []string {
		out := make([]string, 6)
		for i := range out {
			out[i] = v
		}
		return out
	}
	for _, h := range []struct{ name, want string }{
		{scheduler.HeaderScheduleTime, "2026-11-30T12:00:00Z"},
		{scheduler.HeaderJobName, "projects/local/locations/local/jobs/tick"},
		{scheduler.HeaderScheduler, "true"},
		{"Authorization", "Bearer tok"},
		{"User-Agent", "Google-Cloud-Scheduler"},
	} {
		if diff := cmp.Diff(same(h.want), tg.header(h.name)); diff != "" {
			t.Errorf("header %s on the 6 attempts (-want,+got):\n%s", h.name, diff)
		}
	}
}

func TestSuccessStopsRetries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tg := newTarget(t, func(n int, _ *http.Request) int {
		if n < 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	if err := b.emu.AddJob(scheduler.Job{Name: "j", URL: tg.srv.URL, Every: time.Hour,
		Retry: scheduler.RetryConfig{RetryCount: 5, MinBackoff: time.Second}}); err != nil {
		t.Fatal(err)
	}
	res := b.trigger(t, "j")
	b.step(t, "j", 1)
	b.step(t, "j", 2)
	attempts := <-res
	var got []string
	for _, a := range attempts {
		got = append(got, a.Error)
	}
	if diff := cmp.Diff([]string{"HTTP 503", "HTTP 503", ""}, got); diff != "" {
		t.Errorf("attempt errors (-want,+got):\n%s", diff)
	}
	if p := b.clock.Pending(); p != 0 {
		t.Errorf("%d timers still pending after a 2xx; want none (no further retry)", p)
	}
}

func TestNoRetryByDefault(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tg := newTarget(t, func(int, *http.Request) int { return http.StatusNotFound })
	if err := b.emu.AddJob(scheduler.Job{Name: "j", URL: tg.srv.URL, Every: time.Hour}); err != nil {
		t.Fatal(err)
	}
	attempts, err := b.emu.TriggerNow(context.Background(), "j")
	if err != nil {
		t.Fatal(err)
	}
	if len(attempts) != 1 || attempts[0].Error != "HTTP 404" {
		t.Errorf("attempts = %+v, want one failed attempt (retryCount defaults to 0)", attempts)
	}
}

func TestAttemptDeadlineCancels(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cancelled := make(chan struct{})
	tg := newTarget(t, func(n int, r *http.Request) int {
		if n == 1 { // hang until the emulator gives up on us
			<-r.Context().Done()
			close(cancelled)
			return 0
		}
		return http.StatusOK
	})
	if err := b.emu.AddJob(scheduler.Job{Name: "slow", URL: tg.srv.URL, Every: time.Hour, AttemptDeadline: 20 * time.Second,
		Retry: scheduler.RetryConfig{RetryCount: 1, MinBackoff: time.Second}}); err != nil {
		t.Fatal(err)
	}
	res := b.trigger(t, "slow")
	<-tg.arrived // the first attempt is in the handler; its deadline timer is parked
	if !b.clock.WaitPending(b.done, 1) {
		t.Fatal("no deadline timer")
	}
	if d, _ := b.clock.AdvanceToNext(); d != 20*time.Second {
		t.Errorf("deadline fired after %s, want 20s", d)
	}
	<-cancelled // the target saw its request cancelled
	b.step(t, "slow", 1)
	attempts := <-res
	type row struct {
		Error    string
		Schedule time.Time
	}
	var got []row
	for _, a := range attempts {
		got = append(got, row{a.Error, a.ScheduleTime})
	}
	want := []row{{scheduler.StatusDeadlineExceeded, t0}, {"", t0}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("attempts (-want,+got):\n%s", diff)
	}
}

func TestCronScheduleInTimeZone(t *testing.T) {
	t.Parallel()
	b := setup(t) // t0 is 21:00 in Seoul
	tg := newTarget(t, func(int, *http.Request) int { return http.StatusOK })
	if err := b.emu.AddJob(scheduler.Job{Name: "daily", URL: tg.srv.URL, Cron: "0 9 * * *", TimeZone: "Asia/Seoul"}); err != nil {
		t.Fatal(err)
	}
	b.emu.Start()
	if !b.clock.WaitPending(b.done, 1) {
		t.Fatal("schedule never parked")
	}
	if d, _ := b.clock.AdvanceToNext(); d != 12*time.Hour { // 09:00 KST = 00:00Z next day
		t.Errorf("first fire after %s, want 12h", d)
	}
	d := b.step(t, "daily", 1)
	if d != 24*time.Hour {
		t.Errorf("second fire after %s, want 24h", d)
	}
	as, err := b.emu.WaitAttempts(context.Background(), "daily", 2)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{as[0].ScheduleTime.Format(time.RFC3339), as[1].ScheduleTime.Format(time.RFC3339)}
	if diff := cmp.Diff([]string{"2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z"}, got); diff != "" {
		t.Errorf("schedule times (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(got, tg.header(scheduler.HeaderScheduleTime)); diff != "" {
		t.Errorf("ScheduleTime headers (-want,+got):\n%s", diff)
	}
}

func TestPeriodSchedule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tg := newTarget(t, func(int, *http.Request) int { return http.StatusOK })
	if err := b.emu.AddJob(scheduler.Job{Name: "tick", URL: tg.srv.URL, Every: time.Minute}); err != nil {
		t.Fatal(err)
	}
	b.emu.Start()
	if !b.clock.WaitPending(b.done, 1) {
		t.Fatal("schedule never parked")
	}
	b.clock.AdvanceToNext()
	b.step(t, "tick", 1)
	b.step(t, "tick", 2)
	as, _ := b.emu.WaitAttempts(context.Background(), "tick", 3)
	var got []time.Duration
	for _, a := range as {
		got = append(got, a.ScheduleTime.Sub(t0))
	}
	if diff := cmp.Diff([]time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute}, got); diff != "" {
		t.Errorf("schedule times after t0 (-want,+got):\n%s", diff)
	}
}

func TestBackoffMatchesRealDocs(t *testing.T) {
	t.Parallel()
	// The RetryConfig reference: min 10s, max 300s, 3 doublings retry at
	// 10s, 20s, 40s, 80s, 160s, 240s, 300s, 300s.
	r := scheduler.RetryConfig{MinBackoff: 10 * time.Second, MaxBackoff: 300 * time.Second, MaxDoublings: 3}
	var got []time.Duration
	for n := range 8 {
		got = append(got, r.Backoff(n)/time.Second)
	}
	if diff := cmp.Diff([]time.Duration{10, 20, 40, 80, 160, 240, 300, 300}, got); diff != "" {
		t.Errorf("backoff in seconds (-want,+got):\n%s", diff)
	}
	def := scheduler.RetryConfig{}
	if got := []time.Duration{def.Backoff(0), def.Backoff(5), def.Backoff(6), def.Backoff(100)}; !cmp.Equal(got,
		[]time.Duration{5 * time.Second, 160 * time.Second, 320 * time.Second, time.Hour}) {
		t.Errorf("default backoff = %v, want 5s, 160s, 320s, 1h", got)
	}
}

func TestAddJobValidates(t *testing.T) {
	t.Parallel()
	emu := scheduler.New(scheduler.Options{})
	defer emu.Close()
	for _, j := range []scheduler.Job{
		{Name: "a", URL: "http://x", Every: time.Minute, Retry: scheduler.RetryConfig{RetryCount: 6}},
		{Name: "b", URL: "http://x", Every: time.Minute, Cron: "* * * * *"},
		{Name: "c", URL: "http://x"},
		{Name: "d", URL: "http://x", Cron: "61 * * * *"},
		{Name: "e", URL: "http://x", Cron: "* * * * *", TimeZone: "Mars/Olympus"},
		{Name: "f", URL: "ftp://x", Every: time.Minute},
		{Name: "", URL: "http://x", Every: time.Minute},
		{Name: "g", URL: "http://x", Every: time.Minute, Retry: scheduler.RetryConfig{MinBackoff: time.Hour, MaxBackoff: time.Second}},
	} {
		if err := emu.AddJob(j); !errors.Is(err, scheduler.ErrInvalidJob) {
			t.Errorf("AddJob(%+v) = %v, want ErrInvalidJob", j, err)
		}
	}
	if _, err := emu.TriggerNow(context.Background(), "nope"); !errors.Is(err, scheduler.ErrNoJob) {
		t.Errorf("TriggerNow(unknown) = %v, want ErrNoJob", err)
	}
}

func TestCloseStopsLoopsAndForcedRuns(t *testing.T) {
	t.Parallel()
	clock := scheduler.NewManualClock(t0)
	emu := scheduler.New(scheduler.Options{Clock: clock})
	tg := newTarget(t, func(int, *http.Request) int { return http.StatusInternalServerError })
	if err := emu.AddJob(scheduler.Job{Name: "j", URL: tg.srv.URL, Every: time.Minute,
		Retry: scheduler.RetryConfig{RetryCount: 5}}); err != nil {
		t.Fatal(err)
	}
	emu.Start()
	res := make(chan []scheduler.Attempt)
	go func() { as, _ := emu.TriggerNow(context.Background(), "j"); res <- as }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := emu.WaitAttempts(ctx, "j", 1); err != nil {
		t.Fatal(err)
	}
	emu.Close() // must return although a schedule timer and a backoff are parked
	if as := <-res; len(as) != 1 {
		t.Errorf("forced run made %d attempts, want 1 before Close ended it", len(as))
	}
}

func TestShutdownLetsTheAttemptInFlightFinish(t *testing.T) {
	t.Parallel()
	b := setup(t)
	release := make(chan struct{})
	tg := newTarget(t, func(int, *http.Request) int { <-release; return http.StatusOK })
	if err := b.emu.AddJob(scheduler.Job{Name: "tick", URL: tg.srv.URL, Every: time.Minute}); err != nil {
		t.Fatal(err)
	}
	b.emu.Start()
	if !b.clock.WaitPending(b.done, 1) {
		t.Fatal("schedule never parked")
	}
	b.clock.AdvanceToNext()
	<-tg.arrived // a tick is being served
	shut := make(chan error, 1)
	go func() { shut <- b.emu.Shutdown(context.Background()) }()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) while an attempt was in flight", err)
	case <-tg.arrived:
		t.Fatal("a new attempt started after Shutdown")
	default:
	}
	close(release)
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	as := b.emu.Attempts("tick")
	if len(as) != 1 || !as[0].OK() {
		t.Errorf("attempts = %+v, want the one in flight, completed with 2xx", as)
	}
}
