package functions

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/storage"
	ff "github.com/GoogleCloudPlatform/functions-framework-go/functions"
	"google.golang.org/api/option"

	"github.com/baton-cron/baton/shared/clock"
	"github.com/baton-cron/baton/shared/cloudrun"
	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/logging"
	"github.com/baton-cron/baton/shared/metrics"
	"github.com/baton-cron/baton/shared/notify"
	"github.com/baton-cron/baton/shared/openapi"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store/mongostore"
	"github.com/baton-cron/baton/shared/taskqueue"
)

// Deps are the clients and settings the functions share. In the cloud they
// are built once per instance from the environment (FromEnv); locally and in
// tests they are built by the caller, so several stacks can live in one
// process.
type Deps struct {
	// Store is nil when BATON_MONGO_URI is unset; functions that need it
	// answer 503 naming the variable.
	Store *mongostore.Store
	// Storage and Bucket are unset when BATON_BUCKET is unset.
	Storage *storage.Client
	Bucket  string
	// Token, when set, is required as a bearer token (local use).
	Token string
	// Logger is the JSON logger.
	Logger *slog.Logger
	// Clock is the one clock every function's packages take; nil means
	// the wall clock.
	Clock clock.Clock
	// HTTPClient calls targets and workers; nil means a client with a 30s
	// timeout.
	HTTPClient *http.Client
	// AllowedTargets is the host allowlist for http targets
	// (BATON_ALLOWED_TARGETS).
	AllowedTargets []string
	// AllowedTopics is the topic allowlist for pubsub targets
	// (BATON_ALLOWED_TOPICS).
	AllowedTopics []string
	// AllowedJobs is the job allowlist for cloudRunJob targets
	// (BATON_ALLOWED_JOBS).
	AllowedJobs []string
	// RunJobs is the Run Admin API client of cloudRunJob targets; nil
	// fails their runs (scheduler.ErrNoRunJobs).
	RunJobs scheduler.RunJobs
	// RunJobPoll is how often the sweep reads a running execution; 0
	// means scheduler.DefaultRunJobPoll.
	RunJobPoll time.Duration
	// EnsureTopic, when set, is called with the topic of every pubsub
	// target the Schedules API writes. baton local creates the topic in
	// its Pub/Sub fake, so a subscriber can attach before the first run;
	// in the cloud, topics are Terraform's and this is nil.
	EnsureTopic func(ctx context.Context, topic string) error
	// GPUPool is the raw pool configuration, `URL=slots,...` (BATON_GPU_POOL).
	GPUPool string
	// GPUWeights and GPUQuotas are the tenants' weights and slot caps,
	// `tenant=N,...` (BATON_GPU_WEIGHTS, BATON_GPU_QUOTAS).
	GPUWeights, GPUQuotas string
	// GPUFairHalfLife is the half-life of the usage fair share compares
	// (BATON_GPU_FAIR_HALFLIFE); "" means gpu.DefaultFairHalfLife.
	GPUFairHalfLife string
	// TickLeaseTTL is the TTL of the tick lease (BATON_TICK_LEASE_TTL).
	TickLeaseTTL time.Duration
	// ClockSkew is added to every lease expiry (BATON_CLOCK_SKEW).
	ClockSkew time.Duration
	// JobLeaseStore is where the job leases live
	// (BATON_JOB_LEASE_STORE): "gcs" or "firestore"; "" means gcs.
	JobLeaseStore string
	// HistoryKeep is how long finished runs and change records are kept
	// for a schedule without history.keep (BATON_HISTORY_KEEP); 0 means
	// schedule.DefaultKeep.
	HistoryKeep time.Duration
	// Tasks hands decided runs to the Run function through Cloud Tasks
	// (BATON_TASKS_QUEUE). nil makes Tick execute them itself, waiting for
	// the slowest target: FromEnv warns about it.
	Tasks scheduler.Dispatcher
	// SubMinute says that something ticks at second granularity (baton
	// daemon, or the local stack), so seconds-level crons are accepted
	// (BATON_SUBMINUTE).
	SubMinute bool
	// PageSecret is the BATON_PAGE_TOKEN_SECRET that FromEnv opened Store
	// with, so that every instance signs and accepts the same page tokens.
	// Callers that build Deps themselves open Store with their own key and
	// may leave it nil.
	PageSecret []byte
	// Metrics records runs, ticks, leases and the GPU queue. FromEnv
	// exports it to Cloud Monitoring in the cloud; nil records into
	// metrics.Default() (a no-op until a binary installs a provider).
	Metrics *metrics.Set
	// MetricsHandler, when set, serves the metrics at /metrics on Mux
	// (baton local's Prometheus text). The cloud exports instead.
	MetricsHandler http.Handler
	// Notify is the default notification channel
	// (BATON_NOTIFY_WEBHOOK_URL, _SECRET, BATON_NOTIFY_ON); nil means
	// none. ConsoleURL is BATON_CONSOLE_URL.
	Notify     *schedule.Notify
	ConsoleURL string
	// Publisher publishes the events of Pub/Sub channels; FromEnv makes
	// one that dials nothing until a channel is used.
	Publisher notify.Publisher
	// NotifyBackoff is the delay after a failed webhook delivery; zero
	// means scheduler.DefaultNotifyBackoff. Tests shorten it.
	NotifyBackoff time.Duration
	// Partitions is P (BATON_PARTITIONS): 0 makes Tick decide everything
	// under the single tick lease; 1 or more makes it a coordinator
	// (scheduler.Engine.Coordinate).
	Partitions int
	// PartitionQueue opens the queue of the partition tasks, given the
	// Tick function's own URL (their target); nil, or a nil dispatcher,
	// makes the coordinator decide the partitions itself.
	PartitionQueue func(tickURL string) (scheduler.PartitionDispatcher, error)
	// DecideConcurrency and ShardConcurrency are the engine's
	// (BATON_DECIDE_CONCURRENCY, BATON_SHARD_CONCURRENCY); 0 means its
	// defaults.
	DecideConcurrency, ShardConcurrency int
	// InlineShards is the engine's (BATON_INLINE_SHARDS): how many busy
	// decider shards a coordinating tick decides itself; 0 never.
	InlineShards int
	// LapseShardLeases is the engine's (BATON_LAPSE_SHARD_LEASES): a
	// decided shard's lease lapses instead of being released.
	LapseShardLeases bool
	// TaskRuns is the engine's (BATON_TASK_RUNS): the runs one Run task
	// of several schedules carries.
	TaskRuns int

	closers []func() error
	health  tickHealth
}

