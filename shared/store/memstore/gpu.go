package memstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/gpu/gpumodel"
	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// gpuQueue implements store.GPU, as mongostore's does: every conditional
// write is one findAndModify (or update) whose filter is the guard.
type gpuQueue struct{ s *Store }

var _ store.GPU = gpuQueue{}

const (
	jobsColl  = mongostore.GPUJobsCollection
	slotsColl = mongostore.GPUSlotsCollection
)

// findAndModify is mongostore's FindOneAndUpdate: the first document that
// matches, in less's order (then _id), is changed by apply in one write
// and returned as it is after; retried on 112; nothing matching is
// ErrConflict; a lost answer ErrUnknownOutcome.
func (s *Store) findAndModify(ctx context.Context, coll string, match func(bson.M) bool, less func(a, b bson.M) bool, apply func(bson.M) bson.M) (bson.M, error) {
	var out bson.M
	err := retryWrite(ctx, false, func() error {
		s.mu.Lock()
		f := s.takeFault(coll, "findAndModify")
		s.mu.Unlock()
		if f != nil && !f.afterRun {
			return &serverError{code: f.code}
		}
		if err := s.wait(ctx, KindUpdate); err != nil {
			return err
		}
		s.mu.Lock()
		c := s.coll(coll)
		var best bson.M
		for _, m := range c {
			if !match(m) {
				continue
			}
			if best == nil || (less != nil && less(m, best)) || ((less == nil || !less(best, m)) && idOf(m) < idOf(best)) {
				best = m
			}
		}
		out = nil
		if best != nil {
			out = apply(clone(best))
			s.put(coll, idOf(best), out)
		}
		s.mu.Unlock()
		if f != nil {
			return &serverError{code: f.code, applied: true}
		}
		if best == nil {
			return errMiss
		}
		return nil
	})
	switch {
	case errors.Is(err, errMiss):
		return nil, fmt.Errorf("store: find-and-update %s: %w", coll, store.ErrConflict)
	case err != nil:
		return nil, writeError("find-and-update", coll, err)
	}
	s.meter.Add(coll+".findAndModify", 1)
	s.landed(coll, "findAndModify", idOf(out), out)
	return out, nil
}

func byID(id string) func(bson.M) bool { return func(m bson.M) bool { return idOf(m) == id } }

func and(fs ...func(bson.M) bool) func(bson.M) bool {
	return func(m bson.M) bool {
		for _, f := range fs {
			if !f(m) {
				return false
			}
		}
		return true
	}
}

func jobStatusIn(sts ...gpumodel.JobStatus) func(bson.M) bool {
	return func(m bson.M) bool {
		st := gpumodel.JobStatus(strOf(m["status"]))
		return slices.Contains(sts, st)
	}
}

var gpuActive = jobStatusIn(gpumodel.StatusDispatched, gpumodel.StatusRunning)

func intIs(field string, want int64) func(bson.M) bool {
	return func(m bson.M) bool { n, ok := intOf(m[field]); return ok && n == want }
}

func strIs(field, want string) func(bson.M) bool {
	return func(m bson.M) bool { return eqStr(m, field, want) }
}

func notTrue(field string) func(bson.M) bool { return func(m bson.M) bool { return !isTrue(m, field) } }

func gpuHeld(id, slot string, epoch int64) func(bson.M) bool {
	return and(byID(id), strIs("slot", slot), intIs("epoch", epoch), gpuActive)
}

func gpuHeldBy(id string, h gpumodel.Hold) func(bson.M) bool {
	return and(gpuHeld(id, h.Slot, h.Epoch), strIs("secretHash", h.SecretHash))
}

// set and unset make an update, as bson's $set and $unset.
func setUnset(set bson.M, unset ...string) func(bson.M) bson.M { return upd(set, unset...) }

func gpuSlotClaim(leaseUntil time.Time) func(bson.M) bson.M {
	return func(m bson.M) bson.M {
		n, _ := intOf(m["epoch"])
		m["epoch"], m["jobId"], m["leaseUntil"] = n+1, "", val(leaseUntil)
		delete(m, "secretHash")
		return m
	}
}

