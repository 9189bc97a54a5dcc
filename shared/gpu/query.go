package gpu

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// Get reads one job, or returns ErrNotFound.
func (d *Dispatcher) Get(ctx context.Context, id string) (Job, error) {
	var job Job
	err := d.jobs.Get(ctx, id, &job)
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
	filter := bson.D{}
	if q.Status != "" {
		if !q.Status.Valid() {
			return nil, "", httpapi.BadRequest("status", "must be one of %v, not %q", AllJobStatuses(), q.Status)
		}
		filter = bson.D{{Key: "status", Value: q.Status}}
	}
	if q.PageSize < 0 || q.PageSize > 1000 {
		return nil, "", httpapi.BadRequest("pageSize", "must be from 1 to 1000, not %d", q.PageSize)
	}
	p, err := d.jobs.Page(ctx, mongostore.PageQuery{Filter: filter, SortField: "createdAt", SortType: bson.TypeDateTime, IDType: bson.TypeString, Desc: true, Limit: q.PageSize, Token: q.PageToken}, &jobs)
	if errors.Is(err, store.ErrBadPageToken) {
		return nil, "", httpapi.BadRequest("pageToken", "is not a token from this listing; start without it")
	}
	if err != nil {
		return nil, "", fmt.Errorf("gpu: list jobs: %w", err)
	}
	if jobs == nil {
		jobs = []Job{}
	}
	return jobs, p.NextToken, nil
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
	ids := make(bson.A, len(d.ids))
	for i, id := range d.ids {
		ids[i] = id
	}
	var slots []Slot
	if err := d.slots.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}, &slots, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}})); err != nil {
		return nil, fmt.Errorf("gpu: pool: %w", err)
	}
	now := d.cfg.Now()
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
