package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/storage"

	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/httpapi"
)

// DefaultStopGrace is how long a stopped command has to exit after
// SIGTERM before the worker sends SIGKILL to its process group.
const DefaultStopGrace = 10 * time.Second

// Config configures a worker Server.
type Config struct {
	// Command is the argv run for each job. Required.
	Command []string
	// ControlURL is the GPUCallback function's base URL (…/GPUCallback);
	// the operators' GPU function refuses callbacks. Callbacks go to
	// ControlURL/gpu/jobs/{id}:heartbeat and :complete. Empty sends no
	// callbacks (only the round-robin benchmark baseline does that).
	ControlURL string
	// Token, when set, is sent as "Authorization: Bearer" on callbacks and
	// required on POST /run (local use). In the cloud it is empty: the
	// HTTPClient adds a Google ID token and Cloud Run IAM guards /run.
	Token string
	// Bucket receives stdout and stderr under outputs/<jobId>/<attempt>/.
	// Nil discards them (the job still gets the first bytes of stdout).
	Bucket *storage.BucketHandle
	// HTTPClient makes the callbacks; nil means a client with a 30 s
	// timeout.
	HTTPClient *http.Client
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// HeartbeatInterval overrides the default of a third of the lease the
	// dispatcher sends with each job.
	HeartbeatInterval time.Duration
	// StopGrace is how long a stopped command (cancelled, preempted,
	// timed out, or the worker shutting down) has between SIGTERM and
	// SIGKILL; 0 means DefaultStopGrace.
	StopGrace time.Duration
	// Env is added to the command's environment (after os.Environ()).
	Env []string
	// QueueLocally makes the worker accept every /run and queue it
	// in-process, as a naive pool behind a round-robin balancer would. It
	// exists only as the benchmark's baseline; baton never sets it.
	QueueLocally bool
	// Observer, when set, sees each job start and finish (benchmarks).
	Observer func(Event)
}

// Event is what an Observer sees.
type Event struct {
	Kind  string // "start" or "finish"
	JobID string
	At    time.Time
}

// Stats counts what the worker saw. The tests use it to prove that no
// slot was ever doubled: a dispatcher that sent a second job to a busy
// worker shows up as Refused.
type Stats struct {
	Runs          int64 `json:"runs"`          // commands started
	Refused       int64 `json:"refused"`       // /run answered 429 because a job was running
	MaxConcurrent int64 `json:"maxConcurrent"` // most commands alive at once
	Completed     int64 `json:"completed"`     // completions the control plane accepted
	Stale         int64 `json:"stale"`         // callbacks answered 409 (stale fence or cancelled)
	Killed        int64 `json:"killed"`        // commands killed (stop, timeout, shutdown)
}

// Server is one GPU worker. It implements http.Handler.
type Server struct {
	cfg Config
	mux *http.ServeMux

	mu       sync.Mutex
	cur      *run // the job whose command is running, if any
	draining bool
	frozen   chan struct{} // non-nil while callbacks are held (Freeze)
	queue    []job
	queueRun bool // the QueueLocally loop is active

	wg                                                      sync.WaitGroup
	runs, refused, completed, stale, killed, alive, maxLive atomic.Int64
}

type run struct {
	req    gpu.RunRequest
	cancel context.CancelCauseFunc
}

// job is a run request and when the worker took it, the fallback start of
// its lease when the request carries no LeaseUntil.
type job struct {
	gpu.RunRequest
	received time.Time
}

var (
	errStopped     = errors.New("stopped: the control plane answered 409 (cancelled or stale fence)")
	errTimedOut    = errors.New("timed out")
	errInterrupted = errors.New("interrupted: the worker is shutting down")
	errLeaseLost   = errors.New("interrupted: no heartbeat was accepted within the lease, so the job may be given to another slot")
)

// New returns a worker server.
func New(cfg Config) *Server {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.ControlURL = strings.TrimRight(cfg.ControlURL, "/")
	s := &Server{cfg: cfg, mux: http.NewServeMux()}
	s.mux.Handle("POST /run", httpapi.RequireToken(cfg.Token, http.HandlerFunc(s.serveRun)))
	s.mux.HandleFunc("GET /healthz", s.serveHealth)
	return s
}

