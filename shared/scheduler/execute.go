package scheduler

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// ReasonBuffered starts the reason of a run that buffer_one collapsed into
// the schedule's misfire flag.
const ReasonBuffered = "buffered (buffer_one)"

// execute runs the work, one goroutine per schedule (bounded by Workers),
// and waits for all of it.
func (e *Engine) execute(ctx context.Context, work []*scheduleWork, c *counters) {
	sem := make(chan struct{}, e.cfg.Workers)
	var wg sync.WaitGroup
	for _, w := range work {
		if w.s.Overlap == schedule.OverlapAllow {
			// No job lease: every run goes at once.
			for _, r := range w.runs {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer func() { <-sem; wg.Done() }()
					e.runAllow(ctx, &w.s, r, c)
				}()
			}
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ctx := withLane(ctx, w) // a shard's runs: its own job lease
			for i, r := range w.runs {
				if ctx.Err() != nil {
					return
				}
				if i > 0 && !fits(ctx, &w.s) {
					// The rest stay pending: the task is delivered again
					// (Execute answers 503), or the sweep recovers them.
					e.log.Info("run budget spent; the rest of the batch waits for the next delivery", "schedule", w.s.ID, "left", len(w.runs)-i)
					return
				}
				// The batch's later runs are older fire times than any
				// misfire buffered meanwhile: it runs after the last.
				if !e.runLeased(withMoreFollow(ctx, i < len(w.runs)-1), &w.s, r, c) {
					return // the rest wait behind r
				}
			}
		}()
	}
	wg.Wait()
}

// runAllow executes a run of an allow schedule: no job lease, so its writes
// are conditional on the run's status instead of fenced.
func (e *Engine) runAllow(ctx context.Context, s *schedule.Schedule, r *runDoc, c *counters) {
	e.claimThenRun(ctx, s, r, e.cfg.Leases.Holder(), 0, c)
}

// claimThenRun moves r from pending to running as holder, under job lease
// epoch (0 for an allow run, which has none), and executes it only if that
// claim won: whoever moves a run out of pending is its one executor, which
// makes execution exactly-once. A run that is no longer pending (another
// executor has it, or it is done) is left alone. Every later write to the
// running run carries epoch too, so leased runs stay fenced and allow runs
// stay conditional.
func (e *Engine) claimThenRun(ctx context.Context, s *schedule.Schedule, r *runDoc, holder string, epoch int64, c *counters) {
	ttl := leaseTTL(s)
	now := e.now().UTC()
	// The claim token tells this claim from any other, even one by the
	// same holder at the same epoch (two deliveries of an allow run in one
	// process): a claim whose answer was lost is ours only if it is there
	// (Claim reads it back).
	// Its concurrency group's slot first (group.go): a run that must wait
	// is left pending, recorded waiting.
	slot, ok := e.groupSlot(ctx, s, r)
	if !ok {
		return
	}
	if slot != nil {
		var done func()
		ctx, done = e.holdSlot(ctx, s, slot)
		defer done()
	}
	claim := store.RunClaim{Token: claimToken(), Holder: holder, Epoch: epoch, At: now, SweepAt: now.Add(ttl + e.cfg.Leases.Skew()), Delivery: deliveryFrom(ctx)}
	if e.gpuHandOff(s) {
		// Recorded with the claim, before the enqueue: whatever happens
		// next, the sweep knows which job finishes this run.
		r.GPUJob = schedule.GPUJobID(r.ID)
		claim.GPUJob = r.GPUJob
	}
	if runJobHandOff(s) {
		// The "starting" mark, recorded before RunJob: whatever happens
		// next, the sweep looks for this run's execution before starting
		// one (runjob.go).
		r.RunJob = s.Target.CloudRunJob.Job
		claim.RunJob = r.RunJob
	}
	err := e.runs.Claim(ctx, r.ID, claim)
	if err != nil {
		if !errors.Is(err, store.ErrConflict) {
			c.errors.Add(1)
			e.log.Error("claim run failed", "run", r.ID, "err", err)
		}
		return
	}
	c.fired.Add(1)
	c.settle(r.ID, schedule.RunRunning)
	r.StartedAt = now
	e.metrics.RunStarted(ctx, r.ScheduleID, string(r.Source), r.FireTime, now)
	e.runTarget(ctx, s, r, ttl, epoch, c)
}

