package gpu_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/gpu/worker"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// The dispatcher is what the tick's scheduler calls for gpu targets.
var _ scheduler.GPU = (*gpu.Dispatcher)(nil)

// TestNoDoubledSlots pushes 200 short jobs through 4 one-slot workers from
// many concurrent enqueuers while a sweeper runs. A doubled slot would
// reach a busy worker, which counts it (Refused) instead of running it.
func TestNoDoubledSlots(t *testing.T) {
	// Leases far longer than the jobs: the test is about slots, and a
	// lease that ran out while a loaded machine (-race, other packages'
	// tests) delayed heartbeats would re-run a job, rightly, and fail
	// "every job exactly once" for a reason the test is not about.
	b := setup(t, setupOpts{workers: 4, lease: 30 * time.Second})
	n := 200
	if raceBuild {
		// Under -race the embedded database is instrumented too; fewer
		// jobs keep the package inside a minute and still race 4 workers
		// against 8 enqueuers and a sweeper.
		n = 60
	}
	stopSweep := make(chan struct{})
	sweepDone := make(chan struct{})
	stop := sync.OnceFunc(func() { close(stopSweep); <-sweepDone })
	t.Cleanup(stop)
	go func() {
		defer close(sweepDone)
		for {
			select {
			case <-stopSweep:
				return
			case <-time.After(200 * time.Millisecond):
				if _, _, err := b.d.Sweep(b.ctx); err != nil {
					t.Errorf("sweep: %v", err)
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 8 {
				if _, _, err := b.d.Enqueue(b.ctx, gpu.EnqueueRequest{ID: fmt.Sprintf("job-%03d", i), Payload: "sleep 0.01"}); err != nil {
					t.Errorf("enqueue %d: %v", i, err)
				}
			}
		}()
	}
	wg.Wait()
	// Wait on the workers' own counters: polling the database would load
	// the single-writer emulator we are measuring through.
	b.waitFor("every job to be reported", func() bool {
		var c int64
		for _, w := range b.workers {
			c += w.Stats().Completed
		}
		return c >= int64(n)
	})
	stop()

	var runs, completed int64
	for i, w := range b.workers {
		s := w.Stats()
		if s.Refused != 0 || s.MaxConcurrent > 1 {
			t.Errorf("worker %d saw a doubled slot: %+v", i, s)
		}
		runs += s.Runs
		completed += s.Completed
	}
	if runs != int64(n) || completed != int64(n) {
		t.Errorf("runs=%d completed=%d, want %d each (every job exactly once)", runs, completed, n)
	}
	jobs, _, err := b.d.List(b.ctx, gpu.ListQuery{PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Status != gpu.StatusSucceeded || j.Attempts != 0 || j.ExitCode == nil || *j.ExitCode != 0 {
			t.Errorf("job %s: status=%s attempts=%d exit=%v, want succeeded on its first attempt", j.ID, j.Status, j.Attempts, j.ExitCode)
		}
	}
	slots, err := b.d.Slots(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slots {
		if s.State != "free" {
			t.Errorf("slot %s is %s after the run, want free", s.ID, s.State)
		}
	}
}

// TestCrashRequeuesExactlyOnce cuts a worker off mid-job (no callback ever
// arrives): after the lease the sweep requeues the job with attempts+1, it
// completes on another worker, and the cut-off worker's late :complete is
// refused by the fence. Every job ends in exactly one terminal state.
func TestCrashRequeuesExactlyOnce(t *testing.T) {
	b := setup(t, setupOpts{workers: 3})
	b.enqueue(gpu.EnqueueRequest{ID: "victim", Payload: b.gate("release")})
	victim := b.waitStatus("victim", gpu.StatusRunning)
	dead := b.workerByURL(victim.Worker)
	// The crash: the worker stops answering and stops calling back. Its
	// command keeps running, as a partitioned or frozen instance's would.
	dead.srv.Close()
	dead.Freeze()

	for i := 0; i < 11; i++ {
		b.enqueue(gpu.EnqueueRequest{ID: fmt.Sprintf("other-%02d", i), Payload: "sleep 0.05"})
	}
	// Let the live workers finish first: jumping the clock past the lease
	// would expire their jobs too.
	for i := 0; i < 11; i++ {
		b.waitStatus(fmt.Sprintf("other-%02d", i), gpu.StatusSucceeded)
	}
	b.release("release")
	b.clock.Advance(b.d.LeaseTTL() + time.Second)
	requeued, deadN, err := b.d.Sweep(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if requeued != 1 || deadN != 0 {
		t.Fatalf("sweep: requeued=%d dead=%d, want 1, 0", requeued, deadN)
	}
	got := b.waitStatus("victim", gpu.StatusSucceeded)
	if got.Attempts != 1 || got.Worker == dead.URL {
		t.Fatalf("victim: attempts=%d worker=%s, want attempts 1 on a live worker (not %s)", got.Attempts, got.Worker, dead.URL)
	}

	// The zombie wakes and reports: the fence refuses it.
	dead.Thaw()
	b.waitFor("the late completion to be refused", func() bool { return dead.Stats().Stale >= 1 })
	if s := dead.Stats(); s.Completed != 0 {
		t.Errorf("dead worker's completion was accepted: %+v", s)
	}
	after := b.job("victim")
	if diff := cmp.Diff(got, after); diff != "" {
		t.Errorf("the late completion changed the job (-want,+got):\n%s", diff)
	}
	// A job's state is written by the :complete handler before the worker
	// reads the answer and counts it, so wait for the workers to count all
	// twelve, then check that no job was counted twice.
	completed := func() int64 {
		var n int64
		for _, w := range b.workers {
			n += w.Stats().Completed
		}
		return n
	}
	b.waitFor("12 accepted completions", func() bool { return completed() >= 12 })
	if n := completed(); n != 12 {
		t.Errorf("accepted completions = %d, want 12 (one per job)", n)
	}
}

// TestPriorityOrder: while the only worker is busy, jobs queue; they then
// start highest priority first, oldest first within a priority.
func TestPriorityOrder(t *testing.T) {
	rec := &recorder{}
	b := setup(t, setupOpts{workers: 1, worker: withOrder(rec)})
	b.enqueue(gpu.EnqueueRequest{ID: "blocker", Payload: b.gate("go")})
	b.waitStatus("blocker", gpu.StatusRunning)
	for i, p := range []int{1, 5, 0, 5, 3, 10} {
		b.enqueue(gpu.EnqueueRequest{ID: fmt.Sprintf("p%d-%d", p, i), Priority: p, Payload: "true"})
		b.clock.Advance(time.Millisecond) // distinct createdAt
	}
	b.release("go")
	b.waitStatus("p0-2", gpu.StatusSucceeded)
	want := []string{"blocker", "p10-5", "p5-1", "p5-3", "p3-4", "p1-0", "p0-2"}
	if diff := cmp.Diff(want, rec.list()); diff != "" {
		t.Errorf("start order (-want,+got):\n%s", diff)
	}
}

// TestMaxAttemptsDead: a job whose worker never calls back loses its lease
// twice and, with maxAttempts 2, ends dead; the late completions are
// refused.
func TestMaxAttemptsDead(t *testing.T) {
	b := setup(t, setupOpts{workers: 1})
	w := b.workers[0]
	w.Freeze()
	b.enqueue(gpu.EnqueueRequest{ID: "doomed", Payload: "true", MaxAttempts: 2})
	for attempt := 1; attempt <= 2; attempt++ {
		b.waitFor(fmt.Sprintf("attempt %d to run", attempt), func() bool { return w.Stats().Runs == int64(attempt) && !w.Busy() })
		b.clock.Advance(b.d.LeaseTTL() + time.Second)
		requeued, dead, err := b.d.Sweep(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := [2]int{1, 0}
		if attempt == 2 {
			want = [2]int{0, 1}
		}
		if got := [2]int{requeued, dead}; got != want {
			t.Fatalf("sweep after attempt %d: (requeued, dead) = %v, want %v", attempt, got, want)
		}
	}
	j := b.job("doomed")
	if j.Status != gpu.StatusDead || j.Attempts != 2 {
		t.Fatalf("job: status=%s attempts=%d, want dead after 2", j.Status, j.Attempts)
	}
	w.Thaw()
	b.waitFor("both late completions to be refused", func() bool { return w.Stats().Stale == 2 })
	if got := b.job("doomed"); got.Status != gpu.StatusDead {
		t.Errorf("after late completions the job is %s, want dead", got.Status)
	}
}

// TestCancel cancels a queued job (it never runs) and a running one (its
// worker kills the command and frees the slot for the next job).
func TestCancel(t *testing.T) {
	rec := &recorder{}
	b := setup(t, setupOpts{workers: 1, worker: withOrder(rec)})
	w := b.workers[0]
	b.enqueue(gpu.EnqueueRequest{ID: "running", Payload: "sleep 30"})
	b.waitStatus("running", gpu.StatusRunning)
	b.enqueue(gpu.EnqueueRequest{ID: "queued", Payload: "true"})
	if j, err := b.d.Cancel(b.ctx, "queued"); err != nil || j.Status != gpu.StatusCancelled {
		t.Fatalf("cancel queued: %v %v", j.Status, err)
	}
	j, err := b.d.Cancel(b.ctx, "running")
	if err != nil || j.Status != gpu.StatusCancelled {
		t.Fatalf("cancel running: %v %v", j.Status, err)
	}
	b.waitFor("the worker to kill the command", func() bool { return w.Stats().Killed == 1 && !w.Busy() })
	b.enqueue(gpu.EnqueueRequest{ID: "next", Payload: "true"})
	b.waitStatus("next", gpu.StatusSucceeded)
	if diff := cmp.Diff([]string{"running", "next"}, rec.list()); diff != "" {
		t.Errorf("jobs started (-want,+got):\n%s", diff)
	}
	for _, id := range []string{"running", "queued"} {
		if j := b.job(id); j.Status != gpu.StatusCancelled || j.ExitCode != nil {
			t.Errorf("job %s: status=%s exit=%v, want cancelled with no exit code", id, j.Status, j.ExitCode)
		}
	}
	if _, err := b.d.Cancel(b.ctx, "next"); err == nil || !strings.Contains(err.Error(), "finished") {
		t.Errorf("cancel finished job: err=%v, want ErrFinished", err)
	}
}

// TestRefusalCostsNoAttempt: a worker that answers 429 (Cloud Run routed
// two slots' jobs to one busy instance) or cannot be reached costs the job
// no attempt; it runs later on its first attempt.
func TestRefusalCostsNoAttempt(t *testing.T) {
	b := setup(t, setupOpts{workers: 1, slots: 2, extraPool: "http://127.0.0.1:1=1"})
	w := b.workers[0]
	b.enqueue(gpu.EnqueueRequest{ID: "first", Payload: b.gate("go")})
	b.waitStatus("first", gpu.StatusRunning)
	second := b.enqueue(gpu.EnqueueRequest{ID: "second", Payload: "echo ran"})
	if second.Status != gpu.StatusQueued || second.Attempts != 0 {
		t.Fatalf("after refusals: status=%s attempts=%d, want queued with 0 attempts", second.Status, second.Attempts)
	}
	if got := w.Stats().Refused; got != 1 {
		t.Fatalf("worker refused %d requests, want 1 (the 429)", got)
	}
	b.release("go")
	j := b.waitStatus("second", gpu.StatusSucceeded)
	if j.Attempts != 0 || j.Stdout != "ran\n" {
		t.Errorf("second: attempts=%d stdout=%q, want 0 and \"ran\\n\"", j.Attempts, j.Stdout)
	}
}

// TestOutputEnvAndTimeout: the command sees the payload on stdin and the
// job's id, attempt and fence in its environment; stdout and stderr land in
// the bucket; a command past its timeout is killed and the job fails.
func TestOutputEnvAndTimeout(t *testing.T) {
	b := setup(t, setupOpts{workers: 1})
	job := b.enqueue(gpu.EnqueueRequest{ID: "env", Payload: `echo "$BATON_JOB_ID $BATON_JOB_ATTEMPT $BATON_JOB_FENCE"; echo oops >&2; exit 3`})
	j := b.waitStatus(job.ID, gpu.StatusFailed)
	if j.ExitCode == nil || *j.ExitCode != 3 {
		t.Fatalf("exit code %v, want 3", j.ExitCode)
	}
	wantOut := fmt.Sprintf("env 1 %d\n", j.Epoch)
	prefix := "gs://" + b.bucket.BucketName() + "/"
	if !strings.HasPrefix(j.Output, prefix+"outputs/env/") {
		t.Fatalf("output %q, want it under %soutputs/env/", j.Output, prefix)
	}
	for name, want := range map[string]string{"stdout": wantOut, "stderr": "oops\n"} {
		r, err := b.bucket.Object(strings.TrimPrefix(j.Output, prefix) + name).NewReader(b.ctx)
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		got, _ := io.ReadAll(r)
		r.Close()
		if diff := cmp.Diff(want, string(got)); diff != "" {
			t.Errorf("%s (-want,+got):\n%s", name, diff)
		}
	}

	slow := b.enqueue(gpu.EnqueueRequest{ID: "slow", Payload: "sleep 30", Timeout: schedule.Duration(time.Second)})
	j = b.waitStatus(slow.ID, gpu.StatusFailed)
	if !strings.Contains(j.Error, "timed out") || b.workers[0].Stats().Killed != 1 {
		t.Errorf("slow job: error=%q killed=%d, want a timeout kill", j.Error, b.workers[0].Stats().Killed)
	}
}

// TestShutdownRequeuesAtOnce: a worker told to stop (SIGTERM) reports its
// job interrupted, which requeues it with attempts+1 without waiting for
// the lease, and another worker picks it up.
func TestShutdownRequeuesAtOnce(t *testing.T) {
	b := setup(t, setupOpts{workers: 2})
	b.enqueue(gpu.EnqueueRequest{ID: "moved", Payload: b.gate("go")})
	first := b.waitStatus("moved", gpu.StatusRunning)
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	if err := b.workerByURL(first.Worker).Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the job to run elsewhere", func() bool {
		j := b.job("moved")
		return j.Status == gpu.StatusRunning && j.Worker != first.Worker
	})
	b.release("go")
	j := b.waitStatus("moved", gpu.StatusSucceeded)
	if j.Attempts != 1 {
		t.Errorf("attempts=%d, want 1 (the interrupted attempt)", j.Attempts)
	}
}

// TestEnqueueRunIdempotent: a schedule run enqueues one job, however often
// the tick retries.
func TestEnqueueRunIdempotent(t *testing.T) {
	b := setup(t, setupOpts{workers: 0})
	target := schedule.GPUTarget{Payload: "true", Priority: 2}
	id1, err := b.d.EnqueueRun(b.ctx, "nightly@20260101T000000Z", target)
	if err != nil {
		t.Fatal(err)
	}
	id2, err := b.d.EnqueueRun(b.ctx, "nightly@20260101T000000Z", target)
	if err != nil || id1 != id2 {
		t.Fatalf("second enqueue: %q %v, want %q", id2, err, id1)
	}
	j := b.job(id1)
	want := gpu.Job{ID: id1, Status: gpu.StatusQueued, Priority: 2, MaxAttempts: gpu.DefaultMaxAttempts,
		Timeout: schedule.Duration(gpu.DefaultTimeout), Payload: "true", Source: "run:nightly@20260101T000000Z", CreatedAt: j.CreatedAt,
		Tenant: gpu.DefaultTenant}
	if diff := cmp.Diff(want, j); diff != "" {
		t.Errorf("job (-want,+got):\n%s", diff)
	}
}

// TestEnqueueRunTenantTypePreemptible: a schedule run's job carries its gpu
// target's tenant, gpuType and preemptible as an API-enqueued job would,
// and runs on a slot of that type; a gpuType the pool lacks is refused for
// good (ErrInvalidGPUTarget) and queues nothing.
func TestEnqueueRunTenantTypePreemptible(t *testing.T) {
	b := setup(t, setupOpts{workers: 2, types: []string{"", "nvidia-l4"}})
	target := schedule.GPUTarget{Payload: "true", Tenant: "research", GPUType: "nvidia-l4", Preemptible: true}
	id, err := b.d.EnqueueRun(b.ctx, "train@20260101T000000Z", target)
	if err != nil {
		t.Fatal(err)
	}
	j := b.waitStatus(id, gpu.StatusSucceeded)
	if j.Tenant != "research" || j.GPUType != "nvidia-l4" || !j.Preemptible {
		t.Errorf("job tenant=%q gpuType=%q preemptible=%v; want research, nvidia-l4, true (the schedule's gpu target)", j.Tenant, j.GPUType, j.Preemptible)
	}
	if j.Worker != b.workers[1].URL {
		t.Errorf("job ran on %s; want the nvidia-l4 worker %s", j.Worker, b.workers[1].URL)
	}

	const run = "train@20260101T010000Z"
	_, err = b.d.EnqueueRun(b.ctx, run, schedule.GPUTarget{Payload: "true", GPUType: "nvidia-h100"})
	if !errors.Is(err, schedule.ErrInvalidGPUTarget) || !strings.Contains(err.Error(), "gpuType") {
		t.Fatalf("enqueue with a type the pool lacks: err=%v; want ErrInvalidGPUTarget naming gpuType", err)
	}
	if _, err := b.d.Get(b.ctx, schedule.GPUJobID(run)); !errors.Is(err, gpu.ErrNotFound) {
		t.Errorf("job of the refused run: err=%v; want ErrNotFound (nothing queued)", err)
	}
}

// TestCompletionForAnotherJobKeepsTheSlot: a completion hands its slot on
// before the outcome is written, so the hand-off itself must check that
// the slot holds the reported job. One that names the running job's fence
// but another job is refused, and the slot stays with the running job.
func TestCompletionForAnotherJobKeepsTheSlot(t *testing.T) {
	b := setup(t, setupOpts{workers: 1})
	b.enqueue(gpu.EnqueueRequest{ID: "holder", Payload: b.gate("go")})
	running := b.waitStatus("holder", gpu.StatusRunning)
	b.enqueue(gpu.EnqueueRequest{ID: "waiting", Payload: "true"})

	_, err := b.d.Complete(b.ctx, "waiting", gpu.CompleteRequest{Fence: gpu.Fence{Slot: running.Slot, Epoch: running.Epoch}})
	if !errors.Is(err, gpu.ErrStaleFence) {
		t.Fatalf("completion naming another job: err=%v, want ErrStaleFence", err)
	}
	slots, err := b.d.Slots(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(slots) != 1 || slots[0].JobID != "holder" || slots[0].Epoch != running.Epoch {
		t.Fatalf("slot after the refused completion: %+v, want it still holding %q at epoch %d", slots, "holder", running.Epoch)
	}
	if j := b.job("waiting"); j.Status != gpu.StatusQueued {
		t.Errorf("the queued job is %s, want it still queued (its slot is busy)", j.Status)
	}
	b.release("go")
	b.waitStatus("holder", gpu.StatusSucceeded)
	b.waitStatus("waiting", gpu.StatusSucceeded)
}

// TestOutcomeDoesNotWaitForTheNextRun: a completion hands its slot to the
// next job, whose POST /run can take as long as RunTimeout (a worker at
// Cloud Run's max instances answers 429 only after about 10 s). The
// completed job's outcome must be written without waiting for that POST,
// or the worker's callback times out and the job's lease can run out on a
// command that finished. The worker's front is a stalling network edge (a
// test double): it holds the second job's /run until the first job is seen
// succeeded. RunTimeout is longer than the test's patience, so an outcome
// written after the POST makes the test fail rather than wait it out.
func TestOutcomeDoesNotWaitForTheNextRun(t *testing.T) {
	var (
		ws      *worker.Server
		stall   atomic.Bool
		release = make(chan struct{})
		once    sync.Once
	)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/run" && stall.Load() {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		ws.ServeHTTP(w, r)
	}))
	defer front.Close()
	defer once.Do(func() { close(release) })
	b := setup(t, setupOpts{workers: 0, extraPool: front.URL + "=1", runTimeout: 10 * time.Minute})
	// The worker's callbacks pass through a counter on their way to the
	// GPU API. If the outcome waited for the stalled POST, the worker's
	// first :complete would time out (after 30 s) and be sent again.
	var completes atomic.Int64
	api, _ := url.Parse(b.api.URL)
	proxy := httputil.NewSingleHostReverseProxy(api)
	control := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/first:complete") {
			completes.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	defer control.Close()
	ws = worker.New(worker.Config{Command: []string{"sh"}, ControlURL: control.URL, Token: testToken, Logger: quietLogger(), HeartbeatInterval: 100 * time.Millisecond})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ws.Shutdown(ctx)
	}()

	b.enqueue(gpu.EnqueueRequest{ID: "first", Payload: b.gate("go")})
	b.waitStatus("first", gpu.StatusRunning)
	b.enqueue(gpu.EnqueueRequest{ID: "second", Payload: "true"})
	stall.Store(true)
	b.release("go")
	b.waitStatus("first", gpu.StatusSucceeded)
	once.Do(func() { close(release) })
	b.waitStatus("second", gpu.StatusSucceeded)
	if n := completes.Load(); n != 1 {
		t.Errorf("the worker sent :complete for the first job %d times, want 1: the outcome waited for the next job's POST /run", n)
	}
}

// TestUnansweredRunIsNotRunTwice: POST /run reaches the worker, which
// starts the job, but the answer is lost. That is not a refusal: requeuing
// the job would run it a second time. The worker's front is a network edge
// (a test double) that delivers the first /run and then drops the
// connection instead of the answer, before the job's first heartbeat.
func TestUnansweredRunIsNotRunTwice(t *testing.T) {
	var (
		ws   *worker.Server
		sent atomic.Int64
	)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/run" && sent.Add(1) == 1 {
			ws.ServeHTTP(httptest.NewRecorder(), r) // the worker takes the job…
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close() // …and its answer is lost
			return
		}
		ws.ServeHTTP(w, r)
	}))
	defer front.Close()
	b := setup(t, setupOpts{workers: 0, extraPool: front.URL + "=1"})
	ws = worker.New(worker.Config{Command: []string{"sh"}, ControlURL: b.api.URL, Token: testToken, Logger: quietLogger(), HeartbeatInterval: 100 * time.Millisecond})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ws.Shutdown(ctx)
	}()

	marks := filepath.Join(b.dir, "runs")
	b.enqueue(gpu.EnqueueRequest{ID: "once", Payload: fmt.Sprintf("echo run >> %q; sleep 1", marks)})
	j := b.waitStatus("once", gpu.StatusSucceeded)
	// Give a wrongly requeued copy the time to run: the sweep and two
	// dispatches.
	for range 2 {
		if _, _, err := b.d.Sweep(b.ctx); err != nil {
			t.Fatal(err)
		}
	}
	out, err := os.ReadFile(marks)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out), "run\n"); n != 1 || j.Attempts != 0 || ws.Stats().Runs != 1 {
		t.Errorf("the command ran %d times (worker runs %d), attempts %d; want once, with no attempt used", n, ws.Stats().Runs, j.Attempts)
	}
}
