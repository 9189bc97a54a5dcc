package tests

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/fence"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// TestRunServesConcurrentRequestsInOneInstance is the Run function at
// run_concurrency > 1 (docs/deploy.md, "Sizing"): one instance (one
// functions.Mux over one set of Deps: one engine, lease manager, store
// client pool and metrics) serves many /Run requests at once. 40 schedules
// fire in one minute; the Cloud Tasks emulator dispatches their tasks
// concurrently, and each task is also delivered a second time at once, by
// hand. Every target holds its request until all 40 are in flight, so the
// test only passes if the one instance really runs 40 runs at the same
// time; each fire time reaches its target exactly once, under its own job
// lease, and every run succeeds. Run with -race, it is the proof that the
// function's shared state is safe for concurrent requests.
func TestRunServesConcurrentRequestsInOneInstance(t *testing.T) {
	t.Parallel()
	const k = 40
	start := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	r := newHandOffRig(t, start, nil, nil)

	var (
		mu       sync.Mutex
		calls    = map[string]int{} // by fence lease: one schedule each
		inFlight int
		peak     int
		all      = make(chan struct{})
		release  sync.Once
	)
	releaseAll := func() { release.Do(func() { close(all) }) }
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		tok, err := fence.Parse(req.Header.Get(fence.Header))
		mu.Lock()
		if err == nil {
			calls[tok.Lease]++
		}
		inFlight++
		peak = max(peak, inFlight)
		if inFlight == k {
			releaseAll()
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(60 * time.Second): // the run fails, and the test says why below
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer target.Close()
	// On a failure, the held targets answer at once, so that the servers'
	// cleanup does not wait for them.
	defer releaseAll()

	ctx := context.Background()
	for i := range k {
		id := "conc-" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		s := schedule.Schedule{ID: id, Cron: "* * * * *", Target: schedule.Target{Type: schedule.TargetHTTP,
			HTTP: &schedule.HTTPTarget{Method: http.MethodPost, URL: target.URL + "/" + id, Timeout: schedule.Duration(90 * time.Second)}}}
		if err := s.Normalize(schedule.ValidateOptions{Builtins: scheduler.Builtins(), AllowedHosts: []string{"127.0.0.1"}}); err != nil {
			t.Fatal(err)
		}
		next, _ := schedule.NextFire(s.Cron, "", start)
		s.NextRunAt, s.Enabled, s.Version, s.CreatedAt, s.UpdatedAt = next, true, 1, start, start
		if _, err := r.st.Collection(schedule.SchedulesCollection).InsertIdempotent(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	at := start.Add(time.Minute)
	r.set(at.Add(3 * time.Second))
	if code, sum := r.tick(t, at); code != http.StatusOK {
		t.Fatalf("tick: %d %+v", code, sum)
	}
	// The second delivery of every task, all at once, beside the queue's.
	var pending []schedule.Run
	if err := r.st.Collection(schedule.RunsCollection).Find(ctx, bson.D{{Key: "status", Value: schedule.RunPending}}, &pending); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, run := range pending {
		wg.Go(func() {
			_ = api(t, r.srv.URL, "secret", http.MethodPost, "/Run", scheduler.Task{ScheduleID: run.ScheduleID, Runs: []string{run.ID}}, nil)
		})
	}
	select {
	case <-all:
	case <-time.After(90 * time.Second):
		mu.Lock()
		t.Fatalf("only %d of %d runs were ever in flight at once in the one instance", peak, k)
	}
	wg.Wait()
	r.settled(t, 60*time.Second)

	mu.Lock()
	defer mu.Unlock()
	if len(calls) != k {
		t.Errorf("%d schedules reached their target; want %d", len(calls), k)
	}
	for lease, n := range calls {
		if n != 1 || !strings.HasPrefix(lease, "job-conc-") {
			t.Errorf("lease %s: %d target calls; want 1, under the schedule's job lease", lease, n)
		}
	}
	var done []schedule.Run
	if err := r.st.Collection(schedule.RunsCollection).Find(ctx, bson.D{}, &done); err != nil {
		t.Fatal(err)
	}
	for _, run := range done {
		if run.Status != schedule.RunSucceeded {
			t.Errorf("run %s: %s (%s); want succeeded", run.ID, run.Status, run.Error)
		}
	}
	if len(done) != k {
		t.Errorf("%d runs; want %d, one per schedule", len(done), k)
	}
	t.Logf("peak %d runs in flight in one instance; %d pending runs delivered twice", peak, len(pending))
}
