package store

import (
	"context"
	"time"

	"github.com/baton-cron/baton/shared/gpu/gpumodel"
)

// GPU is the GPU queue: jobs, worker slots, and the fenced claims and
// callbacks between them.
//
// A slot is held under an epoch that only goes up: every claim of a slot
// increments it, so (slot, epoch) names one hold forever, and every write
// a holder makes is conditional on it. A worker's callbacks are fenced by
// a gpumodel.Hold: the job must still be active (dispatched or running)
// under that slot and epoch, and carry the hash of that dispatch's secret.
//
// Every conditional write reports a guard that no longer holds as an
// error wrapping ErrConflict (the implementation cannot tell, without a
// read the queue does not pay for, whether a newer epoch or some other
// change moved the document on; the dispatcher reads and explains). A
// conditional write whose answer was lost is not retried, since a retry of
// a write that landed would miss its own guard: it returns an error
// wrapping ErrUnknownOutcome, never ErrConflict, and the caller leaves the
// decision to a later read or to the lease sweep.
type GPU interface {
	// EnsureSlots inserts the slot documents that do not exist yet, by id,
	// and leaves existing ones (and their holds) untouched. Guard: none
	// beyond the id, so it is idempotent; a lost answer is settled by
	// reading the id back, and when that fails too the error wraps
	// ErrUnknownOutcome.
	EnsureSlots(ctx context.Context, slots ...gpumodel.Slot) error

	// UpgradeQueued gives the queued jobs written before tenants and GPU
	// types existed (no tenant or gpuType field) DefaultTenant and any
	// type, so the queue's equality queries find them; it returns how many
	// it changed, and stops at limit. Guard: the field is still missing,
	// so it is idempotent and a lost answer is repaired by calling again.
	UpgradeQueued(ctx context.Context, limit int) (int, error)

	// Enqueue inserts job under its id. Guard: no document with that id
	// exists; when one does, created is false and err nil ("it is there":
	// an earlier attempt's, or a twin's). A lost answer is settled the
	// same way, by reading the id back: created=false, nil, one job. Only
	// when that read fails too does the error wrap ErrUnknownOutcome.
	Enqueue(ctx context.Context, job gpumodel.Job) (created bool, err error)

	// Get reads one job; an error wrapping ErrNotFound when there is none.
	Get(ctx context.Context, id string) (gpumodel.Job, error)

	// List returns one page of jobs, newest first (createdAt, then id,
	// descending), with status "" for every status and tenant "" for
	// every tenant. pageSize 0 means 50.
	// next continues the list with the same status; it is empty on the
	// last page. A token not issued for this listing gets an error
	// wrapping ErrBadPageToken.
	List(ctx context.Context, status gpumodel.JobStatus, tenant string, pageToken string, pageSize int) (jobs []gpumodel.Job, next string, err error)

	// QueueHeads returns the head of each tenant's queue among the queued
	// jobs whose gpuType is one of gpuTypes: per tenant, its best job
	// (highest priority, then oldest createdAt, then smallest id), at
	// most one job per tenant, without its payload. It reads one indexed
	// job per tenant and type, plus the last tenant's name per type (a
	// skip scan over the tenants that knows where to stop), never the
	// queue behind the heads; maxTenants
	// bounds the tenants read per type. A job stored without a tenant
	// reports Tenant "" (gpumodel.Job.TenantOf).
	QueueHeads(ctx context.Context, gpuTypes []string, maxTenants int) ([]gpumodel.Job, error)

	// ClaimJob dispatches queued job id to slot as ClaimBestJob does (the
	// same stamps, in one write), for a dispatcher that chose the job
	// itself (QueueHeads). Guard: job id is still queued; else (another
	// dispatcher took it, it was cancelled) an error wrapping
	// ErrConflict. A lost answer wraps ErrUnknownOutcome; a job dispatched
	// so is requeued by the sweep once its lease runs out.
	ClaimJob(ctx context.Context, id string, slot gpumodel.Slot, secretHash string, now, leaseUntil time.Time) (gpumodel.Job, error)

	// ClaimTenantJob dispatches tenant's best queued job (highest
	// priority, then oldest, then smallest id) among those whose gpuType
	// is one of gpuTypes, as ClaimBestJob does, in one write. A dispatcher
	// that chose the tenant by fair share (QueueHeads) claims so rather
	// than by the head's id, so that racing dispatchers each take the next
	// job instead of all fighting for one. tenant is as stored ("" for a
	// job stored without one). Guard: such a job is queued; else an error
	// wrapping ErrConflict. Errors as ClaimBestJob's. No query of it may
	// sort whole jobs in memory (Firestore caps a query's memory at 128
	// MiB; payloads reach 256 KiB): with several types, it reads each
	// type's head as its sort keys alone (one read per type), then claims
	// within the best head's type, whose index gives the order.
	ClaimTenantJob(ctx context.Context, tenant string, gpuTypes []string, slot gpumodel.Slot, secretHash string, now, leaseUntil time.Time) (gpumodel.Job, error)

	// CountQueuedTenant counts tenant's queued jobs, up to limit (as
	// CountQueued).
	CountQueuedTenant(ctx context.Context, tenant string, limit int64) (int64, error)

	// AnyQueued reports whether a job is queued, reading at most one job
	// id.
	AnyQueued(ctx context.Context) (bool, error)

	// CountQueued counts queued jobs, up to limit: a metric's read per
	// collection must stay bounded whatever the queue holds, so a queue
	// longer than limit reports limit.
	CountQueued(ctx context.Context, limit int64) (int64, error)

	// Slots reads the slot documents with the given ids, by id.
	Slots(ctx context.Context, ids []string) ([]gpumodel.Slot, error)

	// ClaimSlot takes one of the slots ids whose lease ran out at or
	// before expiredBy (the free ones carry the zero lease), the longest
	// expired first: it increments the epoch, which fences out whoever
	// held it, leases it until leaseUntil, and clears its job and secret
	// hash. It returns the slot as claimed. Guard: a slot in ids with
	// leaseUntil <= expiredBy; with none, an error wrapping ErrConflict.
	// Of racers on one free slot exactly one wins. A lost answer wraps
	// ErrUnknownOutcome; the slot, if claimed, is claimable again once
	// leaseUntil passes.
	ClaimSlot(ctx context.Context, ids []string, expiredBy, leaseUntil time.Time) (gpumodel.Slot, error)

	// ReclaimSlot re-claims the slot h names for its holder's next job,
	// in one write: a new epoch, leased until leaseUntil, no job and no
	// secret hash (the tenant stays, as for ClaimSlot). Guard: the slot is at h.Epoch, holds jobID or no job
	// (freed under this epoch), and carries h.SecretHash; else an error
	// wrapping ErrConflict. A lost answer wraps ErrUnknownOutcome; the
	// slot, if reclaimed, is claimable again once leaseUntil passes.
	ReclaimSlot(ctx context.Context, h gpumodel.Hold, jobID string, leaseUntil time.Time) (gpumodel.Slot, error)

	// ClaimBestJob dispatches the best queued job (highest priority, then
	// oldest createdAt, then smallest id) to slot, stamping it with the
	// slot's id, worker and epoch, secretHash, dispatchedAt now and a
	// lease until leaseUntil, in one write. It returns the job as
	// dispatched. Guard: a queued job exists; with none, an error
	// wrapping ErrConflict. Of racers on one queued job exactly one gets
	// it. A lost answer wraps ErrUnknownOutcome; a job dispatched so is
	// requeued by the sweep once its lease runs out.
	ClaimBestJob(ctx context.Context, slot gpumodel.Slot, secretHash string, now, leaseUntil time.Time) (gpumodel.Job, error)

	// LinkSlot records on the slot held at epoch the job it was filled
	// with, the job's tenant, that dispatch's secret hash and the slot's
	// lease for the job's
	// run, leaseUntil (in the same write, so heartbeats need not extend
	// the slot). With a usage (non-zero At) the same write replaces the
	// slot's fair-share usage, offsets and holds with usage.Usage, usage.Offsets and usage.Holds as of usage.At, starts the
	// new hold (linkedTenant tenant, linkedAt usage.At) and clears
	// freedAt (gpumodel.Slot). Guard: the slot is still at epoch; else (a
	// newer claim) an error wrapping ErrConflict. A lost answer wraps
	// ErrUnknownOutcome.
	LinkSlot(ctx context.Context, slotID string, epoch int64, jobID, tenant, secretHash string, leaseUntil time.Time, usage gpumodel.SlotUsage) error

	// ExtendSlot extends the lease of the slot held at epoch to
	// leaseUntil, for jobID. Guard and errors as LinkSlot's.
	ExtendSlot(ctx context.Context, slotID string, epoch int64, jobID string, leaseUntil time.Time) error

	// Release frees the slot held at epoch, making it claimable at
	// claimableAt (the zero lease for at once), and clears its job and
	// tenant. A non-zero freedAt ends the slot's fair-share hold then,
	// unless an earlier release under the same link already ended it (the
	// earlier time stays). Guard: the slot is still
	// at epoch; a newer holder is left alone and the error wraps
	// ErrConflict. A lost answer wraps ErrUnknownOutcome; the slot's own
	// lease frees it then.
	Release(ctx context.Context, slotID string, epoch int64, claimableAt, freedAt time.Time) error

	// Heartbeat records that the holder h of job id is alive: status
	// running, heartbeatAt now, the lease until leaseUntil, startedAt the
	// first beat's now. It returns the job after the write. Guard: the job
	// is active under h (slot, epoch and secret hash); else an error
	// wrapping ErrConflict, and nothing changes; so does a job marked
	// Preempting, whose worker must stop. A lost answer wraps
	// ErrUnknownOutcome, never ErrConflict: the worker beats again.
	Heartbeat(ctx context.Context, id string, h gpumodel.Hold, now, leaseUntil time.Time) (gpumodel.Job, error)

	// Complete records holder h's outcome o on job id, finished at now,
	// and drops its lease. It returns the job after the write. Guard: the
	// job is active under h (and not Preempting when o.UnlessPreempting);
	// else an error wrapping ErrConflict. A lost
	// answer wraps ErrUnknownOutcome, never ErrConflict: a repeat then
	// misses the guard, and the dispatcher reads the job to tell its own
	// landed completion from a stale one.
	Complete(ctx context.Context, id string, h gpumodel.Hold, o gpumodel.Outcome, now time.Time) (gpumodel.Job, error)

	// RequeueInterrupted takes job back from its holder h, whose worker
	// stopped it while shutting down, using one attempt (Job.TakenBack):
	// queued again without its fence, or dead at now. reason is recorded
	// as the job's error. It returns the job after the write. Guard: the
	// job is active under h and still at job.Attempts; else an error
	// wrapping ErrConflict. A lost answer wraps ErrUnknownOutcome.
	RequeueInterrupted(ctx context.Context, job gpumodel.Job, h gpumodel.Hold, reason string, now time.Time) (gpumodel.Job, error)

	// RequeueRefused takes back a job its worker refused permanently,
	// using one attempt as RequeueInterrupted does. Guard: the job is
	// still dispatched under job.Slot and job.Epoch, at job.Attempts (a
	// sweep or heartbeat that moved it on wins); else an error wrapping
	// ErrConflict. A lost answer wraps ErrUnknownOutcome; the sweep takes
	// the job back once its lease runs out if the write did not land.
	RequeueRefused(ctx context.Context, job gpumodel.Job, reason string, now time.Time) error

	// Unclaim puts a dispatched job back in the queue with its attempts
	// unchanged (the worker never ran it), without its fence. Guard: the
	// job is still dispatched under job.Slot and job.Epoch; else an error
	// wrapping ErrConflict. A lost answer wraps ErrUnknownOutcome, and
	// the sweep settles it as for RequeueRefused.
	Unclaim(ctx context.Context, job gpumodel.Job) error

	// Cancel cancels job id, finished at now, and drops its lease; the
	// fence stays, so the holder of a running job can still report.
	// Guard: the job is still at status and epoch (as the caller read
	// it); else an error wrapping ErrConflict, and the caller reads
	// again. A lost answer wraps ErrUnknownOutcome.
	Cancel(ctx context.Context, id string, status gpumodel.JobStatus, epoch int64, now time.Time) error

	// RunningPreemptible reads up to limit running jobs marked
	// preemptible, those already Preempting included, lowest priority
	// first, then the latest started.
	RunningPreemptible(ctx context.Context, limit int) ([]gpumodel.Job, error)

	// MarkPreempting marks the running victim (as RunningPreemptible read
	// it) Preempting. Guard: it is still running under victim.Slot and
	// victim.Epoch, preemptible, not already Preempting, at
	// victim.Preemptions with fewer than maxPreemptions, and started at or
	// before startedBy (the minimum run time); else an error wrapping
	// ErrConflict. A lost answer wraps ErrUnknownOutcome.
	MarkPreempting(ctx context.Context, victim gpumodel.Job, startedBy time.Time, maxPreemptions int) error

	// RequeuePreempted takes a Preempting job back from its holder h, whose
	// worker stopped it, without using an attempt: queued again without its
	// fence, Preempting cleared, Preemptions one more, reason as its error.
	// It returns the job after the write. Guard: the job is active under h,
	// Preempting, at job.Preemptions; else an error wrapping ErrConflict. A
	// lost answer wraps ErrUnknownOutcome.
	RequeuePreempted(ctx context.Context, job gpumodel.Job, h gpumodel.Hold, reason string) (gpumodel.Job, error)

	// Expired reads up to limit active jobs whose lease ran out before
	// before, the longest expired first.
	Expired(ctx context.Context, before time.Time, limit int) ([]gpumodel.Job, error)

	// RequeueExpired takes back an expired job (as Expired read it) from
	// its holder, using one attempt as RequeueInterrupted does, finished
	// at now when that makes it dead. Guard: the job is still active
	// under job.Slot and job.Epoch, at job.Attempts, and its lease still
	// ran out before before (a heartbeat or completion that got there
	// first wins); else an error wrapping ErrConflict. A lost answer
	// wraps ErrUnknownOutcome; the next sweep settles it.
	RequeueExpired(ctx context.Context, job gpumodel.Job, before time.Time, reason string, now time.Time) error
}
