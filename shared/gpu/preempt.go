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
// that tenant is behind the victim's by fair share: its usage ÷ weight on
// the slot's type (the credit cap applied, see rank) is below the
// victim tenant's. Victims go lowest priority first, then the latest
// started. A
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
	var slots []Slot // read once, when two tenants are compared
	for _, v := range victims {
		if v.Preemptions >= d.cfg.MaxPreemptions || v.StartedAt == nil || v.StartedAt.After(startedBy) {
			continue
		}
		if _, ok := d.types[v.Slot]; !ok {
			continue // a slot no longer in the pool: nothing to hand on
		}
		hr := <-d.readHeads(ctx, v.Slot)
		if hr.err != nil {
			return "", hr.err
		}
		head, _, ok, err := d.choose(ctx, v.Slot, hr.heads)
		if err != nil {
			return "", err
		}
		if !ok || head.Priority <= v.Priority {
			continue
		}
		// Within one tenant the slot stays the tenant's, so priority
		// alone decides; across tenants, the taker must be behind the
		// victim's tenant by usage, the measure a free slot goes by.
		if head.TenantOf() != v.TenantOf() {
			if slots == nil {
				if slots, err = d.q.Slots(ctx, d.ids); err != nil {
					return "", fmt.Errorf("read slots: %w", err)
				}
			}
			if !d.behind(d.fairFrom(slots, "", d.types[v.Slot]), hr.heads, head, v.TenantOf()) {
				continue
			}
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

// behind reports whether head's tenant is behind victim's by fair share
// at st: its usage ÷ weight, as rank compares it among heads, below the
// victim tenant's.
func (d *Dispatcher) behind(st *fairState, heads []Job, head Job, victim string) bool {
	for _, r := range d.rank(heads, st) {
		if r.head.ID == head.ID {
			return r.v < st.usage[victim]/float64(d.weight(victim))
		}
	}
	return false
}
