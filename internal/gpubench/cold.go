package gpubench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/gpu/worker"
	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// Cold-start models for ColdOptions.Mode: what a request meets while its
// Cloud Run instance is still starting.
const (
	// ColdDelay holds the request until the instance is up, as Cloud Run
	// does for a service scaling from zero (up to its request timeout).
	ColdDelay = "delay"
	// ColdRefuse answers 429 until the instance is up, as Cloud Run does
	// when it cannot place an instance at once (no capacity, or at
	// max_instances).
	ColdRefuse = "429"
)

// ColdOptions describes one cold-start measurement: Jobs jobs enqueued at
// once on Workers one-slot workers whose instances are not started. The
// first request to a worker starts its instance, which takes ColdStart.
type ColdOptions struct {
	// Open returns an empty database; each pass (warm, then cold) gets its
	// own. Required.
	Open func(name string) (*mongostore.Store, error)
	// Workers is the pool's size; Jobs how many jobs arrive at t=0
	// (default Workers).
	Workers, Jobs int
	// ColdStart is how long an instance takes to start; Mode is ColdDelay
	// or ColdRefuse.
	ColdStart time.Duration
	Mode      string
	// JobDuration is each job's run time (default 1 s).
	JobDuration time.Duration
	// SweepEvery is how often the dispatcher's sweep runs: in production,
	// every tick (Cloud Scheduler's one minute). A job that no completion
	// or enqueue dispatches again waits for it.
	SweepEvery time.Duration
	// RunTimeout bounds POST /run (gpu.Config.RunTimeout; 0 is the
	// dispatcher's default).
	RunTimeout time.Duration
	// Logger for the dispatcher and workers; nil discards.
	Logger *slog.Logger
}

// ColdDefaults are `baton bench gpu-cold`'s options: 4 workers, an
// instance start of 8 s (a GPU instance with its driver and a small image),
// requests held while it starts, and the production sweep period.
func ColdDefaults() ColdOptions {
	return ColdOptions{Workers: 4, ColdStart: 8 * time.Second, Mode: ColdDelay, JobDuration: time.Second, SweepEvery: time.Minute}
}

// ColdPass is one pass's numbers, from the moment the jobs were enqueued.
type ColdPass struct {
	// FirstStart is the time to the first job's start (time to first
	// dispatch); AllStarted the time until every job had started.
	FirstStart, AllStarted time.Duration
	// Refused counts the 429s the instances answered while starting.
	Refused int64
}

// ColdReport is a warm pass and a cold pass on the same pool and jobs.
type ColdReport struct {
	Options    ColdOptions
	Warm, Cold ColdPass
}

// coldInstance puts the Cloud Run start-up in front of a worker: the first
// request starts the instance, which is ready start later; until then a
// request waits (ColdDelay) or gets 429 (ColdRefuse). It models what baton
// cannot run here, Cloud Run's scaling from zero, and nothing else: once
// up, every request reaches the real worker.
type coldInstance struct {
	next    http.Handler
	start   time.Duration
	mode    string
	once    sync.Once
	ready   chan struct{}
	refused atomic.Int64
}

func newColdInstance(next http.Handler, start time.Duration, mode string) *coldInstance {
	c := &coldInstance{next: next, start: start, mode: mode, ready: make(chan struct{})}
	if start <= 0 {
		close(c.ready)
		c.once.Do(func() {})
	}
	return c
}

func (c *coldInstance) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.once.Do(func() { time.AfterFunc(c.start, func() { close(c.ready) }) })
	select {
	case <-c.ready:
		c.next.ServeHTTP(w, r)
		return
	default:
	}
	if c.mode == ColdRefuse {
		c.refused.Add(1)
		http.Error(w, "instance starting: no instance available", http.StatusTooManyRequests)
		return
	}
	// Read the request now, as Cloud Run's front end does before an
	// instance is there: the server then notices when the dispatcher
	// gives up (RunTimeout) and cancels r's context.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	select {
	case <-c.ready:
		c.next.ServeHTTP(w, r)
	case <-r.Context().Done():
		// The dispatcher gave up (RunTimeout): Cloud Run drops a request
		// whose client has gone, so the worker never sees it.
	}
}

