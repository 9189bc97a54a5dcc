package mongostore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/baton-cron/baton/shared/gpu/gpumodel"
	"github.com/baton-cron/baton/shared/store"
)

// gpuQueue implements store.GPU over gpu_jobs and gpu_slots.
//
// Every conditional write is a findAndModify rather than an update: on the
// local emulator (FerretDB on SQLite) only findAndModify pushes the _id
// down, which was measured at about 7 ms against 20 ms for update at 200
// jobs. On Firestore both are indexed point writes.
type gpuQueue struct{ s *Store }

var _ store.GPU = gpuQueue{}

func (g gpuQueue) jobs() *Collection  { return g.s.named(GPUJobsCollection) }
func (g gpuQueue) slots() *Collection { return g.s.named(GPUSlotsCollection) }

// gpuActive are the statuses in which a slot holds the job.
var gpuActive = bson.A{gpumodel.StatusDispatched, gpumodel.StatusRunning}

// gpuHeld is the filter for "job id is still held under slot and epoch",
// whoever asks; the sweep, which acts for no worker, uses it as it is.
func gpuHeld(id, slot string, epoch int64) bson.D {
	return bson.D{{Key: "_id", Value: id}, {Key: "slot", Value: slot}, {Key: "epoch", Value: epoch}, {Key: "status", Value: bson.D{{Key: "$in", Value: gpuActive}}}}
}

// gpuHeldBy is gpuHeld for a worker's callback: the write also needs the
// dispatch's secret, compared by its hash in the database, so a caller
// that only read the fence from GET changes nothing.
func gpuHeldBy(id string, h gpumodel.Hold) bson.D {
	return append(gpuHeld(id, h.Slot, h.Epoch), bson.E{Key: "secretHash", Value: h.SecretHash})
}

// gpuSlotClaim is the update of a slot claim: a new epoch fences out the
// previous holder, and the previous dispatch's secret goes with its epoch.
// The tenant stays until the slot is linked or released (store.GPU).
func gpuSlotClaim(leaseUntil time.Time) bson.D {
	return bson.D{{Key: "$set", Value: bson.D{{Key: "jobId", Value: ""}, {Key: "leaseUntil", Value: leaseUntil}}}, {Key: "$inc", Value: bson.D{{Key: "epoch", Value: 1}}},
		{Key: "$unset", Value: bson.D{{Key: "secretHash", Value: ""}}}}
}

// gpuTakeBack takes a job back from its holder, using one attempt: queued
// again, or dead when it has used maxAttempts.
func gpuTakeBack(job gpumodel.Job, reason string, now time.Time) bson.D {
	attempts, dead := job.TakenBack()
	if dead {
		// The fence goes too, with its secret: the holder's late
		// completion is refused.
		return bson.D{
			{Key: "$set", Value: bson.D{{Key: "status", Value: gpumodel.StatusDead}, {Key: "attempts", Value: attempts}, {Key: "error", Value: reason}, {Key: "finishedAt", Value: now}, {Key: "epoch", Value: int64(0)}}},
			{Key: "$unset", Value: bson.D{{Key: "slot", Value: ""}, {Key: "secretHash", Value: ""}, {Key: "leaseUntil", Value: ""}, {Key: "preempting", Value: ""}}},
		}
	}
	return bson.D{
		{Key: "$set", Value: bson.D{{Key: "status", Value: gpumodel.StatusQueued}, {Key: "attempts", Value: attempts}, {Key: "error", Value: reason}, {Key: "epoch", Value: int64(0)}}},
		{Key: "$unset", Value: bson.D{{Key: "slot", Value: ""}, {Key: "worker", Value: ""}, {Key: "secretHash", Value: ""}, {Key: "leaseUntil", Value: ""}, {Key: "dispatchedAt", Value: ""}, {Key: "startedAt", Value: ""}, {Key: "heartbeatAt", Value: ""}, {Key: "preempting", Value: ""}}},
	}
}

// updateJob applies a conditional update to one job (the filter always
// holds _id); store.ErrConflict when the condition no longer holds.
func (g gpuQueue) updateJob(ctx context.Context, filter, update bson.D) error {
	var after bson.Raw
	return g.jobs().FindOneAndUpdate(ctx, filter, update, &after)
}

