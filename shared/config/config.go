package config

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// Var describes one environment variable baton reads.
type Var struct {
	// Name is the variable's name.
	Name string
	// Users lists the deployables that read it: "Tick", "Schedules", "GPU",
	// "GPUCallback", "Rent", "Run" (Cloud Functions), "gpu-worker" (Cloud
	// Run) or "cli".
	Users []string
	// Default is used when the variable is unset or empty.
	Default string
	// Doc is the line in the README's configuration reference.
	Doc string
}

// Function and service names, as deployed.
const (
	FnTick      = "Tick"
	FnSchedules = "Schedules"
	FnGPU       = "GPU"
	// FnGPUCallback serves only the workers' :heartbeat and :complete, so
	// that the workers' invoker grant reaches nothing else and operators'
	// grants on GPU do not reach the callbacks.
	FnGPUCallback = "GPUCallback"
	FnRent        = "Rent"
	FnRun         = "Run"
	SvcWorker     = "gpu-worker"
	CLI           = "cli"
)

// Variable names.
const (
	EnvMongoURI       = "BATON_MONGO_URI"
	EnvDatabase       = "BATON_DATABASE"
	EnvBucket         = "BATON_BUCKET"
	EnvStorageEmu     = "STORAGE_EMULATOR_HOST"
	EnvPubSubEmu      = "PUBSUB_EMULATOR_HOST"
	EnvToken          = "BATON_TOKEN"
	EnvAllowedTargets = "BATON_ALLOWED_TARGETS"
	EnvAllowedTopics  = "BATON_ALLOWED_TOPICS"
	// EnvAllowedJobs is the allowlist of Cloud Run jobs that cloudRunJob
	// targets may execute; EnvRunEmu is the Run Admin API emulator's
	// host:port (baton local).
	EnvAllowedJobs = "BATON_ALLOWED_JOBS"
	EnvRunEmu      = "CLOUD_RUN_EMULATOR_HOST"
	EnvGPUPool     = "BATON_GPU_POOL"
	// EnvGPUWeights and EnvGPUQuotas are the GPU tenants' weights for
	// fair share and caps on running slots ("a=3,b=1").
	EnvGPUWeights = "BATON_GPU_WEIGHTS"
	EnvGPUQuotas  = "BATON_GPU_QUOTAS"
	// EnvGPUFairHalfLife is the half-life of the usage GPU fair share
	// compares.
	EnvGPUFairHalfLife = "BATON_GPU_FAIR_HALFLIFE"
	EnvTickLeaseTTL    = "BATON_TICK_LEASE_TTL"
	EnvClockSkew       = "BATON_CLOCK_SKEW"
	// EnvJobLeaseStore is where the job leases live: "gcs" (objects in
	// BATON_BUCKET) or "firestore" (documents in BATON_MONGO_URI's
	// database). The tick lease stays in the bucket either way.
	EnvJobLeaseStore = "BATON_JOB_LEASE_STORE"
	// EnvHistoryKeep is how long finished runs and change records are
	// kept, for schedules without history.keep.
	EnvHistoryKeep   = "BATON_HISTORY_KEEP"
	EnvURL           = "BATON_URL"
	EnvSchedulesURL  = "BATON_SCHEDULES_URL"
	EnvGPUURL        = "BATON_GPU_URL"
	EnvPort          = "PORT"
	EnvControlURL    = "BATON_CONTROL_URL"
	EnvWorkerCommand = "BATON_WORKER_COMMAND"
	EnvLogLevel      = "BATON_LOG_LEVEL"
	EnvTargetIDToken = "BATON_TARGET_ID_TOKEN" //nolint:gosec // the name of an env var, not a credential
	EnvTasksQueue    = "BATON_TASKS_QUEUE"
	EnvRunURL        = "BATON_RUN_URL"
	EnvTasksAccount  = "BATON_TASKS_SERVICE_ACCOUNT"
	EnvTasksEmu      = "CLOUD_TASKS_EMULATOR_HOST"
	EnvSubMinute     = "BATON_SUBMINUTE"
	EnvPageSecret    = "BATON_PAGE_TOKEN_SECRET"
	EnvProject       = "BATON_PROJECT"
	EnvRegion        = "BATON_REGION"
	// EnvFirestoreLocation is the database's location when Terraform's
	// firestore_location put it elsewhere than the region (nam5, say).
	EnvFirestoreLocation = "BATON_FIRESTORE_LOCATION"
	// EnvNotifyURL, EnvNotifySecret and EnvNotifyOn are the default
	// notification channel, for schedules without a notify block.
	EnvNotifyURL    = "BATON_NOTIFY_WEBHOOK_URL"
	EnvNotifySecret = "BATON_NOTIFY_WEBHOOK_SECRET" //nolint:gosec // the name of an env var, not a credential
	EnvNotifyOn     = "BATON_NOTIFY_ON"
	// EnvNotifyTopic is the default Pub/Sub notification channel.
	EnvNotifyTopic = "BATON_NOTIFY_TOPIC"
	// EnvConsoleURL is the console's base URL, which notifications link to.
	EnvConsoleURL = "BATON_CONSOLE_URL"
	// EnvTickURL is the Tick function's URL, which baton doctor compares
	// with the Scheduler job's target.
	EnvTickURL = "BATON_TICK_URL"
	// EnvPartitions, EnvTickQueue, EnvDeciderShards, EnvDecideConcurrency
	// and EnvShardConcurrency configure partitioned deciding (issue 28).
	EnvPartitions        = "BATON_PARTITIONS"
	EnvTickQueue         = "BATON_TICK_QUEUE"
	EnvTickTasksAccount  = "BATON_TICK_TASKS_SERVICE_ACCOUNT"
	EnvDeciderShards     = "BATON_DECIDER_SHARDS"
	EnvDecideConcurrency = "BATON_DECIDE_CONCURRENCY"
	EnvShardConcurrency  = "BATON_SHARD_CONCURRENCY"
	// EnvInlineShards lets a coordinating tick decide few busy shards
	// itself (scheduler.Config.InlineShards).
	EnvInlineShards = "BATON_INLINE_SHARDS"
	// EnvLapseShardLeases leaves a decided shard's lease to lapse instead
	// of releasing it (scheduler.Config.LapseShardLeases).
	EnvLapseShardLeases = "BATON_LAPSE_SHARD_LEASES"
	// EnvTaskRuns bounds the runs of one Run task that several schedules
	// share (issue 29).
	EnvTaskRuns = "BATON_TASK_RUNS"
	// EnvMetrics turns the Cloud Monitoring export on (auto: in the cloud)
	// or off.
	EnvMetrics = "BATON_METRICS"
	// EnvMetricsInterval is how often a cloud instance exports metrics.
	EnvMetricsInterval = "BATON_METRICS_INTERVAL"
	// EnvMetricsScheduleLabel keeps or drops the schedule label.
	EnvMetricsScheduleLabel = "BATON_METRICS_SCHEDULE_LABEL"
)

