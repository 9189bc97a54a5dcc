package tests

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
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
		// all closes once k runs of the current minute are in flight;
		// newRound opens the next minute's.
		all    = make(chan struct{})
		closed bool
	)
	releaseLocked := func() {
		if !closed {
			closed = true
			close(all)
		}
	}
	releaseAll := func() { mu.Lock(); releaseLocked(); mu.Unlock() }
	newRound := func() chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		all, closed = make(chan struct{}), false
		return all
	}
	var newConns atomic.Int64
	target := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		tok, err := fence.Parse(req.Header.Get(fence.Header))
		mu.Lock()
		if err == nil {
			calls[tok.Lease]++
		}
		inFlight++
		peak = max(peak, inFlight)
		if inFlight == k {
			releaseLocked()
		}
		ch := all
		mu.Unlock()
		select {
		case <-ch:
		case <-time.After(60 * time.Second): // the run fails, and the test says why below
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	target.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			newConns.Add(1)
		}
	}
	target.Start()
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
		p := peak
		mu.Unlock()
		t.Fatalf("only %d of %d runs were ever in flight at once in the one instance", p, k)
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
	mu.Unlock()

	// The next minute's 40 runs, again all in flight at once, reuse the
	// first minute's connections to the target: the engine keeps a full
	// instance's worth idle, where Go's default keeps 2 a host and the rest
	// would dial (and, over TLS, handshake) again.
	first := newConns.Load()
	second := newRound()
	next := at.Add(time.Minute)
	r.set(next.Add(3 * time.Second))
	if code, sum := r.tick(t, next); code != http.StatusOK {
		t.Fatalf("second tick: %d %+v", code, sum)
	}
	select {
	case <-second:
	case <-time.After(90 * time.Second):
		t.Fatalf("the second minute's %d runs were never in flight at once", k)
	}
	r.settled(t, 60*time.Second)
	mu.Lock()
	if total := 0; true {
		for _, n := range calls {
			total += n
		}
		if total != 2*k {
			t.Errorf("%d target calls over two minutes; want %d", total, 2*k)
		}
	}
	if again := newConns.Load() - first; again != 0 {
		t.Errorf("the second minute's runs opened %d new connections to the target (the first opened %d); want them to reuse the idle ones", again, first)
	}
}