// updateSlot sets fields on a slot only while it is still held at epoch:
// the fence for every slot write. A slot's epoch only goes up (each claim
// increments it), so equality means "the same hold"; a newer holder gets
// store.ErrConflict.
func (g gpuQueue) updateSlot(ctx context.Context, id string, epoch int64, set bson.D) error {
	var after bson.Raw
	return g.slots().FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: id}, {Key: "epoch", Value: epoch}}, bson.D{{Key: "$set", Value: set}}, &after)
}

func (g gpuQueue) EnsureSlots(ctx context.Context, slots ...gpumodel.Slot) error {
	c := g.slots()
	for _, slot := range slots {
		if _, err := c.InsertIdempotent(ctx, slot); err != nil {
			return fmt.Errorf("slot %s: %w", slot.ID, err)
		}
	}
	return nil
}

func (g gpuQueue) UpgradeQueued(ctx context.Context, limit int) (int, error) {
	// One conditional write per old job, not an updateMany: every write
	// is guarded on the field still missing, and counted by the meter.
	// Old jobs are few (those queued across one upgrade) and this runs
	// once per dispatcher.
	n := 0
	for _, f := range []bson.E{{Key: "gpuType", Value: ""}, {Key: "tenant", Value: gpumodel.DefaultTenant}} {
		for n < limit {
			err := g.jobs().UpdateOne(ctx,
				bson.D{{Key: "status", Value: gpumodel.StatusQueued}, {Key: f.Key, Value: bson.D{{Key: "$exists", Value: false}}}},
				bson.D{{Key: "$set", Value: bson.D{f}}})
			if errors.Is(err, store.ErrConflict) {
				break // none left
			}
			if err != nil {
				return n, fmt.Errorf("upgrade queued jobs' %s: %w", f.Key, err)
			}
			n++
		}
	}
	return n, nil
}

func (g gpuQueue) Enqueue(ctx context.Context, job gpumodel.Job) (bool, error) {
	return g.jobs().InsertIdempotent(ctx, job)
}

func (g gpuQueue) Get(ctx context.Context, id string) (gpumodel.Job, error) {
	var job gpumodel.Job
	if err := g.jobs().Get(ctx, id, &job); err != nil {
		return gpumodel.Job{}, err
	}
	return job, nil
}

func (g gpuQueue) List(ctx context.Context, status gpumodel.JobStatus, tenant string, pageToken string, pageSize int) ([]gpumodel.Job, string, error) {
	// Each combination has its index: list, list_status, list_tenant,
	// list_status_tenant.
	filter := bson.D{}
	if status != "" {
		filter = append(filter, bson.E{Key: "status", Value: status})
	}
	if tenant != "" {
		filter = append(filter, bson.E{Key: "tenant", Value: tenant})
	}
	var jobs []gpumodel.Job
	p, err := g.jobs().Page(ctx, PageQuery{Filter: filter, SortField: "createdAt", SortType: bson.TypeDateTime, IDType: bson.TypeString, Desc: true, Limit: pageSize, Token: pageToken}, &jobs)
	if err != nil {
		return nil, "", err
	}
	return jobs, p.NextToken, nil
}

