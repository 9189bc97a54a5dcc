package gpu

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-cron/baton/shared/store"
)

// sweepBatch bounds the expired jobs one Sweep takes back; the next tick
// takes the rest.
const sweepBatch = 200

// Sweep takes back jobs whose lease expired (their worker died, was
// partitioned, or a dispatcher died mid-claim): each goes back to the queue
// with attempts+1, or to dead once it has used maxAttempts. Then it
// dispatches queued jobs to free slots. Every tick calls it. It implements
// scheduler.GPU.
func (d *Dispatcher) Sweep(ctx context.Context) (requeued, dead int, err error) {
	if err := d.Init(ctx); err != nil {
		return 0, 0, err
	}
	requeued, dead, _, err = d.takeBack(ctx, 0)
	if err != nil {
		return requeued, dead, err
	}
	// An empty queue needs no dispatch: one read of at most one job,
	// instead of claiming a free slot and freeing it again (two writes a
	// tick, and a slot that looks busy to anyone reading it meanwhile).
	// A job queued after this read dispatches itself (Enqueue). A failed
	// read dispatches anyway, as before.
	if queued, qerr := d.q.AnyQueued(ctx); qerr != nil || queued {
		if _, err := d.Dispatch(ctx); err != nil {
			return requeued, dead, fmt.Errorf("gpu: sweep: %w", err)
		}
	}
	// A job that waited past a victim's minimum run time is seen here,
	// once per tick (preempt.go).
	d.preemptLogged(ctx)
	return requeued, dead, nil
}

// takeBack is Sweep's first half: it requeues (or marks dead) the jobs
// whose lease ran out more than ClockSkew ago and frees their slots. With
// a lookahead, the same query also finds the soonest lease to run out
// within it, and soon is how long until it may be taken back (0: none).
func (d *Dispatcher) takeBack(ctx context.Context, lookahead time.Duration) (requeued, dead int, soon time.Duration, err error) {
	now := d.cfg.Clock.Now().UTC().Add(-d.cfg.ClockSkew)
	expired, err := d.q.Expired(ctx, now.Add(lookahead), sweepBatch)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("gpu: sweep: %w", err)
	}
	for _, job := range expired {
		if job.LeaseUntil != nil && !job.LeaseUntil.Before(now) {
			// Not yet: the query sorts by lease, so the first of these is
			// the soonest.
			if soon == 0 {
				soon = job.LeaseUntil.Sub(now) + time.Millisecond
			}
			continue
		}
		err := d.q.RequeueExpired(ctx, job, now, fmt.Sprintf("lease expired on slot %s", job.Slot), d.cfg.Clock.Now().UTC())
		if errors.Is(err, store.ErrConflict) {
			continue // a heartbeat or completion got there first
		}
		if err != nil {
			return requeued, dead, 0, fmt.Errorf("gpu: sweep %s: %w", job.ID, err)
		}
		attempts, isDead := job.TakenBack()
		if isDead {
			dead++
		} else {
			requeued++
		}
		d.cfg.Logger.Warn("gpu: job lease expired", "job", job.ID, "slot", job.Slot, "attempts", attempts, "dead", isDead)
		// The hold ends now: the job's epoch is its link's, so a slot
		// linked since is left alone.
		d.freeSlot(ctx, job.Slot, job.Epoch, time.Unix(0, 0).UTC(), d.cfg.Clock.Now().UTC())
	}
	return requeued, dead, soon, nil
}

// DefaultSweepEvery bounds how often heartbeats run sweepSoon, per
// dispatcher (function instance).
const DefaultSweepEvery = time.Second

// sweepSoon takes back expired jobs, as Sweep does, on a heartbeat from a
// live worker, at most once per DefaultSweepEvery per dispatcher. In the
// cloud the tick sweeps once a minute, and a job whose worker died would
// wait for it. While any other job runs, its beats come every LeaseTTL/3;
// a beat that finds a lease due to run out within budget/2 holds its
// answer until then and takes that job back on time, so the job waits at
// most a beat period minus budget/2 for the next beat (2 s by default),
// not a whole period.
//
// All of it, the hold and the dispatch after a take-back, is bounded by
// budget (2/5 of the lease, 6 s by default), because the beat's worker is
// waiting for the answer: its self-fence stops its command 90% of a lease
// after its previous accepted beat was sent, which is about 8.5 s after
// this one's send. A POST /run cut off by the budget counts as unanswered:
// the job keeps its slot until its worker's beat confirms it or its lease
// runs out.
//
// An idle check costs one indexed query that finds nothing, and no write.
// Errors are logged: the heartbeat already succeeded, and the tick's
// sweep is still there.
func (d *Dispatcher) sweepSoon(ctx context.Context) {
	now := d.cfg.Clock.Now()
	last := d.lastSweep.Load()
	if now.UnixNano()-last < int64(DefaultSweepEvery) || !d.lastSweep.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	// The worker hanging up must not stop a requeue halfway.
	budget := d.cfg.LeaseTTL * 2 / 5
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
	defer cancel()
	requeued, _, soon, err := d.takeBack(ctx, budget/2)
	if err == nil && requeued == 0 && soon > 0 && soon <= budget/2 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(soon):
		}
		requeued, _, _, err = d.takeBack(ctx, 0)
	}
	if err != nil {
		d.cfg.Logger.Warn("gpu: sweep on heartbeat", "error", err.Error())
		return
	}
	if requeued > 0 {
		d.dispatchLogged(ctx, "")
	}
}
