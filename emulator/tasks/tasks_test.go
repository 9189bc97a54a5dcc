package tasks_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/baton-cron/baton/emulator/tasks"
)

const location = "projects/p/locations/l"

// bundle is one emulator and an official client pointed at it.
type bundle struct {
	srv    *tasks.Server
	client *cloudtasks.Client
	ctx    context.Context
}

func setup(t *testing.T, o tasks.Options) *bundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	srv, err := tasks.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	c, err := srv.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		_ = srv.Close()
	})
	return &bundle{srv: srv, client: c, ctx: ctx}
}

// queue creates projects/p/locations/l/queues/<id> through the client.
func (b *bundle) queue(t *testing.T, id string, rl *cloudtaskspb.RateLimits, rc *cloudtaskspb.RetryConfig) string {
	t.Helper()
	q, err := b.client.CreateQueue(b.ctx, &cloudtaskspb.CreateQueueRequest{
		Parent: location,
		Queue:  &cloudtaskspb.Queue{Name: location + "/queues/" + id, RateLimits: rl, RetryConfig: rc},
	})
	if err != nil {
		t.Fatalf("CreateQueue %s: %v", id, err)
	}
	return q.Name
}

// httpTask is a task named id (generated when "") that POSTs to url.
func httpTask(queue, id, url string) *cloudtaskspb.Task {
	t := &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{Url: url}}}
	if id != "" {
		t.Name = queue + "/tasks/" + id
	}
	return t
}

func (b *bundle) create(t *testing.T, queue string, task *cloudtaskspb.Task) *cloudtaskspb.Task {
	t.Helper()
	got, err := b.client.CreateTask(b.ctx, &cloudtaskspb.CreateTaskRequest{Parent: queue, Task: task})
	if err != nil {
		t.Fatalf("CreateTask %s: %v", task.GetName(), err)
	}
	return got
}

func (b *bundle) wait(t *testing.T, n int) []tasks.Attempt {
	t.Helper()
	as, err := b.srv.WaitAttempts(b.ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	return as
}

// received is one request as the target saw it.
type received struct {
	method string
	header http.Header
	body   string
	at     time.Time
}

// target is a real loopback HTTP server that records every request and
// answers with what respond returns for request n (from 1).
type target struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []received
}

func newTarget(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request) int) *target {
	t.Helper()
	tg := &target{}
	tg.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		tg.mu.Lock()
		tg.reqs = append(tg.reqs, received{r.Method, r.Header.Clone(), string(body), time.Now()})
		n := len(tg.reqs)
		tg.mu.Unlock()
		w.WriteHeader(respond(n, w, r))
	}))
	t.Cleanup(tg.srv.Close)
	return tg
}

func (tg *target) requests() []received {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return slices.Clone(tg.reqs)
}

func always(code int) func(int, http.ResponseWriter, *http.Request) int {
	return func(int, http.ResponseWriter, *http.Request) int { return code }
}

// eta formats a time as X-CloudTasks-TaskETA: epoch seconds, microseconds.
func eta(t time.Time) string {
	us := t.UnixMicro()
	return fmt.Sprintf("%d.%06d", us/1_000_000, us%1_000_000)
}

func wantCode(t *testing.T, err error, code codes.Code, what string) {
	t.Helper()
	if got := status.Code(err); got != code {
		t.Fatalf("%s: got %v (%v), want %v", what, got, err, code)
	}
}

func TestDispatchHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t, tasks.Options{Token: "local-token"})
	q := b.queue(t, "hdr-q", nil, &cloudtaskspb.RetryConfig{MinBackoff: durationpb.New(10 * time.Millisecond)})
	codesInOrder := []int{http.StatusNotFound, http.StatusServiceUnavailable, http.StatusNoContent}
	oidc := newTarget(t, func(n int, _ http.ResponseWriter, _ *http.Request) int { return codesInOrder[n-1] })
	plain := newTarget(t, always(http.StatusOK))

	task := httpTask(q, "hdr-task", oidc.srv.URL+"/Run")
	hr := task.GetHttpRequest()
	hr.Body = []byte(`{"runs":["r1"]}`)
	hr.Headers = map[string]string{
		"Content-Type":                "application/json",
		"X-Baton-Fence":               "tick:7",
		"User-Agent":                  "not-this",
		"Authorization":               "Basic replaced",
		"X-CloudTasks-TaskRetryCount": "99",
	}
	hr.AuthorizationHeader = &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{ServiceAccountEmail: "run@p.iam.gserviceaccount.com"}}
	created := b.create(t, q, task)
	b.create(t, q, httpTask(q, "plain-task", plain.srv.URL+"/x"))

	as := b.wait(t, 4)
	var mine []tasks.Attempt
	for _, a := range as {
		if a.Task == created.Name {
			mine = append(mine, a)
		}
	}
	reqs := oidc.requests()
	if len(mine) != 3 || len(reqs) != 3 {
		t.Fatalf("got %d attempts and %d requests for the OIDC task, want 3 (404, 503, 204)", len(mine), len(reqs))
	}
	if got, want := mine[0].ScheduleTime, created.GetScheduleTime().AsTime(); !got.Equal(want) {
		t.Errorf("attempt 1 ScheduleTime = %s, want the task's schedule_time %s", got, want)
	}
	prevResp := []string{"", "404", "503"}
	reason := []string{"", "HTTP 404", "HTTP 503"}
	execCount := []string{"0", "1", "1"} // the 503 is not an execution
	for i, r := range reqs {
		if r.method != http.MethodPost || r.body != `{"runs":["r1"]}` {
			t.Errorf("request %d: %s %q, want POST with the task's body", i+1, r.method, r.body)
		}
		got := map[string]string{}
		for _, k := range []string{
			"X-CloudTasks-QueueName", "X-CloudTasks-TaskName", "X-CloudTasks-TaskRetryCount",
			"X-CloudTasks-TaskExecutionCount", "X-CloudTasks-TaskETA", "X-CloudTasks-TaskPreviousResponse",
			"X-CloudTasks-TaskRetryReason", "User-Agent", "Authorization", "Content-Type", "X-Baton-Fence",
		} {
			if v := r.header.Get(k); v != "" {
				got[k] = v
			}
		}
		want := map[string]string{
			"X-CloudTasks-QueueName":          "hdr-q",
			"X-CloudTasks-TaskName":           "hdr-task",
			"X-CloudTasks-TaskRetryCount":     fmt.Sprint(i),
			"X-CloudTasks-TaskExecutionCount": execCount[i],
			"X-CloudTasks-TaskETA":            eta(mine[i].ScheduleTime),
			"User-Agent":                      "Google-Cloud-Tasks",
			"Authorization":                   "Bearer local-token",
			"Content-Type":                    "application/json",
			"X-Baton-Fence":                   "tick:7",
		}
		if prevResp[i] != "" {
			want["X-CloudTasks-TaskPreviousResponse"] = prevResp[i]
			want["X-CloudTasks-TaskRetryReason"] = reason[i]
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("request %d headers (-want,+got):\n%s", i+1, diff)
		}
	}
	if got, want := reqs[0].header.Get("X-CloudTasks-TaskETA"), eta(created.GetScheduleTime().AsTime()); got != want {
		t.Errorf("first TaskETA = %s, want schedule_time %s", got, want)
	}

	p := plain.requests()
	if len(p) != 1 {
		t.Fatalf("plain task: %d requests, want 1", len(p))
	}
	if v := p[0].header.Get("Authorization"); v != "" {
		t.Errorf("task without an OIDC token got Authorization %q, want none", v)
	}
	if v := p[0].header.Get("X-CloudTasks-TaskName"); v != "plain-task" {
		t.Errorf("plain task TaskName = %q", v)
	}
}

func TestRetryBackoffFollowsFormula(t *testing.T) {
	t.Parallel()
	b := setup(t, tasks.Options{})
	// 100ms, doubled once to 200ms, then linear by 100ms·2¹ (400, 600),
	// capped at 700ms.
	q := b.queue(t, "backoff", nil, &cloudtaskspb.RetryConfig{
		MaxAttempts:  6,
		MinBackoff:   durationpb.New(100 * time.Millisecond),
		MaxBackoff:   durationpb.New(700 * time.Millisecond),
		MaxDoublings: 1,
	})
	tg := newTarget(t, always(http.StatusInternalServerError))
	b.create(t, q, httpTask(q, "fails", tg.srv.URL))

	as := b.wait(t, 6)
	var gaps []time.Duration
	for i, a := range as {
		if a.Number != i+1 || a.Status != 500 || a.Error != "HTTP 500" {
			t.Errorf("attempt %d = number %d, status %d, error %q; want number %d, HTTP 500", i, a.Number, a.Status, a.Error, i+1)
		}
		if a.Start.Before(a.ScheduleTime) {
			t.Errorf("attempt %d started at %s, before it was due at %s", i+1, a.Start, a.ScheduleTime)
		}
		if i > 0 {
			gaps = append(gaps, a.ScheduleTime.Sub(as[i-1].End))
		}
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 600 * time.Millisecond, 700 * time.Millisecond}
	if diff := cmp.Diff(want, gaps); diff != "" {
		t.Errorf("retry due time minus the failed attempt's end (-want,+got):\n%s", diff)
	}
	// The retry headers carry the same schedule the attempts record.
	for i, r := range tg.requests() {
		if got := r.header.Get("X-CloudTasks-TaskETA"); got != eta(as[i].ScheduleTime) {
			t.Errorf("request %d TaskETA = %s, want %s", i+1, got, eta(as[i].ScheduleTime))
		}
	}
}

