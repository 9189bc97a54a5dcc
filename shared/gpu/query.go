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
	Tenant    string    // empty for every tenant
	PageToken string
	PageSize  int // 0 means 50
}

// List returns one page of jobs, newest first, with a keyset cursor.
func (d *Dispatcher) List(ctx context.Context, q ListQuery) (jobs []Job, next string, err error) {
	if q.Status != "" && !q.Status.Valid() {
		return nil, "", httpapi.BadRequest("status", "must be one of %v, not %q", AllJobStatuses(), q.Status)
	}
	if q.Tenant != "" && !ValidTenant(q.Tenant) {
		return nil, "", httpapi.BadRequest("tenant", "must be 1-63 letters, digits and ._- starting with a letter or digit, not %q", q.Tenant)
	}
	if q.PageSize < 0 || q.PageSize > 1000 {
		return nil, "", httpapi.BadRequest("pageSize", "must be from 1 to 1000, not %d", q.PageSize)
	}
	jobs, next, err = d.q.List(ctx, q.Status, q.Tenant, q.PageToken, q.PageSize)
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
	// GPUType is the slot's type from the pool ("" untyped).
	GPUType string `json:"gpuType,omitempty"`
}

// QueuedView is a tenant's next job as GET /gpu/pool shows it: the head of
// its queue, and where it stands in the dispatch order.
type QueuedView struct {
	// Position is 1 for the job the next free slot of its type takes.
	Position int    `json:"position"`
	JobID    string `json:"jobId"`
	Tenant   string `json:"tenant"`
	Priority int    `json:"priority"`
	GPUType  string `json:"gpuType,omitempty"`
}

// PoolView is GET /gpu/pool: the slots, the tenants and the heads of
// their queues in dispatch order.
type PoolView struct {
	Slots   []SlotView   `json:"slots"`
	Tenants []TenantView `json:"tenants"`
	// Next lists each tenant's head job in the order fair share would
	// dispatch them if slots freed now (one per tenant: the jobs behind
	// each head are not read).
	Next []QueuedView `json:"next"`
}

// maxTenantQueuedCounted bounds each tenant's queued count in the pool
// view.
const maxTenantQueuedCounted = 10000

// View describes the pool: every slot, each tenant's queued and running
// jobs against its weight, quota and share, and the heads of the queues in
// dispatch order. Its reads: the slot documents, the heads (one job per
// tenant and type) and one bounded count per tenant.
func (d *Dispatcher) View(ctx context.Context) (PoolView, error) {
	slots, err := d.Slots(ctx)
	if err != nil {
		return PoolView{}, err
	}
	running := map[string]int{}
	usage, offset := map[string]float64{}, map[string]float64{}
	now := d.cfg.Clock.Now()
	for _, s := range slots {
		if s.JobID != "" {
			t := s.Tenant
			if t == "" {
				t = DefaultTenant
			}
			running[t]++
		}
		for t, u := range d.slotUsage(s.Slot, now) {
			usage[t] += u
		}
		for t, o := range d.slotOffsets(s.Slot, now) {
			offset[t] = max(offset[t], o)
		}
	}
	for t, o := range offset {
		usage[t] += o
	}
	heads, err := d.q.QueueHeads(ctx, append([]string{""}, d.cfg.Pool.Types()...), maxTenantsPerDispatch)
	if err != nil {
		return PoolView{}, fmt.Errorf("gpu: pool: queue heads: %w", err)
	}
	queued := map[string]int64{}
	names := map[string]bool{}
	for _, h := range heads {
		names[h.TenantOf()] = true
	}
	for t := range d.cfg.Weights {
		names[t] = true
	}
	for t := range d.cfg.Quotas {
		names[t] = true
	}
	for t := range names {
		n, err := d.q.CountQueuedTenant(ctx, t, maxTenantQueuedCounted)
		if err != nil {
			return PoolView{}, fmt.Errorf("gpu: pool: count queued of %s: %w", t, err)
		}
		if n > 0 {
			queued[t] = n
		}
	}
	// The dispatch order of the heads: fair share's order on their slot
	// type (rank; quota ignored: a tenant at its cap still shows where
	// it stands), the types in the pool's order.
	var next []QueuedView
	raw := make([]Slot, len(slots))
	for i, sv := range slots {
		raw[i] = sv.Slot
	}
	byType := map[string][]Job{}
	for _, h := range heads {
		byType[h.GPUType] = append(byType[h.GPUType], h)
	}
	for _, typ := range append([]string{""}, d.cfg.Pool.Types()...) {
		for _, r := range d.rank(byType[typ], d.fairFrom(raw, "", typ)) {
			h := r.head
			next = append(next, QueuedView{Position: len(next) + 1, JobID: h.ID, Tenant: h.TenantOf(), Priority: h.Priority, GPUType: h.GPUType})
		}
	}
	if next == nil {
		next = []QueuedView{}
	}
	return PoolView{Slots: slots, Tenants: d.tenantViews(queued, running, usage), Next: next}, nil
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
		v := SlotView{Slot: s, GPUType: d.types[s.ID]}
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
