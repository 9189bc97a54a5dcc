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
	now := d.cfg.Clock.Now().UTC().Add(-d.cfg.ClockSkew)
	expired, err := d.q.Expired(ctx, now, sweepBatch)
	if err != nil {
		return 0, 0, fmt.Errorf("gpu: sweep: %w", err)
	}
	for _, job := range expired {
		err := d.q.RequeueExpired(ctx, job, now, fmt.Sprintf("lease expired on slot %s", job.Slot), d.cfg.Clock.Now().UTC())
		if errors.Is(err, store.ErrConflict) {
			continue // a heartbeat or completion got there first
		}
		if err != nil {
			return requeued, dead, fmt.Errorf("gpu: sweep %s: %w", job.ID, err)
		}
		attempts, isDead := job.TakenBack()
		if isDead {
			dead++
		} else {
			requeued++
		}
		d.cfg.Logger.Warn("gpu: job lease expired", "job", job.ID, "slot", job.Slot, "attempts", attempts, "dead", isDead)
		d.freeSlot(ctx, job.Slot, job.Epoch, time.Unix(0, 0).UTC())
	}
	if _, err := d.Dispatch(ctx); err != nil {
		return requeued, dead, fmt.Errorf("gpu: sweep: %w", err)
	}
	return requeued, dead, nil
}