func gpuTakeBack(job gpumodel.Job, reason string, now time.Time) func(bson.M) bson.M {
	attempts, dead := job.TakenBack()
	if dead {
		return setUnset(bson.M{"status": gpumodel.StatusDead, "attempts": int64(attempts), "error": reason, "finishedAt": now, "epoch": int64(0)},
			"slot", "secretHash", "leaseUntil", "preempting")
	}
	return setUnset(bson.M{"status": gpumodel.StatusQueued, "attempts": int64(attempts), "error": reason, "epoch": int64(0)},
		"slot", "worker", "secretHash", "leaseUntil", "dispatchedAt", "startedAt", "heartbeatAt", "preempting")
}

func gpuDispatch(slot gpumodel.Slot, secretHash string, now, leaseUntil time.Time) func(bson.M) bson.M {
	return setUnset(bson.M{"status": gpumodel.StatusDispatched, "slot": slot.ID, "worker": slot.Worker,
		"epoch": slot.Epoch, "secretHash": secretHash, "leaseUntil": leaseUntil, "dispatchedAt": now})
}

func (g gpuQueue) job(m bson.M, err error) (gpumodel.Job, error) {
	if err != nil {
		return gpumodel.Job{}, err
	}
	var j gpumodel.Job
	if err := decode(m, &j); err != nil {
		return gpumodel.Job{}, fmt.Errorf("store: decode %s: %w", jobsColl, err)
	}
	return j, nil
}

func (g gpuQueue) slot(m bson.M, err error) (gpumodel.Slot, error) {
	if err != nil {
		return gpumodel.Slot{}, err
	}
	var sl gpumodel.Slot
	if err := decode(m, &sl); err != nil {
		return gpumodel.Slot{}, fmt.Errorf("store: decode %s: %w", slotsColl, err)
	}
	return sl, nil
}

func (g gpuQueue) updateJob(ctx context.Context, match func(bson.M) bool, apply func(bson.M) bson.M) error {
	_, err := g.s.findAndModify(ctx, jobsColl, match, nil, apply)
	return err
}

func (g gpuQueue) updateSlot(ctx context.Context, id string, epoch int64, set bson.M) error {
	_, err := g.s.findAndModify(ctx, slotsColl, and(byID(id), intIs("epoch", epoch)), nil, setUnset(set))
	return err
}

func (g gpuQueue) EnsureSlots(ctx context.Context, slots ...gpumodel.Slot) error {
	for _, slot := range slots {
		if _, err := g.s.insert(ctx, slotsColl, slot); err != nil {
			return fmt.Errorf("slot %s: %w", slot.ID, err)
		}
	}
	return nil
}

func (g gpuQueue) UpgradeQueued(ctx context.Context, limit int) (int, error) {
	n := 0
	for _, f := range []struct {
		key string
		val string
	}{{"gpuType", ""}, {"tenant", gpumodel.DefaultTenant}} {
		for n < limit {
			// One matching job per write, as mongostore's UpdateOne.
			_, err := g.s.findAndModify(ctx, jobsColl, func(m bson.M) bool {
				_, has := m[f.key]
				return eqStr(m, "status", string(gpumodel.StatusQueued)) && !has
			}, nil, setUnset(bson.M{f.key: f.val}))
			if errors.Is(err, store.ErrConflict) {
				break // none left
			}
			if err != nil {
				return n, fmt.Errorf("upgrade queued jobs' %s: %w", f.key, err)
			}
			n++
		}
	}
	return n, nil
}

func (g gpuQueue) Enqueue(ctx context.Context, job gpumodel.Job) (bool, error) {
	return g.s.insert(ctx, jobsColl, job)
}

func (g gpuQueue) Get(ctx context.Context, id string) (gpumodel.Job, error) {
	return g.job(g.s.get(ctx, jobsColl, id))
}

func (g gpuQueue) List(ctx context.Context, status gpumodel.JobStatus, tenant string, pageToken string, pageSize int) ([]gpumodel.Job, string, error) {
	got, next, err := g.s.page(ctx, pageQuery{coll: jobsColl, binding: "status=" + string(status) + "&tenant=" + tenant,
		match: func(m bson.M) bool {
			return (status == "" || eqStr(m, "status", string(status))) && (tenant == "" || eqStr(m, "tenant", tenant))
		}, sortField: "createdAt", desc: true, limit: pageSize, token: pageToken})
	if err != nil {
		return nil, "", err
	}
	jobs, err := decodeAll[gpumodel.Job](jobsColl, got)
	return jobs, next, err
}

