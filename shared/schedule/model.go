package schedule

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/errcode"
)

// Collection names.
const (
	SchedulesCollection = "schedules"
	RunsCollection      = "runs"
)

// Overlap is a schedule's overlap policy: what happens when a fire time
// comes while the previous run still holds the job lease. It is stored and
// sent as its string ("buffer_one"), so the named type changes nothing on
// the wire; it exists so that the compiler keeps a run status or a source
// from being passed where a policy is meant.
type Overlap string

// Overlap policies.
const (
	OverlapSkip      Overlap = "skip"       // record a skipped run with a reason
	OverlapBufferOne Overlap = "buffer_one" // default: collapse misfires into one extra run
	OverlapAllow     Overlap = "allow"      // run concurrently, without a job lease
)

// AllOverlaps lists every overlap policy, in the order the API's error
// messages name them. It returns a new slice each call.
func AllOverlaps() []Overlap { return []Overlap{OverlapSkip, OverlapBufferOne, OverlapAllow} }

// Valid reports whether o is one of the overlap policies. The empty string
// is not; Normalize fills it with the default before validating.
func (o Overlap) Valid() bool {
	switch o {
	case OverlapSkip, OverlapBufferOne, OverlapAllow:
		return true
	}
	return false
}

// Catchup is a schedule's catch-up policy: which fire times missed during
// an outage are fired. It is stored and sent as its string ("latest").
type Catchup string

// Catch-up policies.
const (
	CatchupLatest Catchup = "latest" // default: the most recent missed time only
	CatchupAll    Catchup = "all"    // every missed time, oldest first, up to MaxCatchup
	CatchupNone   Catchup = "none"   // none; move on to the next future time
)

// AllCatchups lists every catch-up policy, in the order the API's error
// messages name them. It returns a new slice each call.
func AllCatchups() []Catchup { return []Catchup{CatchupLatest, CatchupAll, CatchupNone} }

// Valid reports whether c is one of the catch-up policies. The empty string
// is not; Normalize fills it with the default before validating.
func (c Catchup) Valid() bool {
	switch c {
	case CatchupLatest, CatchupAll, CatchupNone:
		return true
	}
	return false
}

// Target types.
const (
	TargetHTTP    = "http"
	TargetGPU     = "gpu"
	TargetBuiltin = "builtin"
	TargetPubSub  = "pubsub"
	// TargetCloudRunJob runs an execution of a Cloud Run job per run.
	TargetCloudRunJob = "cloudRunJob"
)

// Source says why a run exists. It is stored and sent as its string
// ("scheduled"); RunID spells misfire and manual runs' ids with it.
type Source string

// Run sources.
const (
	SourceScheduled Source = "scheduled" // a fire time decided on time by the tick
	SourceMisfire   Source = "misfire"   // buffer_one's extra run after a busy fire time
	SourceCatchup   Source = "catchup"   // a fire time missed during an outage
	SourceRetry     Source = "retry"     // a later attempt of a failed run
	SourceManual    Source = "manual"    // triggered through the API
	SourceBackfill  Source = "backfill"  // a past fire time asked for through :backfill
)

// AllSources lists every run source. It returns a new slice each call.
func AllSources() []Source {
	return []Source{SourceScheduled, SourceMisfire, SourceCatchup, SourceRetry, SourceManual, SourceBackfill}
}

// OperatorAsked reports whether an operator asked for this run by hand
// (trigger or backfill): such runs execute even while the schedule is
// paused, since pausing stops the schedule, not the operator.
func (s Source) OperatorAsked() bool { return s == SourceManual || s == SourceBackfill }

// Valid reports whether s is one of the run sources.
func (s Source) Valid() bool {
	switch s {
	case SourceScheduled, SourceMisfire, SourceCatchup, SourceRetry, SourceManual, SourceBackfill:
		return true
	}
	return false
}

// RunStatus is where a run is in its life. It is stored and sent as its
// string ("pending"), and the database's queries filter on that string.
type RunStatus string