// tickHealth remembers how the last tick served by these Deps went, so that
// /healthz reports degraded while ticks are failing rather than ok.
type tickHealth struct {
	mu       sync.Mutex
	failing  int       // ticks in a row that failed or reported errors
	lastErr  string    // the last failure
	lastOK   time.Time // the last tick without errors
	lastTick time.Time
}

// record notes one tick's outcome: err, or the number of operations the
// tick left for a later one.
func (h *tickHealth) record(err error, errors int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastTick = time.Now().UTC()
	switch {
	case err != nil:
		h.failing++
		h.lastErr = err.Error()
	case errors > 0:
		h.failing++
		h.lastErr = fmt.Sprintf("the tick left %d failed operations for a later tick (see the log)", errors)
	default:
		h.failing, h.lastErr, h.lastOK = 0, "", h.lastTick
	}
}

// report is /healthz's answer: 200 ok, or 503 degraded while ticks fail.
func (h *tickHealth) report() (int, map[string]any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]any{"status": "ok", "functions": Names()}
	if !h.lastTick.IsZero() {
		out["lastTick"] = h.lastTick
	}
	if !h.lastOK.IsZero() {
		out["lastGoodTick"] = h.lastOK
	}
	if h.failing == 0 {
		return http.StatusOK, out
	}
	out["status"] = "degraded"
	out["failingTicks"] = h.failing
	out["lastError"] = h.lastErr
	return http.StatusServiceUnavailable, out
}

// Client returns d.HTTPClient or a default one.
func (d *Deps) Client() *http.Client {
	if d.HTTPClient != nil {
		return d.HTTPClient
	}
	return &http.Client{Timeout: 30 * time.Second}
}

// NeedStore returns an error suitable for httpapi.WriteError when the store
// is not configured.
func (d *Deps) NeedStore() error {
	if d.Store == nil {
		return errcode.New(errcode.Unavailable, config.EnvMongoURI+" is not set; this function needs the database")
	}
	return nil
}