func (g gpuQueue) AnyQueued(ctx context.Context) (bool, error) {
	var j bson.Raw
	err := g.jobs().FindOne(ctx, bson.D{{Key: "status", Value: gpumodel.StatusQueued}}, &j, options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

func (g gpuQueue) CountQueued(ctx context.Context, limit int64) (int64, error) {
	return g.jobs().CountLimit(ctx, bson.D{{Key: "status", Value: gpumodel.StatusQueued}}, limit)
}

func (g gpuQueue) CountQueuedTenant(ctx context.Context, tenant string, limit int64) (int64, error) {
	return g.jobs().CountLimit(ctx, bson.D{{Key: "status", Value: gpumodel.StatusQueued}, {Key: "tenant", Value: tenant}}, limit)
}

// gpuQueueOrder is the order within one tenant's queue.
var gpuQueueOrder = bson.D{{Key: "priority", Value: -1}, {Key: "createdAt", Value: 1}, {Key: "_id", Value: 1}}

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

// typeHeads is QueueHeads for one type: a skip scan over the queue_tenant
// index (status, gpuType, tenant, priority desc, createdAt, _id). Each
// probe asks for the first job of the next tenant after the last one seen,
// which in that order is that tenant's head, so it reads one job per
// tenant and never the jobs behind a head. Beside the first probe, and at
// the same time, one more reads the last tenant's name (queue_tenant_last),
// so the scan knows where to stop: with one tenant queued, the common
// case, the heads cost one round trip, and no probe comes back empty.
func (g gpuQueue) typeHeads(ctx context.Context, typ string, maxTenants int) ([]gpumodel.Job, error) {
	base := bson.D{{Key: "status", Value: gpumodel.StatusQueued}, {Key: "gpuType", Value: typ}}
	sort := append(bson.D{{Key: "tenant", Value: 1}}, gpuQueueOrder...)
	var (
		last    gpumodel.Job
		lastErr error
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		lastErr = g.jobs().FindOne(ctx, base, &last, options.FindOne().
			SetSort(bson.D{{Key: "tenant", Value: -1}}).SetProjection(bson.D{{Key: "tenant", Value: 1}}))
	}()
	var heads []gpumodel.Job
	var after *string
	var err error
	for len(heads) < maxTenants {
		filter := base
		if after != nil {
			filter = append(append(bson.D{}, base...), bson.E{Key: "tenant", Value: bson.D{{Key: "$gt", Value: *after}}})
		}
		var job gpumodel.Job
		err = g.jobs().FindOne(ctx, filter, &job, options.FindOne().SetSort(sort).SetProjection(bson.D{{Key: "payload", Value: 0}}))
		if err != nil {
			break
		}
		heads = append(heads, job)
		if len(heads) == 1 {
			<-done
			if lastErr != nil && !errors.Is(lastErr, store.ErrNotFound) {
				return nil, lastErr
			}
		}
		if lastErr == nil && job.Tenant >= last.Tenant {
			return heads, nil // that was the last tenant
		}
		t := job.Tenant
		after = &t
	}
	if len(heads) == 0 {
		<-done
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	return heads, nil
}

// gpuBefore is gpuQueueOrder in Go, to merge one tenant's heads of
// different types.
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
	var job gpumodel.Job
	err := g.jobs().FindOneAndUpdate(ctx,
		bson.D{{Key: "_id", Value: id}, {Key: "status", Value: gpumodel.StatusQueued}},
		gpuDispatch(slot, secretHash, now, leaseUntil), &job)
	if err != nil {
		return gpumodel.Job{}, err
	}
	return job, nil
}

// ClaimTenantJob claims type by type, so that no query sorts whole job
// documents. Firestore caps a query's memory at 128 MiB, and a job's
// payload may be 256 KiB: with gpuType $in ahead of the sort fields, the
// queue_tenant index (status, gpuType, tenant, priority desc, createdAt,
// _id) cannot give the order across types, and the old single
// findAndModify sorted the tenant's matching jobs, payloads and all, in
// memory. Now, with more than one type, one probe per type reads that
// type's head with a projection of the sort keys alone (one index entry
// each, in index order); the best head's type is then claimed by a
// findAndModify whose filter is all equalities on the index's prefix,
// so its sort is the index's own order and it dispatches the type's best
// job at write time, atomically: racing dispatchers each take the next
// job, as before. When that type has nothing queued any more, the probes
// run again (at most once per type, then ErrConflict).
func (g gpuQueue) ClaimTenantJob(ctx context.Context, tenant string, gpuTypes []string, slot gpumodel.Slot, secretHash string, now, leaseUntil time.Time) (gpumodel.Job, error) {
	claim := func(typ string) (gpumodel.Job, error) {
		var job gpumodel.Job
		err := g.jobs().FindOneAndUpdate(ctx,
			bson.D{{Key: "status", Value: gpumodel.StatusQueued}, {Key: "gpuType", Value: typ}, {Key: "tenant", Value: tenant}},
			gpuDispatch(slot, secretHash, now, leaseUntil),
			&job, options.FindOneAndUpdate().SetSort(gpuQueueOrder))
		return job, err
	}
	switch len(gpuTypes) {
	case 0:
		return gpumodel.Job{}, fmt.Errorf("store: claim tenant %q job: no gpu type: %w", tenant, store.ErrConflict)
	case 1:
		return claim(gpuTypes[0])
	}
	var err error
	for range gpuTypes {
		typ, ok, perr := g.tenantBestType(ctx, tenant, gpuTypes)
		if perr != nil {
			return gpumodel.Job{}, perr
		}
		if !ok {
			return gpumodel.Job{}, fmt.Errorf("store: claim tenant %q job: none of types %q queued: %w", tenant, gpuTypes, store.ErrConflict)
		}
		var job gpumodel.Job
		job, err = claim(typ)
		if !errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrContended) {
			return job, err
		}
		// The type's last job went to another dispatcher (or was
		// cancelled) since the probe: look again.
	}
	return gpumodel.Job{}, err
}

// gpuQueueKeys is the projection of a job onto the queue order's keys.
var gpuQueueKeys = bson.D{{Key: "priority", Value: 1}, {Key: "createdAt", Value: 1}, {Key: "_id", Value: 1}}

// tenantBestType reads the head of tenant's queue in each of gpuTypes, as
// its sort keys alone, and returns the type of the best one (gpuBefore);
// ok is false when none is queued. The probes run at once: one round trip.
func (g gpuQueue) tenantBestType(ctx context.Context, tenant string, gpuTypes []string) (typ string, ok bool, err error) {
	heads := make([]gpumodel.Job, len(gpuTypes))
	errs := make([]error, len(gpuTypes))
	var wg sync.WaitGroup
	for i, t := range gpuTypes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = g.jobs().FindOne(ctx,
				bson.D{{Key: "status", Value: gpumodel.StatusQueued}, {Key: "gpuType", Value: t}, {Key: "tenant", Value: tenant}}, &heads[i],
				options.FindOne().SetSort(gpuQueueOrder).SetProjection(gpuQueueKeys))
		}()
	}
	wg.Wait()
	var best gpumodel.Job
	for i, t := range gpuTypes {
		switch {
		case errors.Is(errs[i], store.ErrNotFound):
			continue
		case errs[i] != nil:
			return "", false, fmt.Errorf("store: head of tenant %q type %q: %w", tenant, t, errs[i])
		}
		if !ok || gpuBefore(heads[i], best) {
			typ, best, ok = t, heads[i], true
		}
	}
	return typ, ok, nil
}

