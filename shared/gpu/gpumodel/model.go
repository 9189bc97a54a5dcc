package gpumodel

import (
	"time"

	"github.com/baton-cron/baton/shared/schedule"
)

// JobStatus is where a GPU job is in its life. It is stored and sent as its
// string ("queued"), and the store's queries filter on that string.
type JobStatus string

// Job statuses.
const (
	StatusQueued     JobStatus = "queued"     // waiting for a slot
	StatusDispatched JobStatus = "dispatched" // sent to a worker, not yet heard from
	StatusRunning    JobStatus = "running"    // the worker heartbeated
	StatusSucceeded  JobStatus = "succeeded"  // the command exited 0
	StatusFailed     JobStatus = "failed"     // the command exited non-zero or timed out
	StatusDead       JobStatus = "dead"       // it used maxAttempts (lost leases, interruptions, permanent refusals)
	StatusCancelled  JobStatus = "cancelled"  // cancelled through the API
)

// AllJobStatuses lists every job status, in the order of a job's life, as
// GET /gpu/jobs?status= names them when it refuses one. It returns a new
// slice each call.
func AllJobStatuses() []JobStatus {
	return []JobStatus{StatusQueued, StatusDispatched, StatusRunning, StatusSucceeded, StatusFailed, StatusDead, StatusCancelled}
}

// Valid reports whether s is one of the job statuses.
func (s JobStatus) Valid() bool {
	switch s {
	case StatusQueued, StatusDispatched, StatusRunning, StatusSucceeded, StatusFailed, StatusDead, StatusCancelled:
		return true
	}
	return false
}

// Terminal reports whether status is final. shared/scheduler asks it of
// the job behind a gpu-target run (this package is a leaf, so it can).
func Terminal(status JobStatus) bool {
	switch status {
	case StatusSucceeded, StatusFailed, StatusDead, StatusCancelled:
		return true
	}
	return false
}

// Job is a GPU job document.
type Job struct {
	ID          string            `bson:"_id" json:"id"`
	Status      JobStatus         `bson:"status" json:"status"`
	Priority    int               `bson:"priority" json:"priority"`
	Attempts    int               `bson:"attempts" json:"attempts"`
	MaxAttempts int               `bson:"maxAttempts" json:"maxAttempts"`
	Timeout     schedule.Duration `bson:"timeout" json:"timeout"`
	Payload     string            `bson:"payload" json:"payload,omitempty"`
	Source      string            `bson:"source" json:"source"`
	CreatedAt   time.Time         `bson:"createdAt" json:"createdAt"`
	// Tenant is whose job it is, for fair share and quotas between
	// tenants (DefaultTenant when the request named none). Stored on
	// every job, so the per-tenant head-of-queue query finds it.
	Tenant string `bson:"tenant" json:"tenant"`
	// GPUType is the slot type the job must run on ("" for any slot).
	// Always stored, "" included: the queue's index starts with it, and
	// a missing field would not match "".
	GPUType string `bson:"gpuType" json:"gpuType,omitempty"`
	// Shard is, for the job of a sharded schedule's run, which shard it
	// is; the worker passes it to the command as BATON_SHARD,
	// BATON_SHARD_COUNT and BATON_SHARD_PARAM.
	Shard *schedule.Shard `bson:"shard,omitempty" json:"shard,omitempty"`
	// Preemptible lets a higher-priority job of a tenant under its fair
	// share take this job's slot while it runs (docs/gpu.md, Preemption).
	Preemptible bool `bson:"preemptible" json:"preemptible,omitempty"`
	// Preemptions counts how often the job was preempted; each one
	// requeued it without using an attempt, and the dispatcher stops
	// preempting it at its bound.
	Preemptions int `bson:"preemptions" json:"preemptions,omitempty"`
	// Preempting marks a running job the dispatcher chose to preempt:
	// its worker's next heartbeat is answered 409, the worker stops the
	// command, and its completion requeues the job (or records a success
	// that got there first).
	Preempting bool `bson:"preempting,omitempty" json:"preempting,omitempty"`

	// Slot, Worker and Epoch name the holder while dispatched or running
	// (and, for a job cancelled while running, the holder that must still
	// report). Together Slot and Epoch are the fence.
	Slot   string `bson:"slot,omitempty" json:"slot,omitempty"`
	Worker string `bson:"worker,omitempty" json:"worker,omitempty"`
	Epoch  int64  `bson:"epoch" json:"epoch,omitempty"`
	// LeaseUntil is when Sweep may take the job back; heartbeats extend it.
	LeaseUntil *time.Time `bson:"leaseUntil,omitempty" json:"leaseUntil,omitempty"`
	// SecretHash is the SHA-256 of the secret sent with this dispatch's
	// POST /run; a callback must carry the secret itself. The fence alone
	// is public (GET shows slot and epoch), so without it any caller of
	// the API could report another job's outcome. It is set with the fence
	// and cleared with it, and never leaves the server: json:"-".
	SecretHash string `bson:"secretHash,omitempty" json:"-"`

	DispatchedAt *time.Time `bson:"dispatchedAt,omitempty" json:"dispatchedAt,omitempty"`
	StartedAt    *time.Time `bson:"startedAt,omitempty" json:"startedAt,omitempty"`
	HeartbeatAt  *time.Time `bson:"heartbeatAt,omitempty" json:"heartbeatAt,omitempty"`
	FinishedAt   *time.Time `bson:"finishedAt,omitempty" json:"finishedAt,omitempty"`

	ExitCode *int   `bson:"exitCode,omitempty" json:"exitCode,omitempty"`
	Output   string `bson:"output,omitempty" json:"output,omitempty"`
	Stdout   string `bson:"stdout,omitempty" json:"stdout,omitempty"`
	Error    string `bson:"error,omitempty" json:"error,omitempty"`
}