// ServeHTTP serves POST /run and GET /healthz.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Stats returns the counters.
func (s *Server) Stats() Stats {
	return Stats{Runs: s.runs.Load(), Refused: s.refused.Load(), MaxConcurrent: s.maxLive.Load(),
		Completed: s.completed.Load(), Stale: s.stale.Load(), Killed: s.killed.Load()}
}

// Busy reports whether a command is running.
func (s *Server) Busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur != nil
}

func (s *Server) serveRun(w http.ResponseWriter, r *http.Request) {
	received := time.Now()
	var req gpu.RunRequest
	if err := httpapi.DecodeJSON(w, r, 4*gpu.MaxPayloadBytes, &req); err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	var bad *httpapi.Error
	switch {
	case req.JobID == "":
		bad = httpapi.BadRequest("jobId", "is required")
	case req.Slot == "":
		bad = httpapi.BadRequest("slot", "is required: the slot the job was dispatched to")
	case req.Epoch < 1:
		bad = httpapi.BadRequest("epoch", "must be the slot's positive fence epoch, not %d", req.Epoch)
	}
	if bad != nil {
		httpapi.WriteError(w, r, bad)
		return
	}
	s.mu.Lock()
	switch {
	case s.draining:
		s.mu.Unlock()
		tooMany(w, r, "worker is shutting down")
		return
	case s.cfg.QueueLocally:
		s.queue = append(s.queue, job{RunRequest: req, received: received})
		if !s.queueRun {
			s.queueRun = true
			s.wg.Add(1)
			go s.drainQueue() //nolint:contextcheck,gosec // the queue outlives this request (answered 202 at once) and serves later ones' jobs too
		}
		s.mu.Unlock()
	case s.cur != nil:
		busy := s.cur.req.JobID
		s.mu.Unlock()
		s.refused.Add(1)
		tooMany(w, r, "busy with job "+busy)
		return
	default:
		// The run outlives the request, which is answered 202 at once: it
		// keeps the request's values but not its cancellation; s.stop ends it.
		ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
		s.cur = &run{req: req, cancel: cancel}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.execute(ctx, job{RunRequest: req, received: received})
		}()
	}
	httpapi.WriteJSON(w, http.StatusAccepted, map[string]string{"status": "accepted", "jobId": req.JobID})
}

func tooMany(w http.ResponseWriter, r *http.Request, msg string) {
	w.Header().Set("Retry-After", "1")
	httpapi.WriteError(w, r, errcode.New(errcode.ResourceExhausted, msg))
}

// drainQueue runs locally queued jobs one after another (QueueLocally).
func (s *Server) drainQueue() {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		if len(s.queue) == 0 || s.draining {
			s.queueRun = false
			s.mu.Unlock()
			return
		}
		j := s.queue[0]
		s.queue = s.queue[1:]
		ctx, cancel := context.WithCancelCause(context.Background())
		s.cur = &run{req: j.RunRequest, cancel: cancel}
		s.mu.Unlock()
		s.execute(ctx, j)
	}
}

// execute runs one job to the end and reports it. It marks the worker free
// as soon as the command is gone, before reporting, so the dispatcher's
// next /run (sent while handling our report) finds it free.
func (s *Server) execute(ctx context.Context, j job) {
	req := j.RunRequest
	log := s.cfg.Logger.With("job", req.JobID, "slot", req.Slot, "epoch", req.Epoch, "attempt", req.Attempt)
	hbCtx, stopHB := context.WithCancel(ctx)
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		s.heartbeat(hbCtx, j, log)
	}()

	res := s.runCommand(ctx, req, log)
	stopHB()
	<-hbDone

	s.mu.Lock()
	s.cur = nil
	s.mu.Unlock()
	if s.cfg.ControlURL == "" {
		return
	}
	// Report even after a 409: if the job was cancelled under our fence,
	// this frees the slot; if the fence is stale, it is refused again.
	s.report(req, res, log) //nolint:contextcheck // the completion must be delivered even when the run's ctx was cancelled (killed, timed out)
}