// claimToken is a random id for one claim.
func claimToken() string {
	var b [8]byte
	_, _ = crand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

// retryBackoff is the delay before retrying a run that failed on attempt
// (from 1): base, doubling per attempt, never more than
// schedule.MaxRetryBackoff.
func retryBackoff(base time.Duration, attempt int) time.Duration {
	if base <= 0 {
		base = schedule.DefaultRetryBackoff
	}
	for i := 1; i < attempt && base < schedule.MaxRetryBackoff; i++ {
		base *= 2
	}
	return min(base, schedule.MaxRetryBackoff)
}

// runLeased executes a run under the schedule's job lease, applying the
// overlap policy when the previous run still holds it.
//
// The policy is for a run that meets an earlier run still running. A
// holder that runs a sibling of the same tick leaves r pending behind it;
// a holder that runs nothing (it is claiming or releasing) is waited for
// briefly, and then r is left pending too, so that a duplicate delivery
// racing the first, or a fire that comes as the last run ends, is never
// skipped or buffered for an overlap that is not there.
func (e *Engine) runLeased(ctx context.Context, s *schedule.Schedule, r *runDoc, c *counters) (next bool) {
	var l *lease.Lease
	wait := 50 * time.Millisecond
	for try := 1; ; try++ {
		var err error
		l, err = e.cfg.Leases.Acquire(ctx, jobLeaseFor(ctx, s.ID), leaseTTL(s))
		if err == nil {
			break
		}
		var held *lease.HeldError
		if !errors.As(err, &held) {
			// Left pending: the sweep picks it up when the reservation ends.
			c.errors.Add(1)
			e.log.Error("job lease acquire failed; run left pending for the sweep", "run", r.ID, "err", err)
			return false
		}
		if r.Source == schedule.SourceRetry || r.Source == schedule.SourceMisfire {
			// Not new fire times: they stay pending, and the holder runs
			// them before it releases (drainWaiting). Left to later
			// deliveries alone, a retry of a schedule whose runs keep the
			// lease held would meet it every time.
			e.markWaiting(ctx, r)
			e.dueAtExpiry(ctx, r, held)
			return false
		}
		switch e.holderOf(ctx, r, held) {
		case holderRunsSibling:
			if later := e.laterStarted(ctx, s, r); later != nil {
				// The holder runs a later fire time than r's: r can never
				// start in order behind it.
				e.superseded(ctx, s, r, later, c)
				return true
			}
			e.log.Info("job lease held by a run of the same tick; run left pending behind it", "run", r.ID, "epoch", held.Epoch)
			e.dueAtExpiry(ctx, r, held)
			return false
		case holderIdle:
			if try > idleHolderWaits {
				// Still running nothing (slow to claim, or to hand off a
				// retry before releasing): no run overlaps r, so no policy
				// applies. It stays pending; the queue delivers it again,
				// or the sweep recovers it.
				e.log.Info("job lease held by a holder that runs nothing; run left pending", "run", r.ID, "epoch", held.Epoch)
				e.dueAtExpiry(ctx, r, held)
				return false
			}
			select {
			case <-ctx.Done():
				return false
			case <-time.After(wait):
			}
			wait *= 2
			if !e.stillPending(ctx, r) {
				return false // the holder claimed it: a duplicate delivery, which goes on in order
			}
			continue
		}
		e.onHeld(ctx, s, r, fmt.Sprintf("job lease %s held by %s (epoch %d) until %s", held.Name, held.Holder, held.Epoch, held.ExpiresAt.UTC().Format(time.RFC3339)), c)
		return true
	}
	if busy, err := e.gpuBusy(ctx, s, r.ID); busy != nil || err != nil {
		// The previous run's GPU job is still in the pool: it holds no
		// job lease, but it is the earlier run r overlaps.
		e.release(ctx, s, l)
		if err != nil {
			// Unknown: no policy applies to an overlap nobody saw. Left
			// pending for the queue or the sweep.
			c.errors.Add(1)
			e.log.Error("gpu overlap check failed; run left pending", "run", r.ID, "err", err)
			return false
		}
		if r.Source == schedule.SourceRetry || r.Source == schedule.SourceMisfire {
			return false
		}
		e.onHeld(ctx, s, r, fmt.Sprintf("run %s is still running as %s", busy.ID, handedOffWork(busy)), c)
		return true
	}
	if later := e.laterStarted(ctx, s, r); later != nil {
		// Order within the schedule: a later fire time has started, so
		// this older one does not start after it.
		e.superseded(ctx, s, r, later, c)
		e.misfireLoop(ctx, s, l, c)
		e.drainWaiting(ctx, s, l, c)
		e.releaseJob(ctx, s, l, c)
		return true
	}
	e.claimAndRun(ctx, s, l, r, c)
	e.misfireLoop(ctx, s, l, c)
	e.drainWaiting(ctx, s, l, c)
	e.releaseJob(ctx, s, l, c)
	return true
}

type moreFollowKey struct{}

// withMoreFollow records whether more runs of the executor's batch follow
// the one it is about to run.
func withMoreFollow(ctx context.Context, more bool) context.Context {
	return context.WithValue(ctx, moreFollowKey{}, more)
}

// moreFollow reports whether the run being executed is not its batch's
// last: the misfire loop then leaves the flag for the last one.
func moreFollow(ctx context.Context) bool {
	more, _ := ctx.Value(moreFollowKey{}).(bool)
	return more
}

// ReasonSuperseded ends the reason of an older fire of a skip or
// buffer_one schedule recorded skipped because a later fire time of the
// same schedule had already started.
const ReasonSuperseded = "a later fire time has already started; an older one never starts after it"

// laterStarted returns the run of a later fire time of r's schedule (of
// its shard) that has already started, when r is a fire time (scheduled or
// catch-up) of a skip or buffer_one schedule; nil otherwise, or when that
// cannot be read (the run then executes, as before the rule). Asked under
// the job lease, which every start of such a schedule holds, so no later
// fire can start between the read and r's claim.
//
// This is the order rule (docs/scheduler.md): after a crash, an older
// fire's run may still be pending (its task redelivered, or recovered by
// the sweep) when a later fire, decided after the restart, has already
// run. Executing the older one then would run the schedule's fire times
// out of order.
func (e *Engine) laterStarted(ctx context.Context, s *schedule.Schedule, r *runDoc) *runDoc {
	switch {
	case s.Overlap == schedule.OverlapAllow:
		return nil
	case r.Source == schedule.SourceScheduled, r.Source == schedule.SourceCatchup, r.Source == schedule.SourceMisfire:
		// A fire time's first run, or buffer_one's run of its buffered
		// window's latest fire (which may have waited for the lease).
	default:
		return nil // a retry re-runs a fire that had started; an operator's run runs
	}
	later, err := e.runs.StartedAfter(ctx, s.ID, r.Shard, r.FireTime)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			e.log.Warn("look for a later fire that has started failed; the run executes", "run", r.ID, "err", err)
		}
		return nil
	}
	return later
}