// NeedPageSecret refuses to build a function that hands out page tokens in
// the cloud without BATON_PAGE_TOKEN_SECRET. Without it the store draws a
// random key per instance, and a nextPageToken from one instance is
// refused by the next (400 at random); refusing to start says why instead.
// Locally one process serves every page, so the random key is right.
func (d *Deps) NeedPageSecret() error {
	if d.Store != nil && len(d.PageSecret) == 0 && config.InCloud() {
		return fmt.Errorf("functions: %s is not set: every instance must sign page tokens with the same secret (Terraform sets it; generate one with openssl rand -base64 48)", config.EnvPageSecret)
	}
	return nil
}

// FromEnv builds Deps from the environment, as a deployed function does.
func FromEnv(ctx context.Context) (*Deps, error) {
	d := &Deps{
		Token:  config.Get(config.EnvToken),
		Logger: logging.New(os.Stdout, config.Get(config.EnvLogLevel)),
		Bucket: config.Get(config.EnvBucket),

		AllowedTargets:  config.List(config.EnvAllowedTargets),
		AllowedTopics:   config.List(config.EnvAllowedTopics),
		AllowedJobs:     config.List(config.EnvAllowedJobs),
		GPUPool:         config.Get(config.EnvGPUPool),
		GPUWeights:      config.Get(config.EnvGPUWeights),
		GPUQuotas:       config.Get(config.EnvGPUQuotas),
		GPUFairHalfLife: config.Get(config.EnvGPUFairHalfLife),
	}
	// A typo in the allowlist would silently refuse that target forever;
	// refuse to start instead, naming the entry.
	if err := schedule.CheckAllowlist(d.AllowedTargets); err != nil {
		return nil, fmt.Errorf("functions: %s: %w", config.EnvAllowedTargets, err)
	}
	if err := schedule.CheckTopicAllowlist(d.AllowedTopics); err != nil {
		return nil, fmt.Errorf("functions: %s: %w", config.EnvAllowedTopics, err)
	}
	if err := schedule.CheckJobAllowlist(d.AllowedJobs); err != nil {
		return nil, fmt.Errorf("functions: %s: %w", config.EnvAllowedJobs, err)
	}
	var err error
	d.Publisher = notify.NewPubSub()
	if d.Notify, err = NotifyFromEnv(d.AllowedTargets); err != nil {
		return nil, err
	}
	d.ConsoleURL = config.Get(config.EnvConsoleURL)
	if d.TickLeaseTTL, err = config.Duration(config.EnvTickLeaseTTL); err != nil {
		return nil, err
	}
	if d.ClockSkew, err = config.Duration(config.EnvClockSkew); err != nil {
		return nil, err
	}
	if d.JobLeaseStore, err = config.JobLeaseStore(); err != nil {
		return nil, fmt.Errorf("functions: %w", err)
	}
	if d.HistoryKeep, err = schedule.ParseKeep(config.Get(config.EnvHistoryKeep)); err != nil {
		return nil, fmt.Errorf("functions: %s: %w", config.EnvHistoryKeep, err)
	}
	// A short secret is refused by every function, not only those that
	// list: it is a typo wherever it is set.
	if d.PageSecret, err = config.PageSecret(); err != nil {
		return nil, fmt.Errorf("functions: %w", err)
	}
	if uri := config.Get(config.EnvMongoURI); uri != "" {
		s, err := mongostore.Open(ctx, uri, mongostore.Options{Database: config.Get(config.EnvDatabase), PageKey: d.PageSecret})
		if err != nil {
			return nil, fmt.Errorf("functions: open store: %w", err)
		}
		d.Store = s
	}
	if d.Metrics, err = CloudMetrics(ctx, d.Logger); err != nil {
		d.close(ctx)
		return nil, fmt.Errorf("functions: %w", err)
	}
	d.SubMinute = config.Get(config.EnvSubMinute) == "true"
	if err := partitionsFromEnv(ctx, d); err != nil {
		d.close(ctx)
		return nil, err
	}
	if qs := config.List(config.EnvTasksQueue); len(qs) > 0 {
		tq, err := taskqueue.Open(ctx, taskqueue.Config{
			Queues: qs, URL: config.Get(config.EnvRunURL), ServiceAccount: config.Get(config.EnvTasksAccount),
		}, config.Get(config.EnvTasksEmu))
		if err != nil {
			d.close(ctx)
			return nil, fmt.Errorf("functions: %w", err)
		}
		d.Tasks = tq
		d.closers = append(d.closers, tq.Close)
	} else {
		d.Logger.Warn(config.EnvTasksQueue + " is not set: Tick executes runs itself and waits for the slowest target; set it to hand runs to the Run function")
	}
	if len(d.AllowedJobs) > 0 || config.Get(config.EnvRunEmu) != "" {
		var opts []option.ClientOption
		if addr := config.Get(config.EnvRunEmu); addr != "" {
			opts = cloudrun.EmulatorOptions(addr)
		}
		rc, err := cloudrun.New(ctx, opts...)
		if err != nil {
			d.close(ctx)
			return nil, fmt.Errorf("functions: %w", err)
		}
		d.RunJobs = rc
		d.closers = append(d.closers, rc.Close)
	}
	if d.Bucket != "" {
		c, err := storage.NewClient(ctx)
		if err != nil {
			d.close(ctx) // the request that retries opens its own
			return nil, fmt.Errorf("functions: storage client: %w", err)
		}
		d.Storage = c
	}
	return d, nil
}

