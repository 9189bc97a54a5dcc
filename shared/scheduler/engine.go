package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-cron/baton/shared/clock"
	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/metrics"
	"github.com/baton-cron/baton/shared/notify"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// TickLease is the name of the lease that covers deciding (object
// leases/tick.json).
const TickLease = "tick"

// JobLease is the name of the job lease of a schedule (object
// leases/<hh>/job-<id>.json: lease.SpreadDir spreads job leases over the
// bucket's index).
func JobLease(scheduleID string) string { return "job-" + scheduleID }

// Defaults for Config.
const (
	DefaultTickLeaseTTL = 30 * time.Second
	DefaultPageSize     = 100
	DefaultGrace        = 90 * time.Second
	DefaultWorkers      = 32
	// DefaultGPUPoll is well short of a one-minute tick, so every tick's
	// sweep looks once at each GPU job in flight (a read each), and a
	// local stack ticking every few seconds sees a job end within one.
	DefaultGPUPoll = 5 * time.Second
	// DefaultRunJobPoll is how often a running Cloud Run execution is
	// read: as GPU jobs, well short of a one-minute tick.
	DefaultRunJobPoll = 5 * time.Second
)

// GPU hands gpu targets to the GPU dispatcher. shared/gpu implements it; a
// nil GPU in Config makes gpu targets fail their run with a clear error.
type GPU interface {
	// EnqueueRun queues the job of one run. It is idempotent per runID: a
	// second call for the same run returns the same job.
	EnqueueRun(ctx context.Context, runID string, t schedule.GPUTarget) (jobID string, err error)
	// Sweep requeues jobs whose slot lease expired and dispatches queued
	// jobs to free slots.
	Sweep(ctx context.Context) (requeued, dead int, err error)
	// RunJob reports the state of the job with id jobID (found false when
	// there is none): the sweep finishes a gpu-target run from it.
	RunJob(ctx context.Context, jobID string) (st schedule.GPUJobState, found bool, err error)
}

