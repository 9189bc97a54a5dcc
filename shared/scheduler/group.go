package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// Concurrency groups (schedule.Concurrency): at most Limit runs of a group
// execute at once, across the group's schedules.
//
// # Slots
//
// A group of limit L has L slot leases, GroupSlotLease(group, k) for k in
// [0, L): ordinary leases (shared/lease), so a slot is taken by compare and
// set on its object's generation, heartbeated by the lease while the run
// executes, released after it, and freed by expiry when its holder dies.
// A run of a schedule with limit L tries the first L slots only (see
// schedule.Concurrency for schedules of one group with different limits).
// The slot's epoch fences nothing: the run's writes stay fenced by its job
// lease (or, for an allow schedule, conditional on its status), and losing
// the slot cancels the run as losing the job lease does.
//
// # Order of the two leases
//
// Job lease first, then the slot, and the slot is only ever tried, never
// waited for. A run that finds the group full records that it waits
// (waitingFor "group <name>", on the run), releases its job lease at once
// and stays pending: nothing is held while waiting, so there is no
// deadlock (a holder of a slot never waits for a job lease either) and a
// waiting run of one schedule never blocks that schedule's job lease, nor
// an execution goroutine. The overlap policy is not applied to a run that
// waits for its group: the policy is about the schedule's previous run
// still running, and a waiting run is not running.
//
// # Order across waiting runs
//
// A group's waiting runs form a line, oldest fire time first
// (store.Runs.OldestGroupWaiting). A run takes a slot only when no older
// run of its group waits: one read per run of a group schedule. A run
// that is behind another waits too, even if a slot is free, so a slot
// that frees goes to the head of the line.
//
// # Who runs a waiting run
//
// A waiting run is pending, so every way a pending run gets executed
// applies: its task is delivered again (Execute answers 503), and the
// sweep recovers it at its sweepAt, which the wait moves to GroupRecheck
// from now. When a run releases its slot it also hands the head of the
// line a new task at once (kickGroup), so a freed slot is used without
// waiting for a redelivery. A holder that dies frees its slot by expiry;
// the waiting runs' redeliveries and the sweep find it free: no stall.
//
// # Exactly once
//
// The claim (pending → running) still decides who executes a run. Two
// deliveries of one run of an allow schedule may both take a slot; the
// one whose claim loses releases its slot at once.

// GroupSlotLease is the name of slot k of concurrency group group.
func GroupSlotLease(group string, k int) string { return fmt.Sprintf("group-%s-%d", group, k) }

// GroupRecheck is how long after a run recorded that it waits for its
// group the sweep looks at it again, should neither a redelivery nor a
// freed slot's hand-off run it first.
const GroupRecheck = 5 * time.Second

// GroupWaitReason is the waitingFor of a run that waits for a slot of
// group.
func GroupWaitReason(group string) string { return "group " + group }

// groupSlot takes a slot of s's concurrency group for r, before r's claim.
// ok is false when r must wait: the group is full, an older run of the
// group waits, or the slots could not be read; the wait is then recorded
// on r. A schedule without a group needs no slot (nil, true).
func (e *Engine) groupSlot(ctx context.Context, s *schedule.Schedule, r *runDoc) (slot *lease.Lease, ok bool) {
	g := s.Concurrency
	if g == nil {
		return nil, true
	}
	head, err := e.runs.OldestGroupWaiting(ctx, g.Group)
	switch {
	case err == nil && head.ID != r.ID && runBefore(head, r):
		e.waitForGroup(ctx, s, r, "behind "+head.ID)
		return nil, false
	case err != nil && !errors.Is(err, store.ErrNotFound):
		// Unknown: taking a slot could pass an older waiting run. Wait.
		e.log.Warn("read the concurrency group's line failed; the run waits", "run", r.ID, "group", g.Group, "err", err)
		e.waitForGroup(ctx, s, r, "its line could not be read")
		return nil, false
	}
	for k := range g.Limit {
		l, err := e.cfg.Leases.Acquire(ctx, GroupSlotLease(g.Group, k), leaseTTL(s))
		if err == nil {
			return l, true
		}
		var held *lease.HeldError
		if !errors.As(err, &held) {
			e.log.Warn("concurrency slot acquire failed; the run waits", "run", r.ID, "slot", GroupSlotLease(g.Group, k), "err", err)
			e.waitForGroup(ctx, s, r, "a slot could not be read")
			return nil, false
		}
	}
	e.waitForGroup(ctx, s, r, fmt.Sprintf("all %d slots held", g.Limit))
	return nil, false
}

// runBefore reports whether a is ahead of b in a group's line: the older
// fire time, then the smaller id.
func runBefore(a, b *runDoc) bool {
	if !a.FireTime.Equal(b.FireTime) {
		return a.FireTime.Before(b.FireTime)
	}
	return a.ID < b.ID
}

// waitForGroup records on r that it waits for its group (why says what it
// met), due for the sweep GroupRecheck from now. Best effort: a run whose
// wait is not recorded is still pending, so it is delivered again and
// recovered by the sweep at its old sweepAt; it only misses its place in
// the line until a later wait is recorded.
func (e *Engine) waitForGroup(ctx context.Context, s *schedule.Schedule, r *runDoc, why string) {
	g := s.Concurrency.Group
	reason := GroupWaitReason(g)
	e.log.Info("concurrency group full; the run waits", "run", r.ID, "group", g, "why", why)
	if e.beforeGroupWait != nil {
		e.beforeGroupWait(r.ID)
	}
	err := e.runs.WaitForGroup(ctx, r.ID, g, reason, r.FireTime, e.now().UTC().Add(GroupRecheck))
	if err != nil && !errors.Is(err, store.ErrConflict) {
		e.log.Warn("record the wait for the concurrency group failed; the run is delivered again", "run", r.ID, "group", g, "err", err)
		return
	}
	if err == nil {
		r.WaitingFor, r.Group = reason, g
	}
}

// holdSlot ties r's execution to its slot: ctx is cancelled when the slot
// is lost (a renew refused: someone took it after it expired), and done
// releases the slot and hands the group's next waiting run a task.
func (e *Engine) holdSlot(ctx context.Context, s *schedule.Schedule, slot *lease.Lease) (context.Context, func()) {
	sctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(slot.Context(), func() { cancel(context.Cause(slot.Context())) }) //nolint:contextcheck // the AfterFunc callback only cancels; it makes no call that takes a context
	return sctx, func() {
		stop()
		cancel(nil)
		e.release(ctx, s, slot)
		e.kickGroup(ctx, s.Concurrency.Group)
	}
}

// kickGroup hands the run at the head of group's line a new task, so that
// the slot just released is used at once rather than at its next
// redelivery or sweep. Best effort: without a task queue (in-process
// execution), or when this fails, those still run it.
func (e *Engine) kickGroup(ctx context.Context, group string) {
	if e.cfg.Tasks == nil {
		return
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	head, err := e.runs.OldestGroupWaiting(kctx, group)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			e.log.Warn("read the concurrency group's line failed; its head waits for a redelivery", "group", group, "err", err)
		}
		return
	}
	ids := []string{head.ID}
	t := Task{Name: TaskName(ids, "group@"+e.now().UTC().Format(time.RFC3339Nano)), ScheduleID: head.ScheduleID, Runs: ids}
	if err := e.cfg.Tasks.Dispatch(kctx, t); err != nil {
		e.log.Warn("hand the concurrency group's next run a task failed; it waits for a redelivery", "run", head.ID, "err", err)
	}
}