// close releases the clients FromEnv opened. It detaches from ctx's
// cancellation: the cleanup after a failed open must run even when ctx is
// what ended.
func (d *Deps) close(ctx context.Context) {
	if d.Store != nil {
		_ = d.Store.Close(context.WithoutCancel(ctx))
	}
	if d.Storage != nil {
		_ = d.Storage.Close()
	}
	for _, c := range d.closers {
		_ = c()
	}
}

// Builder makes one function's handler from Deps.
type Builder func(d *Deps) (http.Handler, error)

var builders = map[string]Builder{}

// register records a function's builder and registers a lazy wrapper with
// functions-framework-go, which builds Deps from the environment on the
// first request (not in init, so a cold start that only serves Rent never
// dials the database).
func register(name string, b Builder) {
	builders[name] = b
	ff.HTTP(name, lazy(name, b, FromEnv))
}

// lazy builds the handler on the first request that succeeds in building
// it. A failed build (the database unreachable for a moment at a cold
// start) is not kept: the next request tries again, rather than the
// instance answering 500 for the rest of its life.
func lazy(name string, b Builder, env func(context.Context) (*Deps, error)) http.HandlerFunc {
	var (
		mu sync.Mutex
		h  http.Handler
	)
	return func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if h == nil {
			// The clients outlive this request: they serve every later one,
			// so they are not built on (or cancelled with) r.Context().
			ctx := context.Background()
			d, err := env(ctx) //nolint:contextcheck // Deps live for the instance, not for the request that happened to build them
			if err == nil {
				slog.SetDefault(d.Logger)
				if h, err = b(d); err != nil {
					// A bad setting fails every retry: do not leak a
					// client per request.
					d.close(ctx) //nolint:contextcheck // the clients were opened on the instance's context, not the request's
				}
			}
			if err != nil {
				mu.Unlock()
				// A bad setting is the deployment's fault, whatever its
				// code (a bad URI is InvalidArgument): 500, logged.
				httpapi.WriteError(w, r, errcode.Wrap(errcode.Internal, fmt.Errorf("function %s: init: %w", name, err), ""))
				return
			}
		}
		mu.Unlock()
		h.ServeHTTP(w, r)
	}
}

// Names lists the registered functions, sorted.
func Names() []string {
	out := make([]string, 0, len(builders))
	for n := range builders {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Mux mounts every function on one mux under /<Name>, stripping the prefix
// so each handler sees the paths it would see deployed alone.
func Mux(d *Deps) (*http.ServeMux, error) {
	mux := http.NewServeMux()
	for _, name := range Names() {
		h, err := builders[name](d)
		if err != nil {
			return nil, fmt.Errorf("functions: build %s: %w", name, err)
		}
		prefix := "/" + name
		mux.Handle(prefix, http.StripPrefix(prefix, h))
		mux.Handle(prefix+"/", http.StripPrefix(prefix, h))
	}
	if d.MetricsHandler != nil {
		// Open like /healthz: it is served on the local machine only
		// (baton local); in the cloud metrics are exported, not scraped.
		mux.Handle("/metrics", d.MetricsHandler)
	}
	// The contract of every function's API, at the root as at
	// /Schedules/openapi.json, so `baton local` answers it where a
	// generator looks first.
	mux.Handle(openapi.Path, openapi.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		status, body := d.health.report()
		httpapi.WriteJSON(w, status, body)
	})
	// Anything else gets the shared JSON error shape, not Go's text 404.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, r, httpapi.NotFound("no function at %s; the functions are %s", r.URL.Path, strings.Join(Names(), ", ")))
	})
	return mux, nil
}