// gpuDispatch is the update that dispatches a queued job to slot: the
// fence and the secret's hash in one write, so no reader sees a fence
// without the hash that guards it.
func gpuDispatch(slot gpumodel.Slot, secretHash string, now, leaseUntil time.Time) bson.D {
	return bson.D{{Key: "$set", Value: bson.D{
		{Key: "status", Value: gpumodel.StatusDispatched}, {Key: "slot", Value: slot.ID}, {Key: "worker", Value: slot.Worker},
		{Key: "epoch", Value: slot.Epoch}, {Key: "secretHash", Value: secretHash}, {Key: "leaseUntil", Value: leaseUntil}, {Key: "dispatchedAt", Value: now},
	}}}
}

func (g gpuQueue) Slots(ctx context.Context, ids []string) ([]gpumodel.Slot, error) {
	in := make(bson.A, len(ids))
	for i, id := range ids {
		in[i] = id
	}
	var slots []gpumodel.Slot
	if err := g.slots().Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: in}}}}, &slots, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}})); err != nil {
		return nil, err
	}
	return slots, nil
}

func (g gpuQueue) ClaimSlot(ctx context.Context, ids []string, expiredBy, leaseUntil time.Time) (gpumodel.Slot, error) {
	in := make(bson.A, len(ids))
	for i, id := range ids {
		in[i] = id
	}
	var slot gpumodel.Slot
	err := g.slots().FindOneAndUpdate(ctx,
		bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: in}}}, {Key: "leaseUntil", Value: bson.D{{Key: "$lte", Value: expiredBy}}}},
		gpuSlotClaim(leaseUntil),
		&slot, options.FindOneAndUpdate().SetSort(bson.D{{Key: "leaseUntil", Value: 1}, {Key: "_id", Value: 1}}))
	if err != nil {
		return gpumodel.Slot{}, err
	}
	return slot, nil
}