// MinPageSecretLen is the shortest BATON_PAGE_TOKEN_SECRET accepted, in
// bytes (store.MinPageKeyLen, which this package cannot import).
const MinPageSecretLen = 32

var functions = []string{FnTick, FnSchedules, FnGPU, FnGPUCallback, FnRun}

// Vars lists every environment variable baton reads.
var Vars = []Var{
	{EnvMongoURI, append(functions, CLI), "", "Firestore (MongoDB compatibility) connection string. `retryWrites=false` is added when absent and `retryWrites=true` is refused."},
	{EnvDatabase, append(functions, CLI), "baton", "Database name, when the URI has no path."},
	// GPU reads job output for GET /gpu/jobs/{id}/logs (read-only, outputs/
	// alone); GPUCallback never touches the bucket, so it is not given it.
	{EnvBucket, []string{FnTick, FnSchedules, FnGPU, FnRun, SvcWorker, CLI}, "", "Cloud Storage bucket for leases (`leases/`, the functions) and job output (`outputs/`, written by the GPU worker, read by the GPU function's logs route)."},
	{EnvStorageEmu, nil, "", "host:port of a GCS emulator (set by `baton local`); unset in the cloud."},
	{EnvPubSubEmu, nil, "", "host:port of a Pub/Sub emulator, read by Google's Pub/Sub client: `baton local` prints its fake's, for subscribers to pull from; unset in the cloud."},
	{EnvToken, append(functions, SvcWorker, CLI), "", "Bearer token required by the API when set (local use). In the cloud, IAM invoker checks authenticate callers."},
	{EnvAllowedTargets, []string{FnTick, FnSchedules, FnRun}, "", "Comma-separated host allowlist for `http` targets (`host`, `host:port`, `*.example.com`). Empty refuses every http target. `baton local` allows loopback and these hosts beside it."},
	{EnvAllowedTopics, []string{FnTick, FnSchedules, FnRun}, "", "Comma-separated allowlist of Pub/Sub topics that `pubsub` targets may publish to (`projects/P/topics/T`, or `projects/P/topics/*` for every topic of P). Empty refuses every pubsub target. Terraform sets it from `pubsub_target_topics`, beside the publisher grant on exactly those topics. `baton local` allows `projects/local/topics/*` and these beside it."},
	{EnvAllowedJobs, []string{FnTick, FnSchedules, FnRun}, "", "Comma-separated allowlist of Cloud Run jobs that `cloudRunJob` targets may execute (`projects/P/locations/R/jobs/J`, or `projects/P/locations/R/jobs/*`). Empty refuses every cloudRunJob target. Terraform sets it from `cloud_run_target_jobs`, beside the grant on exactly those jobs. `baton local` allows `projects/local/locations/local/jobs/*` and these beside it."},
	{EnvRunEmu, nil, "", "host:port of a Run Admin API v2 emulator, where cloudRunJob targets start and read executions (set by `baton local`); unset in the cloud."},
	{EnvGPUPool, []string{FnTick, FnSchedules, FnGPU, FnGPUCallback, FnRun, CLI}, "", "GPU worker pool: comma-separated `URL=slots` entries, each optionally typed `URL=slots@nvidia-l4` (a job's `gpuType` must match one)."},
	{EnvGPUWeights, []string{FnTick, FnSchedules, FnGPU, FnGPUCallback, FnRun, CLI}, "", "GPU tenants' weights for fair share of the slots, `tenant=N,...` (`a=3,b=1`); a tenant not named weighs 1."},
	{EnvGPUQuotas, []string{FnTick, FnSchedules, FnGPU, FnGPUCallback, FnRun, CLI}, "", "GPU tenants' caps on concurrently running slots, `tenant=N,...` (`batch=2`); a tenant not named has no cap."},
	{EnvGPUFairHalfLife, []string{FnTick, FnSchedules, FnGPU, FnGPUCallback, FnRun, CLI}, "1h", "Half-life of the GPU usage fair share compares (slot-seconds per tenant, decayed), `1s` to `720h`: shorter forgives a burst sooner, longer holds a heavy user back longer."},
	{EnvTickLeaseTTL, []string{FnTick}, "30s", "TTL of the tick lease."},
	{EnvClockSkew, []string{FnTick, FnSchedules, FnGPU, FnGPUCallback, FnRun, CLI}, "2s", "Clock-skew allowance added to every lease expiry."},
	{EnvJobLeaseStore, []string{FnTick, FnSchedules, FnRun, CLI}, JobLeaseStoreGCS, "Where the job leases live: `gcs` (objects in `BATON_BUCKET`, a Class A write per run) or `firestore` (documents in the `job_leases` collection, a write unit per run, about a twentieth of the price; docs/cost.md). Terraform's `job_lease_store` defaults to `firestore`. The tick lease stays in the bucket. Every process of a deployment must agree; a switch is safe while both run (shared/lease/switch.go)."},
	{EnvHistoryKeep, []string{FnTick, FnSchedules, FnRun, CLI}, "30d", "How long finished runs and schedule change records are kept (`30d`, `36h`; 1h to 3650d) when a schedule sets no `history.keep`. Each gets an `expireAt`; Firestore's TTL policy deletes them in the cloud, the sweep locally."},
	{EnvURL, []string{CLI}, "http://127.0.0.1:8080", "Base URL of the functions for the CLI (`/Schedules`, `/GPU` are appended)."},
	{EnvSchedulesURL, []string{CLI}, "", "URL of the Schedules function for the CLI, when each function has its own URL (the cloud). Empty means `$BATON_URL/Schedules`."},
	{EnvGPUURL, []string{CLI}, "", "URL of the GPU function for the CLI, when each function has its own URL (the cloud). Empty means `$BATON_URL/GPU`."},
	{EnvPort, []string{SvcWorker}, "8080", "Port the GPU worker listens on (Cloud Run sets it)."},
	{EnvControlURL, []string{SvcWorker}, "", "URL of the GPUCallback function, which the worker calls back (`…/gpu/jobs/{id}:heartbeat`, `:complete`); locally `$BATON_URL/GPUCallback`. The operators' GPU function refuses these routes with 421 wrong_function, which the worker logs at ERROR and retries (it keeps the job). It is the worker's own setting, not sent by the dispatcher, so that nothing that can call the worker can redirect its ID tokens and dispatch secrets elsewhere."},
	{EnvWorkerCommand, []string{SvcWorker}, `["sh","-c","cat"]`, "The command a GPU worker runs for each job, as a JSON argv list."},
	{EnvLogLevel, nil, "info", "debug, info, warn or error."},
	{EnvTargetIDToken, []string{FnTick, FnSchedules, FnRun, CLI}, "false", "`true` makes `http` targets carry a Google-signed OIDC ID token (audience: the target URL), as in the cloud, where Terraform sets it. Locally there are no Google credentials: leave it `false`."},
	{EnvTasksQueue, []string{FnTick, FnSchedules, FnRun}, "", "Cloud Tasks queue that decided runs are handed to (`projects/P/locations/L/queues/baton-runs`), or several separated by commas: a schedule's tasks go to the queue at FNV-1a(schedule id) mod their number, so the order matters. Each task calls the Run function. Empty executes runs inside the calling process, which only `baton daemon` should do: a Tick that executes waits for its slowest target."},
	{EnvRunURL, []string{FnTick, FnSchedules, FnRun}, "", "URL of the Run function: every task's HTTP target and the audience of its OIDC token."},
	{EnvTasksAccount, []string{FnTick, FnSchedules, FnRun}, "", "Service account whose OIDC token each task carries to Run (Terraform's `baton-tasks`). The enqueuer needs `iam.serviceAccounts.actAs` on it."},
	{EnvTasksEmu, nil, "", "host:port of a Cloud Tasks emulator (set by `baton local`); unset in the cloud."},
	{EnvPageSecret, []string{FnSchedules, FnGPU}, "", "Secret (at least 32 bytes; `openssl rand -base64 48`) that signs the list endpoints' `nextPageToken`s, so that a made-up or edited token is refused with 400. Every instance must share it (Terraform passes `page_token_secret`). Required in the cloud; locally (and under `baton local`) unset draws a random one per process."},
	{EnvProject, []string{CLI}, "", "Google Cloud project ID of the deployment, for `baton doctor` (Terraform's `project`)."},
	{EnvRegion, []string{CLI}, "us-central1", "Region of the deployment (Terraform's `region`), for `baton doctor`: where the Scheduler job is, and the database's expected location unless `--location` or `BATON_FIRESTORE_LOCATION` says otherwise."},
	{EnvFirestoreLocation, []string{CLI}, "", "Location of the Firestore database (Terraform's `firestore_location`, which defaults to `region`), for `baton doctor --location`. Empty means `BATON_REGION`."},
	{EnvTickURL, []string{CLI}, "", "The Tick function's URL (`terraform output function_urls`), for `baton doctor --tick-url`: the Scheduler job must call exactly it. Empty checks only the host's `baton-tick-` prefix, a WARN."},
	{EnvMetrics, append(functions, CLI), "auto", "`auto` exports metrics to Cloud Monitoring when running in the cloud (K_SERVICE set) and not otherwise; `on` always; `off` never. `baton local` serves them as Prometheus text at `/metrics` either way (docs/observability.md)."},
	{EnvMetricsInterval, append(functions, CLI), "60s", "How often a cloud instance exports its metrics; each instance also flushes on shutdown (SIGTERM)."},
	{EnvMetricsScheduleLabel, append(functions, CLI), "true", "`false` drops the `schedule` label from the run metrics, for deployments with many schedules (bounded cardinality)."},
	{EnvNotifyURL, []string{FnTick, FnSchedules, FnRun, CLI}, "", "Default notification webhook, for every schedule without a `notify` block of its own (docs/notifications.md). Must be on `BATON_ALLOWED_TARGETS`, like an http target. Empty means no default channel."},
	{EnvNotifySecret, []string{FnTick, FnSchedules, FnRun, CLI}, "", "Secret (at least 16 bytes) that signs the default webhook's requests (`X-Baton-Signature`). Required when `BATON_NOTIFY_WEBHOOK_URL` is set; never logged."},
	{EnvNotifyOn, []string{FnTick, FnSchedules, FnRun, CLI}, "failed", "Comma-separated events the default webhook gets: `failed`, `skipped`, `misfire`, `recovered`, `missed`."},
	{EnvNotifyTopic, []string{FnTick, FnSchedules, FnRun, CLI}, "", "Default Pub/Sub notification channel, `projects/PROJECT/topics/TOPIC`, for every schedule without a `notify` block: each event of `BATON_NOTIFY_ON` is published there too (docs/notifications.md). The functions' service accounts need `roles/pubsub.publisher` on it. `baton local` serves `projects/local/topics/baton-events` from an in-memory fake."},
	{EnvConsoleURL, []string{FnTick, FnSchedules, FnRun, CLI}, "", "Base URL of the console; each notification links to `$BATON_CONSOLE_URL/runs/<id>`. Empty leaves the link out, except under `baton local`, which links to its own console."},
	{EnvPartitions, []string{FnTick}, "0", "P, the partitions of a tick: with 1 or more, Tick is a coordinator that creates P partition tasks on `BATON_TICK_QUEUE` per schedule time, and each delivery decides the decider shards `v mod P == p`, each under its own lease `leases/tick-<v>.json` (docs/scheduler.md). 0 decides every schedule in the tick itself under `leases/tick.json`, as `baton daemon` does; do not mix the two on one database. At most `BATON_DECIDER_SHARDS`; may change while running."},
	// Terraform sets both on Tick, empty when decider_partitions is 0
	// (infra/terraform/ticks.tf).
	{EnvTickQueue, []string{FnTick}, "", "Read by Tick. Cloud Tasks queue of the partition tasks (`projects/P/locations/L/queues/baton-ticks`), whose target is the Tick function's own URL (taken from the coordinating request). Empty with `BATON_PARTITIONS` set decides the partitions inside the coordinating tick, one after another."},
	{EnvTickTasksAccount, []string{FnTick}, "", "Read by Tick. Service account whose OIDC token each partition task carries back to Tick: one that may invoke Tick only, never `baton-tasks` (which invokes Run only). Empty sends no token (local use)."},
	{EnvDeciderShards, []string{FnTick, FnSchedules, FnRun, CLI}, "64", "V, the virtual decider shards: each schedule's shard is FNV-1a 32 of its id mod V, stored as `vshard`. Fixed per deployment: changing it is an offline migration (docs/scheduler.md). 1 to 4096."},
	{EnvDecideConcurrency, []string{FnTick, CLI}, "32", "Schedules one decider (a tick, or one decider shard of a partition) decides at once; sized for Firestore's 10 to 50 ms a write (docs/scheduler.md)."},
	{EnvShardConcurrency, []string{FnTick}, "4", "Decider shards one partition decides at once."},
	{EnvInlineShards, []string{FnTick}, "16", "With `BATON_PARTITIONS` set, the coordinating tick first looks at every decider shard for one due schedule (a read unit each); when at most this many have something due, it decides them itself, each under its own lease, and creates no partition task, so that a quiet minute's runs share Run tasks (docs/cost.md). 0 always creates the partition tasks; `BATON_DECIDER_SHARDS` or more decides every minute in the tick."},
	{EnvLapseShardLeases, []string{FnTick}, "true", "`true`: a decider shard's lease is left to lapse once the shard is decided, instead of released with a write (a write unit per busy shard a minute, docs/cost.md): a shard decided early in its minute has its lease gone (`BATON_TICK_LEASE_TTL` and `BATON_CLOCK_SKEW` after its last write, 5 s to spare) before the next minute's tick, and the instance that left it takes it again at once. A late decide (a redelivered partition, a retried tick) releases, and so does a failed one. Meanwhile another instance's tick skips the shard, just decided. `baton local` defaults to `false`, so that a restarted stack decides at once."},
	{EnvTaskRuns, []string{FnTick}, "100", "Runs one Run task carries: the runs a tick (or a partition) hands off at once share tasks of up to this many, across schedules, and with them Cloud Tasks' create and delivery and Cloud Run's request fee (docs/cost.md). Each runs as if it had its own task. 1 gives every schedule its own task. 1 to 100."},
	{EnvSubMinute, []string{FnSchedules}, "false", "`true` when something ticks at second granularity (`baton daemon`, deployed by Terraform with `daemon_image`). Otherwise a seconds-level cron is refused with 400 instead of being fired once a minute."},
}