// Run statuses.
const (
	RunPending   RunStatus = "pending"   // decided, not started
	RunRunning   RunStatus = "running"   // executing under its job lease
	RunSucceeded RunStatus = "succeeded" // finished well
	RunFailed    RunStatus = "failed"    // finished badly, or its heartbeat stopped
	RunSkipped   RunStatus = "skipped"   // not executed, by policy; Reason says why
)

// AllRunStatuses lists every run status, in the order of a run's life. It
// returns a new slice each call.
func AllRunStatuses() []RunStatus {
	return []RunStatus{RunPending, RunRunning, RunSucceeded, RunFailed, RunSkipped}
}

// Valid reports whether s is one of the run statuses.
func (s RunStatus) Valid() bool {
	switch s {
	case RunPending, RunRunning, RunSucceeded, RunFailed, RunSkipped:
		return true
	}
	return false
}

// Duration is a time.Duration that reads and writes as a Go duration string
// ("90s", "5m") in JSON and BSON, so documents stay readable by people.
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"90s\" or \"5m\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalBSONValue writes a duration string.
func (d Duration) MarshalBSONValue() (byte, []byte, error) {
	t, b, err := bson.MarshalValue(d.String())
	return byte(t), b, err
}

// UnmarshalBSONValue reads a duration string.
func (d *Duration) UnmarshalBSONValue(t byte, b []byte) error {
	var s string
	if err := bson.UnmarshalValue(bson.Type(t), b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Schedule is one cron job, stored in the schedules collection. Every write
// validates it and recomputes NextRunAt, so an edit is live at the next tick.
type Schedule struct {
	ID          string `bson:"_id" json:"id"`
	Description string `bson:"description,omitempty" json:"description,omitempty"`
	// Labels, when set, are key/value labels (labels.go) that lists
	// select on (labelSelector) and `baton apply` marks its owner with
	// (OwnerLabel).
	Labels Labels `bson:"labels,omitempty" json:"labels,omitempty"`
	// Cron is a 5-field unix-cron expression, with an optional leading
	// seconds field, or a descriptor (@hourly, @every 90s, …).
	Cron string `bson:"cron" json:"cron"`
	// TimeZone is an IANA zone name; empty means UTC.
	TimeZone string `bson:"timeZone" json:"timeZone"`
	// Jitter, when set, delays every fire time by a stable offset in
	// [0, jitter) hashed from the id, so schedules with the same cron do
	// not all fire at once, and each keeps its offset (and its run ids).
	Jitter Duration `bson:"jitter,omitempty" json:"jitter,omitzero"`
	// DST, when set, says what the expression does where the time zone
	// skips or repeats wall times; nil is shift and once-first.
	DST *DSTPolicy `bson:"dst,omitempty" json:"dst,omitempty"`
	// StartAt, when set, is the first instant the schedule may fire at;
	// EndAt, when set, is the first it may not (the window is
	// [StartAt, EndAt)). A schedule past its EndAt is disabled by the tick
	// that finds no next fire time, as an expression that never fires
	// again is.
	StartAt time.Time `bson:"startAt,omitempty" json:"startAt,omitzero"`
	EndAt   time.Time `bson:"endAt,omitempty" json:"endAt,omitzero"`
	// RemainingRuns, when set, is how many more fire times the tick may
	// decide; the advance that commits a decision lowers it by the fires
	// decided, in the same guarded write, and at 0 disables the schedule.
	// Manual, backfill, retry and misfire runs do not count.
	RemainingRuns *int64 `bson:"remainingRuns,omitempty" json:"remainingRuns,omitempty"`
	// Shards, when set (1 to MaxShards), fans every fire out into that
	// many runs, <run>#<i>, each under its own job lease and told its
	// shard; remainingRuns still counts fires. ShardParams, when set, has
	// one string per shard, handed to shard i as its parameter (shard.go).
	Shards      int      `bson:"shards,omitempty" json:"shards,omitempty"`
	ShardParams []string `bson:"shardParams,omitempty" json:"shardParams,omitempty"`
	Target      Target   `bson:"target" json:"target"`
	// ExcludeCalendars name calendars (calendar.go) on whose days the
	// schedule does not fire: such a fire time is recorded skipped, the
	// calendar as its reason. OnlyCalendars, when set, name the
	// calendars outside whose days it does not fire.
	ExcludeCalendars []string `bson:"excludeCalendars,omitempty" json:"excludeCalendars,omitempty"`
	OnlyCalendars    []string `bson:"onlyCalendars,omitempty" json:"onlyCalendars,omitempty"`
	// Overlap is one of skip, buffer_one (default), allow.
	Overlap Overlap `bson:"overlap" json:"overlap"`
	// Catchup is one of latest (default), all, none.
	Catchup Catchup `bson:"catchup" json:"catchup"`
	// MaxCatchup bounds the runs fired by Catchup "all"; default 10.
	MaxCatchup int `bson:"maxCatchup" json:"maxCatchup"`
	// CatchupWindow: a missed time older than this is never fired; default 1h.
	CatchupWindow Duration `bson:"catchupWindow" json:"catchupWindow"`
	Retry         Retry    `bson:"retry" json:"retry"`
	// LeaseTTL is the TTL of the job lease held while a run executes;
	// default 30s. The lease is heartbeated, so runs may last much longer.
	LeaseTTL Duration `bson:"leaseTTL" json:"leaseTTL"`
	Enabled  bool     `bson:"enabled" json:"enabled"`
	// Notify, when set, sends events about the schedule's runs to a
	// webhook (notify.go).
	Notify *Notify `bson:"notify,omitempty" json:"notify,omitempty"`
	// Concurrency, when set, puts the schedule in a concurrency group:
	// at most Concurrency.Limit of the group's runs execute at once.
	Concurrency *Concurrency `bson:"concurrency,omitempty" json:"concurrency,omitempty"`
	// PauseReason is why an operator paused the schedule (POST :pause with
	// {"reason"}), for the next operator to read; at most MaxDescription
	// bytes. It exists only while the schedule is paused: enabling it
	// again clears it.
	PauseReason string `bson:"pauseReason,omitempty" json:"pauseReason,omitempty"`
	// PausedBy and PausedAt say who paused the schedule and when (the
	// caller's Google identity in the cloud, "local" under the local
	// bearer token). PausedUntil, when set, is when the tick resumes it by
	// itself. All three exist only while the schedule is paused.
	PausedBy    string    `bson:"pausedBy,omitempty" json:"pausedBy,omitempty"`
	PausedAt    time.Time `bson:"pausedAt,omitempty" json:"pausedAt,omitzero"`
	PausedUntil time.Time `bson:"pausedUntil,omitempty" json:"pausedUntil,omitzero"`
	// NextRunAt is the next fire time, in UTC. The tick reads schedules with
	// enabled && nextRunAt <= now.
	NextRunAt time.Time `bson:"nextRunAt" json:"nextRunAt"`
	// Misfire is set (buffer_one) when a fire time came while a run held the
	// job lease; the holder clears it and runs once more.
	Misfire   bool      `bson:"misfire" json:"misfire"`
	Version   int64     `bson:"version" json:"version"`
	CreatedAt time.Time `bson:"createdAt" json:"createdAt"`
	UpdatedAt time.Time `bson:"updatedAt" json:"updatedAt"`
	// Fence is the epoch of the last tick lease that advanced NextRunAt:
	// the lease of the schedule's decider shard (leases/tick-<vshard>.json),
	// or of the single tick lease when not partitioned.
	Fence int64 `bson:"fence" json:"-"`
	// DeciderShard is the schedule's virtual decider shard,
	// DeciderShardOf(ID, DeciderShards()), set by Normalize on every write
	// and by the one-off backfill for schedules stored before it. Stored as
	// vshard, not "shard": Shards already names the job sharding of one
	// schedule's runs.
	DeciderShard int `bson:"vshard" json:"-"`
	// History, when set, bounds how long finished runs and change records
	// are kept (history.go).
	History *History `bson:"history,omitempty" json:"history,omitempty"`
	// LastChange is the change that produced this version, written with it
	// (history.go); served by GET /schedules/{id}/versions, not here.
	LastChange *Change `bson:"lastChange,omitempty" json:"-"`
}

// Target is what a run calls. Exactly one of HTTP, GPU and Builtin is set,
// matching Type.
type Target struct {
	Type    string         `bson:"type" json:"type"`
	HTTP    *HTTPTarget    `bson:"http,omitempty" json:"http,omitempty"`
	GPU     *GPUTarget     `bson:"gpu,omitempty" json:"gpu,omitempty"`
	Builtin *BuiltinTarget `bson:"builtin,omitempty" json:"builtin,omitempty"`
	PubSub  *PubSubTarget  `bson:"pubsub,omitempty" json:"pubsub,omitempty"`
	// CloudRunJob is the cloudRunJob target's block.
	CloudRunJob *CloudRunJobTarget `bson:"cloudRunJob,omitempty" json:"cloudRunJob,omitempty"`
}

// HTTPTarget calls a URL. Its host must be on BATON_ALLOWED_TARGETS.
type HTTPTarget struct {
	Method  string            `bson:"method" json:"method"`
	URL     string            `bson:"url" json:"url"`
	Headers map[string]string `bson:"headers,omitempty" json:"headers,omitempty"`
	Body    string            `bson:"body,omitempty" json:"body,omitempty"`
	Timeout Duration          `bson:"timeout" json:"timeout"`
	// ErrorExcerpt keeps a short, redacted excerpt of a failing answer's
	// body in the run's error. Off, the error holds the status line only:
	// the run is returned by the API and logged, and a body can carry a
	// token or internals.
	ErrorExcerpt bool `bson:"errorExcerpt,omitempty" json:"errorExcerpt,omitempty"`
}

// GPUTarget enqueues a job on the GPU pool.
type GPUTarget struct {
	Payload     string   `bson:"payload,omitempty" json:"payload,omitempty"`
	Priority    int      `bson:"priority" json:"priority"`
	MaxAttempts int      `bson:"maxAttempts" json:"maxAttempts"`
	Timeout     Duration `bson:"timeout" json:"timeout"`
	// Tenant is whose job each run's job is, for the pool's fair share and
	// quotas (BATON_GPU_WEIGHTS, BATON_GPU_QUOTAS), as an API-enqueued
	// job's tenant; empty gives the job the pool's default tenant.
	Tenant string `bson:"tenant,omitempty" json:"tenant,omitempty"`
	// GPUType asks for a slot of that type (BATON_GPU_POOL's
	// "URL=slots@type"); empty takes any slot. The Schedules API refuses a
	// type its pool does not have (ValidateOptions.GPUTypes).
	GPUType string `bson:"gpuType,omitempty" json:"gpuType,omitempty"`
	// Preemptible lets a higher-priority job stop each run's job while it
	// runs and requeue it without using an attempt (docs/gpu.md,
	// Preemption).
	Preemptible bool `bson:"preemptible,omitempty" json:"preemptible,omitempty"`
	// Shard is set by the scheduler on the copy it enqueues for a run of
	// a sharded schedule (Run.GPUTarget), so the job's command is told its
	// shard; it is never stored on a schedule nor read from a request.
	Shard *Shard `bson:"-" json:"-"`
}

// Shard is one shard of a sharded fire, as a GPU job is told it: Index
// (from 0) of Count, with its shardParams entry.
type Shard struct {
	Index int    `bson:"index" json:"index"`
	Count int    `bson:"count" json:"count"`
	Param string `bson:"param,omitempty" json:"param,omitempty"`
}

// GPUTarget is t as run r enqueues it: with r's shard when r is a shard
// run, so that each shard's job is told which one it is.
func (r *Run) GPUTarget(t GPUTarget) GPUTarget {
	if r.Shard != nil {
		t.Shard = &Shard{Index: *r.Shard, Count: r.Shards, Param: r.ShardParam}
	}
	return t
}

// BuiltinTarget runs a Go function registered by name (noop, sleep, fail).
type BuiltinTarget struct {
	Name string            `bson:"name" json:"name"`
	Args map[string]string `bson:"args,omitempty" json:"args,omitempty"`
}

// Retry says how often a failed run is tried again.
type Retry struct {
	// MaxAttempts counts the first attempt; 1 (default) means no retry.
	MaxAttempts int `bson:"maxAttempts" json:"maxAttempts"`
	// Backoff is the delay before the first retry; it doubles each time.
	Backoff Duration `bson:"backoff" json:"backoff"`
}

// Run records one decision for one fire time of one schedule. Its _id is
// RunID(scheduleID, fireTime, attempt-ish suffix), so inserting it twice is a
// duplicate-key no-op and a duplicated tick fires nothing twice.
type Run struct {
	ID         string    `bson:"_id" json:"id"`
	ScheduleID string    `bson:"scheduleId" json:"scheduleId"`
	FireTime   time.Time `bson:"fireTime" json:"fireTime"`
	Source     Source    `bson:"source" json:"source"`
	Status     RunStatus `bson:"status" json:"status"`
	Reason     string    `bson:"reason,omitempty" json:"reason,omitempty"`
	Attempt    int       `bson:"attempt" json:"attempt"`
	// Holder and Epoch identify the job lease the run executed under.
	Holder      string    `bson:"holder,omitempty" json:"holder,omitempty"`
	Epoch       int64     `bson:"epoch,omitempty" json:"epoch,omitempty"`
	CreatedAt   time.Time `bson:"createdAt" json:"createdAt"`
	StartedAt   time.Time `bson:"startedAt,omitempty" json:"startedAt,omitzero"`
	HeartbeatAt time.Time `bson:"heartbeatAt,omitempty" json:"heartbeatAt,omitzero"`
	FinishedAt  time.Time `bson:"finishedAt,omitempty" json:"finishedAt,omitzero"`
	Error       string    `bson:"error,omitempty" json:"error,omitempty"`
	// Output is a short summary (an HTTP status, a GPU job id).
	Output string `bson:"output,omitempty" json:"output,omitempty"`
	// ExpireAt is when a finished run may be deleted (history.go); only
	// finished runs carry it.
	ExpireAt time.Time `bson:"expireAt,omitempty" json:"expireAt,omitzero"`
	// GPUJob is the id of the GPU job a gpu-target run hands its work to
	// (GPUJobID of the run id), set by the claim. Such a run stays running
	// while the job is queued or running, with nobody holding the job
	// lease, and the sweep finishes it from the job's outcome.
	GPUJob string `bson:"gpuJob,omitempty" json:"gpuJob,omitempty"`
	// RunJob is the full name of the Cloud Run job a cloudRunJob-target
	// run starts an execution of, set by the claim: from then on the run
	// is "starting" until Execution is recorded, and the sweep, not a
	// heartbeat, ends it (scheduler/runjob.go).
	RunJob string `bson:"runJob,omitempty" json:"runJob,omitempty"`
	// Execution is the full name of that execution, once started.
	Execution string `bson:"execution,omitempty" json:"execution,omitempty"`
	// ExitCode is the GPU job's exit status, once it has one.
	ExitCode *int `bson:"exitCode,omitempty" json:"exitCode,omitempty"`
	// Delivery is the execution plane's account of the task that claimed
	// the run (Cloud Tasks' X-CloudTasks-* headers); nil when the run was
	// executed in-process (baton daemon).
	Delivery *Delivery `bson:"delivery,omitempty" json:"delivery,omitempty"`
	// WaitingFor, on a pending run, says what it waits for before it can
	// start ("group etl": its concurrency group is full); Group is that
	// group. The claim clears both, so only waiting runs carry them.
	WaitingFor string `bson:"waitingFor,omitempty" json:"waitingFor,omitempty"`
	Group      string `bson:"group,omitempty" json:"group,omitempty"`
	// Fence is the epoch of the last lease holder that wrote the run.
	Fence int64 `bson:"fence" json:"-"`
	// DeciderShard is the virtual decider shard of the run's schedule
	// (RunDeciderShard), stored as vshard as on the schedule. The store
	// stamps it on every insert, so that the runs' time-ordered indexes
	// can lead with it: a minute's runs then write V index ranges, not
	// one hot one, and a partition sweeps its own shards' runs. Runs
	// stored before it have none (docs/scheduler.md).
	DeciderShard int `bson:"vshard" json:"-"`
	// BatchAt is, on a retry, when its first attempt was decided (that
	// run's createdAt): the retry of a catch-up batch's run belongs to
	// that batch, and the batch's later runs wait behind it rather than
	// count it as an earlier run overlapping them.
	BatchAt time.Time `bson:"batchAt,omitempty" json:"-"`
	// Shard, on a run of a sharded schedule, is its shard (from 0) of
	// Shards, with ShardParam its parameter; nil on other runs. A
	// pointer, so that shard 0 is stored and shown.
	Shard      *int   `bson:"shard,omitempty" json:"shard,omitempty"`
	Shards     int    `bson:"shards,omitempty" json:"shards,omitempty"`
	ShardParam string `bson:"shardParam,omitempty" json:"shardParam,omitempty"`
	// ShardRuns is set only on the aggregate of a sharded fire that GET
	// /runs/{fireId} answers (FireOf): each shard's latest attempt. It is
	// never stored.
	ShardRuns []ShardRun `bson:"-" json:"shardRuns,omitempty"`
}

// Delivery is one delivery of a Cloud Task to the Run function, as its
// headers describe it. It is kept on the run so that history shows when the
// queue had to retry before a Run claimed it.
type Delivery struct {
	// Queue and Task are the short queue and task ids.
	Queue string `bson:"queue,omitempty" json:"queue,omitempty"`
	Task  string `bson:"task,omitempty" json:"task,omitempty"`
	// RetryCount is how often the queue retried the task before this
	// delivery (X-CloudTasks-TaskRetryCount).
	RetryCount int `bson:"retryCount" json:"retryCount"`
	// ExecutionCount is how many earlier deliveries got an answer from Run
	// (X-CloudTasks-TaskExecutionCount).
	ExecutionCount int `bson:"executionCount" json:"executionCount"`
}

// GPUJobID is the id of the GPU job of run runID. One run makes one job,
// whatever happens to the enqueue's answer: a retry of the enqueue, by the
// executor or the sweep, finds the job already there. A retry of the run
// (a new attempt, a new run id) makes a new job.
//
// A shard run's "#" (ShardSep), which GPU job ids do not allow, becomes "+",
// which no other run id holds, so the mapping stays one to one.
func GPUJobID(runID string) string { return "run-" + strings.ReplaceAll(runID, ShardSep, "+") }

// ErrInvalidGPUTarget means the GPU pool refuses a run's gpu target as it is
// (a limit it breaks); enqueueing it again cannot succeed.
var ErrInvalidGPUTarget = errcode.New(errcode.InvalidArgument, "schedule: the GPU pool refuses this gpu target")

// GPUJobState is what a gpu-target run needs to know of its GPU job.
type GPUJobState struct {
	// Status is the job's status, a shared/gpu JobStatus (queued,
	// dispatched, running, succeeded, failed, dead, cancelled) as its
	// string: shared/gpu imports this package, not the other way round.
	Status string
	// ExitCode is the command's exit status once it exited.
	ExitCode *int
	// Error says why the job failed, died or was interrupted.
	Error string
	// Attempts counts the job's own attempts that were used up.
	Attempts int
	// Output is where the job's stdout and stderr are stored.
	Output string
}

// RunID is the deterministic _id of the run of a schedule at a fire time.
// source and attempt keep a retry or a misfire rerun distinct from the
// original while staying deterministic.
func RunID(scheduleID string, fireTime time.Time, source Source, attempt int) string {
	id := scheduleID + "@" + fireTime.UTC().Format("20060102T150405Z")
	if source == SourceMisfire || source == SourceManual {
		id += "-" + string(source)
	}
	if attempt > 1 {
		id += fmt.Sprintf("-a%d", attempt)
	}
	return id
}