func (g gpuQueue) ReclaimSlot(ctx context.Context, h gpumodel.Hold, jobID string, leaseUntil time.Time) (gpumodel.Slot, error) {
	// jobId too: only the holder of this very job may give the slot away,
	// not a caller that knows the slot's epoch but reports another job. ""
	// is a slot freed under this epoch (a /run that timed out although the
	// worker took the job, or the sweep): its worker is idle now too. And
	// the secret's hash: slot, epoch and job id are all public, so without
	// it anyone could take the slot from under a running job and double-book
	// its GPU, even though the job's outcome is then refused.
	var slot gpumodel.Slot
	err := g.slots().FindOneAndUpdate(ctx,
		bson.D{{Key: "_id", Value: h.Slot}, {Key: "epoch", Value: h.Epoch}, {Key: "jobId", Value: bson.D{{Key: "$in", Value: bson.A{jobID, ""}}}},
			{Key: "secretHash", Value: h.SecretHash}},
		gpuSlotClaim(leaseUntil),
		&slot)
	if err != nil {
		return gpumodel.Slot{}, err
	}
	return slot, nil
}

func (g gpuQueue) ClaimBestJob(ctx context.Context, slot gpumodel.Slot, secretHash string, now, leaseUntil time.Time) (gpumodel.Job, error) {
	// The fence and the secret's hash in one write, so no reader sees a
	// fence without the hash that guards it.
	var job gpumodel.Job
	err := g.jobs().FindOneAndUpdate(ctx,
		bson.D{{Key: "status", Value: gpumodel.StatusQueued}},
		gpuDispatch(slot, secretHash, now, leaseUntil),
		&job, options.FindOneAndUpdate().SetSort(gpuQueueOrder))
	if err != nil {
		return gpumodel.Job{}, err
	}
	return job, nil
}

func (g gpuQueue) LinkSlot(ctx context.Context, slotID string, epoch int64, jobID, tenant, secretHash string, leaseUntil time.Time, usage gpumodel.SlotUsage) error {
	set := bson.D{{Key: "jobId", Value: jobID}, {Key: "tenant", Value: tenant}, {Key: "secretHash", Value: secretHash}, {Key: "leaseUntil", Value: leaseUntil}}
	if usage.At.IsZero() {
		return g.updateSlot(ctx, slotID, epoch, set)
	}
	list := usage.Usage
	if list == nil {
		list = []gpumodel.TenantUsage{}
	}
	offsets := usage.Offsets
	if offsets == nil {
		offsets = []gpumodel.TenantUsage{}
	}
	holds := usage.Holds
	if holds == nil {
		holds = []gpumodel.TenantUsage{}
	}
	set = append(set, bson.E{Key: "usage", Value: list}, bson.E{Key: "offsets", Value: offsets}, bson.E{Key: "holds", Value: holds}, bson.E{Key: "usageAt", Value: usage.At},
		bson.E{Key: "linkedTenant", Value: tenant}, bson.E{Key: "linkedAt", Value: usage.At})
	var after bson.Raw
	return g.slots().FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: slotID}, {Key: "epoch", Value: epoch}},
		bson.D{{Key: "$set", Value: set}, {Key: "$unset", Value: bson.D{{Key: "freedAt", Value: ""}}}}, &after)
}

func (g gpuQueue) ExtendSlot(ctx context.Context, slotID string, epoch int64, jobID string, leaseUntil time.Time) error {
	return g.updateSlot(ctx, slotID, epoch, bson.D{{Key: "jobId", Value: jobID}, {Key: "leaseUntil", Value: leaseUntil}})
}

func (g gpuQueue) Release(ctx context.Context, slotID string, epoch int64, claimableAt, freedAt time.Time) error {
	set := bson.D{{Key: "jobId", Value: ""}, {Key: "tenant", Value: ""}, {Key: "leaseUntil", Value: claimableAt}}
	if freedAt.IsZero() {
		return g.updateSlot(ctx, slotID, epoch, set)
	}
	// $min: a second release under the same link (a claim that found
	// nothing queued) must not stretch the hold over the idle time
	// between the two. LinkSlot unsets freedAt, so the first release
	// after a link sets it.
	var after bson.Raw
	return g.slots().FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: slotID}, {Key: "epoch", Value: epoch}},
		bson.D{{Key: "$set", Value: set}, {Key: "$min", Value: bson.D{{Key: "freedAt", Value: freedAt}}}}, &after)
}