// InlineShardsFromEnv reads BATON_INLINE_SHARDS for a deployment of v
// decider shards: a whole number of at least 0, and above v it means what
// v does (every minute decided in the tick), so that a deployment of fewer
// than 16 decider shards starts with the default. The local stack reads
// it here too.
func InlineShardsFromEnv(v int) (int, error) {
	n, err := strconv.Atoi(config.Get(config.EnvInlineShards))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("functions: %s=%q: want a whole number of at least 0", config.EnvInlineShards, config.Get(config.EnvInlineShards))
	}
	return min(n, v), nil
}

// LapseShardLeasesFromEnv reads BATON_LAPSE_SHARD_LEASES: true or false.
func LapseShardLeasesFromEnv() (bool, error) {
	b, err := strconv.ParseBool(config.Get(config.EnvLapseShardLeases))
	if err != nil {
		return false, fmt.Errorf("functions: %s=%q: want true or false", config.EnvLapseShardLeases, config.Get(config.EnvLapseShardLeases))
	}
	return b, nil
}

// partitionsFromEnv reads partitioned deciding's settings into d: V (set
// process-wide, before any schedule is normalised), P, the concurrencies,
// and the partition task queue, opened once on the first coordinating
// tick (it needs Tick's own URL).
func partitionsFromEnv(ctx context.Context, d *Deps) error {
	ints := map[string]*int{config.EnvPartitions: &d.Partitions, config.EnvDecideConcurrency: &d.DecideConcurrency, config.EnvShardConcurrency: &d.ShardConcurrency}
	for name, dst := range ints {
		n, err := strconv.Atoi(config.Get(name))
		if err != nil || n < 0 {
			return fmt.Errorf("functions: %s=%q: want a whole number of at least 0", name, config.Get(name))
		}
		*dst = n
	}
	if tr, err := strconv.Atoi(config.Get(config.EnvTaskRuns)); err != nil || tr < 1 || tr > scheduler.MaxTaskRuns {
		return fmt.Errorf("functions: %s=%q: want 1 to %d", config.EnvTaskRuns, config.Get(config.EnvTaskRuns), scheduler.MaxTaskRuns)
	} else {
		d.TaskRuns = tr
	}
	v, err := strconv.Atoi(config.Get(config.EnvDeciderShards))
	if err != nil || v < 1 || v > schedule.MaxDeciderShards {
		return fmt.Errorf("functions: %s=%q: want 1 to %d", config.EnvDeciderShards, config.Get(config.EnvDeciderShards), schedule.MaxDeciderShards)
	}
	schedule.SetDeciderShards(v)
	if d.InlineShards, err = InlineShardsFromEnv(v); err != nil {
		return err
	}
	if d.LapseShardLeases, err = LapseShardLeasesFromEnv(); err != nil {
		return err
	}
	if d.Partitions > v {
		return fmt.Errorf("functions: %s=%d: at most %s (%d)", config.EnvPartitions, d.Partitions, config.EnvDeciderShards, v)
	}
	if q := config.Get(config.EnvTickQueue); q != "" && d.Partitions > 0 {
		var (
			once sync.Once
			pq   *taskqueue.Queue
			perr error
		)
		d.PartitionQueue = func(tickURL string) (scheduler.PartitionDispatcher, error) {
			once.Do(func() {
				pq, perr = taskqueue.Open(context.WithoutCancel(ctx), taskqueue.Config{
					// Not baton-tasks' token: that account invokes Run only.
					Queue: q, URL: tickURL, ServiceAccount: config.Get(config.EnvTickTasksAccount), DispatchDeadline: 15 * time.Minute,
				}, config.Get(config.EnvTasksEmu))
				if perr == nil {
					d.closers = append(d.closers, pq.Close)
				}
			})
			if perr != nil {
				return nil, perr
			}
			return pq, nil
		}
	}
	return nil
}
