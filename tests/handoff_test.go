package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/clock"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/emulator/tasks"
	"github.com/baton-cron/baton/functions"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store/mongostore"
	"github.com/baton-cron/baton/shared/taskqueue"
)

// api calls the local stack's HTTP API with its token and decodes the JSON
// answer into out (when non-nil).
func api(t *testing.T, base, token, method, path string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	if resp.StatusCode >= 300 {
		t.Logf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode
}

// httpSchedule is a schedule document for the API with an http target.
func httpSchedule(id, cron, url, timeout string) map[string]any {
	return map[string]any{
		"id": id, "cron": cron,
		"target": map[string]any{"type": "http", "http": map[string]any{"url": url, "method": "POST", "timeout": timeout}},
	}
}

// TestSlowTargetDelaysNoOtherSchedule is the execution plane's promise,
// end to end through `baton local`'s stack and its HTTP API: a target that
// takes longer than the whole window does not delay a schedule firing every
// 2 s. Before the hand-off, Tick executed its runs before answering, and the
// Scheduler emulator (like Cloud Scheduler) starts a tick only when the last
// one has finished, so the fast schedule waited for the slow target.
func TestSlowTargetDelaysNoOtherSchedule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: 2 * time.Second})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })

	release := make(chan struct{})
	var slowCalls atomic.Int64
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slowCalls.Add(1)
		select { // slower than the window: 40 s, or until the test ends
		case <-release:
		case <-time.After(40 * time.Second):
		}
	}))
	// Closed before the stack: its Close waits for the deliveries in flight.
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })

	type arrival struct{ fire, at time.Time }
	var (
		mu       sync.Mutex
		arrivals []arrival
	)
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		ft, err := time.Parse(time.RFC3339Nano, r.Header.Get(scheduler.HeaderFireTime))
		if err != nil {
			t.Errorf("fast target: %s %q: %v", scheduler.HeaderFireTime, r.Header.Get(scheduler.HeaderFireTime), err)
		}
		mu.Lock()
		arrivals = append(arrivals, arrival{ft, at})
		mu.Unlock()
	}))
	t.Cleanup(fast.Close)

	slowSched := httpSchedule("slow", "*/4 * * * * *", slow.URL, "60s")
	slowSched["overlap"] = "skip"
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", slowSched, nil); code != http.StatusCreated {
		t.Fatalf("create slow: %d", code)
	}
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", httpSchedule("fast", "*/2 * * * * *", fast.URL, "10s"), nil); code != http.StatusCreated {
		t.Fatalf("create fast: %d", code)
	}

	// The window starts once the slow target holds a run, and lasts 24 s:
	// twelve fire times of the fast schedule, all while the slow one runs.
	deadline := time.Now().Add(30 * time.Second)
	for slowCalls.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the slow target was never called")
		}
		time.Sleep(100 * time.Millisecond)
	}
	from := time.Now().Truncate(time.Second).Add(time.Second)
	to := from.Add(24 * time.Second)
	time.Sleep(time.Until(to.Add(8 * time.Second))) // the last fire's allowed lateness

	mu.Lock()
	defer mu.Unlock()
	seen := map[int64]time.Duration{} // by Unix second: the keys' locations differ
	var worst time.Duration
	for _, a := range arrivals {
		if a.fire.Before(from) || !a.fire.Before(to) {
			continue
		}
		if _, dup := seen[a.fire.Unix()]; dup {
			t.Errorf("fire time %s reached the fast target twice", a.fire.Format(time.RFC3339))
		}
		late := a.at.Sub(a.fire)
		seen[a.fire.Unix()] = late
		worst = max(worst, late)
	}
	for ft := from; ft.Before(to); ft = ft.Add(time.Second) {
		if ft.Unix()%2 == 0 {
			if _, ok := seen[ft.Unix()]; !ok {
				t.Errorf("fire time %s of the fast schedule never reached its target", ft.Format(time.RFC3339))
			}
		}
	}
	t.Logf("fast schedule: %d fire times in the window, worst lateness %s; slow target called %d times", len(seen), worst, slowCalls.Load())
	if worst > 8*time.Second {
		t.Errorf("worst lateness of the 2 s schedule while a slow target runs: %s, want ≤ 8s", worst)
	}
}

// handOffRig is Tick, Run and Schedules over HTTP against the emulators,
// with runs handed off through the Cloud Tasks emulator to /Run, and a
// scripted clock for decisions.
type handOffRig struct {
	st     *mongostore.Store
	db     string // the database and bucket, for another process
	bucket string
	srv    *httptest.Server
	tasks  *tasks.Server
	mu     sync.Mutex
	now    time.Time
}

func (r *handOffRig) clock() time.Time { r.mu.Lock(); defer r.mu.Unlock(); return r.now }
func (r *handOffRig) set(t time.Time)  { r.mu.Lock(); r.now = t; r.mu.Unlock() }