func TestMaxAttemptsStopsRetries(t *testing.T) {
	t.Parallel()
	drops := make(chan slog.Level, 1)
	b := setup(t, tasks.Options{Logger: slog.New(hookHandler{on: func(r slog.Record) {
		if strings.Contains(r.Message, "task dropped") {
			drops <- r.Level
		}
	}})})
	q := b.queue(t, "three", nil, &cloudtaskspb.RetryConfig{MaxAttempts: 3, MinBackoff: durationpb.New(10 * time.Millisecond)})
	tg := newTarget(t, always(http.StatusServiceUnavailable))
	doomed := b.create(t, q, httpTask(q, "doomed", tg.srv.URL))

	b.wait(t, 3) // the three attempts; the full list is read after the sentinel
	// Dropping happens with the third attempt's record, so it is gone now.
	_, err := b.client.GetTask(b.ctx, &cloudtaskspb.GetTaskRequest{Name: doomed.Name})
	wantCode(t, err, codes.NotFound, "GetTask of a dropped task")
	if !strings.Contains(status.Convert(err).Message(), "existed recently") {
		t.Errorf("GetTask message %q should say the task existed recently", status.Convert(err).Message())
	}
	// A sentinel created afterwards is the next and last attempt: nothing
	// of the dropped task runs again.
	b.create(t, q, httpTask(q, "sentinel", tg.srv.URL))
	as := b.wait(t, 4)
	var got []string
	for _, a := range as {
		got = append(got, fmt.Sprintf("%s#%d", a.Task[strings.LastIndex(a.Task, "/")+1:], a.Number))
	}
	if diff := cmp.Diff([]string{"doomed#1", "doomed#2", "doomed#3", "sentinel#1"}, got[:4]); diff != "" {
		t.Errorf("attempts (-want,+got):\n%s", diff)
	}
	select {
	case lvl := <-drops:
		if lvl != slog.LevelWarn {
			t.Errorf("the dropped task was logged at %v, want WARN", lvl)
		}
	case <-b.ctx.Done():
		t.Error("no log line for the dropped task")
	}
}

func TestDedupeByName(t *testing.T) {
	t.Parallel()
	const tombstone = 2 * time.Second
	b := setup(t, tasks.Options{Tombstone: tombstone})
	q := b.queue(t, "dedupe", nil, nil)
	tg := newTarget(t, always(http.StatusOK))
	again := func(id string) error {
		t.Helper()
		_, err := b.client.CreateTask(b.ctx, &cloudtaskspb.CreateTaskRequest{Parent: q, Task: httpTask(q, id, tg.srv.URL)})
		return err
	}

	// A live task (due in an hour) holds its name; so does a deleted one.
	later := httpTask(q, "later", tg.srv.URL)
	later.ScheduleTime = timestamppb.New(time.Now().Add(time.Hour))
	b.create(t, q, later)
	wantCode(t, again("later"), codes.AlreadyExists, "CreateTask over a live task")
	if err := b.client.DeleteTask(b.ctx, &cloudtaskspb.DeleteTaskRequest{Name: later.Name}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, again("later"), codes.AlreadyExists, "CreateTask over a deleted task")

	// A task that succeeded holds its name until the tombstone expires.
	b.create(t, q, httpTask(q, "done", tg.srv.URL))
	first := b.wait(t, 1)[0]
	if !first.OK() {
		t.Fatalf("attempt = %+v, want a 2xx", first)
	}
	wantCode(t, again("done"), codes.AlreadyExists, "CreateTask over a finished task within the tombstone")
	if time.Since(first.End) >= tombstone {
		t.Fatalf("the check above ran after the tombstone expired; it proved nothing")
	}
	// Wait for the tombstone to pass (a timer on the known expiry, not a
	// guess), then the name is free again and the new task runs.
	<-time.After(time.Until(first.End.Add(tombstone + time.Millisecond)))
	if err := again("done"); err != nil {
		t.Fatalf("CreateTask after the tombstone expired: %v", err)
	}
	as := b.wait(t, 2)
	if as[1].Task != q+"/tasks/done" || as[1].Number != 1 {
		t.Errorf("second attempt = %+v, want the re-created task's first attempt", as[1])
	}
}

func TestMaxConcurrentDispatches(t *testing.T) {
	t.Parallel()
	b := setup(t, tasks.Options{})
	q := b.queue(t, "conc", &cloudtaskspb.RateLimits{MaxConcurrentDispatches: 2}, nil)
	var inflight, peak atomic.Int32
	arrived := make(chan struct{}, 16)
	release := make(chan struct{})
	tg := newTarget(t, func(int, http.ResponseWriter, *http.Request) int {
		n := inflight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		arrived <- struct{}{}
		<-release
		inflight.Add(-1)
		return http.StatusOK
	})
	const n = 8
	for i := range n {
		b.create(t, q, httpTask(q, fmt.Sprintf("c%d", i), tg.srv.URL))
	}
	// Hold two in flight; each release lets exactly one more start. If the
	// limit were ignored, all eight would arrive while the first two wait.
	<-arrived
	<-arrived
	for range n - 2 {
		release <- struct{}{}
		<-arrived
	}
	release <- struct{}{}
	release <- struct{}{}
	b.wait(t, n)
	if got := peak.Load(); got != 2 {
		t.Errorf("peak requests in flight = %d, want exactly max_concurrent_dispatches 2", got)
	}
}