func queued(m bson.M) bool { return eqStr(m, "status", string(gpumodel.StatusQueued)) }

func (g gpuQueue) AnyQueued(ctx context.Context) (bool, error) {
	got, err := g.s.find(ctx, jobsColl, "find", queued, nil, 1)
	return len(got) > 0, err
}

// countLimit is mongostore's CountLimit: the matches, up to limit,
// metered as the documents counted.
func (s *Store) countLimit(ctx context.Context, coll string, match func(bson.M) bool, limit int64) (int64, error) {
	got, err := s.find(ctx, coll, "count", match, nil, int(limit))
	return int64(len(got)), err
}

func (g gpuQueue) CountQueued(ctx context.Context, limit int64) (int64, error) {
	return g.s.countLimit(ctx, jobsColl, queued, limit)
}

func (g gpuQueue) CountQueuedTenant(ctx context.Context, tenant string, limit int64) (int64, error) {
	return g.s.countLimit(ctx, jobsColl, and(queued, strIs("tenant", tenant)), limit)
}

// queueLess is the queue's order: highest priority, then oldest, then id.
func queueLess(a, b bson.M) bool {
	pa, _ := intOf(a["priority"])
	pb, _ := intOf(b["priority"])
	if pa != pb {
		return pa > pb
	}
	if c := cmpTime(a, b, "createdAt"); c != 0 {
		return c < 0
	}
	return cmpID(a, b) < 0
}

func (g gpuQueue) QueueHeads(ctx context.Context, gpuTypes []string, maxTenants int) ([]gpumodel.Job, error) {
	best := map[string]gpumodel.Job{}
	var order []string
	for _, typ := range gpuTypes {
		heads, err := g.typeHeads(ctx, typ, maxTenants)
		if err != nil {
			return nil, fmt.Errorf("queue heads of type %q: %w", typ, err)
		}
		for _, job := range heads {
			key := job.TenantOf()
			cur, seen := best[key]
			if !seen {
				order = append(order, key)
			}
			if !seen || gpuBefore(job, cur) {
				best[key] = job
			}
		}
	}
	heads := make([]gpumodel.Job, 0, len(order))
	for _, t := range order {
		heads = append(heads, best[t])
	}
	return heads, nil
}

// typeHeads is mongostore's skip scan over the tenants of one type: one
// indexed read per tenant, plus the last tenant's name.
func (g gpuQueue) typeHeads(ctx context.Context, typ string, maxTenants int) ([]gpumodel.Job, error) {
	base := and(queued, func(m bson.M) bool {
		v, ok := m["gpuType"]
		return ok && strOf(v) == typ
	})
	last, lerr := g.s.findOne(ctx, jobsColl, base, func(a, b bson.M) bool { return strOf(a["tenant"]) > strOf(b["tenant"]) })
	if lerr != nil && !errors.Is(lerr, store.ErrNotFound) {
		return nil, lerr
	}
	var heads []gpumodel.Job
	var after *string
	for len(heads) < maxTenants {
		match := base
		if after != nil {
			a := *after
			match = and(base, func(m bson.M) bool { return strOf(m["tenant"]) > a })
		}
		m, err := g.s.findOne(ctx, jobsColl, match, func(a, b bson.M) bool {
			if c := strings.Compare(strOf(a["tenant"]), strOf(b["tenant"])); c != 0 {
				return c < 0
			}
			return queueLess(a, b)
		})
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		m = clone(m)
		delete(m, "payload")
		job, err := g.job(m, nil)
		if err != nil {
			return nil, err
		}
		heads = append(heads, job)
		if lerr == nil && job.Tenant >= strOf(last["tenant"]) {
			return heads, nil
		}
		t := job.Tenant
		after = &t
	}
	return heads, nil
}

func gpuBefore(a, b gpumodel.Job) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.Before(b.CreatedAt)
	}
	return a.ID < b.ID
}