// superseded records r skipped because the later fire later has started:
// under skip, with a reason that says so; under buffer_one, as buffered
// into the later fire, which has run in its place (no misfire flag: that
// would run r's window again, after a later fire, which is the disorder
// the rule prevents).
func (e *Engine) superseded(ctx context.Context, s *schedule.Schedule, r, later *runDoc, c *counters) {
	now := e.now().UTC().Truncate(time.Millisecond)
	who := fmt.Sprintf("run %s (fire time %s) started at %s", later.ID, later.FireTime.UTC().Format(time.RFC3339), later.StartedAt.UTC().Format(time.RFC3339))
	reason := "overlap skip: " + ReasonSuperseded + "; " + who
	ev := schedule.EventSkipped
	if s.Overlap == schedule.OverlapBufferOne {
		reason = ReasonBuffered + ": " + ReasonSuperseded + "; " + who + "; folded into it"
		ev = schedule.EventMisfire
	}
	n := e.notice(s, ev, now)
	if err := e.runs.Skip(ctx, r.ID, reason, now, e.expireAt(s, now), n); err != nil {
		if !errors.Is(err, store.ErrConflict) {
			c.errors.Add(1)
			e.log.Error("record superseded run failed", "run", r.ID, "err", err)
		}
		return
	}
	c.skipped.Add(1)
	e.log.Info("older fire skipped: a later fire time has already started", "run", r.ID, "later", later.ID)
	e.metrics.RunFinished(ctx, r.ScheduleID, string(r.Source), string(schedule.RunSkipped), time.Time{}, now)
	skipped := *r
	skipped.Status, skipped.Reason, skipped.FinishedAt = schedule.RunSkipped, reason, now
	if n != nil {
		skipped.NotifyAt, skipped.NotifyEvent = n.At, n.Event
	}
	e.deliverSoon(ctx, s, skipped)
}

// dueAtExpiry makes a run left pending behind the held job lease due for
// the sweep when that lease would expire, if its sweepAt is later (the
// deciding tick's reservation, a minute). A holder that died between
// acquiring and claiming, or while releasing, has no running run for the
// failover to find, and the queue may give up on the run's task first:
// this bounds the wait by the lease TTL plus one tick. A live holder
// renews, and the sweep's delivery meets it again and moves the mark on.
// Conditional on the sweepAt read; best effort.
func (e *Engine) dueAtExpiry(ctx context.Context, r *runDoc, held *lease.HeldError) {
	at := held.ExpiresAt.UTC()
	if at.IsZero() || !r.SweepAt.After(at) {
		return
	}
	if err := e.moveSweep(ctx, r.ID, schedule.RunPending, r.SweepAt, at); err != nil {
		if !errors.Is(err, store.ErrConflict) {
			e.log.Warn("mark a run behind a held lease due at its expiry failed; it waits for its reservation", "run", r.ID, "err", err)
		}
		return
	}
	r.SweepAt = at
}

// markWaiting records on a due retry or misfire run that met the job lease
// held, so that the holder runs it next. Best effort: unmarked, the run is
// still delivered again and recovered by the sweep.
func (e *Engine) markWaiting(ctx context.Context, r *runDoc) {
	err := e.runs.MarkWaiting(ctx, r.ID)
	if err != nil && !errors.Is(err, store.ErrConflict) {
		e.log.Warn("mark a retry waiting for the job lease failed; it is delivered again", "run", r.ID, "err", err)
	}
}

// maxDrain bounds the waiting runs one holder takes on before releasing.
const maxDrain = 10

// drainWaiting runs, under the job lease l and oldest fire first, the
// retries and misfire runs that met l held and were marked waiting. Only
// due runs are marked (their task came, or the sweep recovered them), so
// none runs before its backoff. One read per leased execution.
func (e *Engine) drainWaiting(ctx context.Context, s *schedule.Schedule, l *lease.Lease, c *counters) {
	if busy, err := e.gpuBusy(ctx, s, ""); busy != nil || err != nil {
		return // the run this holder handed to the GPU pool is still going
	}
	for range maxDrain {
		if ctx.Err() != nil || l.Context().Err() != nil || !fits(ctx, s) {
			return
		}
		rd, err := e.runs.NextWaiting(ctx, s.ID, laneOf(ctx))
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				e.log.Warn("look for runs waiting for the job lease failed; they are delivered again", "schedule", s.ID, "err", err)
			}
			return
		}
		if later := e.laterStarted(ctx, s, rd); later != nil {
			// A misfire run that waited while a later fire started.
			e.superseded(ctx, s, rd, later, c)
			continue
		}
		e.log.Info("running a retry that waited for the job lease", "run", rd.ID)
		e.claimAndRun(ctx, s, l, rd, c)
		if !e.stillPending(ctx, rd) {
			continue
		}
		return // the claim did not take (a fault): its deliveries or the sweep will
	}
}