// Config configures an Engine.
type Config struct {
	// Store is the database. Required.
	Store store.Backend
	// Leases makes the tick lease and the job leases. Required.
	Leases *lease.Manager
	// Clock is the clock used for decisions and run timestamps; nil means
	// the wall clock. (Lease expiry is judged by the lease manager on the
	// storage server's clock, not on this one.)
	Clock clock.Clock
	// TickLeaseTTL is the TTL of the tick lease; default 30s.
	TickLeaseTTL time.Duration
	// AllowedTargets is the http target host allowlist
	// (BATON_ALLOWED_TARGETS), checked again at execution time.
	AllowedTargets []string
	// AllowedTopics is the pubsub target topic allowlist
	// (BATON_ALLOWED_TOPICS), checked again at execution time.
	AllowedTopics []string
	// HTTPClient calls http targets; nil means a client without a global
	// timeout (each target has its own).
	HTTPClient *http.Client
	// LookupIP resolves http target host names before the address check;
	// nil means net.DefaultResolver. Tests set it: DNS has no emulator, so
	// a hostile record is played at this edge.
	LookupIP func(ctx context.Context, host string) ([]net.IPAddr, error)
	// IDToken makes http targets carry a Google-signed OIDC ID token whose
	// audience is the target URL (in the cloud; not locally, where there
	// are no Google credentials).
	IDToken bool
	// GPU is the GPU dispatcher; nil fails gpu targets with a clear error.
	GPU GPU
	// RunBudget bounds how long one Execute (a Run invocation) keeps
	// starting runs; default DefaultRunBudget. Runs it has no time for stay
	// pending (or buffered) for the next delivery, the lease holder after
	// it, or the sweep.
	RunBudget time.Duration
	// GPUPoll is how often the sweep looks at the job of a gpu-target run
	// that is still queued or running; default DefaultGPUPoll. Each look
	// is one read per such run, so reads grow with GPU work in flight.
	GPUPoll time.Duration
	// RunJobs is the Run Admin API of cloudRunJob targets; nil fails
	// their runs with ErrNoRunJobs.
	RunJobs RunJobs
	// AllowedJobs is the cloudRunJob target job allowlist
	// (BATON_ALLOWED_JOBS), checked again at execution time.
	AllowedJobs []string
	// RunJobPoll is how often the sweep looks at the execution of a
	// running cloudRunJob run; default DefaultRunJobPoll. One read per
	// execution in flight per look.
	RunJobPoll time.Duration
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// PageSize is the number of due schedules read per page; default 100.
	PageSize int
	// Grace is how old a fire time may be when a tick sees it and still be
	// on time (source "scheduled"). Older fire times were missed, and their
	// catch-up policy decides. Default 90s, which covers a one-minute tick.
	Grace time.Duration
	// Workers bounds the schedules executed concurrently by one tick;
	// default 32.
	Workers int
	// DecideConcurrency bounds the schedules one decider (a tick, or one
	// decider shard of a partition) decides at once; default
	// DefaultDecideConcurrency, sized for Firestore's write latency
	// (BATON_DECIDE_CONCURRENCY).
	DecideConcurrency int
	// TaskRuns bounds the runs of one Run task when a tick hands off the
	// runs of several schedules at once: they share a task (a page) up to
	// this many runs, and with it Cloud Tasks' create and delivery and Cloud
	// Run's request fee. Default MaxTaskRuns; 1 gives every schedule its
	// own task (BATON_TASK_RUNS).
	TaskRuns int
	// PageSlots bounds the page entries (one schedule's runs each) that
	// this engine executes at once, across every page task it serves;
	// default DefaultPageSlots. Before pages a Run instance executed at
	// most as many schedules at once as it served requests (Terraform's
	// run_concurrency, 80); a page of 100 schedules per request would
	// multiply that, and with it the connections and memory an instance
	// needs. An entry past the bound waits for a slot.
	PageSlots int
	// ShardConcurrency bounds the decider shards one partition decides at
	// once; default DefaultShardConcurrency (BATON_SHARD_CONCURRENCY).
	ShardConcurrency int
	// InlineShards lets a coordinating tick decide in its own request,
	// creating no partition task, when at most this many decider shards
	// have something due (Coordinate). 0 never does: every coordinating
	// tick creates its partition tasks (BATON_INLINE_SHARDS, 16 in the
	// functions). A partition task costs a Cloud Tasks create and
	// delivery and a request, and the runs it decides share Run tasks
	// only with its own shards' runs: a small deployment's minute of ten
	// runs over eight partitions paid about one Run task a run
	// (docs/cost.md). Deciding few shards is little work for one request.
	InlineShards int
	// LapseShardLeases leaves a decider shard's lease to lapse once the
	// shard is decided, instead of releasing it (lease.Lease.Retain): the
	// release is a write (a marker, a write unit) per busy shard per
	// tick, and the next tick, a minute away, comes after the lease's TTL
	// anyway; this engine's own next acquire writes over it at once. It
	// applies only to a shard decided early enough in the minute of its
	// tick's schedule time that the lease (TickLeaseTTL and the skew after
	// its last write) is gone before the next minute's tick (retainBy):
	// a late decide, such as a partition task redelivered half a minute
	// in, releases. Meanwhile another process's decide of the shard (a
	// manual tick, a duplicated one) finds it held and skips it: it was
	// just decided, and what falls due since is the next tick's. A shard
	// whose decide stopped with an error is released, so that a retry
	// decides it at once. BATON_LAPSE_SHARD_LEASES: true in the functions,
	// false in baton local, whose restart would otherwise wait out the
	// leases its last process left.
	LapseShardLeases bool
	// Partitions creates the partition tasks of a coordinating tick
	// (Coordinate); nil makes Coordinate decide every partition in this
	// process, one after another (tests, and baton local without a
	// tasks emulator).
	Partitions PartitionDispatcher
	// Notify is the default notification channel, for schedules without a
	// notify block of their own (BATON_NOTIFY_WEBHOOK_URL, _SECRET, _ON);
	// nil means none.
	Notify *schedule.Notify
	// ConsoleURL, when set, is the console's base URL: notifications link
	// to a run at ConsoleURL/runs/<id> (BATON_CONSOLE_URL).
	ConsoleURL string
	// NotifyTimeout bounds one webhook request; default
	// DefaultNotifyTimeout.
	NotifyTimeout time.Duration
	// NotifyBackoff is the delay after a failed delivery, doubling per
	// attempt up to MaxNotifyBackoff; default DefaultNotifyBackoff.
	NotifyBackoff time.Duration
	// NotifyAttempts is how many deliveries an event gets before it is
	// given up; default DefaultNotifyAttempts.
	NotifyAttempts int
	// Publisher sends the events of channels with a Pub/Sub topic
	// (notify.PubSub); nil makes their deliveries fail, and retry, with an
	// error saying so.
	Publisher notify.Publisher
	// HistoryKeep is how long a finished run is kept (its expireAt) when
	// its schedule sets no history.keep; 0 means schedule.DefaultKeep.
	HistoryKeep time.Duration
	// Tasks hands decided runs to the execution plane (Cloud Tasks → the
	// Run function). nil executes them in this process: after deciding in
	// Tick (which then waits for its slowest target: only for tests and the
	// inline benchmark), or in the background in TickHeld (baton daemon).
	Tasks Dispatcher
	// Metrics records runs and ticks; nil records into metrics.Default()
	// (OpenTelemetry's global provider, a no-op until a binary sets one).
	Metrics *metrics.Set
}

