package gpu

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

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
	now := d.cfg.Now().UTC().Add(-d.cfg.ClockSkew)
	var expired []Job
	err = d.jobs.Find(ctx,
		bson.D{{Key: "status", Value: bson.D{{Key: "$in", Value: active}}}, {Key: "leaseUntil", Value: bson.D{{Key: "$lt", Value: now}}}},
		&expired, options.Find().SetLimit(sweepBatch).SetSort(bson.D{{Key: "leaseUntil", Value: 1}, {Key: "_id", Value: 1}}))
	if err != nil {
		return 0, 0, fmt.Errorf("gpu: sweep: %w", err)
	}
	for _, job := range expired {
		filter := held(job.ID, Fence{Slot: job.Slot, Epoch: job.Epoch})
		filter = append(filter, bson.E{Key: "attempts", Value: job.Attempts}, bson.E{Key: "leaseUntil", Value: bson.D{{Key: "$lt", Value: now}}})
		err := d.updateJob(ctx, filter, d.requeueUpdate(job, fmt.Sprintf("lease expired on slot %s", job.Slot)))
		if errors.Is(err, store.ErrConflict) {
			continue // a heartbeat or completion got there first
		}
		if err != nil {
			return requeued, dead, fmt.Errorf("gpu: sweep %s: %w", job.ID, err)
		}
		if job.Attempts+1 >= job.MaxAttempts {
			dead++
		} else {
			requeued++
		}
		d.cfg.Logger.Warn("gpu: job lease expired", "job", job.ID, "slot", job.Slot, "attempts", job.Attempts+1, "dead", job.Attempts+1 >= job.MaxAttempts)
		d.freeSlot(ctx, job.Slot, job.Epoch, time.Unix(0, 0).UTC())
	}
	if _, err := d.Dispatch(ctx); err != nil {
		return requeued, dead, fmt.Errorf("gpu: sweep: %w", err)
	}
	return requeued, dead, nil
}
