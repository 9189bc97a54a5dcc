package gpu

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-cron/baton/shared/gpu/gpumodel"
	"github.com/baton-cron/baton/shared/store"
)

// Heartbeat records that the worker holding job id under fence f is alive:
// the first one moves the job to running and stamps startedAt; each one
// extends the job's and the slot's lease. A stale fence gets ErrStaleFence;
// a job cancelled under this fence gets ErrCancelled. Either way the worker
// must stop its command. A fence that holds without its dispatch's secret
// gets ErrForbidden.
func (d *Dispatcher) Heartbeat(ctx context.Context, id string, f Fence) (Job, error) {
	now := d.cfg.Clock.Now().UTC()
	lease := now.Add(d.cfg.LeaseTTL)
	job, err := d.q.Heartbeat(ctx, id, hold(f), now, lease)
	// Contention that outlasted the store's retries refused nothing: the
	// worker hears "retry" (Aborted, 503), not a stale fence.
	if errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrContended) {
		return Job{}, d.whyNotHeld(ctx, id, f, "heartbeat")
	}
	if err != nil {
		return Job{}, fmt.Errorf("gpu: heartbeat %s: %w", id, err)
	}
	// The job lease is the only write: the slot was leased for the whole
	// run when it was linked (runLease). The live workers' beats are also
	// the cheapest clock there is for noticing a dead one: the tick runs
	// once a minute, a beat every few seconds.
	d.sweepSoon(ctx)
	return job, nil
}

// whyNotHeld explains a failed fenced write on job id.
func (d *Dispatcher) whyNotHeld(ctx context.Context, id string, f Fence, op string) error {
	job, err := d.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("gpu: %s %s: %w", op, id, err)
	}
	if job.Slot == f.Slot && job.Epoch == f.Epoch {
		// The secret first: whether the job was cancelled is not the
		// business of a caller that is not its worker.
		if !secretMatches(job.SecretHash, f.Secret) {
			return fmt.Errorf("gpu: %s %s: %w", op, id, ErrForbidden)
		}
		if job.Status == StatusCancelled {
			return fmt.Errorf("gpu: %s %s: %w", op, id, ErrCancelled)
		}
		if job.Preempting && !Terminal(job.Status) {
			return fmt.Errorf("gpu: %s %s: %w", op, id, ErrPreempted)
		}
	}
	return d.staleFence(op, id, f, job)
}

// staleFence is the error for a callback on job id whose fence f does not
// hold. The job's state goes to the log, not into the error, which is the
// caller's answer: workers cannot read jobs (GPUCallback serves no GET),
// and a stale or forged caller must not learn the job's status, nor which
// slot and epoch hold it now.
func (d *Dispatcher) staleFence(op, id string, f Fence, job Job) error {
	d.cfg.Logger.Info("gpu: callback with a stale fence", "op", op, "job", id, "fence", fmt.Sprintf("%s@%d", f.Slot, f.Epoch),
		"status", job.Status, "slot", job.Slot, "epoch", job.Epoch)
	return fmt.Errorf("gpu: %s %s: fence %s@%d: %w", op, id, f.Slot, f.Epoch, ErrStaleFence)
}

// Complete records the outcome reported by the worker holding job id under
// fence c.Fence, and hands the slot to the next queued job. Exit 0 is
// succeeded, anything else failed; an interrupted job (worker shutting
// down) is requeued at once with attempts+1, or dead when that used up
// maxAttempts. A completion repeated after a lost answer is accepted again;
// one from a stale holder gets ErrStaleFence, and one whose fence holds but
// that lacks the dispatch's secret gets ErrForbidden and changes nothing,
// not even the slot. A worker that stopped a cancelled job reports here
// too, which frees its slot.
func (d *Dispatcher) Complete(ctx context.Context, id string, c CompleteRequest) (Job, error) {
	// A worker hanging up must not strand a half-dispatched job, nor leave
	// an outcome unwritten once the hand-off has begun.
	ctx = context.WithoutCancel(ctx)
	if c.Interrupted {
		// The job goes back to the queue first, so the hand-off can place
		// it on another worker at once.
		job, err := d.finish(ctx, id, c)
		if err != nil {
			return Job{}, err
		}
		d.handoff(ctx, c.Fence, id)
		return job, nil
	}
	// The worker is done with the slot whatever the job's fate, so the
	// next job is claimed before the outcome is written, and its POST /run
	// goes out while the outcome is written: the GPU idles for the
	// hand-off alone. The outcome never waits on that POST, which can take
	// RunTimeout. reclaim is fenced on the slot still holding this job at
	// this epoch for this dispatch's secret, so a stale, mismatched or
	// forged completion hands nothing off.
	slot, next, secret, ok := d.reclaim(ctx, c.Fence, id)
	sent := make(chan error, 1)
	if ok && next != nil {
		go func() { sent <- d.send(ctx, slot, next, secret) }()
	} else {
		sent <- nil
	}
	job, err := d.finish(ctx, id, c)
	// Wait for the POST: in Cloud Functions an instance may lose its CPU
	// once it has answered. With quotas, dispatch once more even after a
	// clean hand-off: this job's tenant may have been held back by its
	// quota while another slot sat free, and this slot may have gone to
	// someone else.
	if serr := <-sent; !ok || serr != nil || len(d.cfg.Quotas) > 0 {
		d.dispatchLogged(ctx, c.Slot)
	}
	return job, err
}

