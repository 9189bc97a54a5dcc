package gpu

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/metrics"
	"github.com/baton-cron/baton/shared/store"
)

// Get reads one job, or returns ErrNotFound.
func (d *Dispatcher) Get(ctx context.Context, id string) (Job, error) {
	job, err := d.q.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return Job{}, fmt.Errorf("gpu: job %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Job{}, fmt.Errorf("gpu: get job %s: %w", id, err)
	}
	return job, nil
}

// ListQuery selects a page of jobs, newest first.
type ListQuery struct {
	Status    JobStatus // empty for every status
	PageToken string
	PageSize  int // 0 means 50
}

// List returns one page of jobs, newest first, with a keyset cursor.
func (d *Dispatcher) List(ctx context.Context, q ListQuery) (jobs []Job, next string, err error) {
	if q.Status != "" && !q.Status.Valid() {
		return nil, "", httpapi.BadRequest("status", "must be one of %v, not %q", AllJobStatuses(), q.Status)
	}
	if q.PageSize < 0 || q.PageSize > 1000 {
		return nil, "", httpapi.BadRequest("pageSize", "must be from 1 to 1000, not %d", q.PageSize)
	}
	jobs, next, err = d.q.List(ctx, q.Status, q.PageToken, q.PageSize)
	if errors.Is(err, store.ErrBadPageToken) {
		return nil, "", httpapi.BadRequest("pageToken", "is not a token from this listing; start without it")
	}
	if err != nil {
		return nil, "", fmt.Errorf("gpu: list jobs: %w", err)
	}
	if jobs == nil {
		jobs = []Job{}
	}
	return jobs, next, nil
}

// SlotView is one slot as GET /gpu/pool shows it.
type SlotView struct {
	Slot
	// State is free, claiming, busy, expired or backoff.
	State string `json:"state"`
	// LeaseLeft is the lease time left, in seconds (0 when claimable).
	LeaseLeft float64 `json:"leaseLeftSeconds"`
}

// Slots describes every configured slot.
func (d *Dispatcher) Slots(ctx context.Context) ([]SlotView, error) {
	if err := d.Init(ctx); err != nil {
		return nil, err
	}
	slots, err := d.q.Slots(ctx, d.ids)
	if err != nil {
		return nil, fmt.Errorf("gpu: pool: %w", err)
	}
	now := d.cfg.Clock.Now()
	out := make([]SlotView, len(slots))
	for i, s := range slots {
		v := SlotView{Slot: s}
		left := s.LeaseUntil.Sub(now)
		switch {
		case s.LeaseUntil.Before(time.Unix(1, 0)):
			v.State = "free"
		case left <= 0 && s.JobID != "":
			v.State = "expired"
		case left <= 0:
			v.State = "free"
		case s.JobID != "":
			v.State = "busy"
		case left > d.cfg.RefusalBackoff:
			v.State = "claiming"
		default:
			v.State = "backoff"
		}
		if left > 0 {
			v.LeaseLeft = left.Seconds()
		}
		out[i] = v
	}
	return out, nil
}

// maxQueueDepthCounted bounds the queue-depth gauge's read: a deeper queue
// shows this many, which is already an alert.
const maxQueueDepthCounted = 10000

// ObserveMetrics makes the GPU gauges (queue depth, slots by state) read
// this dispatcher's pool at each metrics collection: one bounded count and
// one read of the slot documents, whatever the queue holds.
func (d *Dispatcher) ObserveMetrics() error {
	return d.cfg.Metrics.ObserveGPU(func(ctx context.Context) (metrics.GPUState, error) {
		slots, err := d.Slots(ctx)
		if err != nil {
			return metrics.GPUState{}, err
		}
		queued, err := d.q.CountQueued(ctx, maxQueueDepthCounted)
		if err != nil {
			return metrics.GPUState{}, fmt.Errorf("gpu: count queued: %w", err)
		}
		st := metrics.GPUState{Queued: queued, Slots: map[string]int64{}}
		for _, s := range slots {
			st.Slots[s.State]++
		}
		return st, nil
	})
}
