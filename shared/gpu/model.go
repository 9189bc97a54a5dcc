package gpu

import (
	"regexp"
	"time"

	"github.com/baton-cron/baton/shared/gpu/gpumodel"
	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/schedule"
)

// JobStatus is where a GPU job is in its life (gpumodel.JobStatus, where
// the store's records live). It is stored and sent as its string
// ("queued").
type JobStatus = gpumodel.JobStatus

// Job statuses (gpumodel's, under this package's names).
const (
	StatusQueued     = gpumodel.StatusQueued     // waiting for a slot
	StatusDispatched = gpumodel.StatusDispatched // sent to a worker, not yet heard from
	StatusRunning    = gpumodel.StatusRunning    // the worker heartbeated
	StatusSucceeded  = gpumodel.StatusSucceeded  // the command exited 0
	StatusFailed     = gpumodel.StatusFailed     // the command exited non-zero or timed out
	StatusDead       = gpumodel.StatusDead       // it used maxAttempts (lost leases, interruptions, permanent refusals)
	StatusCancelled  = gpumodel.StatusCancelled  // cancelled through the API
)

// AllJobStatuses lists every job status, in the order of a job's life, as
// GET /gpu/jobs?status= names them when it refuses one. It returns a new
// slice each call.
func AllJobStatuses() []JobStatus { return gpumodel.AllJobStatuses() }

// Terminal reports whether status is final (gpumodel.Terminal).
func Terminal(status JobStatus) bool { return gpumodel.Terminal(status) }

// Job sources.
const (
	// SourceAPI marks a job enqueued with POST /gpu/jobs.
	SourceAPI = "api"
	// SourceRunPrefix, followed by the run id, marks a job enqueued by a
	// schedule's gpu target.
	SourceRunPrefix = "run:"
)

// Limits and defaults for a job.
const (
	MaxPayloadBytes    = 256 << 10
	StdoutHeadBytes    = 4 << 10
	MaxPriority        = 1000
	DefaultMaxAttempts = 3
	MaxMaxAttempts     = 100
	DefaultTimeout     = time.Hour
	MinTimeout         = time.Second
	MaxTimeout         = 24 * time.Hour
)

// Job is a GPU job document (gpumodel.Job).
type Job = gpumodel.Job

// Slot is a GPU slot document (gpumodel.Slot). A slot whose LeaseUntil is
// in the past is claimable: free slots carry the zero lease; JobID is empty
// while the slot is being claimed or backing off after a refusal.
type Slot = gpumodel.Slot

// Fence names the slot hold under which a worker acts, and proves it is
// that hold's worker.
type Fence struct {
	Slot  string `json:"slot"`
	Epoch int64  `json:"epoch"`
	// Secret is the dispatch's secret from POST /run. It travels in the
	// SecretHeader header, not in the body, so json:"-".
	Secret string `json:"-"`
}

// RunRequest is the body of POST /run to a worker.
type RunRequest struct {
	JobID   string            `json:"jobId"`
	Attempt int               `json:"attempt"` // 1-based
	Slot    string            `json:"slot"`
	Epoch   int64             `json:"epoch"`
	Payload string            `json:"payload"`
	Timeout schedule.Duration `json:"timeout"`
	// Lease is the slot lease; the worker heartbeats about three times per
	// lease.
	Lease schedule.Duration `json:"lease"`
	// LeaseUntil is when the job's lease, set at the claim before this
	// request was sent, runs out if no heartbeat extends it. The worker's
	// self-fence counts from it rather than from receipt, which may come up
	// to RunTimeout later. Zero (a dispatcher that predates it) makes the
	// worker count the lease from receipt.
	LeaseUntil time.Time `json:"leaseUntil,omitzero"`
	// Secret is drawn for this dispatch alone; the worker sends it back on
	// every callback (SecretHeader), which is how the API tells the slot's
	// worker from anyone else who read the fence from GET /gpu/jobs/{id}.
	Secret string `json:"secret"`
	// Shard is the job's shard, for the job of a sharded schedule's run.
	Shard *schedule.Shard `json:"shard,omitempty"`
}

// Fence returns the request's fence, with its secret.
func (r RunRequest) Fence() Fence { return Fence{Slot: r.Slot, Epoch: r.Epoch, Secret: r.Secret} }

// HeartbeatRequest is the body of POST /gpu/jobs/{id}:heartbeat.
type HeartbeatRequest struct {
	Fence
}