func newHandOffRig(t *testing.T, start time.Time, retry *cloudtaskspb.RetryConfig, runURL func(self string) string) *handOffRig {
	t.Helper()
	ctx := context.Background()
	r := &handOffRig{st: emutest.Store(t), now: start}
	gcs, bucket := emutest.GCS(t)
	r.db, r.bucket = r.st.DatabaseName(), bucket
	if err := r.st.EnsureIndexes(ctx, mongostore.SchedulerIndexes...); err != nil {
		t.Fatal(err)
	}
	var err error
	if r.tasks, err = tasks.Start(ctx, tasks.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.tasks.Close() })
	const queue = "projects/test/locations/here/queues/baton-runs"
	if retry == nil {
		retry = &cloudtaskspb.RetryConfig{MaxAttempts: 20, MinBackoff: durationpb.New(200 * time.Millisecond), MaxBackoff: durationpb.New(2 * time.Second), MaxDoublings: 3}
	}
	if _, err := r.tasks.CreateQueue(ctx, &cloudtaskspb.Queue{Name: queue, RetryConfig: retry,
		RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 500, MaxConcurrentDispatches: 50}}); err != nil {
		t.Fatal(err)
	}
	// The mux is built after the server has its address: the tasks name
	// the Run URL.
	var h atomic.Value
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { h.Load().(http.Handler).ServeHTTP(w, req) }))
	t.Cleanup(r.srv.Close)
	url := r.srv.URL + "/Run"
	if runURL != nil {
		url = runURL(r.srv.URL)
	}
	q, err := taskqueue.Open(ctx, taskqueue.Config{Queue: queue, URL: url, Token: "secret"}, r.tasks.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	d := &functions.Deps{Store: r.st, Storage: gcs, Bucket: bucket, Token: "secret", Clock: clock.Func(r.clock),
		Logger: slog.New(slog.DiscardHandler), TickLeaseTTL: 10 * time.Second, ClockSkew: time.Second,
		AllowedTargets: []string{"127.0.0.1"}, Tasks: q, SubMinute: true}
	mux, err := functions.Mux(d)
	if err != nil {
		t.Fatal(err)
	}
	h.Store(http.Handler(mux))
	return r
}

