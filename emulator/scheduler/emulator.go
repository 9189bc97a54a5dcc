package scheduler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// Header names the real service sends.
const (
	HeaderScheduler    = "X-CloudScheduler"
	HeaderJobName      = "X-CloudScheduler-JobName"
	HeaderScheduleTime = "X-CloudScheduler-ScheduleTime"
	UserAgent          = "Google-Cloud-Scheduler"
)

// StatusDeadlineExceeded is the Attempt.Error of an attempt cut off by the
// attempt deadline, as the real execution log names it.
const StatusDeadlineExceeded = "DEADLINE_EXCEEDED"

// errDeadline is the cancel cause of an attempt that ran out of time.
var errDeadline = errors.New(StatusDeadlineExceeded)

// Attempt is one HTTP call, as recorded for tests and logs.
type Attempt struct {
	// Job is the short job name.
	Job string
	// ScheduleTime is the header value's time; the same for every retry of
	// one execution.
	ScheduleTime time.Time
	// Number counts attempts within one execution from 1.
	Number int
	// Start and End are clock times.
	Start, End time.Time
	// Status is the HTTP status, 0 when no answer arrived.
	Status int
	// Error is empty on a 2xx; otherwise the reason ("HTTP 404",
	// DEADLINE_EXCEEDED, or a transport error).
	Error string
}

// OK reports whether the attempt got a 2xx.
func (a Attempt) OK() bool { return a.Error == "" }

// Options configures New.
type Options struct {
	// Clock defaults to RealClock.
	Clock Clock
	// Client sends the requests; nil means a plain http.Client (the attempt
	// deadline, not a client timeout, bounds each attempt).
	Client *http.Client
	// Logger receives one line per attempt; failures at WARNING.
	Logger *slog.Logger
}

// Emulator runs jobs. It is safe for concurrent use.
type Emulator struct {
	clock  Clock
	client *http.Client
	log    *slog.Logger

	// stopCtx ends schedules and backoff waits (Shutdown, Close); hardCtx
	// also cancels requests in flight (Close, or Shutdown's ctx ending).
	stopCtx, hardCtx context.Context
	stop, hard       context.CancelFunc
	wg               sync.WaitGroup

	mu       sync.Mutex
	jobs     map[string]*jobEntry
	started  bool
	attempts []Attempt
	changed  chan struct{} // closed and replaced on every new attempt
}

type jobEntry struct {
	job   Job
	sched schedule
}

// New returns a stopped emulator with no jobs.
func New(opts Options) *Emulator {
	if opts.Clock == nil {
		opts.Clock = RealClock{}
	}
	if opts.Client == nil {
		// A transport of its own: httptest.Server.Close calls
		// CloseIdleConnections on http.DefaultTransport, which broke an
		// attempt of another emulator sharing it ("transport connection
		// broken: CloseIdleConnections called", seen in CI).
		opts.Client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Emulator{
		clock: opts.Clock, client: opts.Client, log: opts.Logger,
		jobs: map[string]*jobEntry{}, changed: make(chan struct{}),
	}
	e.hardCtx, e.hard = context.WithCancel(context.Background())
	e.stopCtx, e.stop = context.WithCancel(e.hardCtx)
	return e
}

// merge returns a context that ends when either parent ends.
func merge(a, b context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return ctx, func() { stop(); cancel() }
}

// AddJob validates and adds a job. If the emulator is started, the job's
// schedule starts at once. A name may be added once.
func (e *Emulator) AddJob(j Job) error {
	s, err := j.validate()
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, dup := e.jobs[j.Name]; dup {
		return fmt.Errorf("%w %q: already added", ErrInvalidJob, j.Name)
	}
	je := &jobEntry{job: j, sched: s}
	e.jobs[j.Name] = je
	if e.started {
		e.startLocked(je)
	}
	return nil
}

// Start runs every job on its schedule until Close.
func (e *Emulator) Start() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started {
		return
	}
	e.started = true
	for _, je := range e.jobs {
		e.startLocked(je)
	}
}

func (e *Emulator) startLocked(je *jobEntry) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.loop(je)
	}()
}

// Close stops every schedule, cancels attempts in flight and waits for the
// loops to end.
func (e *Emulator) Close() {
	e.hard()
	e.wg.Wait()
}

// Shutdown stops every schedule and retry, lets attempts in flight finish
// (so a tick being served is not cut off), and cancels them only if ctx
// ends first. It waits for the job loops; forced runs (TriggerNow) end on
// their own.
func (e *Emulator) Shutdown(ctx context.Context) error {
	e.stop()
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
		e.hard()
		return nil
	case <-ctx.Done():
		e.hard()
		<-done
		return fmt.Errorf("scheduler: shutdown: %w", ctx.Err())
	}
}