// claimAndRun executes r under the job lease l: the claim and every write
// to the run are fenced with l's epoch.
func (e *Engine) claimAndRun(ctx context.Context, s *schedule.Schedule, l *lease.Lease, r *runDoc, c *counters) {
	// The claim and the target run on the lease's context: a holder whose
	// lease has already ended (a misfire rerun after a lost renew, say) must
	// not claim, and when the lease is lost mid-run the run is cancelled at
	// once. The run stays pending for the sweep.
	rctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(l.Context(), func() { cancel(context.Cause(l.Context())) }) //nolint:contextcheck // the AfterFunc callback only cancels; it makes no call that takes a context
	defer func() { stop(); cancel(nil) }()
	// Checked on the lease's own context: AfterFunc on an already-ended
	// context cancels rctx from another goroutine, a moment later.
	if lctx := l.Context(); lctx.Err() != nil {
		e.log.Warn("job lease ended before the claim; run left pending for the sweep", "run", r.ID, "cause", context.Cause(lctx)) //nolint:contextcheck // the lease's own context on purpose (see above)
		return
	}
	// As the claim records them: the target gets the epoch as its fence.
	r.Holder, r.Epoch = l.Holder(), l.Epoch()
	e.claimThenRun(rctx, s, r, l.Holder(), l.Epoch(), c)
}

// runTarget executes r's target while heartbeating the run document, then
// records the outcome and, on failure, the retry. Its writes to the running
// run are fenced by the claim's epoch, or conditional on the run's status
// alone for an allow run (epoch 0).
func (e *Engine) runTarget(ctx context.Context, s *schedule.Schedule, r *runDoc, ttl time.Duration, epoch int64, c *counters) {
	var (
		out    string
		runErr error
	)
	if e.gpuHandOff(s) {
		// The job outlives this executor: the sweep finishes the run
		// (gpurun.go), unless the pool refuses the target for good.
		if runErr = e.handToGPU(ctx, s, r, epoch, c); runErr == nil {
			return
		}
	} else if runJobHandOff(s) {
		// The execution outlives this executor too (runjob.go).
		if runErr = e.handToRunJob(ctx, s, r, epoch, c); runErr == nil {
			return
		}
	} else {
		out, runErr = e.callWithHeartbeat(ctx, s, r, ttl, epoch)
	}
	e.recordRun(ctx, s, r, ttl, out, runErr, epoch, c)
}

// callWithHeartbeat calls r's target while heartbeating the run document
// (under the claim's epoch), and stops the call when a heartbeat is refused
// (the run was failed over, or a newer holder fenced this one out).
func (e *Engine) callWithHeartbeat(ctx context.Context, s *schedule.Schedule, r *runDoc, ttl time.Duration, epoch int64) (string, error) {
	tctx, cancel := context.WithCancelCause(ctx)
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		t := time.NewTicker(lease.HeartbeatInterval(ttl))
		defer t.Stop()
		for {
			select {
			case <-tctx.Done():
				return
			case <-t.C:
			}
			now := e.now().UTC()
			err := e.runs.Heartbeat(tctx, r.ID, epoch, now, now.Add(ttl+e.cfg.Leases.Skew()))
			if errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrContended) {
				// Failed over, or fenced out by a newer holder: stop.
				// Contention that outlasted the retries refused nothing:
				// the next beat tries again, as after any failed beat.
				cancel(fmt.Errorf("run %s: heartbeat refused: %w", r.ID, err))
				return
			}
		}
	}()
	out, runErr := e.callTarget(tctx, s, &r.Run)
	if cause := context.Cause(tctx); runErr != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		runErr = fmt.Errorf("%w (cause: %v)", runErr, cause) //nolint:errorlint // the outcome is the target's error; the cancel cause (lease lost, heartbeat refused) is only described, so how the outcome is classified is unchanged
	}
	cancel(nil)
	<-hbDone
	return out, runErr
}