func (r *handOffRig) tick(t *testing.T, scheduleTime time.Time) (int, scheduler.Summary) {
	req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/Tick", nil)
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

// settled waits until no run of the database is pending or running, ticking
// (which sweeps) meanwhile, and fails the test after timeout.
func (r *handOffRig) settled(t *testing.T, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		n, err := r.st.Collection(schedule.RunsCollection).Count(context.Background(),
			bson.D{{Key: "status", Value: bson.D{{Key: "$in", Value: bson.A{schedule.RunPending, schedule.RunRunning}}}}})
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			var open []schedule.Run
			_ = r.st.Collection(schedule.RunsCollection).Find(context.Background(),
				bson.D{{Key: "status", Value: bson.D{{Key: "$in", Value: bson.A{schedule.RunPending, schedule.RunRunning}}}}}, &open)
			t.Fatalf("%d runs still pending or running after %s: %+v", n, timeout, open)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestHandOffExactlyOnceOverHTTP is TestTickExactlyOnceOverHTTP with the
// execution plane: every minute of a scripted hour gets 20 concurrent POST
// /Tick and two duplicate deliveries, runs go through the Cloud Tasks
// emulator to /Run, and ticks stop for ten minutes in the middle (an
// outage). With catch-up "all", every fire time of the hour is decided once
// and executed once; none is missing. The outage's ten missed fire times
// are one task, executed oldest first under the job lease.
func TestHandOffExactlyOnceOverHTTP(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	r := newHandOffRig(t, start, nil, nil)
	crons := map[string]string{"minutely": "* * * * *", "quarterly": "*/15 * * * *"}
	for id, cron := range crons {
		s := schedule.Schedule{ID: id, Cron: cron, Catchup: schedule.CatchupAll, Target: schedule.Target{Type: schedule.TargetBuiltin,
			Builtin: &schedule.BuiltinTarget{Name: "test-count", Args: map[string]string{"key": t.Name() + id}}}}
		if err := s.Normalize(schedule.ValidateOptions{Builtins: scheduler.Builtins()}); err != nil {
			t.Fatal(err)
		}
		next, _ := schedule.NextFire(cron, "", start)
		s.NextRunAt, s.Enabled, s.Version, s.CreatedAt, s.UpdatedAt = next, true, 1, start, start
		if _, err := r.st.Collection(schedule.SchedulesCollection).InsertIdempotent(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	var enqueued atomic.Int64
	for m := 1; m <= 60; m++ {
		if m >= 25 && m < 35 {
			continue // the outage: nothing ticks
		}
		at := start.Add(time.Duration(m) * time.Minute)
		r.set(at.Add(3 * time.Second))
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, sum := r.tick(t, at)
				if code != http.StatusOK {
					t.Errorf("minute %d: status %d", m, code)
				}
				enqueued.Add(int64(sum.Enqueued))
				if sum.Fired != 0 {
					t.Errorf("minute %d: the tick executed %d runs itself", m, sum.Fired)
				}
			}()
		}
		wg.Wait()
		for range 2 {
			if code, _ := r.tick(t, at); code != http.StatusOK {
				t.Errorf("duplicate delivery: status %d", code)
			}
		}
		// A scripted minute passes only once the deliveries are done, as
		// a real one would: otherwise the next minute's fire would find
		// this one still running, a genuine overlap.
		r.settled(t, 60*time.Second)
	}
	t.Logf("ticks enqueued %d runs; the emulator made %d deliveries", enqueued.Load(), len(r.tasks.Attempts()))

	for id, cron := range crons {
		spec, _ := schedule.Parse(cron)
		var want, got []string
		for _, ft := range schedule.FireTimes(spec, time.UTC, start, start.Add(time.Hour), 0) {
			want = append(want, schedule.RunID(id, ft, schedule.SourceScheduled, 1)+" succeeded")
		}
		var runs []schedule.Run
		if err := r.st.Collection(schedule.RunsCollection).Find(context.Background(), bson.D{{Key: "scheduleId", Value: id}}, &runs); err != nil {
			t.Fatal(err)
		}
		for _, run := range runs {
			got = append(got, run.ID+" "+string(run.Status))
			if run.Status == schedule.RunSucceeded && (run.Delivery == nil || run.Delivery.Task == "" || run.Delivery.Queue != "baton-runs") {
				t.Errorf("run %s: delivery %+v, want the task that claimed it", run.ID, run.Delivery)
			}
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
}

// TestRunRedeliveryChangesNothing: a task delivered again after its run
// finished (Cloud Tasks delivers at least once) answers 200, executes
// nothing and writes nothing; a body that is not a task is a 400 naming the
// field.
func TestRunRedeliveryChangesNothing(t *testing.T) {
	t.Parallel()
	r := newHandOffRig(t, time.Now().UTC(), nil, nil)
	r.set(time.Now().UTC())
	key := t.Name()
	body := map[string]any{"id": "once", "cron": "@hourly", "target": map[string]any{"type": "builtin", "builtin": map[string]any{"name": "test-count", "args": map[string]string{"key": key}}}}
	if code := api(t, r.srv.URL, "secret", "POST", "/Schedules/schedules", body, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	var run schedule.Run
	if code := api(t, r.srv.URL, "secret", "POST", "/Schedules/schedules/once:trigger", nil, &run); code != http.StatusOK {
		t.Fatalf("trigger: %d", code)
	}
	r.settled(t, 30*time.Second)
	var before, after bson.M
	runs := r.st.Collection(schedule.RunsCollection)
	if err := runs.Get(context.Background(), run.ID, &before); err != nil {
		t.Fatal(err)
	}
	if before["status"] != string(schedule.RunSucceeded) {
		t.Fatalf("triggered run: %v, want succeeded", before)
	}
	for range 3 {
		var out scheduler.Outcome
		if code := api(t, r.srv.URL, "secret", "POST", "/Run", scheduler.Task{ScheduleID: "once", Runs: []string{run.ID}}, &out); code != http.StatusOK {
			t.Errorf("redelivery: %d, want 200", code)
		}
		if out.Executed != 0 || len(out.Runs) != 1 || out.Runs[0].Status != schedule.RunSucceeded {
			t.Errorf("redelivery outcome %+v, want nothing executed and the run reported succeeded", out)
		}
	}
	if err := runs.Get(context.Background(), run.ID, &after); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("a redelivery wrote to the finished run (-before,+after):\n%s", diff)
	}
	v, _ := tickCalls.LoadOrStore(key, new(atomic.Int64))
	if n := v.(*atomic.Int64).Load(); n != 1 {
		t.Errorf("target executed %d times, want 1", n)
	}
	for _, bad := range []struct {
		body  string
		field string
	}{
		{`{"runs":["x"]}`, "scheduleId"},
		{`{"scheduleId":"once"}`, "runs"},
		{`{"scheduleId":"once","runs":[""]}`, "runs[0]"},
		{`{"scheduleId":"once","runs":["x"],"extra":1}`, "extra"},
	} {
		req, _ := http.NewRequest("POST", r.srv.URL+"/Run", strings.NewReader(bad.body))
		req.Header.Set("Authorization", "Bearer secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct{ Field string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || e.Error.Field != bad.field {
			t.Errorf("POST /Run %s: %d field %q, want 400 naming %s", bad.body, resp.StatusCode, e.Error.Field, bad.field)
		}
	}
	if code := api(t, r.srv.URL, "wrong", "POST", "/Run", scheduler.Task{ScheduleID: "once", Runs: []string{run.ID}}, nil); code != http.StatusUnauthorized {
		t.Errorf("POST /Run without the token: %d, want 401", code)
	}
}

// fmtRuns lists runs as "id status attempt" lines, sorted.
func fmtRuns(runs []schedule.Run) []string {
	var out []string
	for _, r := range runs {
		out = append(out, fmt.Sprintf("%s %s a%d", r.ID, r.Status, r.Attempt))
	}
	sort.Strings(out)
	return out
}