func (g gpuQueue) ClaimJob(ctx context.Context, id string, slot gpumodel.Slot, secretHash string, now, leaseUntil time.Time) (gpumodel.Job, error) {
	return g.job(g.s.findAndModify(ctx, jobsColl, and(byID(id), queued), nil, gpuDispatch(slot, secretHash, now, leaseUntil)))
}

func (g gpuQueue) ClaimTenantJob(ctx context.Context, tenant string, gpuTypes []string, slot gpumodel.Slot, secretHash string, now, leaseUntil time.Time) (gpumodel.Job, error) {
	claim := func(typ string) (gpumodel.Job, error) {
		return g.job(g.s.findAndModify(ctx, jobsColl, and(queued, strIs("gpuType", typ), strIs("tenant", tenant)), queueLess,
			gpuDispatch(slot, secretHash, now, leaseUntil)))
	}
	switch len(gpuTypes) {
	case 0:
		return gpumodel.Job{}, fmt.Errorf("store: claim tenant %q job: no gpu type: %w", tenant, store.ErrConflict)
	case 1:
		return claim(gpuTypes[0])
	}
	var err error
	for range gpuTypes {
		var best gpumodel.Job
		typ, ok := "", false
		for _, t := range gpuTypes {
			m, ferr := g.s.findOne(ctx, jobsColl, and(queued, strIs("gpuType", t), strIs("tenant", tenant)), queueLess)
			if errors.Is(ferr, store.ErrNotFound) {
				continue
			}
			if ferr != nil {
				return gpumodel.Job{}, fmt.Errorf("store: head of tenant %q type %q: %w", tenant, t, ferr)
			}
			head, derr := g.job(m, nil)
			if derr != nil {
				return gpumodel.Job{}, derr
			}
			if !ok || gpuBefore(head, best) {
				typ, best, ok = t, head, true
			}
		}
		if !ok {
			return gpumodel.Job{}, fmt.Errorf("store: claim tenant %q job: none of types %q queued: %w", tenant, gpuTypes, store.ErrConflict)
		}
		var job gpumodel.Job
		job, err = claim(typ)
		if !errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrContended) {
			return job, err
		}
	}
	return gpumodel.Job{}, err
}

func (g gpuQueue) Slots(ctx context.Context, ids []string) ([]gpumodel.Slot, error) {
	got, err := g.s.find(ctx, slotsColl, "find", func(m bson.M) bool { return slices.Contains(ids, idOf(m)) },
		func(a, b bson.M) bool { return cmpID(a, b) < 0 }, 0)
	if err != nil {
		return nil, err
	}
	return decodeAll[gpumodel.Slot](slotsColl, got)
}

func (g gpuQueue) ClaimSlot(ctx context.Context, ids []string, expiredBy, leaseUntil time.Time) (gpumodel.Slot, error) {
	return g.slot(g.s.findAndModify(ctx, slotsColl,
		func(m bson.M) bool { return slices.Contains(ids, idOf(m)) && timeLTE(m, "leaseUntil", expiredBy) },
		byTimeThenID("leaseUntil"), gpuSlotClaim(leaseUntil)))
}

func (g gpuQueue) ReclaimSlot(ctx context.Context, h gpumodel.Hold, jobID string, leaseUntil time.Time) (gpumodel.Slot, error) {
	return g.slot(g.s.findAndModify(ctx, slotsColl,
		and(byID(h.Slot), intIs("epoch", h.Epoch), strIs("secretHash", h.SecretHash), func(m bson.M) bool {
			j, ok := m["jobId"].(string)
			return ok && (j == jobID || j == "")
		}), nil, gpuSlotClaim(leaseUntil)))
}

func (g gpuQueue) ClaimBestJob(ctx context.Context, slot gpumodel.Slot, secretHash string, now, leaseUntil time.Time) (gpumodel.Job, error) {
	return g.job(g.s.findAndModify(ctx, jobsColl, queued, queueLess, gpuDispatch(slot, secretHash, now, leaseUntil)))
}