// heartbeat beats after min(interval, 1s) (which marks the job running)
// and then every interval, until ctx ends. A 409 or 404 stops the command,
// and so does the job's lease running out without an accepted beat; a 421
// (the control URL names the wrong function) is logged at ERROR and
// retried like a 5xx.
func (s *Server) heartbeat(ctx context.Context, j job, log *slog.Logger) {
	if s.cfg.ControlURL == "" {
		return
	}
	req := j.RunRequest
	every := s.cfg.HeartbeatInterval
	if every <= 0 {
		every = req.Lease.D() / 3
	}
	if every <= 0 {
		every = 10 * time.Second
	}
	body := gpu.HeartbeatRequest{Fence: req.Fence()}
	// Self-fencing: once the job's lease has run out without an accepted
	// beat (the control plane unreachable or answering 5xx), the sweep may
	// hand the job to another slot. Stop the command before that, rather
	// than run the job on two slots at once.
	var expire *time.Timer
	ttl := selfFenceTTL(req.Lease.D())
	if ttl > 0 {
		expire = time.AfterFunc(time.Until(firstDeadline(j, ttl)), func() {
			log.Warn("gpu-worker: lease ran out without an accepted heartbeat; stopping the command")
			s.stop(req.JobID, errLeaseLost)
		})
		defer expire.Stop()
	}
	// The first beat (which marks the job running) waits a moment: a job
	// that ends sooner goes straight to its outcome, which saves a
	// database write on the hot path of short jobs. The claim's lease
	// covers the wait.
	t := time.NewTimer(min(every, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// The dispatcher extends the lease from when it receives the beat,
		// which is after it was sent: counting from the send, not the
		// answer (which may be slow), stays inside that lease.
		sent := time.Now()
		status, err := s.callback(ctx, req, "heartbeat", body)
		switch {
		case status == http.StatusMisdirectedRequest:
			// Not about the job: the control URL names the wrong function.
			// Keep the command and keep beating, as for a 5xx (the
			// self-fence still stops it if no beat is accepted in time).
			s.misdirected(log, "heartbeat", err)
		case status == http.StatusConflict || status == http.StatusNotFound:
			s.stale.Add(1)
			log.Warn("gpu-worker: heartbeat refused; stopping the command", "status", status)
			s.stop(req.JobID, errStopped)
			return
		case err != nil && ctx.Err() == nil:
			log.Warn("gpu-worker: heartbeat failed; will retry", "error", err.Error())
		case err == nil && expire != nil:
			expire.Reset(time.Until(sent.Add(ttl)))
		}
		t.Reset(every)
	}
}

// selfFenceTTL is how long after its lease starts the worker stops a job
// whose lease nothing extended: 90 % of the lease, the margin covering a
// late timer and the kill taking effect. Zero (no lease sent) means no
// self-fence.
func selfFenceTTL(lease time.Duration) time.Duration {
	return lease - lease/10
}

// firstDeadline is when the worker stops job j if no heartbeat is
// accepted: ttl after its lease started. The lease started at the claim,
// before POST /run (which may take RunTimeout), so the deadline counts
// back from the claim's LeaseUntil; a request without one (an older
// dispatcher) counts from receipt. It is never later than the receipt's
// deadline, so a dispatcher clock running ahead cannot stretch it. No
// allowance for clock skew is taken here: the sweep already waits
// gpu.Config.ClockSkew (BATON_CLOCK_SKEW) past a lease before taking the
// job back, and that covers the worker's clock as much as the sweeper's,
// while they differ by less.
func firstDeadline(j job, ttl time.Duration) time.Time {
	deadline := j.received.Add(ttl)
	if !j.LeaseUntil.IsZero() {
		if claim := j.LeaseUntil.Add(ttl - j.Lease.D()); claim.Before(deadline) {
			deadline = claim
		}
	}
	return deadline
}

// stop cancels the running job if it is still jobID.
func (s *Server) stop(jobID string, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && s.cur.req.JobID == jobID {
		s.cur.cancel(cause)
	}
}

type result struct {
	exitCode    int
	output      string
	stdout      string
	errMsg      string
	timedOut    bool
	interrupted bool
}

func (s *Server) runCommand(ctx context.Context, req gpu.RunRequest, log *slog.Logger) result {
	if req.Timeout > 0 {
		t := time.AfterFunc(req.Timeout.D(), func() { s.stop(req.JobID, errTimedOut) })
		defer t.Stop()
	}
	if len(s.cfg.Command) == 0 {
		return result{exitCode: -1, errMsg: "worker has no command (BATON_WORKER_COMMAND)"}
	}
	prefix := fmt.Sprintf("outputs/%s/%d/", req.JobID, req.Attempt)
	stdout, stderr, closeOut, location := s.outputs(ctx, prefix)
	head := &headWriter{limit: gpu.StdoutHeadBytes}

	cmd := exec.CommandContext(ctx, s.cfg.Command[0], s.cfg.Command[1:]...) //nolint:gosec // the operator's configured command (BATON_WORKER_COMMAND), not request input; the payload goes to stdin
	grace := s.cfg.StopGrace
	if grace <= 0 {
		grace = DefaultStopGrace
	}
	setGroup(cmd, func() time.Duration {
		// Self-fencing gets no grace: the lease is running out and the
		// sweep may give the job to another slot, so the command must be
		// gone now, not after a SIGTERM it may ignore.
		if errors.Is(context.Cause(ctx), errLeaseLost) {
			return 0
		}
		return grace
	})
	cmd.WaitDelay = 2 * time.Second
	cmd.Stdin = strings.NewReader(req.Payload)
	cmd.Stdout = io.MultiWriter(stdout, head)
	cmd.Stderr = stderr
	cmd.Env = append(append(os.Environ(), s.cfg.Env...),
		"BATON_JOB_ID="+req.JobID,
		"BATON_JOB_ATTEMPT="+strconv.Itoa(req.Attempt),
		"BATON_JOB_FENCE="+strconv.FormatInt(req.Epoch, 10),
		"BATON_JOB_SLOT="+req.Slot,
	)
	if sh := req.Shard; sh != nil {
		cmd.Env = append(cmd.Env, "BATON_SHARD="+strconv.Itoa(sh.Index), "BATON_SHARD_COUNT="+strconv.Itoa(sh.Count), "BATON_SHARD_PARAM="+sh.Param)
	}
	s.runs.Add(1)
	live := s.alive.Add(1)
	for {
		m := s.maxLive.Load()
		if live <= m || s.maxLive.CompareAndSwap(m, live) {
			break
		}
	}
	s.observe("start", req.JobID)
	err := cmd.Run()
	s.alive.Add(-1)
	s.observe("finish", req.JobID)

	res := result{exitCode: 0, stdout: head.String()}
	if cmd.ProcessState != nil {
		res.exitCode = cmd.ProcessState.ExitCode()
	}
	if err != nil {
		res.errMsg = err.Error()
		if res.exitCode == 0 {
			res.exitCode = -1
		}
	}
	if cause := context.Cause(ctx); cause != nil {
		s.killed.Add(1)
		res.exitCode = -1
		res.errMsg = cause.Error()
		res.timedOut = errors.Is(cause, errTimedOut)
		res.interrupted = errors.Is(cause, errInterrupted) || errors.Is(cause, errLeaseLost)
		if res.timedOut {
			res.errMsg = fmt.Sprintf("timed out after %s", req.Timeout)
		}
	}
	if err := closeOut(); err != nil {
		log.Error("gpu-worker: store output", "error", err.Error())
		if res.errMsg == "" {
			res.errMsg = "storing output: " + err.Error()
		}
	} else {
		res.output = location
	}
	return res
}

func (s *Server) observe(kind, id string) {
	if s.cfg.Observer != nil {
		s.cfg.Observer(Event{Kind: kind, JobID: id, At: time.Now()})
	}
}

// outputs opens the bucket objects for stdout and stderr. The writers use
// a context that outlives a killed command, so what it printed is kept.
func (s *Server) outputs(ctx context.Context, prefix string) (stdout, stderr io.Writer, closeFn func() error, location string) {
	if s.cfg.Bucket == nil {
		return io.Discard, io.Discard, func() error { return nil }, ""
	}
	wctx := context.WithoutCancel(ctx)
	o := s.cfg.Bucket.Object(prefix + "stdout").NewWriter(wctx)
	e := s.cfg.Bucket.Object(prefix + "stderr").NewWriter(wctx)
	o.ContentType, e.ContentType = "text/plain; charset=utf-8", "text/plain; charset=utf-8"
	return o, e, func() error {
		return errors.Join(o.Close(), e.Close())
	}, "gs://" + s.cfg.Bucket.BucketName() + "/" + prefix
}

// report sends :complete, retrying transient failures. The dispatcher
// accepts a repeat, so a lost answer is harmless.
func (s *Server) report(req gpu.RunRequest, res result, log *slog.Logger) {
	body := gpu.CompleteRequest{Fence: req.Fence(), ExitCode: res.exitCode, Output: res.output, Stdout: res.stdout,
		Error: res.errMsg, TimedOut: res.timedOut, Interrupted: res.interrupted}
	backoff := 100 * time.Millisecond
	for try := 1; ; try++ {
		status, err := s.callback(context.Background(), req, "complete", body)
		switch {
		case err == nil:
			s.completed.Add(1)
			return
		case status == http.StatusMisdirectedRequest && try < 6:
			// Retried as a transient failure: the job is not stale.
			s.misdirected(log, "complete", err)
		case status == http.StatusConflict || status == http.StatusNotFound:
			s.stale.Add(1)
			log.Warn("gpu-worker: completion refused (stale fence); the job belongs to someone else now", "status", status)
			return
		case try == 6:
			log.Error("gpu-worker: completion not delivered; the job's lease will expire and it will be retried", "error", err.Error())
			return
		}
		time.Sleep(backoff)
		backoff *= 2
	}
}

// misdirected logs a callback answered 421 Misdirected Request
// (gpu.CodeWrongFunction): BATON_CONTROL_URL names a function that does
// not serve the callbacks (the operators' GPU function instead of
// GPUCallback, or an old URL during an upgrade). That is a configuration
// error, not a verdict on the job, so the caller retries as it does for a
// 5xx; a 404 or 409 would mean the job is no longer this worker's.
func (s *Server) misdirected(log *slog.Logger, action string, err error) {
	log.Error("gpu-worker: callback sent to the wrong function; fix "+config.EnvControlURL+" (the GPUCallback function's URL); will retry",
		"action", action, "controlURL", s.cfg.ControlURL, "error", err.Error())
}

// callback POSTs to the control plane about the job of req. It returns the
// HTTP status (0 when there was none) and an error for anything but 2xx.
// It sends the dispatch's secret in gpu.SecretHeader: the fence in the
// body is public, the secret proves this worker was sent the job.
func (s *Server) callback(ctx context.Context, req gpu.RunRequest, action string, body any) (int, error) {
	jobID := req.JobID
	if err := s.waitThawed(ctx); err != nil {
		return 0, err
	}
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	u := s.cfg.ControlURL + "/gpu/jobs/" + url.PathEscape(jobID) + ":" + action
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := http.NewRequestWithContext(rctx, http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	r.Header.Set("Content-Type", "application/json")
	if req.Secret != "" {
		// None from a dispatcher that predates secrets; the API it runs
		// with does not ask for one.
		r.Header.Set(gpu.SecretHeader, req.Secret)
	}
	if s.cfg.Token != "" {
		r.Header.Set("Authorization", "Bearer "+s.cfg.Token)
	}
	resp, err := s.cfg.HTTPClient.Do(r)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", action, jobID, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("%s %s: %s: %s", action, jobID, resp.Status, bytes.TrimSpace(msg))
	}
	return resp.StatusCode, nil
}

// Shutdown stops taking jobs, stops the running command and reports it
// interrupted (so it is requeued at once), then waits for that report or
// ctx. Cloud Run allows 10 s after SIGTERM.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	s.queue = nil
	if s.cur != nil {
		s.cur.cancel(errInterrupted)
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("gpu-worker: shutdown: %w", ctx.Err())
	}
}

// Freeze holds every callback (heartbeats and completions) until Thaw, as
// if the worker were frozen or cut off from the control plane. Tests and
// the benchmark use it to play a crashed worker whose late completion must
// be refused by the fence.
func (s *Server) Freeze() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen == nil {
		s.frozen = make(chan struct{})
	}
}

// Thaw releases the callbacks held by Freeze.
func (s *Server) Thaw() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen != nil {
		close(s.frozen)
		s.frozen = nil
	}
}

func (s *Server) waitThawed(ctx context.Context) error {
	s.mu.Lock()
	ch := s.frozen
	s.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// headWriter keeps the first limit bytes written to it.
type headWriter struct {
	mu    sync.Mutex
	limit int
	buf   bytes.Buffer
}

func (h *headWriter) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.limit - h.buf.Len(); room > 0 {
		h.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (h *headWriter) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.buf.String()
}