// recordRun records the outcome of r's target call and, on failure, the
// retry it is owed.
func (e *Engine) recordRun(ctx context.Context, s *schedule.Schedule, r *runDoc, ttl time.Duration, out string, runErr error, epoch int64, c *counters) {
	// Milliseconds, as the database keeps them, so that a read-back of a
	// write whose answer was lost compares equal.
	now := e.now().UTC().Truncate(time.Millisecond)
	o := store.RunOutcome{Status: schedule.RunSucceeded, FinishedAt: now, Output: truncate(out, 1024)}
	o.ExpireAt = e.expireAt(s, now) // retention.go
	if runErr != nil {
		o.Status = schedule.RunFailed
		o.Error = truncate(runErr.Error(), 1024)
	}
	status := o.Status
	if runErr != nil && r.Attempt < max(s.Retry.MaxAttempts, 1) {
		// A retry is owed: the failed run keeps a sweepAt until its retry
		// is recorded, so that the sweep records it if this executor
		// cannot (the insert fails, or the process dies first).
		o.RetryOwedAt = now.Add(e.reservation())
	}
	if ev := outcomeEvent(&r.Run, o.Status); ev != "" {
		// Queued by the outcome's own write: both land, or neither.
		o.Notice = e.notice(s, ev, now)
	}
	// Leased runs retry the outcome for as long as they hold the lease
	// (ctx ends when it is lost), bounded; an allow run has no lease to
	// keep the sweep off it, only its last heartbeat's window.
	bound := maxOutcomeRetry
	if r.Epoch == 0 {
		bound = ttl
	}
	if err := e.recordOutcome(ctx, r.ID, epoch, o, bound); err != nil {
		// Failed over meanwhile, or fenced out: the sweep (or the newer
		// holder) owns the outcome.
		c.errors.Add(1)
		e.log.Warn("record run outcome refused", "run", r.ID, "status", status, "err", err)
		return
	}
	c.settle(r.ID, status)
	e.deliverSoon(ctx, s, finished(r, o))
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer wcancel()
	e.metrics.RunFinished(ctx, r.ScheduleID, string(r.Source), string(status), r.StartedAt, now)
	if runErr == nil {
		c.succeeded.Add(1)
		return
	}
	c.failed.Add(1)
	e.log.Warn("run failed", "run", r.ID, "schedule", s.ID, "err", runErr)
	e.retry(wctx, s, &r.Run, now, c)
}

// maxOutcomeRetry bounds how long a leased run keeps retrying its outcome
// while the database fails; the lease stays held meanwhile, so the sweep
// does not fail the run over and run the target again.
const maxOutcomeRetry = 10 * time.Minute

