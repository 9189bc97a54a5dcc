package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/baton-cron/baton/shared/gpu/gpumodel"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// A gpu-target run lives longer than any executor: its job can wait in the
// GPU queue and then run for up to a day, while a Run invocation lasts at
// most 30 minutes. So the executor only claims the run (which records its
// job id, schedule.GPUJobID), enqueues the job and releases the job lease;
// the run stays running. The sweep then looks at the job every GPUPoll and
// finishes the run from the job's outcome: succeeded, or failed with the
// job's exit code (or its death or cancellation), under the schedule's retry
// policy. Nothing holds the job lease meanwhile, so the overlap policy asks
// the runs collection instead (gpuBusy).
//
// Each step is safe to fail and safe to have landed:
//   - the enqueue is idempotent per run (the job id is the run's), so the
//     executor retries it, and a sweep that finds no job enqueues it again;
//   - the executor's write after the enqueue only moves sweepAt; if it is
//     lost, the claim's sweepAt brings the sweep to the run a little early;
//   - the sweep's finishing write is conditional on the sweepAt it read, so
//     concurrent sweeps finish a run once, and a finished run owed a retry
//     keeps its owed-retry mark until the retry is recorded (owedRetries).

// gpuHandOff reports whether r's target is handed to the GPU pool rather
// than called: a gpu target on an engine with a dispatcher. Without one,
// callTarget fails the run with ErrNoGPU.
func (e *Engine) gpuHandOff(s *schedule.Schedule) bool {
	return s.Target.Type == schedule.TargetGPU && s.Target.GPU != nil && e.cfg.GPU != nil
}

// enqueueTries bounds the executor's enqueue attempts; the sweep takes over
// after that.
const enqueueTries = 3

// handToGPU enqueues the job of the claimed run r and leaves r running for
// the sweep to finish. It returns a non-nil error only when the pool refuses
// the target for good (schedule.ErrInvalidGPUTarget): the caller records the
// run failed. Any other failure leaves the run running, and the sweep
// enqueues the job once the job lease is free.
func (e *Engine) handToGPU(ctx context.Context, s *schedule.Schedule, r *runDoc, epoch int64, c *counters) error {
	jobID := r.GPUJob // recorded by the claim
	var err error
	wait := 100 * time.Millisecond
	for try := 1; ; try++ {
		_, err = e.cfg.GPU.EnqueueRun(ctx, r.ID, r.GPUTarget(*s.Target.GPU))
		if err == nil || errors.Is(err, schedule.ErrInvalidGPUTarget) || try == enqueueTries || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait/2 + rand.N(wait/2+1)): //nolint:gosec // jitter, not a secret
		}
		wait *= 2
	}
	if errors.Is(err, schedule.ErrInvalidGPUTarget) {
		return err
	}
	if err != nil {
		c.errors.Add(1)
		e.log.Warn("gpu enqueue failed; the run stays running and the sweep enqueues its job", "run", r.ID, "job", jobID, "err", err)
		return nil
	}
	now := e.now().UTC()
	werr := e.runs.HandOff(context.WithoutCancel(ctx), r.ID, epoch, "gpu job "+jobID, now, now.Add(e.cfg.GPUPoll))
	if werr != nil {
		// The claim's sweepAt stands: the sweep looks at the job sooner.
		e.log.Warn("record the gpu hand-off failed; the sweep looks at the job when the claim's sweepAt passes", "run", r.ID, "err", werr)
	}
	e.log.Info("run handed to the GPU pool", "run", r.ID, "job", jobID)
	return nil
}