// CompleteRequest is the body of POST /gpu/jobs/{id}:complete.
type CompleteRequest struct {
	Fence
	// ExitCode is the command's exit status; -1 when it was killed.
	ExitCode int `json:"exitCode"`
	// Output is where stdout and stderr were stored (gs://bucket/outputs/<id>/…/).
	Output string `json:"output,omitempty"`
	// Stdout is the first StdoutHeadBytes of stdout, for a quick look
	// without the bucket.
	Stdout string `json:"stdout,omitempty"`
	// Error describes a failure to start, a timeout or a kill.
	Error string `json:"error,omitempty"`
	// TimedOut: the worker killed the command at the job's timeout.
	TimedOut bool `json:"timedOut,omitempty"`
	// Interrupted: the worker is shutting down (SIGTERM) and stopped the
	// command; the job is requeued at once with attempts+1.
	Interrupted bool `json:"interrupted,omitempty"`
}

// EnqueueRequest is the body of POST /gpu/jobs.
type EnqueueRequest struct {
	// ID is an optional idempotency key; enqueueing the same id twice
	// returns the first job.
	ID          string            `json:"id,omitempty"`
	Payload     string            `json:"payload"`
	Priority    int               `json:"priority"`
	MaxAttempts int               `json:"maxAttempts,omitempty"`
	Timeout     schedule.Duration `json:"timeout,omitempty"`
	// Tenant is whose job it is, for fair share and quotas
	// (BATON_GPU_WEIGHTS, BATON_GPU_QUOTAS); empty means DefaultTenant.
	Tenant string `json:"tenant,omitempty"`
	// GPUType asks for a slot of that type (BATON_GPU_POOL's
	// "URL=slots@type"); empty takes any slot.
	GPUType string `json:"gpuType,omitempty"`
	// Shard is set only by EnqueueRun, for a shard run's job; the API
	// does not accept it.
	Shard *schedule.Shard `json:"-"`
	// Preemptible lets a higher-priority job whose tenant is under its
	// fair share stop this one while it runs and requeue it without using
	// an attempt (docs/gpu.md, Preemption).
	Preemptible bool `json:"preemptible,omitempty"`
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,199}$`)

// normalize fills defaults and validates; errors are 400s naming the field.
func (r *EnqueueRequest) normalize() error {
	if r.ID != "" && !idPattern.MatchString(r.ID) {
		return httpapi.BadRequest("id", "must be 1-200 characters of letters, digits and ._@+- (no colon: it starts an action) starting with a letter or digit")
	}
	if len(r.Payload) > MaxPayloadBytes {
		return httpapi.BadRequest("payload", "is %d bytes; the limit is %d (store big inputs in the bucket and pass their name)", len(r.Payload), MaxPayloadBytes)
	}
	if r.Priority < 0 || r.Priority > MaxPriority {
		return httpapi.BadRequest("priority", "must be from 0 to %d (higher runs first), not %d", MaxPriority, r.Priority)
	}
	if r.MaxAttempts == 0 {
		r.MaxAttempts = DefaultMaxAttempts
	}
	if r.MaxAttempts < 1 || r.MaxAttempts > MaxMaxAttempts {
		return httpapi.BadRequest("maxAttempts", "must be from 1 to %d, not %d", MaxMaxAttempts, r.MaxAttempts)
	}
	if r.Timeout == 0 {
		r.Timeout = schedule.Duration(DefaultTimeout)
	}
	if r.Timeout.D() < MinTimeout || r.Timeout.D() > MaxTimeout {
		return httpapi.BadRequest("timeout", "must be from %s to %s, not %s", MinTimeout, MaxTimeout, r.Timeout)
	}
	if r.Tenant == "" {
		r.Tenant = DefaultTenant
	}
	if !ValidTenant(r.Tenant) {
		return httpapi.BadRequest("tenant", "must be 1-63 letters, digits and ._- starting with a letter or digit, not %q", r.Tenant)
	}
	if r.GPUType != "" && !ValidGPUType(r.GPUType) {
		return httpapi.BadRequest("gpuType", "must be 1-63 lower-case letters, digits and - (a pool type such as nvidia-l4), not %q", r.GPUType)
	}
	return nil
}

// JobPage is one page of GET /gpu/jobs. NextPageToken continues the list;
// it is empty on the last page.
type JobPage struct {
	Jobs          []Job  `json:"jobs"`
	NextPageToken string `json:"nextPageToken"`
}