// RunCold measures time to first dispatch on a warm pool and then on a
// cold one, with the same dispatcher, jobs and sweep. The warm pass is the
// baseline the cold one is read against.
func RunCold(ctx context.Context, o ColdOptions) (ColdReport, error) {
	if o.Open == nil {
		return ColdReport{}, errors.New("bench gpu-cold: ColdOptions.Open is nil")
	}
	if o.Workers < 1 {
		return ColdReport{}, errors.New("bench gpu-cold: Workers must be at least 1")
	}
	if o.Jobs < 1 {
		o.Jobs = o.Workers
	}
	if o.JobDuration <= 0 {
		o.JobDuration = time.Second
	}
	if o.SweepEvery <= 0 {
		o.SweepEvery = time.Minute
	}
	if o.Mode != ColdDelay && o.Mode != ColdRefuse {
		return ColdReport{}, fmt.Errorf("bench gpu-cold: Mode must be %q or %q, not %q", ColdDelay, ColdRefuse, o.Mode)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	rep := ColdReport{Options: o}
	var err error
	if rep.Warm, err = coldPass(ctx, o, "benchcoldwarm", 0); err != nil {
		return rep, fmt.Errorf("bench gpu-cold: warm pass: %w", err)
	}
	if rep.Cold, err = coldPass(ctx, o, "benchcoldcold", o.ColdStart); err != nil {
		return rep, fmt.Errorf("bench gpu-cold: cold pass: %w", err)
	}
	return rep, nil
}

func coldPass(ctx context.Context, o ColdOptions, db string, start time.Duration) (ColdPass, error) {
	st, err := o.Open(db)
	if err != nil {
		return ColdPass{}, err
	}
	defer func() { _ = st.Close(context.WithoutCancel(ctx)) }() // a fresh database per pass; a failed close loses nothing measured
	tl := newTimeline(o.Jobs)
	var hmu sync.RWMutex
	handler := http.NotFoundHandler()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hmu.RLock()
		h := handler
		hmu.RUnlock()
		h.ServeHTTP(w, r)
	}))
	defer api.Close()
	var pool gpu.Pool
	var instances []*coldInstance
	for i := 0; i < o.Workers; i++ {
		ws := worker.New(worker.Config{Command: []string{"sh"}, ControlURL: api.URL, Token: token, Logger: o.Logger, Observer: tl.observer(i)})
		ci := newColdInstance(ws, start, o.Mode)
		instances = append(instances, ci)
		srv := httptest.NewServer(ci)
		defer srv.Close()
		pool = append(pool, gpu.Worker{URL: srv.URL, Slots: 1})
	}
	d, err := gpu.New(gpu.Config{Store: st, Pool: pool, Authorize: gpu.BearerAuthorizer(token), Logger: o.Logger, RunTimeout: o.RunTimeout})
	if err != nil {
		return ColdPass{}, err
	}
	if err := d.Init(ctx); err != nil {
		return ColdPass{}, err
	}
	hmu.Lock()
	handler = httpapi.RequireToken(token, gpu.NewHandler(d))
	hmu.Unlock()
	sctx, stopSweep := context.WithCancel(ctx)
	defer stopSweep()
	go func() {
		t := time.NewTicker(o.SweepEvery)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
				_, _, _ = d.Sweep(sctx)
			}
		}
	}()
	begin := time.Now()
	// The jobs arrive at once from separate callers (a tick's runs are
	// executed concurrently, each enqueuing its own job), so no enqueue
	// waits behind another's POST /run.
	errs := make(chan error, o.Jobs)
	for i := 0; i < o.Jobs; i++ {
		id := fmt.Sprintf("c%03d", i)
		tl.submitted(id)
		go func() {
			_, _, err := d.Enqueue(ctx, gpu.EnqueueRequest{ID: id, Payload: payload(o.JobDuration), Timeout: schedule.Duration(time.Hour)})
			if err != nil {
				err = fmt.Errorf("enqueue %s: %w", id, err)
			}
			errs <- err
		}()
	}
	for i := 0; i < o.Jobs; i++ {
		if err := <-errs; err != nil {
			return ColdPass{}, err
		}
	}
	if err := wait(ctx, tl); err != nil {
		return ColdPass{}, err
	}
	tl.mu.Lock()
	starts := make([]time.Duration, 0, len(tl.start))
	for _, at := range tl.start {
		starts = append(starts, at.Sub(begin))
	}
	tl.mu.Unlock()
	sort.Slice(starts, func(a, b int) bool { return starts[a] < starts[b] })
	p := ColdPass{FirstStart: starts[0], AllStarted: starts[len(starts)-1]}
	for _, ci := range instances {
		p.Refused += ci.refused.Load()
	}
	return p, nil
}

// Print writes both passes and, last, one machine-readable key=value line.
func (r ColdReport) Print(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "pool: %d workers, %d jobs of %s at t=0, instance start %s (%s), sweep every %s\n",
		o.Workers, o.Jobs, o.JobDuration, o.ColdStart, o.Mode, o.SweepEvery)
	fmt.Fprintf(w, "%-6s %14s %14s %8s\n", "pool", "first_start", "all_started", "refused")
	for _, x := range []struct {
		name string
		p    ColdPass
	}{{"warm", r.Warm}, {"cold", r.Cold}} {
		fmt.Fprintf(w, "%-6s %14s %14s %8d\n", x.name, x.p.FirstStart.Round(time.Millisecond), x.p.AllStarted.Round(time.Millisecond), x.p.Refused)
	}
	fmt.Fprintf(w, "cold_first_dispatch_ms=%d cold_all_started_ms=%d warm_first_dispatch_ms=%d warm_all_started_ms=%d cold_refused=%d cold_start_ms=%d mode=%s\n",
		r.Cold.FirstStart.Milliseconds(), r.Cold.AllStarted.Milliseconds(), r.Warm.FirstStart.Milliseconds(), r.Warm.AllStarted.Milliseconds(),
		r.Cold.Refused, o.ColdStart.Milliseconds(), o.Mode)
}