func (g gpuQueue) LinkSlot(ctx context.Context, slotID string, epoch int64, jobID, tenant, secretHash string, leaseUntil time.Time, usage gpumodel.SlotUsage) error {
	set := bson.M{"jobId": jobID, "tenant": tenant, "secretHash": secretHash, "leaseUntil": leaseUntil}
	if usage.At.IsZero() {
		return g.updateSlot(ctx, slotID, epoch, set)
	}
	// As mongostore: the fair-share usage folded in at the link, and the
	// hold it starts; freedAt goes, so the next release sets it.
	orEmpty := func(l []gpumodel.TenantUsage) []gpumodel.TenantUsage {
		if l == nil {
			return []gpumodel.TenantUsage{}
		}
		return l
	}
	set["usage"], set["offsets"], set["holds"] = orEmpty(usage.Usage), orEmpty(usage.Offsets), orEmpty(usage.Holds)
	set["usageAt"], set["linkedTenant"], set["linkedAt"] = usage.At, tenant, usage.At
	_, err := g.s.findAndModify(ctx, slotsColl, and(byID(slotID), intIs("epoch", epoch)), nil, setUnset(set, "freedAt"))
	return err
}

func (g gpuQueue) ExtendSlot(ctx context.Context, slotID string, epoch int64, jobID string, leaseUntil time.Time) error {
	return g.updateSlot(ctx, slotID, epoch, bson.M{"jobId": jobID, "leaseUntil": leaseUntil})
}

func (g gpuQueue) Release(ctx context.Context, slotID string, epoch int64, claimableAt, freedAt time.Time) error {
	set := bson.M{"jobId": "", "tenant": "", "leaseUntil": claimableAt}
	if freedAt.IsZero() {
		return g.updateSlot(ctx, slotID, epoch, set)
	}
	_, err := g.s.findAndModify(ctx, slotsColl, and(byID(slotID), intIs("epoch", epoch)), nil, func(m bson.M) bson.M {
		m = upd(set)(m)
		if t, ok := msOf(m["freedAt"]); !ok || ms(freedAt) < t {
			m["freedAt"] = val(freedAt) // $min: a second release must not stretch the hold
		}
		return m
	})
	return err
}

func (g gpuQueue) Heartbeat(ctx context.Context, id string, h gpumodel.Hold, now, leaseUntil time.Time) (gpumodel.Job, error) {
	return g.job(g.s.findAndModify(ctx, jobsColl, and(gpuHeldBy(id, h), notTrue("preempting")), nil, func(m bson.M) bson.M {
		m["status"], m["heartbeatAt"], m["leaseUntil"] = string(gpumodel.StatusRunning), val(now), val(leaseUntil)
		if t, ok := msOf(m["startedAt"]); !ok || ms(now) < t {
			m["startedAt"] = val(now) // $min
		}
		return m
	}))
}

func (g gpuQueue) Complete(ctx context.Context, id string, h gpumodel.Hold, o gpumodel.Outcome, now time.Time) (gpumodel.Job, error) {
	match := gpuHeldBy(id, h)
	if o.UnlessPreempting {
		match = and(match, notTrue("preempting"))
	}
	return g.job(g.s.findAndModify(ctx, jobsColl, match, nil, setUnset(bson.M{"status": o.Status, "exitCode": o.ExitCode,
		"output": o.Output, "stdout": o.Stdout, "error": o.Error, "finishedAt": now}, "leaseUntil")))
}

func (g gpuQueue) RequeueInterrupted(ctx context.Context, job gpumodel.Job, h gpumodel.Hold, reason string, now time.Time) (gpumodel.Job, error) {
	return g.job(g.s.findAndModify(ctx, jobsColl, and(gpuHeldBy(job.ID, h), intIs("attempts", int64(job.Attempts))), nil, gpuTakeBack(job, reason, now)))
}

func (g gpuQueue) RequeueRefused(ctx context.Context, job gpumodel.Job, reason string, now time.Time) error {
	return g.updateJob(ctx, and(byID(job.ID), strIs("slot", job.Slot), intIs("epoch", job.Epoch),
		jobStatusIn(gpumodel.StatusDispatched), intIs("attempts", int64(job.Attempts))), gpuTakeBack(job, reason, now))
}