// recordOutcome writes a run's outcome o under epoch. The target has
// answered: losing this write would let the sweep fail the run over and call
// the target again. So a failure is retried with jittered backoff while ctx
// (the job lease) is live and within bound; after each failure Finish reads
// the run back, so that a write that landed with its answer lost
// (retryWrites=false) is recognised by its status and finishedAt. It gives
// up when the write is refused and did not land: the run was failed over,
// or a newer holder fenced it out, and the outcome is theirs.
func (e *Engine) recordOutcome(ctx context.Context, id string, epoch int64, o store.RunOutcome, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	wait := 100 * time.Millisecond
	for {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err := e.runs.Finish(wctx, id, epoch, o)
		cancel()
		if err == nil {
			return nil
		}
		// A conflict gives up; contention that outlasted the store's
		// retries (ErrContended) refused nothing, and is retried here.
		if errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrContended) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		e.log.Warn("record run outcome failed; retrying while the lease is held", "run", id, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait/2 + rand.N(wait/2+1)): //nolint:gosec // jitter, not a secret
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// retry records the next attempt of a failed run, if the schedule's retry
// policy allows one: a pending run with source retry, attempt+1 and a
// deterministic id, due after the backoff (doubling per attempt). The sweep
// executes it when it is due.
//
// A failed run owed a retry carries a sweepAt until the retry is recorded
// (and handed off); retry clears it then, and the sweep (owedRetries) calls
// retry again for a run that still has one. The retry's id is
// deterministic, so doing it twice records it once.
func (e *Engine) retry(ctx context.Context, s *schedule.Schedule, r *schedule.Run, now time.Time, c *counters) {
	maxAttempts := max(s.Retry.MaxAttempts, 1)
	if r.Attempt >= maxAttempts {
		e.retryRecorded(ctx, r.ID) // none owed (the policy may have changed)
		return
	}
	backoff := retryBackoff(s.Retry.Backoff.D(), r.Attempt)
	base := r.ID
	if r.Attempt > 1 {
		base = strings.TrimSuffix(base, fmt.Sprintf("-a%d", r.Attempt))
	}
	next := &runDoc{Run: schedule.Run{
		ID:          fmt.Sprintf("%s-a%d", base, r.Attempt+1),
		ScheduleID:  r.ScheduleID,
		FireTime:    r.FireTime,
		Source:      schedule.SourceRetry,
		Status:      schedule.RunPending,
		Attempt:     r.Attempt + 1,
		CreatedAt:   now,
		HeartbeatAt: now,
		BatchAt:     batchOf(r),
		Shard:       r.Shard, // a shard retries as itself
		Shards:      r.Shards,
		ShardParam:  r.ShardParam,
	}, SweepAt: now.Add(backoff)}
	if e.cfg.Tasks != nil {
		// Its task is delivered at the backoff; the sweep keeps off it
		// for one reservation more, so that it only steps in when the task
		// was lost.
		next.SweepAt = next.SweepAt.Add(e.reservation())
	}
	inserted, err := e.runs.Insert(ctx, next)
	if err != nil {
		c.errors.Add(1)
		e.log.Error("record retry failed", "run", r.ID, "err", err)
		return
	}
	if inserted {
		c.retried.Add(1)
	}
	if e.cfg.Tasks != nil {
		// Even when the insert found the retry there already: an earlier
		// attempt at this write may have landed without its task.
		ids := []string{next.ID}
		t := Task{Name: TaskName(ids, ""), ScheduleID: s.ID, Runs: ids, At: now.Add(backoff)}
		if err := e.cfg.Tasks.Dispatch(ctx, t); err != nil {
			c.errors.Add(1)
			e.log.Error("hand off retry failed; the sweep enqueues it", "run", next.ID, "err", err)
		}
	}
	e.retryRecorded(ctx, r.ID)
}

// batchOf is when r's first attempt was decided: the tick's batch that r,
// or the run r retries, belongs to.
func batchOf(r *schedule.Run) time.Time {
	if !r.BatchAt.IsZero() {
		return r.BatchAt
	}
	return r.CreatedAt
}

// retryRecorded clears a failed run's owed-retry mark. A failure leaves the
// mark, and the sweep's retry finds the retry recorded and clears it then.
func (e *Engine) retryRecorded(ctx context.Context, id string) {
	err := e.runs.RetryRecorded(ctx, id)
	if err != nil && !errors.Is(err, store.ErrConflict) {
		e.log.Warn("clear the owed-retry mark failed; the sweep clears it", "run", id, "err", err)
	}
}

// onHeld applies the overlap policy to r when the previous run is still
// running: it holds the job lease, or its GPU job is in the pool. who says
// which, for the run's reason. Retries and misfire runs are not new fire
// times: they stay pending and the sweep tries again.
func (e *Engine) onHeld(ctx context.Context, s *schedule.Schedule, r *runDoc, who string, c *counters) {
	if r.Source == schedule.SourceRetry || r.Source == schedule.SourceMisfire {
		return
	}
	if later := e.laterStarted(ctx, s, r); later != nil {
		// A later fire has started: r is superseded, not an overlap. A
		// buffered r would set the misfire flag at r's older fire time,
		// and its misfire run would start after the later fire.
		e.superseded(ctx, s, r, later, c)
		return
	}
	now := e.now().UTC().Truncate(time.Millisecond)
	// mark records r skipped with reason, queuing event ev in the same
	// write; sent delivers it at once. (A buffered fire's misfire event
	// waits for the misfire flag: a fire put back for the sweep was not
	// collapsed after all, and PutBack withdraws its notice.)
	var skipped runDoc
	mark := func(reason string, ev schedule.Event) error {
		n := e.notice(s, ev, now)
		if err := e.runs.Skip(ctx, r.ID, reason, now, e.expireAt(s, now), n); err != nil {
			return err
		}
		skipped = *r
		skipped.Status, skipped.Reason, skipped.FinishedAt = schedule.RunSkipped, reason, now
		if n != nil {
			skipped.NotifyAt, skipped.NotifyEvent = n.At, n.Event
		}
		return nil
	}
	sent := func() { e.deliverSoon(ctx, s, skipped) }
	switch s.Overlap {
	case schedule.OverlapSkip:
		if err := mark("overlap skip: the previous run is still running; "+who, schedule.EventSkipped); err != nil {
			if !errors.Is(err, store.ErrConflict) {
				c.errors.Add(1)
				e.log.Error("record skipped run failed", "run", r.ID, "err", err)
			}
			return
		}
		c.skipped.Add(1)
		e.metrics.RunFinished(ctx, r.ScheduleID, string(r.Source), string(schedule.RunSkipped), time.Time{}, now)
		sent()
	default: // buffer_one
		if err := mark(ReasonBuffered+": the previous run is still running; "+who+"; collapsed into one misfire run", schedule.EventMisfire); err != nil {
			if !errors.Is(err, store.ErrConflict) {
				c.errors.Add(1)
				e.log.Error("record buffered run failed", "run", r.ID, "err", err)
			}
			return
		}
		if e.beforeMisfireWrite != nil {
			e.beforeMisfireWrite(s.ID, "flag")
		}
		err := e.setMisfire(ctx, s.ID, r.FireTime, true)
		if err != nil && e.misfireSet(ctx, s.ID) {
			// The write landed and only its answer was lost, or another
			// buffered fire set the flag: a misfire run covers this fire.
			e.log.Warn("set misfire flag reported an error, but the flag is set", "run", r.ID, "err", err)
			err = nil
		}
		if err != nil {
			// The run says buffered, but no flag does, so nobody would
			// run it: put it back in the sweep's hands, which tries again.
			c.errors.Add(1)
			if uerr := e.runs.PutBack(ctx, r.ID, now, now); uerr != nil {
				e.log.Error("buffered run lost: setting the misfire flag failed, and so did putting the run back for the sweep",
					"run", r.ID, "err", err, "undo_err", uerr)
			} else {
				e.log.Warn("set misfire flag failed; run put back for the sweep", "run", r.ID, "err", err)
			}
			return
		}
		c.misfired.Add(1)
		// Buffered: recorded skipped, with a misfire run to cover it.
		e.metrics.RunFinished(ctx, r.ScheduleID, string(r.Source), string(schedule.RunSkipped), time.Time{}, now)
		sent()
		// The holder may have checked the flag and released just before
		// we set it. Try to take the lease: if we get it, the misfire is
		// ours to run; if it is still held, its holder checks the flag
		// again after releasing.
		l, err := e.cfg.Leases.Acquire(ctx, jobLeaseFor(ctx, s.ID), leaseTTL(s))
		if err != nil {
			return
		}
		e.misfireLoop(ctx, s, l, c)
		e.releaseJob(ctx, s, l, c)
	}
}

// holderState is what the holder of a job lease that a run met is doing.
type holderState int

const (
	// holderRunsOther: it executes an earlier run of the schedule. That
	// is the overlap the policy is about.
	holderRunsOther holderState = iota
	// holderRunsSibling: it executes a run that the same tick decided (a
	// catch-up batch), which the run is queued behind, or the run itself
	// (another delivery of its task claimed it).
	holderRunsSibling
	// holderIdle: no run is running under its epoch. It has just acquired
	// and not yet claimed (a second delivery of the very task that holds
	// the lease, racing the first), or it has finished and is releasing.
	holderIdle
)

// holderOf tells what the holder of the lease r met is doing, from the run
// that is running under its epoch. One read, on the held path only.
func (e *Engine) holderOf(ctx context.Context, r *runDoc, held *lease.HeldError) holderState {
	x, err := e.runs.RunningAt(ctx, r.ScheduleID, r.Shard, held.Epoch)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return holderIdle
	case err != nil:
		// Unknown: the policy applies, as it did before the question was
		// asked; a skip is recorded with its reason.
		e.log.Warn("look for the job lease holder's run failed", "run", r.ID, "err", err)
		return holderRunsOther
	case x.CreatedAt.Equal(r.CreatedAt):
		// A sibling, or r itself (another delivery claimed it).
		return holderRunsSibling
	case !x.BatchAt.IsZero() && x.BatchAt.Equal(batchOf(&r.Run)):
		// The retry of a sibling, which took the lease between two runs of
		// the batch: r is queued behind it, as behind the sibling.
		return holderRunsSibling
	case !x.FireTime.Before(r.FireTime):
		// The holder runs a later fire time than r's (a misfire run,
		// say, between the runs of r's catch-up batch): r did not come
		// while an earlier run was running, so nothing overlaps it; it is
		// queued behind.
		return holderRunsSibling
	}
	return holderRunsOther
}