// gpuBusy reports whether a gpu-target schedule that does not allow overlap
// has a run other than exceptID (empty for none) whose GPU job is still in
// the pool's hands: that run is the previous run still running, although it
// holds no job lease. One read, for such schedules only.
//
// A cloudRunJob schedule's running execution counts the same way
// (runJobHandOff): its run holds no job lease either.
func (e *Engine) gpuBusy(ctx context.Context, s *schedule.Schedule, exceptID string) (busy *runDoc, err error) {
	if s.Overlap == schedule.OverlapAllow {
		return nil, nil
	}
	var x *runDoc
	switch {
	case e.gpuHandOff(s):
		x, err = e.runs.RunningGPU(ctx, s.ID, laneOf(ctx), exceptID)
	case runJobHandOff(s):
		x, err = e.runs.RunningRunJob(ctx, s.ID, laneOf(ctx), exceptID)
	default:
		return nil, nil
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look for a running gpu run of %s: %w", s.ID, err)
	}
	return x, nil
}

// settleGPURun is the failover's step for a running gpu-target run whose
// sweepAt passed: look at its job; finish the run if the job ended, enqueue
// the job if it is missing and the executor is gone, and otherwise look
// again after GPUPoll.
func (e *Engine) settleGPURun(ctx context.Context, r *runDoc, now time.Time, c *counters) {
	if e.cfg.GPU == nil {
		e.finishGPURun(ctx, r, nil, ErrNoGPU.Error(), now, c)
		return
	}
	st, found, err := e.cfg.GPU.RunJob(ctx, r.GPUJob)
	switch {
	case err != nil:
		c.errors.Add(1)
		e.log.Warn("read the gpu job of a run failed; looking again later", "run", r.ID, "job", r.GPUJob, "err", err)
		e.postpone(ctx, r, now, e.reservation(), c)
	case !found:
		e.enqueueMissing(ctx, r, now, c)
	case !gpumodel.Terminal(gpumodel.JobStatus(st.Status)):
		e.postpone(ctx, r, now, e.cfg.GPUPoll, c)
	default:
		e.finishGPURun(ctx, r, &st, "", now, c)
	}
}

// enqueueMissing enqueues the job of a gpu-target run whose executor claimed
// it but did not get the job queued (it died, or the pool failed it), once
// that executor no longer holds the job lease. The job id is the run's, so
// an enqueue that did land after all is found, not doubled.
func (e *Engine) enqueueMissing(ctx context.Context, r *runDoc, now time.Time, c *counters) {
	if left, alive := e.jobAlive(ctx, r); alive {
		e.postpone(ctx, r, now, left, c) // its executor may still be enqueueing
		return
	}
	var s schedule.Schedule
	err := e.getSchedule(ctx, r.ScheduleID, &s)
	switch {
	case errors.Is(err, store.ErrNotFound):
		e.finishGPURun(ctx, r, nil, "schedule deleted before its gpu job was queued", now, c)
		return
	case err != nil:
		c.errors.Add(1)
		e.log.Warn("read the schedule of a gpu run failed; looking again later", "run", r.ID, "err", err)
		e.postpone(ctx, r, now, e.reservation(), c)
		return
	case s.Target.Type != schedule.TargetGPU || s.Target.GPU == nil:
		e.finishGPURun(ctx, r, nil, "the schedule's target is no longer gpu, and the run's job was never queued", now, c)
		return
	}
	if _, err := e.cfg.GPU.EnqueueRun(ctx, r.ID, r.GPUTarget(*s.Target.GPU)); err != nil {
		if errors.Is(err, schedule.ErrInvalidGPUTarget) {
			e.finishGPURun(ctx, r, nil, err.Error(), now, c)
			return
		}
		c.errors.Add(1)
		e.log.Warn("enqueue the gpu job of a run failed; trying again later", "run", r.ID, "err", err)
		e.postpone(ctx, r, now, e.reservation(), c)
		return
	}
	e.log.Warn("gpu job of a run was not queued by its executor; queued by the sweep", "run", r.ID, "job", r.GPUJob)
	e.postpone(ctx, r, now, e.cfg.GPUPoll, c)
}