// Engine decides and executes runs. It is safe for concurrent use; every
// decision it makes is guarded by leases and conditional writes, so any
// number of engines (function instances, daemons) may share a database.
type Engine struct {
	cfg       Config
	now       func() time.Time
	log       *slog.Logger
	metrics   *metrics.Set
	schedules store.Schedules
	runs      store.Runs
	http      *http.Client
	// notifyHTTP sends webhooks: the guarded client, without redirects.
	notifyHTTP *http.Client
	idClients  sync.Map // audience → *http.Client

	bg sync.WaitGroup
	// pageSlots bounds the page entries executing (Config.PageSlots).
	pageSlots chan struct{}
	// backfilled is set once a coordinating tick has run the decider
	// shard backfill (backfillOnce).
	backfilled atomic.Bool
	// notifying is set while TickHeld's notification sweep runs.
	notifying atomic.Bool
	// misfireMu guards misfireAfter, the _id the stranded-misfire sweep
	// resumes after: its pages advance across sweeps (strandedMisfires).
	misfireMu    sync.Mutex
	misfireAfter string

	// beforeInsert, when set (tests), runs when a schedule is about to have
	// its runs inserted, after the tick lease was last checked: where a
	// tick that pauses there would wake past its lease. An error aborts
	// the tick there.
	beforeInsert func(scheduleID string) error
	// afterInsert, when set (tests), runs after a schedule's runs were
	// inserted and before nextRunAt is advanced; an error aborts the tick
	// there, as a crash would.
	afterInsert func(scheduleID string) error
	// beforeRelease, when set (tests), runs in a job lease holder after its
	// last misfire check and before it releases the lease: the window in
	// which a buffering executor can set the flag unseen.
	beforeRelease func(scheduleID string)
	// beforeMisfireWrite, when set (tests), runs just before the second of
	// buffer_one's two-write steps: step "flag" before the misfire flag is
	// set (the buffered run is already marked skipped), step "run" before
	// the misfire run is recorded (the flag is already cleared).
	beforeMisfireWrite func(scheduleID, step string)
	// beforeGroupWait, when set (tests), runs just before a run records
	// that it waits for its concurrency group.
	beforeGroupWait func(runID string)
}

