package gpu

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-cron/baton/shared/store"
)

// preemptLogged runs preempt and logs its failure: a job not preempted
// now still runs when a slot frees.
func (d *Dispatcher) preemptLogged(ctx context.Context) {
	if _, err := d.preempt(ctx); err != nil {
		d.cfg.Logger.Warn("gpu: preempt", "error", err.Error())
	}
}

// preempt is called after an enqueue of a priority above 0 that found no
// slot, and by every Sweep (each tick). It marks at most one running
// preemptible job Preempting when the job fill would give its slot is of
// higher priority and, when it is another tenant's than the victim's,
// that tenant runs fewer slots than its fair share. Victims go lowest priority first, then the latest started. A
// job is spared before PreemptMinRun of running and after MaxPreemptions
// preemptions, and nothing is marked while another preemption is under
// way, so one urgent job stops one job, not a slot's worth each time
// Dispatch runs. It returns the job marked ("" for none).
//
// The mark is the only write here. The victim's worker learns of it from
// its next heartbeat's 409, stops the command and reports; that
// completion requeues the victim with no attempt used and hands its slot
// to the queue (Complete), so the victim is never queued while its
// command may still run.
func (d *Dispatcher) preempt(ctx context.Context) (string, error) {
	victims, err := d.q.RunningPreemptible(ctx, len(d.ids))
	if err != nil {
		return "", fmt.Errorf("running preemptible jobs: %w", err)
	}
	for _, v := range victims {
		if v.Preempting {
			return "", nil // one at a time
		}
	}
	now := d.cfg.Clock.Now().UTC()
	startedBy := now.Add(-d.cfg.PreemptMinRun)
	var running map[string]int
	var shares map[string]float64
	for _, v := range victims {
		if v.Preemptions >= d.cfg.MaxPreemptions || v.StartedAt == nil || v.StartedAt.After(startedBy) {
			continue
		}
		if _, ok := d.types[v.Slot]; !ok {
			continue // a slot no longer in the pool: nothing to hand on
		}
		head, ok, err := d.best(ctx, v.Slot)
		if err != nil {
			return "", err
		}
		if !ok || head.Priority <= v.Priority {
			continue
		}
		if shares == nil && head.TenantOf() != v.TenantOf() {
			if running, shares, err = d.shares(ctx); err != nil {
				return "", err
			}
		}
		// Within one tenant the slot stays the tenant's, so priority
		// alone decides; across tenants, the taker must be below its share.
		if t := head.TenantOf(); t != v.TenantOf() && float64(running[t]) >= shares[t] {
			continue
		}
		err = d.q.MarkPreempting(ctx, v, startedBy, d.cfg.MaxPreemptions)
		if errors.Is(err, store.ErrConflict) {
			continue // it finished, was cancelled or someone marked it first
		}
		if err != nil {
			return "", fmt.Errorf("mark %s preempting: %w", v.ID, err)
		}
		d.cfg.Logger.Info("gpu: preempting a job for a higher-priority one", "job", v.ID, "priority", v.Priority,
			"for", head.ID, "forPriority", head.Priority, "preemptions", v.Preemptions)
		return v.ID, nil
	}
	return "", nil
}

// shares reads each tenant's running slots and its weighted fair share of
// the pool now, as GET /gpu/pool computes it (tenantViews): the tenants
// with a queued or running job share the slots by weight, capped by quota.
func (d *Dispatcher) shares(ctx context.Context) (map[string]int, map[string]float64, error) {
	running, err := d.running(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	heads, err := d.q.QueueHeads(ctx, append([]string{""}, d.cfg.Pool.Types()...), maxTenantsPerDispatch)
	if err != nil {
		return nil, nil, fmt.Errorf("queue heads: %w", err)
	}
	queued := map[string]int64{}
	for _, h := range heads {
		queued[h.TenantOf()] = 1 // only whether it has work counts for the share
	}
	shares := map[string]float64{}
	for _, v := range d.tenantViews(queued, running) {
		shares[v.Tenant] = v.Share
	}
	return running, shares, nil
}