func TestMaxDispatchesPerSecond(t *testing.T) {
	t.Parallel()
	b := setup(t, tasks.Options{})
	q := b.queue(t, "rate", &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 5, MaxBurstSize: 1}, nil)
	got, err := b.client.GetQueue(b.ctx, &cloudtaskspb.GetQueueRequest{Name: q})
	if err != nil {
		t.Fatal(err)
	}
	if rl := got.GetRateLimits(); rl.MaxDispatchesPerSecond != 5 || rl.MaxBurstSize != 1 {
		t.Fatalf("rate limits = %v, want 5/s with burst 1", rl)
	}
	tg := newTarget(t, always(http.StatusOK))
	var names []string
	for i := range 5 {
		names = append(names, b.create(t, q, httpTask(q, fmt.Sprintf("r%d", i), tg.srv.URL)).Name)
	}
	as := b.wait(t, 5)
	// Attempts are recorded as they end; the limit is on when they start.
	slices.SortFunc(as, func(x, y tasks.Attempt) int { return x.Start.Compare(y.Start) })
	var order []string
	for i, a := range as {
		order = append(order, a.Task)
		if i > 0 {
			if gap := a.Start.Sub(as[i-1].Start); gap < 200*time.Millisecond {
				t.Errorf("dispatch %d came %s after the one before, want ≥ 200ms at 5/s", i+1, gap)
			}
		}
	}
	if diff := cmp.Diff(names, order); diff != "" {
		t.Errorf("dispatch order, want oldest first (-want,+got):\n%s", diff)
	}
}

func TestDispatchDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t, tasks.Options{})
	q := b.queue(t, "deadline", nil, &cloudtaskspb.RetryConfig{MinBackoff: durationpb.New(10 * time.Millisecond)})
	cancelled := make(chan struct{}, 1)
	tg := newTarget(t, func(n int, _ http.ResponseWriter, r *http.Request) int {
		if n == 1 {
			select {
			case <-r.Context().Done():
				cancelled <- struct{}{}
			case <-time.After(time.Minute):
			}
		}
		return http.StatusOK
	})
	task := httpTask(q, "slow", tg.srv.URL)
	task.DispatchDeadline = durationpb.New(15 * time.Second)
	b.create(t, q, task)

	as := b.wait(t, 2)
	if as[0].Error != "DEADLINE_EXCEEDED" || as[0].Status != 0 {
		t.Errorf("attempt 1 = status %d, error %q; want no status and DEADLINE_EXCEEDED", as[0].Status, as[0].Error)
	}
	if d := as[0].End.Sub(as[0].Start); d < 15*time.Second {
		t.Errorf("attempt 1 was cut off after %s, before the 15s deadline", d)
	}
	select {
	case <-cancelled:
	default:
		t.Error("the handler's request context was not cancelled at the deadline")
	}
	if !as[1].OK() || as[1].Number != 2 {
		t.Errorf("attempt 2 = %+v, want the retry, answered 200", as[1])
	}
	h := tg.requests()[1].header
	got := []string{h.Get("X-CloudTasks-TaskRetryCount"), h.Get("X-CloudTasks-TaskExecutionCount"),
		h.Get("X-CloudTasks-TaskPreviousResponse"), h.Get("X-CloudTasks-TaskRetryReason")}
	if diff := cmp.Diff([]string{"1", "0", "", "DEADLINE_EXCEEDED"}, got); diff != "" {
		t.Errorf("retry's RetryCount, ExecutionCount, PreviousResponse, RetryReason (-want,+got):\n%s", diff)
	}
}

func TestFutureScheduleTimeIsNotEarly(t *testing.T) {
	t.Parallel()
	b := setup(t, tasks.Options{})
	q := b.queue(t, "future", nil, nil)
	tg := newTarget(t, always(http.StatusOK))
	task := httpTask(q, "later", tg.srv.URL)
	at := time.Now().Add(1500 * time.Millisecond)
	task.ScheduleTime = timestamppb.New(at)
	created := b.create(t, q, task)
	if !created.GetScheduleTime().AsTime().Equal(at.Truncate(time.Microsecond)) {
		t.Errorf("schedule_time = %s, want %s truncated to µs", created.GetScheduleTime().AsTime(), at)
	}
	// A task due now, created after it, runs first.
	b.create(t, q, httpTask(q, "now", tg.srv.URL))

	as := b.wait(t, 2)
	if as[0].Task != q+"/tasks/now" || as[1].Task != created.Name {
		t.Fatalf("attempts in order %s, %s; want the due task before the future one", as[0].Task, as[1].Task)
	}
	a := as[1]
	if !a.ScheduleTime.Equal(created.GetScheduleTime().AsTime()) {
		t.Errorf("ScheduleTime = %s, want %s", a.ScheduleTime, created.GetScheduleTime().AsTime())
	}
	if a.Start.Before(a.ScheduleTime) {
		t.Errorf("dispatched at %s, before schedule_time %s", a.Start, a.ScheduleTime)
	}
	if r := tg.requests()[1]; r.at.Before(at.Truncate(time.Microsecond)) {
		t.Errorf("target got it at %s, before schedule_time %s", r.at, at)
	}
}