// New checks cfg and returns an Engine.
func New(cfg Config) (*Engine, error) {
	if cfg.Store == nil {
		return nil, errors.New("scheduler: new: Config.Store is required")
	}
	if cfg.Leases == nil {
		return nil, errors.New("scheduler: new: Config.Leases is required")
	}
	if cfg.TickLeaseTTL <= 0 {
		cfg.TickLeaseTTL = DefaultTickLeaseTTL
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = DefaultPageSize
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.DecideConcurrency <= 0 {
		cfg.DecideConcurrency = DefaultDecideConcurrency
	}
	if cfg.ShardConcurrency <= 0 {
		cfg.ShardConcurrency = DefaultShardConcurrency
	}
	if cfg.TaskRuns <= 0 || cfg.TaskRuns > MaxTaskRuns {
		cfg.TaskRuns = MaxTaskRuns
	}
	if cfg.PageSlots <= 0 {
		cfg.PageSlots = DefaultPageSlots
	}
	if cfg.RunBudget <= 0 {
		cfg.RunBudget = DefaultRunBudget
	}
	if cfg.GPUPoll <= 0 {
		cfg.GPUPoll = DefaultGPUPoll
	}
	if cfg.RunJobPoll <= 0 {
		cfg.RunJobPoll = DefaultRunJobPoll
	}
	if cfg.NotifyTimeout <= 0 {
		cfg.NotifyTimeout = DefaultNotifyTimeout
	}
	if cfg.HistoryKeep <= 0 {
		cfg.HistoryKeep = schedule.DefaultKeep
	}
	if cfg.NotifyBackoff <= 0 {
		cfg.NotifyBackoff = DefaultNotifyBackoff
	}
	if cfg.NotifyAttempts <= 0 {
		cfg.NotifyAttempts = DefaultNotifyAttempts
	}
	e := &Engine{
		pageSlots: make(chan struct{}, cfg.PageSlots),
		cfg:       cfg,
		now:       clock.Or(cfg.Clock).Now,
		log:       cfg.Logger,
		schedules: cfg.Store.Schedules(),
		runs:      cfg.Store.Runs(),
		http:      cfg.HTTPClient,
		metrics:   metrics.Or(cfg.Metrics),
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.http == nil {
		e.http = &http.Client{}
	}
	e.http = guardClient(e.http, cfg.AllowedTargets, cfg.LookupIP)
	e.notifyHTTP = noRedirects(e.http)
	return e, nil
}

// Summary is what a tick did. It is the Tick function's JSON answer.
type Summary struct {
	// Status is "ok", or "skipped" when another holder had the tick lease.
	Status string `json:"status"`
	// Reason says why a tick was skipped.
	Reason string `json:"reason,omitempty"`
	// Holder is the tick lease holder: the other one when skipped, this
	// one otherwise.
	Holder string `json:"holder,omitempty"`
	// Epoch is the tick lease's fencing epoch.
	Epoch int64 `json:"epoch,omitempty"`
	// ScheduleTime is X-CloudScheduler-ScheduleTime, when given.
	ScheduleTime *time.Time `json:"scheduleTime,omitempty"`
	// Now is the time the tick decided at.
	Now time.Time `json:"now"`
	// Due is the number of due schedules read.
	Due int `json:"due"`
	// Decided is the number of run documents newly inserted.
	Decided int `json:"decided"`
	// Fired is the number of runs executed (claimed and started) in this
	// process; with a Dispatcher it is 0, and the Run function reports them.
	Fired int `json:"fired"`
	// Enqueued is the number of runs handed to the execution plane.
	Enqueued int `json:"enqueued"`
	// Succeeded and Failed count finished runs; Failed includes runs the
	// failover sweep found with a stopped heartbeat.
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	// Skipped counts runs recorded skipped by the overlap policy skip or
	// by a calendar (excludeCalendars, onlyCalendars).
	Skipped int `json:"skipped"`
	// Misfired counts runs buffered by buffer_one (collapsed into one extra
	// run with source misfire).
	Misfired int `json:"misfired"`
	// CaughtUp counts runs decided for missed fire times (source catchup).
	CaughtUp int `json:"caughtUp"`
	// Retried counts retry runs created.
	Retried int `json:"retried"`
	// Recovered counts pending runs the sweep picked up (orphaned by a
	// crash, or retries that came due).
	Recovered int `json:"recovered"`
	// Resumed counts schedules whose timed pause ended (pausedUntil).
	Resumed int `json:"resumed"`
	// GPURequeued and GPUDead are the GPU sweep's counts.
	GPURequeued int `json:"gpuRequeued"`
	GPUDead     int `json:"gpuDead"`
	// Errors counts operations that failed and were left for a later tick.
	Errors int `json:"errors"`
	// DocsRead is the number of documents read (store meter delta);
	// SchedulesRead counts only schedule documents.
	DocsRead      int64 `json:"docsRead"`
	SchedulesRead int64 `json:"schedulesRead"`
	// Took is the wall time of the tick.
	Took string `json:"took"`
	// Partition and Partitions say which partition of how many this tick
	// decided (TickPartition); absent for an unpartitioned tick.
	Partition  *int `json:"partition,omitempty"`
	Partitions int  `json:"partitions,omitempty"`
	// ShardsDecided counts the decider shards this partition held and
	// decided; ShardsSkipped those another holder had (a duplicated task,
	// or a partition of another P still deciding them), which are left to
	// that holder, never waited on.
	ShardsDecided int `json:"shardsDecided,omitempty"`
	ShardsSkipped int `json:"shardsSkipped,omitempty"`
	// ShardsQuiet counts the decider shards that had nothing due, which
	// the partition left without taking their lease.
	ShardsQuiet int `json:"shardsQuiet,omitempty"`
}

// counters accumulates a Summary from concurrent executions.
type counters struct {
	due, decided, fired, enqueued, succeeded, failed, skipped, misfired, caughtUp, retried, recovered, errors atomic.Int64
	// settled holds, by run id, the status this execution last wrote to a
	// run it claimed: running, then its outcome. A claimed run is never
	// pending again, so a task's answer need not read it back
	// (executeOne).
	settled sync.Map
}

// settle records that this execution wrote status to run id (counters.settled).
func (c *counters) settle(id string, status schedule.RunStatus) { c.settled.Store(id, status) }

func (c *counters) fill(s *Summary) {
	s.Due = int(c.due.Load())
	s.Decided = int(c.decided.Load())
	s.Fired = int(c.fired.Load())
	s.Enqueued = int(c.enqueued.Load())
	s.Succeeded = int(c.succeeded.Load())
	s.Failed = int(c.failed.Load())
	s.Skipped = int(c.skipped.Load())
	s.Misfired = int(c.misfired.Load())
	s.CaughtUp = int(c.caughtUp.Load())
	s.Retried = int(c.retried.Load())
	s.Recovered = int(c.recovered.Load())
	s.Errors = int(c.errors.Load())
}

// Wait blocks until the background executions started by Trigger and by
// TickHeld have finished.
func (e *Engine) Wait() { e.bg.Wait() }

func (e *Engine) readMeter() (total, schedules int64) {
	m := e.cfg.Store.Meter()
	snap := m.Snapshot()
	for op, n := range snap {
		if len(op) > len(schedule.SchedulesCollection) && op[:len(schedule.SchedulesCollection)+1] == schedule.SchedulesCollection+"." {
			schedules += n
		}
	}
	return m.Total(), schedules
}

// Tick is flow 1: take the tick lease, decide the due schedules, release the
// lease, execute the fired runs, sweep, and summarise. A busy tick lease is
// a normal outcome (Status "skipped"), not an error. scheduleTime is
// X-CloudScheduler-ScheduleTime, or zero; it is recorded, while decisions
// use the engine's clock, so a late duplicate delivery decides nothing new.
func (e *Engine) Tick(ctx context.Context, scheduleTime time.Time) (*Summary, error) {
	start := time.Now()
	read0, sched0 := e.readMeter()
	sum := &Summary{Status: "ok", Now: e.now().UTC()}
	if !scheduleTime.IsZero() {
		st := scheduleTime.UTC()
		sum.ScheduleTime = &st
	}
	l, err := e.cfg.Leases.Acquire(ctx, TickLease, e.cfg.TickLeaseTTL)
	if err != nil {
		var held *lease.HeldError
		if errors.As(err, &held) {
			sum.Status = "skipped"
			sum.Reason = fmt.Sprintf("tick lease held by %s (epoch %d) until %s", held.Holder, held.Epoch, held.ExpiresAt.UTC().Format(time.RFC3339))
			sum.Holder = held.Holder
			sum.Epoch = held.Epoch
			sum.Took = time.Since(start).String()
			e.metrics.Tick(ctx, "skipped", time.Since(start), 0)
			return sum, nil
		}
		e.metrics.Tick(ctx, "failed", time.Since(start), 0)
		return nil, fmt.Errorf("scheduler: tick: %w", err)
	}
	sum.Holder, sum.Epoch = l.Holder(), l.Epoch()
	var c counters
	work, derr := e.decide(l.Context(), l, sum.Now, &c) //nolint:contextcheck // deciding is bounded by the tick lease (it stops when the lease is lost), not by the request; unchanged behaviour
	// Release as soon as the decisions are committed: the tick lease covers
	// deciding, never executing.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.TickLeaseTTL)
	if rerr := l.Release(rctx); rerr != nil {
		e.log.Warn("tick lease release failed", "err", rerr)
	}
	cancel()
	// A tick that stopped early still starts the work it committed (see
	// decide); only the sweep is left to the next tick.
	e.handOffOrExecute(ctx, work, &c)
	if derr != nil {
		e.log.Warn("tick stopped early; the schedules it had decided were started", "schedules", len(work), "err", derr)
		read1, _ := e.readMeter()
		e.metrics.Tick(ctx, "failed", time.Since(start), read1-read0)
		return nil, fmt.Errorf("scheduler: tick: %w", derr)
	}
	e.handOffOrExecute(ctx, e.sweep(ctx, &c, sum, sweepShards(0, 0), true), &c)
	// In the background: a tick that waited for a slow receiver would
	// start the next tick late, and its runs with it.
	e.deliverPendingBackground(ctx)
	e.finishTick(ctx, "tick", sum, &c, start, read0, sched0)
	return sum, nil
}

// handOffOrExecute starts a tick's work: handed off when the engine has a
// queue (Tick's time must not depend on how long any target takes), else
// executed here, before the tick answers (baton daemon's inline ticks).
func (e *Engine) handOffOrExecute(ctx context.Context, work []*scheduleWork, c *counters) {
	if e.cfg.Tasks != nil {
		e.handOff(ctx, work, c)
		return
	}
	e.execute(ctx, work, c)
}

// finishTick completes an ok tick's summary (counters, documents read
// since read0 and sched0, its time since start), records the tick's
// metric and logs the summary as what ("tick", "tick partition").
func (e *Engine) finishTick(ctx context.Context, what string, sum *Summary, c *counters, start time.Time, read0, sched0 int64) {
	c.fill(sum)
	read1, sched1 := e.readMeter()
	sum.DocsRead, sum.SchedulesRead = read1-read0, sched1-sched0
	sum.Took = time.Since(start).String()
	e.metrics.Tick(ctx, "ok", time.Since(start), sum.DocsRead)
	e.log.Info(what, "summary", sum)
}

// TickHeld decides under a tick lease the caller already holds and keeps
// (the daemon's way of ticking), then starts the fired runs in the
// background (Wait waits for them) and returns without waiting: a long run
// must not delay the next tick. With sweep set it also sweeps, starting the
// recovered runs in the background too. execCtx bounds the executions; it
// should outlive the lease, because runs continue under their own job
// leases when the tick lease moves to another daemon.
func (e *Engine) TickHeld(ctx, execCtx context.Context, l *lease.Lease, sweep bool) (*Summary, error) {
	start := time.Now()
	read0, sched0 := e.readMeter()
	sum := &Summary{Status: "ok", Now: e.now().UTC(), Holder: l.Holder(), Epoch: l.Epoch()}
	c := &counters{}
	lctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(l.Context(), func() { cancel(context.Cause(l.Context())) }) //nolint:contextcheck // the AfterFunc callback only cancels; it makes no call that takes a context
	defer stop()
	work, err := e.decide(lctx, l, sum.Now, c)
	e.startOrHandOff(execCtx, work, c)
	if err != nil {
		read1, _ := e.readMeter()
		e.metrics.Tick(ctx, "failed", time.Since(start), read1-read0)
		return nil, fmt.Errorf("scheduler: tick under held lease: %w", err)
	}
	if sweep {
		e.startOrHandOff(execCtx, e.sweep(lctx, c, sum, sweepShards(0, 0), true), c)
		e.deliverPendingBackground(execCtx)
	}
	c.fill(sum)
	read1, sched1 := e.readMeter()
	sum.DocsRead, sum.SchedulesRead = read1-read0, sched1-sched0
	sum.Took = time.Since(start).String()
	e.metrics.Tick(ctx, "ok", time.Since(start), sum.DocsRead)
	return sum, nil
}

// startOrHandOff gets work going without waiting for it: handed off when
// there is a Dispatcher, otherwise executed in the background (Wait waits).
func (e *Engine) startOrHandOff(ctx context.Context, work []*scheduleWork, c *counters) {
	if len(work) == 0 {
		return
	}
	if e.cfg.Tasks != nil {
		e.handOff(ctx, work, c)
		return
	}
	e.bg.Add(1)
	go func() { defer e.bg.Done(); e.execute(ctx, work, &counters{}) }()
}

// NextDue returns the earliest nextRunAt of an enabled schedule (one
// document read), or ok false when there is none.
func (e *Engine) NextDue(ctx context.Context) (t time.Time, ok bool, err error) {
	t, ok, err = e.schedules.NextDue(ctx)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("scheduler: next due: %w", err)
	}
	return t, ok, nil
}

// getSchedule reads schedule id into out; a missing one is an error
// wrapping store.ErrNotFound.
func (e *Engine) getSchedule(ctx context.Context, id string, out *schedule.Schedule) error {
	s, err := e.schedules.Get(ctx, id)
	if err != nil {
		return err
	}
	*out = s
	return nil
}