// Get returns the variable's value, or its declared default. It panics on a
// name missing from Vars, so an undeclared variable fails the first test that
// reads it rather than shipping undocumented.
func Get(name string) string {
	for _, v := range Vars {
		if v.Name == name {
			if s := strings.TrimSpace(os.Getenv(name)); s != "" {
				return s
			}
			return v.Default
		}
	}
	panic(fmt.Sprintf("config: %s is not declared in config.Vars", name))
}

// The values of EnvJobLeaseStore.
const (
	JobLeaseStoreGCS       = "gcs"
	JobLeaseStoreFirestore = "firestore"
)

// JobLeaseStore returns EnvJobLeaseStore, or an error naming it when it is
// neither "gcs" nor "firestore": a typo must stop a process from starting,
// since processes that disagree on the store would each take a lease the
// other holds only through the switch guard.
func JobLeaseStore() (string, error) {
	switch s := strings.ToLower(Get(EnvJobLeaseStore)); s {
	case JobLeaseStoreGCS, JobLeaseStoreFirestore:
		return s, nil
	default:
		return "", fmt.Errorf("config: %s=%q: must be %q or %q", EnvJobLeaseStore, Get(EnvJobLeaseStore), JobLeaseStoreGCS, JobLeaseStoreFirestore)
	}
}

// Duration returns a duration variable, or an error naming it.
func Duration(name string) (time.Duration, error) {
	s := Get(name)
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("config: %s=%q: must be a positive duration such as 30s", name, s)
	}
	return d, nil
}

// List splits a comma-separated variable, dropping empty items.
func List(name string) []string {
	var out []string
	for _, s := range strings.Split(Get(name), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// InCloud reports whether this process runs on Cloud Run (as Cloud
// Functions do), which sets K_SERVICE. There, several instances serve one
// deployment, so per-process defaults that must agree between requests are
// refused.
func InCloud() bool { return os.Getenv("K_SERVICE") != "" }

// PageSecret returns BATON_PAGE_TOKEN_SECRET, or nil when it is unset. A
// secret shorter than MinPageSecretLen bytes is an error naming the
// variable: a short secret can be guessed, and then anyone can sign a page
// token.
func PageSecret() ([]byte, error) {
	s := Get(EnvPageSecret)
	if s == "" {
		return nil, nil
	}
	if len(s) < MinPageSecretLen {
		return nil, fmt.Errorf("config: %s is %d bytes, want at least %d (generate one with openssl rand -base64 48)", EnvPageSecret, len(s), MinPageSecretLen)
	}
	return []byte(s), nil
}