func TestInvalidInput(t *testing.T) {
	t.Parallel()
	b := setup(t, tasks.Options{})
	q := b.queue(t, "valid", nil, nil)
	ok := "http://127.0.0.1:1/run"
	withTask := func(f func(*cloudtaskspb.Task)) *cloudtaskspb.CreateTaskRequest {
		tk := httpTask(q, "", ok)
		f(tk)
		return &cloudtaskspb.CreateTaskRequest{Parent: q, Task: tk}
	}
	queueReq := func(name string, rl *cloudtaskspb.RateLimits, rc *cloudtaskspb.RetryConfig) *cloudtaskspb.CreateQueueRequest {
		return &cloudtaskspb.CreateQueueRequest{Parent: location, Queue: &cloudtaskspb.Queue{Name: location + "/queues/" + name, RateLimits: rl, RetryConfig: rc}}
	}
	cases := []struct {
		name  string
		call  func() error
		code  codes.Code
		field string
	}{
		{"queue parent", func() error {
			_, err := b.client.CreateQueue(b.ctx, &cloudtaskspb.CreateQueueRequest{Parent: "projects/p", Queue: &cloudtaskspb.Queue{Name: "projects/p/queues/x"}})
			return err
		}, codes.InvalidArgument, "parent"},
		{"queue id", func() error { _, err := b.client.CreateQueue(b.ctx, queueReq("under_score", nil, nil)); return err }, codes.InvalidArgument, "queue.name"},
		{"rate too high", func() error {
			_, err := b.client.CreateQueue(b.ctx, queueReq("r", &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 501}, nil))
			return err
		}, codes.InvalidArgument, "queue.rate_limits.max_dispatches_per_second"},
		{"concurrency negative", func() error {
			_, err := b.client.CreateQueue(b.ctx, queueReq("c", &cloudtaskspb.RateLimits{MaxConcurrentDispatches: -1}, nil))
			return err
		}, codes.InvalidArgument, "queue.rate_limits.max_concurrent_dispatches"},
		{"max attempts", func() error {
			_, err := b.client.CreateQueue(b.ctx, queueReq("m", nil, &cloudtaskspb.RetryConfig{MaxAttempts: -2}))
			return err
		}, codes.InvalidArgument, "queue.retry_config.max_attempts"},
		{"backoff order", func() error {
			_, err := b.client.CreateQueue(b.ctx, queueReq("o", nil, &cloudtaskspb.RetryConfig{MinBackoff: durationpb.New(time.Minute), MaxBackoff: durationpb.New(time.Second)}))
			return err
		}, codes.InvalidArgument, "queue.retry_config.min_backoff"},
		{"queue exists", func() error { _, err := b.client.CreateQueue(b.ctx, queueReq("valid", nil, nil)); return err }, codes.AlreadyExists, ""},
		{"no such queue", func() error {
			_, err := b.client.GetQueue(b.ctx, &cloudtaskspb.GetQueueRequest{Name: location + "/queues/nope"})
			return err
		}, codes.NotFound, ""},
		{"task into a missing queue", func() error {
			_, err := b.client.CreateTask(b.ctx, &cloudtaskspb.CreateTaskRequest{Parent: location + "/queues/nope", Task: httpTask(location+"/queues/nope", "", ok)})
			return err
		}, codes.NotFound, ""},
		{"task id", func() error {
			_, err := b.client.CreateTask(b.ctx, withTask(func(tk *cloudtaskspb.Task) { tk.Name = q + "/tasks/not a valid id" }))
			return err
		}, codes.InvalidArgument, "task.name"},
		{"task id too long", func() error {
			_, err := b.client.CreateTask(b.ctx, withTask(func(tk *cloudtaskspb.Task) { tk.Name = q + "/tasks/" + strings.Repeat("a", 501) }))
			return err
		}, codes.InvalidArgument, "task.name"},
		{"task in another queue", func() error {
			_, err := b.client.CreateTask(b.ctx, withTask(func(tk *cloudtaskspb.Task) { tk.Name = location + "/queues/other/tasks/t" }))
			return err
		}, codes.InvalidArgument, "task.name"},
		{"no http request", func() error {
			_, err := b.client.CreateTask(b.ctx, withTask(func(tk *cloudtaskspb.Task) { tk.MessageType = nil }))
			return err
		}, codes.InvalidArgument, "task.http_request"},
		{"app engine task", func() error {
			_, err := b.client.CreateTask(b.ctx, withTask(func(tk *cloudtaskspb.Task) {
				tk.MessageType = &cloudtaskspb.Task_AppEngineHttpRequest{AppEngineHttpRequest: &cloudtaskspb.AppEngineHttpRequest{RelativeUri: "/x"}}
			}))
			return err
		}, codes.Unimplemented, "task.app_engine_http_request"},
		{"empty url", func() error {
			_, err := b.client.CreateTask(b.ctx, withTask(func(tk *cloudtaskspb.Task) { tk.GetHttpRequest().Url = "" }))
			return err
		}, codes.InvalidArgument, "task.http_request.url"},
		{"ftp url", func() error {
			_, err := b.client.CreateTask(b.ctx, withTask(func(tk *cloudtaskspb.Task) { tk.GetHttpRequest().Url = "ftp://h/x" }))
			return err
		}, codes.InvalidArgument, "task.http_request.url"},
		{"body on GET", func() error {
			_, err := b.client.CreateTask(b.ctx, withTask(func(tk *cloudtaskspb.Task) {
				tk.GetHttpRequest().HttpMethod = cloudtaskspb.HttpMethod_GET
				tk.GetHttpRequest().Body = []byte("x")
			}))
			return err
		}, codes.InvalidArgument, "task.http_request.body"},
		{"bad header", func() error {
			_, err := b.client.CreateTask(b.ctx, withTask(func(tk *cloudtaskspb.Task) { tk.GetHttpRequest().Headers = map[string]string{"Bad Name": "v"} }))
			return err
		}, codes.InvalidArgument, "task.http_request.headers"},
		{"oidc without account", func() error {
			_, err := b.client.CreateTask(b.ctx, withTask(func(tk *cloudtaskspb.Task) {
				tk.GetHttpRequest().AuthorizationHeader = &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{}}
			}))
			return err
		}, codes.InvalidArgument, "task.http_request.oidc_token.service_account_email"},
		{"deadline 14s", func() error {
			_, err := b.client.CreateTask(b.ctx, withTask(func(tk *cloudtaskspb.Task) { tk.DispatchDeadline = durationpb.New(14 * time.Second) }))
			return err
		}, codes.InvalidArgument, "task.dispatch_deadline"},
		{"deadline 31m", func() error {
			_, err := b.client.CreateTask(b.ctx, withTask(func(tk *cloudtaskspb.Task) { tk.DispatchDeadline = durationpb.New(31 * time.Minute) }))
			return err
		}, codes.InvalidArgument, "task.dispatch_deadline"},
		{"schedule 31 days ahead", func() error {
			_, err := b.client.CreateTask(b.ctx, withTask(func(tk *cloudtaskspb.Task) { tk.ScheduleTime = timestamppb.New(time.Now().Add(31 * 24 * time.Hour)) }))
			return err
		}, codes.InvalidArgument, "task.schedule_time"},
		{"task too big", func() error {
			_, err := b.client.CreateTask(b.ctx, withTask(func(tk *cloudtaskspb.Task) { tk.GetHttpRequest().Body = make([]byte, 101*1024) }))
			return err
		}, codes.InvalidArgument, "task"},
		{"get task name", func() error {
			_, err := b.client.GetTask(b.ctx, &cloudtaskspb.GetTaskRequest{Name: q + "/tasks/"})
			return err
		}, codes.InvalidArgument, "name"},
		{"list filter", func() error {
			_, err := b.client.ListQueues(b.ctx, &cloudtaskspb.ListQueuesRequest{Parent: location, Filter: "name: x"}).Next()
			return err
		}, codes.InvalidArgument, "filter"},
		{"update mask", func() error {
			_, err := b.client.UpdateQueue(b.ctx, &cloudtaskspb.UpdateQueueRequest{Queue: &cloudtaskspb.Queue{Name: q}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"bogus"}}})
			return err
		}, codes.InvalidArgument, "update_mask"},
		{"delete a missing task", func() error {
			return b.client.DeleteTask(b.ctx, &cloudtaskspb.DeleteTaskRequest{Name: q + "/tasks/never"})
		}, codes.NotFound, ""},
	}
	for _, c := range cases {
		err := c.call()
		if got := status.Code(err); got != c.code {
			t.Errorf("%s: code %v (%v), want %v", c.name, got, err, c.code)
			continue
		}
		if msg := status.Convert(err).Message(); c.field != "" && !strings.HasPrefix(msg, c.field+":") {
			t.Errorf("%s: message %q does not name the field %s", c.name, msg, c.field)
		}
	}

	// The deadline bounds are inclusive.
	for _, d := range []time.Duration{15 * time.Second, 30 * time.Minute} {
		tk := httpTask(q, "", ok)
		tk.DispatchDeadline = durationpb.New(d)
		tk.ScheduleTime = timestamppb.New(time.Now().Add(time.Hour))
		if got := b.create(t, q, tk); got.GetDispatchDeadline().AsDuration() != d {
			t.Errorf("dispatch_deadline %s stored as %s", d, got.GetDispatchDeadline().AsDuration())
		}
	}
	// A deleted queue's name cannot be reused at once.
	if err := b.client.DeleteQueue(b.ctx, &cloudtaskspb.DeleteQueueRequest{Name: q}); err != nil {
		t.Fatal(err)
	}
	_, err := b.client.CreateQueue(b.ctx, queueReq("valid", nil, nil))
	wantCode(t, err, codes.FailedPrecondition, "CreateQueue over a just-deleted queue")
}