func (g gpuQueue) Heartbeat(ctx context.Context, id string, h gpumodel.Hold, now, leaseUntil time.Time) (gpumodel.Job, error) {
	var job gpumodel.Job
	notPreempting := bson.E{Key: "preempting", Value: bson.D{{Key: "$ne", Value: true}}}
	err := g.jobs().FindOneAndUpdate(ctx, append(gpuHeldBy(id, h), notPreempting),
		bson.D{
			{Key: "$set", Value: bson.D{{Key: "status", Value: gpumodel.StatusRunning}, {Key: "heartbeatAt", Value: now}, {Key: "leaseUntil", Value: leaseUntil}}},
			// $min keeps the first heartbeat's time.
			{Key: "$min", Value: bson.D{{Key: "startedAt", Value: now}}},
		}, &job)
	if err != nil {
		return gpumodel.Job{}, err
	}
	return job, nil
}

func (g gpuQueue) Complete(ctx context.Context, id string, h gpumodel.Hold, o gpumodel.Outcome, now time.Time) (gpumodel.Job, error) {
	update := bson.D{
		{Key: "$set", Value: bson.D{{Key: "status", Value: o.Status}, {Key: "exitCode", Value: o.ExitCode}, {Key: "output", Value: o.Output},
			{Key: "stdout", Value: o.Stdout}, {Key: "error", Value: o.Error}, {Key: "finishedAt", Value: now}}},
		{Key: "$unset", Value: bson.D{{Key: "leaseUntil", Value: ""}}},
	}
	filter := gpuHeldBy(id, h)
	if o.UnlessPreempting {
		filter = append(filter, bson.E{Key: "preempting", Value: bson.D{{Key: "$ne", Value: true}}})
	}
	var job gpumodel.Job
	if err := g.jobs().FindOneAndUpdate(ctx, filter, update, &job); err != nil {
		return gpumodel.Job{}, err
	}
	return job, nil
}

func (g gpuQueue) RequeueInterrupted(ctx context.Context, job gpumodel.Job, h gpumodel.Hold, reason string, now time.Time) (gpumodel.Job, error) {
	filter := append(gpuHeldBy(job.ID, h), bson.E{Key: "attempts", Value: job.Attempts})
	var after gpumodel.Job
	if err := g.jobs().FindOneAndUpdate(ctx, filter, gpuTakeBack(job, reason, now), &after); err != nil {
		return gpumodel.Job{}, err
	}
	return after, nil
}

func (g gpuQueue) RequeueRefused(ctx context.Context, job gpumodel.Job, reason string, now time.Time) error {
	return g.updateJob(ctx,
		bson.D{{Key: "_id", Value: job.ID}, {Key: "slot", Value: job.Slot}, {Key: "epoch", Value: job.Epoch},
			{Key: "status", Value: gpumodel.StatusDispatched}, {Key: "attempts", Value: job.Attempts}},
		gpuTakeBack(job, reason, now))
}

func (g gpuQueue) Unclaim(ctx context.Context, job gpumodel.Job) error {
	return g.updateJob(ctx,
		bson.D{{Key: "_id", Value: job.ID}, {Key: "slot", Value: job.Slot}, {Key: "epoch", Value: job.Epoch}, {Key: "status", Value: gpumodel.StatusDispatched}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: gpumodel.StatusQueued}, {Key: "epoch", Value: int64(0)}}},
			{Key: "$unset", Value: bson.D{{Key: "slot", Value: ""}, {Key: "worker", Value: ""}, {Key: "secretHash", Value: ""}, {Key: "leaseUntil", Value: ""}, {Key: "dispatchedAt", Value: ""}}}})
}