func (g gpuQueue) Unclaim(ctx context.Context, job gpumodel.Job) error {
	return g.updateJob(ctx, and(byID(job.ID), strIs("slot", job.Slot), intIs("epoch", job.Epoch), jobStatusIn(gpumodel.StatusDispatched)),
		setUnset(bson.M{"status": gpumodel.StatusQueued, "epoch": int64(0)}, "slot", "worker", "secretHash", "leaseUntil", "dispatchedAt"))
}

func (g gpuQueue) Cancel(ctx context.Context, id string, status gpumodel.JobStatus, epoch int64, now time.Time) error {
	return g.updateJob(ctx, and(byID(id), jobStatusIn(status), intIs("epoch", epoch)),
		setUnset(bson.M{"status": gpumodel.StatusCancelled, "finishedAt": now}, "leaseUntil"))
}

func (g gpuQueue) RunningPreemptible(ctx context.Context, limit int) ([]gpumodel.Job, error) {
	got, err := g.s.find(ctx, jobsColl, "find", and(jobStatusIn(gpumodel.StatusRunning), func(m bson.M) bool { return isTrue(m, "preemptible") }),
		func(a, b bson.M) bool {
			pa, _ := intOf(a["priority"])
			pb, _ := intOf(b["priority"])
			if pa != pb {
				return pa < pb
			}
			if c := cmpTime(a, b, "startedAt"); c != 0 {
				return c > 0
			}
			return cmpID(a, b) < 0
		}, limit)
	if err != nil {
		return nil, err
	}
	return decodeAll[gpumodel.Job](jobsColl, got)
}

func (g gpuQueue) MarkPreempting(ctx context.Context, victim gpumodel.Job, startedBy time.Time, maxPreemptions int) error {
	if victim.Preemptions >= maxPreemptions {
		return fmt.Errorf("mark %s preempting: preempted %d times already: %w", victim.ID, victim.Preemptions, store.ErrConflict)
	}
	return g.updateJob(ctx, and(byID(victim.ID), strIs("slot", victim.Slot), intIs("epoch", victim.Epoch),
		jobStatusIn(gpumodel.StatusRunning), func(m bson.M) bool { return isTrue(m, "preemptible") }, notTrue("preempting"),
		intIs("preemptions", int64(victim.Preemptions)), func(m bson.M) bool { return timeLTE(m, "startedAt", startedBy) }),
		setUnset(bson.M{"preempting": true}))
}

func (g gpuQueue) RequeuePreempted(ctx context.Context, job gpumodel.Job, h gpumodel.Hold, reason string) (gpumodel.Job, error) {
	return g.job(g.s.findAndModify(ctx, jobsColl,
		and(gpuHeldBy(job.ID, h), func(m bson.M) bool { return isTrue(m, "preempting") }, intIs("preemptions", int64(job.Preemptions))), nil,
		func(m bson.M) bson.M {
			n, _ := intOf(m["preemptions"])
			m = setUnset(bson.M{"status": gpumodel.StatusQueued, "error": reason, "epoch": int64(0)},
				"preempting", "slot", "worker", "secretHash", "leaseUntil", "dispatchedAt", "startedAt", "heartbeatAt")(m)
			m["preemptions"] = n + 1
			return m
		}))
}

func leaseBefore(before time.Time) func(bson.M) bool {
	return func(m bson.M) bool { t, ok := msOf(m["leaseUntil"]); return ok && t < ms(before) }
}

func (g gpuQueue) Expired(ctx context.Context, before time.Time, limit int) ([]gpumodel.Job, error) {
	got, err := g.s.find(ctx, jobsColl, "find", and(gpuActiveAny, leaseBefore(before)), byTimeThenID("leaseUntil"), limit)
	if err != nil {
		return nil, err
	}
	return decodeAll[gpumodel.Job](jobsColl, got)
}

// gpuActiveAny is gpuActive as a plain filter (no id).
var gpuActiveAny = gpuActive

func (g gpuQueue) RequeueExpired(ctx context.Context, job gpumodel.Job, before time.Time, reason string, now time.Time) error {
	return g.updateJob(ctx, and(gpuHeld(job.ID, job.Slot, job.Epoch), intIs("attempts", int64(job.Attempts)), leaseBefore(before)),
		gpuTakeBack(job, reason, now))
}