// finishGPURun records a gpu-target run's outcome from its job's state st
// (or, with st nil, fails it with reason), conditional on the sweepAt the
// sweep read, and records the retry a failure is owed. A job the operator
// cancelled is not retried.
func (e *Engine) finishGPURun(ctx context.Context, r *runDoc, st *schedule.GPUJobState, reason string, now time.Time, c *counters) {
	status := schedule.RunFailed
	retryable := true
	o := store.RunOutcome{FinishedAt: now}
	out := "gpu job " + r.GPUJob
	switch {
	case st == nil:
		retryable = false // nothing a retry would change
	case gpumodel.JobStatus(st.Status) == gpumodel.StatusSucceeded:
		status = schedule.RunSucceeded
	case gpumodel.JobStatus(st.Status) == gpumodel.StatusFailed && st.ExitCode != nil:
		reason = fmt.Sprintf("gpu job %s exited %d", r.GPUJob, *st.ExitCode)
	case gpumodel.JobStatus(st.Status) == gpumodel.StatusCancelled:
		reason = fmt.Sprintf("gpu job %s was cancelled", r.GPUJob)
		retryable = false
	default:
		reason = fmt.Sprintf("gpu job %s ended %s after %d attempts", r.GPUJob, st.Status, st.Attempts)
	}
	if st != nil {
		if st.ExitCode != nil {
			o.ExitCode = st.ExitCode
			out += fmt.Sprintf(": exit %d", *st.ExitCode)
		}
		if st.Output != "" {
			out += " " + st.Output
		}
		if st.Error != "" && status == schedule.RunFailed {
			reason += ": " + st.Error
		}
	}
	o.Output, o.Status = truncate(out, 1024), status
	e.endSwept(ctx, r, o, reason, retryable, "gpu job "+r.GPUJob, now, c)
}

// endSwept records the outcome o of a running run whose work was handed
// off (a gpu job, a Cloud Run execution, named by what), conditional on
// the sweepAt the sweep read, and records the retry a failure is owed
// when retryable.
func (e *Engine) endSwept(ctx context.Context, r *runDoc, o store.RunOutcome, reason string, retryable bool, what string, now time.Time, c *counters) {
	status := o.Status
	if status == schedule.RunFailed {
		o.Error = truncate(reason, 1024)
	}
	var s *schedule.Schedule
	ev := outcomeEvent(&r.Run, status)
	if (status == schedule.RunFailed && retryable) || ev != "" {
		// For its retry policy, and for its notify block: the event is
		// queued by the outcome's own write.
		var got schedule.Schedule
		switch err := e.getSchedule(ctx, r.ScheduleID, &got); {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			c.errors.Add(1)
			e.log.Warn("read the schedule of a finished run failed; finishing it later", "run", r.ID, "work", what, "err", err)
			return // the sweepAt stays passed: the next sweep tries again
		default:
			s = &got
		}
	}
	if s != nil && retryable && status == schedule.RunFailed && r.Attempt < max(s.Retry.MaxAttempts, 1) {
		// The owed-retry mark, as runTarget leaves it.
		o.RetryOwedAt = now.Add(e.reservation())
	}
	if ev != "" {
		o.Notice = e.notice(s, ev, now)
	}
	o.ExpireAt = e.expireAt(s, now) // retention.go
	err := e.runs.FinishSwept(ctx, r.ID, r.SweepAt, o)
	if err != nil {
		if !errors.Is(err, store.ErrConflict) {
			// The run stays running with a passed sweepAt (or, if the
			// write landed, finished): the next sweep looks again.
			c.errors.Add(1)
			e.log.Warn("record the outcome of a handed-off run failed; the next sweep tries again", "run", r.ID, "work", what, "err", err)
		}
		return
	}
	e.metrics.RunFinished(ctx, r.ScheduleID, string(r.Source), string(status), r.StartedAt, now)
	e.deliverSoon(ctx, s, finished(r, o))
	if status == schedule.RunSucceeded {
		c.succeeded.Add(1)
		e.log.Info("handed-off run finished", "run", r.ID, "work", what, "status", status)
		return
	}
	c.failed.Add(1)
	e.log.Warn("handed-off run failed", "run", r.ID, "work", what, "reason", reason)
	if s != nil && retryable {
		e.retry(ctx, s, &r.Run, now, c)
	}
}