func (g gpuQueue) Cancel(ctx context.Context, id string, status gpumodel.JobStatus, epoch int64, now time.Time) error {
	return g.updateJob(ctx,
		bson.D{{Key: "_id", Value: id}, {Key: "status", Value: status}, {Key: "epoch", Value: epoch}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: gpumodel.StatusCancelled}, {Key: "finishedAt", Value: now}}},
			{Key: "$unset", Value: bson.D{{Key: "leaseUntil", Value: ""}}}})
}

func (g gpuQueue) RunningPreemptible(ctx context.Context, limit int) ([]gpumodel.Job, error) {
	var jobs []gpumodel.Job
	err := g.jobs().Find(ctx,
		bson.D{{Key: "status", Value: gpumodel.StatusRunning}, {Key: "preemptible", Value: true}},
		&jobs, options.Find().SetLimit(int64(limit)).SetSort(bson.D{{Key: "priority", Value: 1}, {Key: "startedAt", Value: -1}, {Key: "_id", Value: 1}}))
	if err != nil {
		return nil, err
	}
	return jobs, nil
}

func (g gpuQueue) MarkPreempting(ctx context.Context, victim gpumodel.Job, startedBy time.Time, maxPreemptions int) error {
	if victim.Preemptions >= maxPreemptions {
		return fmt.Errorf("mark %s preempting: preempted %d times already: %w", victim.ID, victim.Preemptions, store.ErrConflict)
	}
	return g.updateJob(ctx,
		bson.D{{Key: "_id", Value: victim.ID}, {Key: "slot", Value: victim.Slot}, {Key: "epoch", Value: victim.Epoch},
			{Key: "status", Value: gpumodel.StatusRunning}, {Key: "preemptible", Value: true},
			{Key: "preempting", Value: bson.D{{Key: "$ne", Value: true}}}, {Key: "preemptions", Value: victim.Preemptions},
			{Key: "startedAt", Value: bson.D{{Key: "$lte", Value: startedBy}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "preempting", Value: true}}}})
}

func (g gpuQueue) RequeuePreempted(ctx context.Context, job gpumodel.Job, h gpumodel.Hold, reason string) (gpumodel.Job, error) {
	filter := append(gpuHeldBy(job.ID, h), bson.E{Key: "preempting", Value: true}, bson.E{Key: "preemptions", Value: job.Preemptions})
	update := bson.D{
		{Key: "$set", Value: bson.D{{Key: "status", Value: gpumodel.StatusQueued}, {Key: "error", Value: reason}, {Key: "epoch", Value: int64(0)}}},
		{Key: "$inc", Value: bson.D{{Key: "preemptions", Value: 1}}},
		{Key: "$unset", Value: bson.D{{Key: "preempting", Value: ""}, {Key: "slot", Value: ""}, {Key: "worker", Value: ""}, {Key: "secretHash", Value: ""}, {Key: "leaseUntil", Value: ""}, {Key: "dispatchedAt", Value: ""}, {Key: "startedAt", Value: ""}, {Key: "heartbeatAt", Value: ""}}},
	}
	var after gpumodel.Job
	if err := g.jobs().FindOneAndUpdate(ctx, filter, update, &after); err != nil {
		return gpumodel.Job{}, err
	}
	return after, nil
}

func (g gpuQueue) Expired(ctx context.Context, before time.Time, limit int) ([]gpumodel.Job, error) {
	var expired []gpumodel.Job
	err := g.jobs().Find(ctx,
		bson.D{{Key: "status", Value: bson.D{{Key: "$in", Value: gpuActive}}}, {Key: "leaseUntil", Value: bson.D{{Key: "$lt", Value: before}}}},
		&expired, options.Find().SetLimit(int64(limit)).SetSort(bson.D{{Key: "leaseUntil", Value: 1}, {Key: "_id", Value: 1}}))
	if err != nil {
		return nil, err
	}
	return expired, nil
}

func (g gpuQueue) RequeueExpired(ctx context.Context, job gpumodel.Job, before time.Time, reason string, now time.Time) error {
	filter := gpuHeld(job.ID, job.Slot, job.Epoch)
	filter = append(filter, bson.E{Key: "attempts", Value: job.Attempts}, bson.E{Key: "leaseUntil", Value: bson.D{{Key: "$lt", Value: before}}})
	return g.updateJob(ctx, filter, gpuTakeBack(job, reason, now))
}