// idleHolderWaits bounds how often a run that met an idle holder tries the
// lease again (50 ms, doubling: 750 ms in all) before it is left pending.
// An idle holder claims or releases within a write or two.
const idleHolderWaits = 4

// stillPending reports whether r is still pending (false when that cannot
// be read: whoever can read it decides).
func (e *Engine) stillPending(ctx context.Context, r *runDoc) bool {
	cur, err := e.runs.Get(ctx, r.ID)
	return err == nil && cur.Status == schedule.RunPending
}

// misfireLoop is the holder's side of buffer_one, before releasing: while
// the misfire flag is set, clear it (conditionally, fenced by the job
// lease) and run once more with source misfire. However many misfires were
// buffered during the run, that is one extra run.
func (e *Engine) misfireLoop(ctx context.Context, s *schedule.Schedule, l *lease.Lease, c *counters) {
	if s.Overlap != schedule.OverlapBufferOne || moreFollow(ctx) {
		// More of this executor's batch follows: the misfire (a later
		// fire time) waits for the batch's last run, so that no fire
		// time of the batch starts after it (the order rule).
		return
	}
	for ctx.Err() == nil && l.Context().Err() == nil {
		if !fits(ctx, s) {
			// The flag stays set: the sweep runs it once this holder has
			// released (strandedMisfires).
			e.log.Info("run budget spent; the misfire run waits for the sweep", "schedule", s.ID)
			return
		}
		rd, ok := e.takeMisfire(ctx, s, l, c)
		if !ok {
			return
		}
		if later := e.laterStarted(ctx, s, rd); later != nil {
			// The buffered window's latest fire is older than a fire that
			// has started since: running it now would start it after.
			e.superseded(ctx, s, rd, later, c)
			continue
		}
		e.claimAndRun(ctx, s, l, rd, c)
		// A schedule whose runs outlast its period buffers a fire during
		// every misfire run, so this loop can hold the lease for as long
		// as that lasts: the retries waiting for the lease (a run failed
		// over after a crash, say) go between misfire runs, or they would
		// wait as long.
		e.drainWaiting(ctx, s, l, c)
	}
}