// loop fires the job at each scheduled time. Times that pass while an
// execution (with its retries) runs are skipped.
func (e *Emulator) loop(je *jobEntry) {
	next := je.sched.Next(e.clock.Now())
	for {
		t := e.clock.NewTimer(next.Sub(e.clock.Now()))
		select {
		case <-e.stopCtx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		e.execute(e.stopCtx, e.hardCtx, je.job, next)
		if e.stopCtx.Err() != nil {
			return
		}
		now := e.clock.Now()
		next = je.sched.Next(next)
		for !next.After(now) {
			next = je.sched.Next(next) // skipped while retries ran
		}
	}
}

// TriggerNow runs one execution of the job at once (the real "force run"),
// with its retries, and returns its attempts. The schedule time is now.
func (e *Emulator) TriggerNow(ctx context.Context, name string) ([]Attempt, error) {
	e.mu.Lock()
	je, ok := e.jobs[name]
	e.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrNoJob, name)
	}
	// Shutdown ends the retries of a forced run; Close also its request.
	waitCtx, stopWait := merge(ctx, e.stopCtx)
	defer stopWait()
	reqCtx, stopReq := merge(ctx, e.hardCtx)
	defer stopReq()
	return e.execute(waitCtx, reqCtx, je.job, e.clock.Now()), nil
}

// execute makes attempts for one schedule time until one gets a 2xx or the
// retry config is spent. waitCtx ends the retries; reqCtx the request in
// flight.
func (e *Emulator) execute(waitCtx, reqCtx context.Context, j Job, scheduled time.Time) []Attempt {
	scheduled = scheduled.Truncate(time.Second).UTC()
	retry := j.Retry.withDefaults()
	first := e.clock.Now()
	var out []Attempt
	for n := 1; ; n++ {
		a := e.attempt(reqCtx, j, scheduled, n)
		out = append(out, a)
		e.record(a)
		if a.OK() || waitCtx.Err() != nil {
			return out
		}
		retries := n - 1
		countDone := retries >= retry.RetryCount
		durationDone := retry.MaxRetryDuration == 0 || e.clock.Now().Sub(first) >= retry.MaxRetryDuration
		if countDone && durationDone {
			return out
		}
		t := e.clock.NewTimer(retry.Backoff(retries))
		select {
		case <-waitCtx.Done():
			t.Stop()
			return out
		case <-t.C():
		}
	}
}

// attempt sends one request, cut off at the attempt deadline on the
// emulator's clock.
func (e *Emulator) attempt(ctx context.Context, j Job, scheduled time.Time, n int) Attempt {
	a := Attempt{Job: j.Name, ScheduleTime: scheduled, Number: n, Start: e.clock.Now()}
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	deadline := e.clock.NewTimer(j.AttemptDeadline)
	defer deadline.Stop()
	go func() {
		select {
		case <-deadline.C():
			cancel(errDeadline)
		case <-actx.Done():
		}
	}()

	req, err := http.NewRequestWithContext(actx, j.Method, j.URL, bytes.NewReader(j.Body))
	if err != nil {
		a.Error = fmt.Sprintf("build request: %v", err)
	} else {
		for k, v := range j.Headers {
			req.Header.Set(k, v)
		}
		req.Header.Set(HeaderScheduler, "true")
		req.Header.Set(HeaderJobName, j.FullName())
		req.Header.Set(HeaderScheduleTime, scheduled.Format(time.RFC3339))
		req.Header.Set("User-Agent", UserAgent)
		if j.Token != "" {
			req.Header.Set("Authorization", "Bearer "+j.Token)
		}
		resp, err := e.client.Do(req)
		switch {
		case err != nil && errors.Is(context.Cause(actx), errDeadline):
			a.Error = StatusDeadlineExceeded
		case err != nil:
			a.Error = err.Error()
		default:
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			_ = resp.Body.Close() // only read, and the status is already in hand
			a.Status = resp.StatusCode
			if errors.Is(context.Cause(actx), errDeadline) {
				a.Error = StatusDeadlineExceeded
			} else if resp.StatusCode < 200 || resp.StatusCode > 299 {
				a.Error = fmt.Sprintf("HTTP %d", resp.StatusCode)
			}
		}
	}
	a.End = e.clock.Now()
	level := slog.LevelInfo
	if !a.OK() {
		level = slog.LevelWarn
	}
	e.log.Log(ctx, level, "scheduler: attempt", "job", j.FullName(), "url", j.URL,
		"scheduleTime", scheduled.Format(time.RFC3339), "attempt", n, "status", a.Status, "error", a.Error)
	return a
}

func (e *Emulator) record(a Attempt) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.attempts = append(e.attempts, a)
	close(e.changed)
	e.changed = make(chan struct{})
}

// Attempts returns a copy of every attempt so far, oldest first; name ""
// means every job.
func (e *Emulator) Attempts(name string) []Attempt {
	e.mu.Lock()
	defer e.mu.Unlock()
	return filter(e.attempts, name)
}

// WaitAttempts blocks until the job (every job for "") has at least n
// recorded attempts, and returns them; it fails when ctx ends first.
func (e *Emulator) WaitAttempts(ctx context.Context, name string, n int) ([]Attempt, error) {
	for {
		e.mu.Lock()
		got, ch := filter(e.attempts, name), e.changed
		e.mu.Unlock()
		if len(got) >= n {
			return got, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return got, fmt.Errorf("scheduler: waiting for %d attempts of %q (have %d): %w", n, name, len(got), ctx.Err())
		}
	}
}

func filter(all []Attempt, name string) []Attempt {
	out := []Attempt{}
	for _, a := range all {
		if name == "" || a.Job == name {
			out = append(out, a)
		}
	}
	return out
}