// DefaultTenant is the tenant of a job that names none.
const DefaultTenant = "default"

// TenantOf is the job's tenant for fair share: DefaultTenant for a job
// stored before jobs carried one.
func (j Job) TenantOf() string {
	if j.Tenant == "" {
		return DefaultTenant
	}
	return j.Tenant
}

// TakenBack is what taking the job back from its holder makes of it: one
// more attempt used, and dead when that was its last (else queued again).
// The store's requeues and the sweep's count both go by it, so the rule
// lives once.
func (j Job) TakenBack() (attempts int, dead bool) {
	attempts = j.Attempts + 1
	return attempts, attempts >= j.MaxAttempts
}

// Slot is a GPU slot document. A slot whose LeaseUntil is in the past is
// claimable: free slots carry the zero lease; JobID is empty while the slot
// is being claimed or backing off after a refusal.
type Slot struct {
	ID         string    `bson:"_id" json:"id"`
	Worker     string    `bson:"worker" json:"worker"`
	JobID      string    `bson:"jobId" json:"jobId,omitempty"`
	LeaseUntil time.Time `bson:"leaseUntil" json:"leaseUntil"`
	Epoch      int64     `bson:"epoch" json:"epoch"`
	// Tenant is the tenant of the job the slot holds (set with JobID when
	// the slot is linked, cleared with it): the dispatcher counts each
	// tenant's running slots from the slot documents alone.
	Tenant string `bson:"tenant,omitempty" json:"tenant,omitempty"`
	// SecretHash is the hash of the secret of the dispatch that holds the
	// slot (as on the job), so a completion hands the slot on only when
	// it comes from that dispatch's worker. Never shown: json:"-".
	SecretHash string `bson:"secretHash,omitempty" json:"-"`

	// The slot's share of each tenant's fair-share usage (docs/gpu.md):
	// Usage is each tenant's slot-seconds on this slot, decayed to
	// UsageAt; LinkedTenant held it from LinkedAt until FreedAt (or still
	// does, when FreedAt is unset), which Usage does not count yet. The
	// fill that links the slot's next job folds that hold into Usage, in
	// the same fenced write (LinkSlot), from the slot document its claim
	// returned: keeping usage costs no read and no write of its own. Kept
	// out of the JSON: GET /gpu/pool shows the per-tenant sums.
	Usage []TenantUsage `bson:"usage,omitempty" json:"-"`
	// Offsets are the credit cap's charges (shared/gpu/usage.go), decayed
	// to UsageAt as Usage is: each the tenant's whole charge when it was
	// written, so the dispatcher takes the largest over the slots rather
	// than the sum, and two fills that charge a tenant at once for the
	// same return charge it once.
	Offsets []TenantUsage `bson:"offsets,omitempty" json:"-"`
	// Holds is, per tenant, how long its last finished hold of this slot
	// lasted (seconds, not decayed) and when it ended, which tells a
	// tenant served lately from one back from idle; and the length is
	// the dispatcher's guess of how long
	// a job of the tenant it starts now will hold a slot, which it
	// charges at once, as a stride scheduler charges a whole stride on
	// selection, so fills deciding together do not all pick the tenant
	// whose just-started job has not used anything yet.
	Holds        []TenantUsage `bson:"holds,omitempty" json:"-"`
	UsageAt      time.Time     `bson:"usageAt,omitempty" json:"-"`
	LinkedTenant string        `bson:"linkedTenant,omitempty" json:"-"`
	LinkedAt     time.Time     `bson:"linkedAt,omitempty" json:"-"`
	FreedAt      time.Time     `bson:"freedAt,omitempty" json:"-"`
}

// TenantUsage is one tenant's decayed slot-seconds on one slot. A list
// rather than a map keyed by tenant: tenant names may hold ".", which a
// field path would read as nesting.
type TenantUsage struct {
	Tenant  string  `bson:"t"`
	Seconds float64 `bson:"s"`
	// At is, in Slot.Holds, when that hold ended.
	At time.Time `bson:"at,omitempty"`
}

// SlotUsage is what a fill records on the slot it links (store.GPU.LinkSlot):
// the slot's usage and offsets decayed to At, the previous hold folded
// in; At is also when the new hold begins. The zero value records
// nothing.
type SlotUsage struct {
	Usage   []TenantUsage
	Offsets []TenantUsage
	Holds   []TenantUsage
	At      time.Time
}

// Hold is the fence of a worker's callback as the store checks it: the
// slot and epoch the job was dispatched under, and the hash of that
// dispatch's secret (the secret itself never reaches the store).
type Hold struct {
	Slot       string
	Epoch      int64
	SecretHash string
}

// Outcome is a finished command's result, as the holder's completion
// records it on the job.
type Outcome struct {
	// Status is StatusSucceeded or StatusFailed.
	Status JobStatus
	// UnlessPreempting makes the write miss a job marked Preempting, so
	// the dispatcher requeues it instead of recording the failure its
	// stopped command reported.
	UnlessPreempting bool
	ExitCode         int
	Output           string
	Stdout           string
	Error            string
}