func TestQueueAdministration(t *testing.T) {
	t.Parallel()
	b := setup(t, tasks.Options{})
	tg := newTarget(t, always(http.StatusOK))

	t.Run("defaults", func(t *testing.T) {
		got, err := b.srv.CreateQueue(b.ctx, &cloudtaskspb.Queue{Name: location + "/queues/defaults"})
		if err != nil {
			t.Fatal(err)
		}
		want := []any{500.0, int32(100), int32(1000), int32(100), 0 * time.Second, 100 * time.Millisecond, time.Hour, int32(16), cloudtaskspb.Queue_RUNNING}
		rl, rc := got.GetRateLimits(), got.GetRetryConfig()
		gotv := []any{rl.MaxDispatchesPerSecond, rl.MaxBurstSize, rl.MaxConcurrentDispatches, rc.MaxAttempts,
			rc.MaxRetryDuration.AsDuration(), rc.MinBackoff.AsDuration(), rc.MaxBackoff.AsDuration(), rc.MaxDoublings, got.State}
		if diff := cmp.Diff(want, gotv); diff != "" {
			t.Errorf("defaults (-want,+got):\n%s", diff)
		}
	})

	t.Run("update honours the mask", func(t *testing.T) {
		q := b.queue(t, "upd", &cloudtaskspb.RateLimits{MaxConcurrentDispatches: 7}, &cloudtaskspb.RetryConfig{MaxAttempts: 5})
		got, err := b.client.UpdateQueue(b.ctx, &cloudtaskspb.UpdateQueueRequest{
			Queue: &cloudtaskspb.Queue{Name: q,
				RateLimits:  &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 10, MaxConcurrentDispatches: 1},
				RetryConfig: &cloudtaskspb.RetryConfig{MaxAttempts: 9, MaxDoublings: 3}},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"rate_limits.max_dispatches_per_second", "retryConfig.maxAttempts"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		gotv := []any{got.RateLimits.MaxDispatchesPerSecond, got.RateLimits.MaxConcurrentDispatches, got.RateLimits.MaxBurstSize,
			got.RetryConfig.MaxAttempts, got.RetryConfig.MaxDoublings}
		want := []any{10.0, int32(7), int32(2), int32(9), int32(16)}
		if diff := cmp.Diff(want, gotv); diff != "" {
			t.Errorf("rate, concurrency, burst, attempts, doublings after a masked update (-want,+got):\n%s", diff)
		}
	})

	t.Run("pause holds dispatch, resume releases it", func(t *testing.T) {
		q := b.queue(t, "pause", nil, nil)
		if _, err := b.client.PauseQueue(b.ctx, &cloudtaskspb.PauseQueueRequest{Name: q}); err != nil {
			t.Fatal(err)
		}
		it := b.client.ListQueues(b.ctx, &cloudtaskspb.ListQueuesRequest{Parent: location, Filter: "state: PAUSED"})
		var paused []string
		for {
			qq, err := it.Next()
			if errors.Is(err, iterator.Done) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			paused = append(paused, qq.Name)
		}
		if diff := cmp.Diff([]string{q}, paused); diff != "" {
			t.Errorf("ListQueues state: PAUSED (-want,+got):\n%s", diff)
		}
		task := b.create(t, q, httpTask(q, "held", tg.srv.URL))
		// Counted before the resume: the dispatch may come before a count
		// taken after it, and the wait would then be for one too many.
		before := len(b.srv.Attempts())
		resumedAt := time.Now()
		if _, err := b.client.ResumeQueue(b.ctx, &cloudtaskspb.ResumeQueueRequest{Name: q}); err != nil {
			t.Fatal(err)
		}
		for _, a := range b.wait(t, before+1) {
			if a.Task == task.Name && a.Start.Before(resumedAt) {
				t.Errorf("dispatched at %s, while the queue was paused (resumed at %s)", a.Start, resumedAt)
			}
		}
	})

	t.Run("list pages and purge", func(t *testing.T) {
		q := b.queue(t, "list", nil, nil)
		var want []string
		for _, id := range []string{"a", "b", "c"} {
			tk := httpTask(q, id, tg.srv.URL)
			tk.ScheduleTime = timestamppb.New(time.Now().Add(time.Hour))
			want = append(want, b.create(t, q, tk).Name)
		}
		it := b.client.ListTasks(b.ctx, &cloudtaskspb.ListTasksRequest{Parent: q, PageSize: 1})
		var got []string
		for {
			tk, err := it.Next()
			if errors.Is(err, iterator.Done) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, tk.Name)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ListTasks, one per page (-want,+got):\n%s", diff)
		}
		pq, err := b.client.PurgeQueue(b.ctx, &cloudtaskspb.PurgeQueueRequest{Name: q})
		if err != nil {
			t.Fatal(err)
		}
		if pq.PurgeTime == nil {
			t.Error("purge_time unset after PurgeQueue")
		}
		if _, err := b.client.ListTasks(b.ctx, &cloudtaskspb.ListTasksRequest{Parent: q}).Next(); !errors.Is(err, iterator.Done) {
			t.Errorf("ListTasks after purge: %v, want no tasks", err)
		}
	})
}

func TestGetTaskTracksAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t, tasks.Options{})
	// One failure, then the retry is an hour away: the task sits still.
	q := b.queue(t, "track", nil, &cloudtaskspb.RetryConfig{MinBackoff: durationpb.New(time.Hour)})
	tg := newTarget(t, always(http.StatusInternalServerError))
	tk := httpTask(q, "t1", tg.srv.URL)
	tk.GetHttpRequest().Body = []byte("payload")
	created := b.create(t, q, tk)
	if created.GetHttpRequest().GetBody() != nil || created.View != cloudtaskspb.Task_BASIC {
		t.Errorf("CreateTask's default (BASIC) view has body %q, view %v", created.GetHttpRequest().GetBody(), created.View)
	}
	a := b.wait(t, 1)[0]

	got, err := b.client.GetTask(b.ctx, &cloudtaskspb.GetTaskRequest{Name: created.Name, ResponseView: cloudtaskspb.Task_FULL})
	if err != nil {
		t.Fatal(err)
	}
	gotv := []any{got.DispatchCount, got.ResponseCount, got.FirstAttempt.GetDispatchTime().AsTime(),
		got.LastAttempt.GetScheduleTime().AsTime(), got.LastAttempt.GetDispatchTime().AsTime(),
		got.LastAttempt.GetResponseTime().AsTime(), codes.Code(got.LastAttempt.GetResponseStatus().GetCode()),
		got.ScheduleTime.AsTime(), string(got.GetHttpRequest().GetBody())}
	want := []any{int32(1), int32(1), a.Start.UTC(), a.ScheduleTime.UTC(), a.Start.UTC(), a.End.UTC(), codes.Internal,
		a.End.Add(time.Hour).UTC(), "payload"}
	if diff := cmp.Diff(want, gotv); diff != "" {
		t.Errorf("dispatch_count, response_count, first dispatch, last schedule/dispatch/response, status, next schedule, body (-want,+got):\n%s", diff)
	}

	if err := b.client.DeleteTask(b.ctx, &cloudtaskspb.DeleteTaskRequest{Name: created.Name}); err != nil {
		t.Fatal(err)
	}
	_, err = b.client.GetTask(b.ctx, &cloudtaskspb.GetTaskRequest{Name: created.Name})
	wantCode(t, err, codes.NotFound, "GetTask after DeleteTask")
}