// finish records the completion on the job under its fence.
func (d *Dispatcher) finish(ctx context.Context, id string, c CompleteRequest) (Job, error) {
	if !c.Interrupted {
		// The common case needs no read first: one fenced write.
		status := StatusSucceeded
		if c.ExitCode != 0 || c.TimedOut {
			status = StatusFailed
		}
		// A success is recorded even on a job being preempted: the work
		// is done, and requeuing it would run it twice. A failure on one
		// is most likely the stop itself, so that write misses and the
		// job is requeued below.
		o := gpumodel.Outcome{Status: status, UnlessPreempting: status == StatusFailed, ExitCode: c.ExitCode, Output: c.Output, Stdout: truncate(c.Stdout, StdoutHeadBytes), Error: c.Error}
		job, err := d.q.Complete(ctx, id, hold(c.Fence), o, d.cfg.Clock.Now().UTC())
		if err == nil {
			return job, nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return Job{}, fmt.Errorf("gpu: complete %s: %w", id, err)
		}
	}
	job, err := d.Get(ctx, id)
	if err != nil {
		return Job{}, fmt.Errorf("gpu: complete: %w", err)
	}
	if job.Slot != c.Slot || job.Epoch != c.Epoch {
		return Job{}, d.staleFence("complete", id, c.Fence, job)
	}
	if !secretMatches(job.SecretHash, c.Secret) {
		// Before the terminal case: a forger must not even learn that its
		// "repeat" would have been accepted.
		return Job{}, fmt.Errorf("gpu: complete %s: %w", id, ErrForbidden)
	}
	if Terminal(job.Status) {
		// Cancelled under this fence, or a repeat after a lost answer.
		return job, nil
	}
	if job.Preempting {
		job, err = d.q.RequeuePreempted(ctx, job, hold(c.Fence), "preempted by a higher-priority job")
		if err != nil {
			if errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrContended) {
				return Job{}, d.whyNotHeld(ctx, id, c.Fence, "complete")
			}
			return Job{}, fmt.Errorf("gpu: complete %s: requeue preempted: %w", id, err)
		}
		return job, nil
	}
	if !c.Interrupted {
		// Held and active, yet the fenced write missed: it raced with a
		// cancel or a sweep. Let the worker retry.
		return Job{}, fmt.Errorf("gpu: complete %s: the job changed meanwhile: %w", id, store.ErrConflict)
	}
	job, err = d.q.RequeueInterrupted(ctx, job, hold(c.Fence), "interrupted: "+c.Error, d.cfg.Clock.Now().UTC())
	if err != nil {
		if errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrContended) {
			return Job{}, d.whyNotHeld(ctx, id, c.Fence, "complete")
		}
		return Job{}, fmt.Errorf("gpu: complete %s: %w", id, err)
	}
	return job, nil
}

// Cancel cancels a queued, dispatched or running job. A running job's
// worker learns it on its next heartbeat (409), stops its command and
// reports, which frees the slot; if the worker is gone, the slot's lease
// runs out. Cancelling a finished job gets ErrFinished.
func (d *Dispatcher) Cancel(ctx context.Context, id string) (Job, error) {
	for range 5 {
		job, err := d.Get(ctx, id)
		if err != nil {
			return Job{}, fmt.Errorf("gpu: cancel: %w", err)
		}
		if Terminal(job.Status) {
			return job, fmt.Errorf("gpu: cancel %s: it is %s: %w", id, job.Status, ErrFinished)
		}
		err = d.q.Cancel(ctx, id, job.Status, job.Epoch, d.cfg.Clock.Now().UTC())
		if errors.Is(err, store.ErrConflict) {
			continue // it moved on; look again
		}
		if err != nil {
			return Job{}, fmt.Errorf("gpu: cancel %s: %w", id, err)
		}
		return d.Get(ctx, id)
	}
	return Job{}, fmt.Errorf("gpu: cancel %s: the job kept changing state: %w", id, store.ErrConflict)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