// takeMisfire clears the schedule's misfire flag under the job lease l
// (fenced by jobFence) and records the misfire's run, pending. ok is false
// when the flag is not set (or could not be cleared, or the run not
// recorded, in which case the flag is set again for a later check).
func (e *Engine) takeMisfire(ctx context.Context, s *schedule.Schedule, l *lease.Lease, c *counters) (rd *runDoc, ok bool) {
	if busy, err := e.gpuBusy(ctx, s, ""); busy != nil || err != nil {
		// The buffered fire waits for the GPU job that it overlapped: the
		// flag stays, and the sweep runs it once that job's run finished.
		return nil, false
	}
	// Fenced by the job lease; a clear whose answer was lost is settled
	// inside (store.Schedules.ClearMisfire): the run id below is the one
	// this flag setting owns, so a clear we did not in fact make records
	// nothing new.
	got, err := e.schedules.ClearMisfire(ctx, s.ID, l.Epoch())
	if err != nil {
		if !errors.Is(err, store.ErrConflict) {
			c.errors.Add(1)
			e.log.Error("clear misfire flag failed", "schedule", s.ID, "err", err)
		}
		return nil, false
	}
	now := e.now().UTC()
	at := got.At.UTC()
	if at.IsZero() {
		at = now.Truncate(time.Second)
	}
	rd = e.pendingRun(s.ID, at, schedule.SourceMisfire, now)
	if got.Seq > 0 {
		// Two windows may buffer the same latest fire time (a fire
		// buffered, put back for the sweep, and buffered again). Each
		// setting of the flag bumps the sequence; each clearing takes
		// one, so the id is new each time.
		rd.ID += fmt.Sprintf("-%d", got.Seq)
	}
	if e.beforeMisfireWrite != nil {
		e.beforeMisfireWrite(s.ID, "run")
	}
	if _, err := e.runs.Insert(ctx, rd); err != nil {
		if landed, gerr := e.runs.Get(ctx, rd.ID); gerr == nil {
			// The insert landed; only its answer was lost.
			e.log.Warn("record misfire run reported an error, but the run is there", "run", rd.ID, "err", err)
			return landed, true
		}
		// The flag is cleared and no run records the misfire: set the
		// flag again, so that a later check (this holder's after it
		// releases, or the next holder's) runs it. The sequence stays,
		// so the retry uses this run id: if the insert did land after
		// all, the retry finds it rather than adding a second run.
		c.errors.Add(1)
		if ferr := e.setMisfire(ctx, s.ID, at, false); ferr != nil {
			e.log.Error("misfire lost: recording its run failed, and so did setting the flag again", "schedule", s.ID, "err", err, "undo_err", ferr)
		} else {
			e.log.Warn("record misfire run failed; flag set again for a later check", "schedule", s.ID, "err", err)
		}
		return nil, false
	}
	return rd, true
}

// misfireSet reports whether the schedule's misfire flag is set (false
// when that cannot be read).
func (e *Engine) misfireSet(ctx context.Context, scheduleID string) bool {
	set, err := e.schedules.HasMisfire(ctx, scheduleID)
	return err == nil && set
}

// setMisfire sets the schedule's misfire flag for a buffered fire at
// fireTime; bump starts a new misfire run id (misfireSeq). misfireAt, the
// misfire run's fire time, is the latest fire buffered since the flag was
// last cleared: a flag that is down starts a new window at fireTime, and a
// flag that is up takes the later of the two. (A $max over the schedule's
// life would name an older fire, buffered after a misfire had run, with
// that misfire's fire time, and the target would see it twice.) A failure
// is retried a few times before the caller has to undo the write it paired
// with. A retry of an applied bump bumps twice, which only skips a number.
func (e *Engine) setMisfire(ctx context.Context, scheduleID string, fireTime time.Time, bump bool) error {
	var err error
	for try, wait := 1, 50*time.Millisecond; ; try, wait = try+1, wait*2 {
		// Opens a window when the flag is down, joins it when up; a clear
		// between the two writes makes both miss (ErrConflict): try again.
		err = e.schedules.SetMisfire(ctx, scheduleID, fireTime, bump)
		if err == nil || try == 3 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// maxReleaseRounds bounds releaseJob's re-checks. A flag still set after
// that (the database failing the misfire's writes over and over) stays set:
// the next holder's release runs it.
const maxReleaseRounds = 5

// releaseJob releases the job lease and then checks the misfire flag once
// more: a buffering executor may have set it after our last check. If it
// is set, take the lease again and run the misfire; if someone else holds
// the lease, that holder sees the flag when it releases.
func (e *Engine) releaseJob(ctx context.Context, s *schedule.Schedule, l *lease.Lease, c *counters) {
	if e.beforeRelease != nil {
		e.beforeRelease(s.ID)
	}
	for round := 1; ; round++ {
		e.release(ctx, s, l)
		if s.Overlap != schedule.OverlapBufferOne || ctx.Err() != nil || moreFollow(ctx) {
			return
		}
		if !e.misfireSet(ctx, s.ID) || round == maxReleaseRounds || !fits(ctx, s) {
			return
		}
		if busy, err := e.gpuBusy(ctx, s, ""); busy != nil || err != nil {
			return // the GPU job's end brings the misfire (strandedMisfires)
		}
		var err error
		l, err = e.cfg.Leases.Acquire(ctx, jobLeaseFor(ctx, s.ID), leaseTTL(s))
		if err != nil {
			return
		}
		e.misfireLoop(ctx, s, l, c)
	}
}

// release releases the job lease l, even when ctx has ended (a held lease
// would block the schedule's next run until it expires), within one TTL. A
// lease already lost needs no release.
func (e *Engine) release(ctx context.Context, s *schedule.Schedule, l *lease.Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaseTTL(s))
	defer cancel()
	if err := l.Release(rctx); err != nil && !errors.Is(err, lease.ErrNotHeld) {
		e.log.Warn("job lease release failed", "lease", l.Name(), "err", err)
	}
}

func leaseTTL(s *schedule.Schedule) time.Duration {
	if d := s.LeaseTTL.D(); d > 0 {
		return d
	}
	return schedule.DefaultLeaseTTL
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