// TestShutdownWaitsForInFlight is not parallel: it counts the package's
// goroutines, which only works while no other test runs.
func TestShutdownWaitsForInFlight(t *testing.T) {
	before := goroutines()
	stopping := make(chan struct{})
	var once sync.Once
	log := slog.New(hookHandler{on: func(r slog.Record) {
		if strings.HasPrefix(r.Message, "tasks: shutdown") {
			once.Do(func() { close(stopping) })
		}
	}})
	ctx := context.Background()
	srv, err := tasks.Start(ctx, tasks.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	c, err := srv.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	arrived, release := make(chan struct{}), make(chan struct{})
	tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
	}))
	q, err := srv.CreateQueue(ctx, &cloudtaskspb.Queue{Name: location + "/queues/drain"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: q.Name, Task: httpTask(q.Name, "running", tg.URL)}); err != nil {
		t.Fatal(err)
	}
	<-arrived
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(ctx) }()
	<-stopping
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) while an attempt was in flight", err)
	default:
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if as := srv.Attempts(); len(as) != 1 || !as[0].OK() {
		t.Errorf("attempts = %+v, want the in-flight one, finished with a 2xx", as)
	}
	_ = c.Close()
	tg.Close()
	checkNoLeak(t, before)
}

// TestCloseCancelsInFlight is not parallel, for the same reason.
func TestCloseCancelsInFlight(t *testing.T) {
	before := goroutines()
	ctx := context.Background()
	srv, err := tasks.Start(ctx, tasks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := srv.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	arrived := make(chan struct{})
	tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
	}))
	q, err := srv.CreateQueue(ctx, &cloudtaskspb.Queue{Name: location + "/queues/hard"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: q.Name, Task: httpTask(q.Name, "stuck", tg.URL)}); err != nil {
		t.Fatal(err)
	}
	<-arrived
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if as := srv.Attempts(); len(as) != 1 || as[0].OK() || as[0].Status != 0 {
		t.Errorf("attempts = %+v, want one cancelled attempt", as)
	}
	_ = c.Close()
	tg.Close()
	checkNoLeak(t, before)
}

// goroutines returns the stacks of live goroutines that belong to the
// emulator or to the gRPC and HTTP client machinery it starts, by id.
func goroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "baton/emulator/tasks.") || strings.Contains(g, "google.golang.org/grpc") ||
			strings.Contains(g, "net/http.(*persistConn)") {
			id, _, _ := strings.Cut(g, " [")
			out[id] = g
		}
	}
	return out
}

// checkNoLeak fails if goroutines that were not there before stay alive.
// Goroutines end asynchronously after the close that stops them, so it
// looks again, a few times, for up to two seconds, as goleak does.
func checkNoLeak(t *testing.T, before map[string]string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		var leaked []string
		for id, g := range goroutines() {
			if _, old := before[id]; !old {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
		}
		<-time.After(20 * time.Millisecond)
	}
}

// hookHandler is a slog handler that hands each record to on.
type hookHandler struct{ on func(slog.Record) }

func (h hookHandler) Enabled(context.Context, slog.Level) bool      { return true }
func (h hookHandler) Handle(_ context.Context, r slog.Record) error { h.on(r); return nil }
func (h hookHandler) WithAttrs([]slog.Attr) slog.Handler            { return h }
func (h hookHandler) WithGroup(string) slog.Handler                 { return h }
