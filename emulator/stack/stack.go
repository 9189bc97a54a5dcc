package stack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/baton-cron/baton/emulator/runjobs"
	"github.com/baton-cron/baton/shared/cloudrun"
	"github.com/baton-cron/baton/shared/notify"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/storage"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/baton-cron/baton/emulator/gcs"
	"github.com/baton-cron/baton/emulator/mongo"
	"github.com/baton-cron/baton/emulator/scheduler"
	"github.com/baton-cron/baton/emulator/tasks"
	"github.com/baton-cron/baton/functions"
	"github.com/baton-cron/baton/internal/console"
	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/metrics"
	"github.com/baton-cron/baton/shared/schedule"
	baton "github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store/mongostore"
	"github.com/baton-cron/baton/shared/taskqueue"
)

// Defaults for Config's zero values.
const (
	DefaultAddr     = "127.0.0.1:8080"
	DefaultBucket   = "baton-local"
	DefaultDatabase = "baton"
	DefaultTick     = time.Minute
	// TickJob is the scheduler job that calls /Tick.
	TickJob = "baton-tick"
	// TasksQueue is the Cloud Tasks queue the local Tick hands runs to
	// (the first, when Config.Queues asks for more).
	TasksQueue = "projects/local/locations/local/queues/baton-runs"
	// TickQueue is the Cloud Tasks queue of the local partition tasks,
	// which call /Tick back (Config.Partitions).
	TickQueue = "projects/local/locations/local/queues/baton-ticks"
)

// TasksQueues is the full names of n run queues as Terraform names them
// (tasks_queue_count): TasksQueue, then TasksQueue-1, TasksQueue-2, …, in
// the order the enqueuer hashes over.
func TasksQueues(n int) []string {
	out := []string{TasksQueue}
	for i := 1; i < n; i++ {
		out = append(out, TasksQueue+"-"+strconv.Itoa(i))
	}
	return out
}

// localQueue is a local queue's configuration: the Terraform defaults'
// rate limits and retry shape, with shorter backoffs so that a Run
// answering 503 is tried again within seconds on a laptop.
func localQueue(name string) *cloudtaskspb.Queue {
	return &cloudtaskspb.Queue{
		Name: name,
		RetryConfig: &cloudtaskspb.RetryConfig{
			MaxAttempts: 5, MinBackoff: durationpb.New(time.Second), MaxBackoff: durationpb.New(30 * time.Second), MaxDoublings: 4,
		},
		RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 250, MaxConcurrentDispatches: 1000},
	}
}

// LocalTasksAccount is the service account named in the local tasks' OIDC
// token request. Nothing signs it: the Cloud Tasks emulator sends the
// stack's bearer token instead.
const LocalTasksAccount = "baton-tasks@local.iam.gserviceaccount.com"

// Hook starts something extra once the HTTP server is up (local GPU
// workers, say) and returns how to stop it. Hooks start in order and stop in
// reverse, before the HTTP server drains.
type Hook func(ctx context.Context, s *Stack) (stop func(ctx context.Context) error, err error)

// Config configures Start. The zero value is a throwaway stack on
// 127.0.0.1:8080 with temporary data.
type Config struct {
	// Addr is the functions' listen address; "" means 127.0.0.1:8080, and
	// port 0 picks a free port (tests).
	Addr string
	// MongoAddr, GCSAddr and TasksAddr are the emulators' listen
	// addresses; "" means a free port on 127.0.0.1.
	MongoAddr, GCSAddr, TasksAddr string
	// PubSubAddr is the listen address of the Pub/Sub fake
	// (PUBSUB_EMULATOR_HOST); empty picks a free port.
	PubSubAddr string
	// RunJobs are the Cloud Run jobs of the Run Admin API emulator
	// (region local), a job id to the shell command each task runs
	// (baton local --run-job NAME=COMMAND); RunJobsAddr is its listen
	// address, "" for a free port.
	RunJobs     map[string]string
	RunJobsAddr string
	// RunJobPoll is how often the sweep reads a running execution (tests
	// shorten it); 0 is the engine's default.
	RunJobPoll time.Duration
	// PubSubReactors are pstest's fault hooks (an error for a Publish, for
	// example), for tests of what a refused or unanswered publish does.
	PubSubReactors []pstest.ServerReactorOption
	// DataDir keeps the database under DataDir/mongo, the bucket's
	// objects (leases, job outputs) under DataDir/gcs and the Cloud Tasks
	// queue under DataDir/tasks across restarts. ""
	// means a temporary directory removed by Close.
	DataDir string
	// Fresh wipes DataDir/mongo, DataDir/gcs and DataDir/tasks before
	// starting.
	Fresh bool
	// Bucket is created in the GCS emulator; "" means baton-local.
	Bucket string
	// Database is the database name; "" means baton.
	Database string
	// Tick is the scheduler's period for /Tick; 0 means one minute, and a
	// negative value starts no tick job.
	Tick time.Duration
	// Partitions is P (baton local --partitions): with 1 or more the
	// local Tick is a coordinator whose partition tasks go through the
	// Cloud Tasks emulator's TickQueue back to /Tick, the path a
	// partitioned deployment takes; 0 decides in the tick itself.
	Partitions int
	// InlineShards is BATON_INLINE_SHARDS of the local Tick when
	// Partitions is set: a coordinating tick with at most this many busy
	// decider shards decides them itself; nil reads the variable.
	InlineShards *int
	// LapseShardLeases is BATON_LAPSE_SHARD_LEASES of the local Tick when
	// Partitions is set; nil reads the variable when it is set, else
	// false: the cloud's default, true, would make a restarted stack wait
	// out (about 30 s) the shard leases its last process left.
	LapseShardLeases *bool
	// JobLeaseStore is where the job leases live, "gcs" or "firestore"
	// (baton local --job-lease-store); "" means BATON_JOB_LEASE_STORE.
	JobLeaseStore string
	// Token is the bearer token the API requires; "" means a random one.
	Token string
	// Logger receives JSON logs; nil discards them.
	Logger *slog.Logger
	// Verbose passes the emulators' own logs through.
	Verbose bool
	// Lax turns the emulators' strict mode off (baton local
	// --lax-emulators), for debugging: see mongo.Options.Lax and
	// gcs.Options.Lax. Strict, the default, refuses what Firestore and
	// Cloud Storage refuse.
	Lax bool
	// Clock drives the scheduler emulator; nil means the wall clock.
	Clock scheduler.Clock
	// Hooks run after the HTTP server is up, in order.
	Hooks []Hook
	// GPUWorkers is the number of local GPU workers (one slot each) that
	// run real commands on the CPU; 0 starts none, and then the pool is
	// BATON_GPU_POOL.
	GPUWorkers int
	// GPUCommand is the workers' command; nil means DefaultGPUCommand.
	GPUCommand []string
	// ServerTimeouts bound the functions' and the GPU workers' HTTP
	// connections; the zero value means httpapi.DefaultTimeouts. Tests
	// shorten them to see a slow client cut off. The functions' server
	// never gets a Write timeout, whatever this says: /Run and /Tick
	// execute targets for up to 30 minutes.
	ServerTimeouts httpapi.Timeouts
	// NotifyBackoff is the delay after a failed notification delivery;
	// zero means the scheduler's default. Tests shorten it.
	NotifyBackoff time.Duration
	// Queues is the number of run queues (baton local --queues, Terraform's
	// tasks_queue_count); 0 means 1. Schedules spread over them as in the
	// cloud, so the same enqueuer runs locally.
	Queues int
}

// Stack is a running local stack.
type Stack struct {
	// URL is the functions' base URL, e.g. http://127.0.0.1:8080. The
	// operator console is at URL + ConsolePath.
	URL string
	// Token is the bearer token the API requires.
	Token string
	// MongoURI is the database's connection string, database included.
	MongoURI string
	// StorageHost is host:port of the GCS emulator (STORAGE_EMULATOR_HOST).
	StorageHost string
	// Bucket is the bucket the functions use.
	Bucket string
	// Deps are the functions' dependencies; hooks may read them.
	Deps *functions.Deps
	// Scheduler is the Cloud Scheduler emulator; tests read its attempts.
	Scheduler *scheduler.Emulator
	// Tasks is the Cloud Tasks emulator that delivers runs to /Run; tests
	// read its attempts.
	Tasks *tasks.Server
	// PubSubHost is the Pub/Sub fake's host:port (PUBSUB_EMULATOR_HOST).
	PubSubHost string
	// RunJobs is the Run Admin API v2 emulator where cloudRunJob targets
	// start executions; RunJobsHost its host:port
	// (CLOUD_RUN_EMULATOR_HOST).
	RunJobs     *runjobs.Server
	RunJobsHost string
	// TasksHost is its host:port (CLOUD_TASKS_EMULATOR_HOST).
	TasksHost string
	// Queues is the run queues' full names (BATON_TASKS_QUEUE), in order.
	Queues []string
	// Logger is the stack's logger.
	Logger *slog.Logger
	// PubSub is Google's in-memory Pub/Sub fake (pstest), with the topic
	// NotifyTopic created: a notify block may name it, and tests read what
	// was published.
	PubSub *pstest.Server

	publisher *notify.PubSub
	runClient *cloudrun.Client
	mongo     *mongo.Server
	gcs       *gcs.Server
	store     *mongostore.Store
	storage   *storage.Client
	http      *http.Server
	served    chan error
	stops     []func(ctx context.Context) error // hooks' stops, in start order
	gpu       *gpuWorkers
	queue     *taskqueue.Queue
	tickQueue *taskqueue.Queue
}

// NotifyTopic is the Pub/Sub topic the local stack's fake serves, for a
// notify block's pubsub channel (or BATON_NOTIFY_TOPIC).
const NotifyTopic = "projects/local/topics/baton-events"

// Start brings the stack up and returns when every part accepts requests.
// On error, whatever had started is closed again.
func Start(ctx context.Context, cfg Config) (_ *Stack, err error) {
	cfg = withDefaults(cfg)
	s := &Stack{Token: cfg.Token, Bucket: cfg.Bucket, Logger: cfg.Logger}
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = s.Close(cctx)
		}
	}()

	mongoDir := ""
	if cfg.DataDir != "" {
		mongoDir = filepath.Join(cfg.DataDir, "mongo")
		if cfg.Fresh {
			if err := os.RemoveAll(mongoDir); err != nil {
				return nil, fmt.Errorf("stack: wipe %s: %w", mongoDir, err)
			}
			cfg.Logger.Info("stack: wiped data (--fresh)", "dir", mongoDir)
		}
	}
	if s.mongo, err = mongo.Start(ctx, mongo.Options{Dir: mongoDir, Addr: cfg.MongoAddr, Logger: cfg.Logger, Verbose: cfg.Verbose, Lax: cfg.Lax}); err != nil {
		return nil, fmt.Errorf("stack: mongo emulator: %w", err)
	}
	s.MongoURI = withDatabase(s.mongo.URI(), cfg.Database)

	var gcsLog *slog.Logger
	if cfg.Verbose {
		gcsLog = cfg.Logger
	} else if cfg.Lax && cfg.Logger != nil {
		// The GCS emulator's own logs, its warning that it is lax
		// among them, are dropped unless verbose: say it here.
		cfg.Logger.Warn("gcs emulator: lax mode: the per-object write rate limit (one write per second per object) is not enforced; real GCS answers 429 where this does not")
	}
	gcsDir := ""
	if cfg.DataDir != "" {
		gcsDir = filepath.Join(cfg.DataDir, "gcs")
		if cfg.Fresh {
			if err := os.RemoveAll(gcsDir); err != nil {
				return nil, fmt.Errorf("stack: wipe %s: %w", gcsDir, err)
			}
		}
	}
	if s.gcs, err = gcs.Start(ctx, gcs.Options{Addr: cfg.GCSAddr, Logger: gcsLog, Dir: gcsDir, Lax: cfg.Lax}); err != nil {
		return nil, fmt.Errorf("stack: gcs emulator: %w", err)
	}
	s.StorageHost = s.gcs.Host()
	if err := s.gcs.CreateBucket(ctx, cfg.Bucket); err != nil {
		return nil, fmt.Errorf("stack: create bucket: %w", err)
	}
	if s.storage, err = s.gcs.Client(ctx); err != nil {
		return nil, fmt.Errorf("stack: storage client: %w", err)
	}
	// The stack is one process serving every page, so an unset secret is
	// fine: the store draws a random one (crypto/rand) at each start, and a
	// token from a previous run is refused with 400, which costs a client
	// one restart of its listing. Only the CLI holds tokens, and it only
	// hands back what the stack gave it, so nothing else needs the secret.
	pageSecret, err := config.PageSecret()
	if err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	if s.store, err = mongostore.Open(ctx, s.MongoURI, mongostore.Options{Database: cfg.Database, PageKey: pageSecret}); err != nil {
		return nil, fmt.Errorf("stack: open store: %w", err)
	}
	// In the cloud Terraform declares these; locally the stack creates them.
	if err := s.store.EnsureIndexes(ctx, mongostore.Indexes()...); err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}

	tasksDir := ""
	if cfg.DataDir != "" {
		// Cloud Tasks is durable; so is the local queue, so that a
		// restart of the stack delays delivery by the restart alone.
		tasksDir = filepath.Join(cfg.DataDir, "tasks")
		if cfg.Fresh {
			if err := os.RemoveAll(tasksDir); err != nil {
				return nil, fmt.Errorf("stack: wipe %s: %w", tasksDir, err)
			}
		}
	}
	// Tasks ask for an OIDC token, as in the cloud, and the emulator puts
	// this start's token in its place at each delivery: a task kept in
	// the data dir from an earlier start (another random token) still
	// reaches /Run.
	if s.Tasks, err = tasks.Start(ctx, tasks.Options{Addr: cfg.TasksAddr, Logger: gcsLog, Dir: tasksDir, Token: cfg.Token}); err != nil {
		return nil, fmt.Errorf("stack: tasks emulator: %w", err)
	}
	s.TasksHost = s.Tasks.Addr()
	// Created, or (replayed from the data dir) set to this configuration.
	s.Queues = TasksQueues(max(cfg.Queues, 1))
	for _, q := range s.Queues {
		if _, err := s.Tasks.EnsureQueue(ctx, localQueue(q)); err != nil {
			return nil, fmt.Errorf("stack: create queue %s: %w", q, err)
		}
	}
	if _, err := s.Tasks.EnsureQueue(ctx, localQueue(TickQueue)); err != nil {
		return nil, fmt.Errorf("stack: create queue: %w", err)
	}

	pool := config.Get(config.EnvGPUPool)
	if cfg.GPUWorkers > 0 {
		if s.gpu, pool, err = listenGPUWorkers(ctx, cfg.GPUWorkers, cfg.DataDir); err != nil {
			return nil, err
		}
	}
	allowed, err := allowedTargets()
	if err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	deps := &functions.Deps{
		Store: s.store, Storage: s.storage, Bucket: cfg.Bucket, Token: cfg.Token, Logger: cfg.Logger,
		PageSecret:      pageSecret,
		AllowedTargets:  allowed,
		GPUPool:         pool,
		GPUWeights:      config.Get(config.EnvGPUWeights),
		GPUQuotas:       config.Get(config.EnvGPUQuotas),
		GPUFairHalfLife: config.Get(config.EnvGPUFairHalfLife),
		// The local stack ticks at --tick, which may be a second.
		SubMinute:     true,
		NotifyBackoff: cfg.NotifyBackoff,
		ConsoleURL:    config.Get(config.EnvConsoleURL),
	}
	// The default channel, as the cloud's functions read it.
	if deps.Notify, err = functions.NotifyFromEnv(deps.AllowedTargets); err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	// Pub/Sub channels and pubsub targets publish to Google's own
	// in-memory fake.
	if s.PubSub, err = startPubSub(cfg.PubSubAddr, cfg.PubSubReactors); err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	s.PubSubHost = s.PubSub.Addr
	if err := s.ensureTopic(ctx, NotifyTopic); err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	// Every topic of project "local" may be a pubsub target's, and the
	// Schedules API creates the topic a schedule names, so that a
	// subscriber can attach before the first run.
	topics := config.List(config.EnvAllowedTopics)
	if err := schedule.CheckTopicAllowlist(topics); err != nil {
		return nil, fmt.Errorf("stack: %s: %w", config.EnvAllowedTopics, err)
	}
	deps.AllowedTopics = append([]string{LocalTopics}, topics...)
	deps.EnsureTopic = s.ensureTopic
	s.publisher = notify.NewPubSub(option.WithEndpoint(s.PubSub.Addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	deps.Publisher = s.publisher
	// cloudRunJob targets start executions on the Run Admin API
	// emulator, whose jobs are all of project and region "local".
	// With a data dir, executions are journalled there and their tasks
	// outlive the stack, as a Cloud Run execution outlives its caller: a
	// restart finds them again rather than failing and retrying the run.
	runJobsDir := ""
	if cfg.DataDir != "" {
		runJobsDir = filepath.Join(cfg.DataDir, "runjobs")
		if cfg.Fresh {
			if err := os.RemoveAll(runJobsDir); err != nil {
				return nil, fmt.Errorf("stack: wipe %s: %w", runJobsDir, err)
			}
		}
	}
	if s.RunJobs, err = runjobs.Start(ctx, runjobs.Options{Addr: cfg.RunJobsAddr, Jobs: cfg.RunJobs, Logger: gcsLog, Dir: runJobsDir}); err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	s.RunJobsHost = s.RunJobs.Addr()
	jobs := config.List(config.EnvAllowedJobs)
	if err := schedule.CheckJobAllowlist(jobs); err != nil {
		return nil, fmt.Errorf("stack: %s: %w", config.EnvAllowedJobs, err)
	}
	deps.AllowedJobs = append([]string{LocalJobs}, jobs...)
	if s.runClient, err = cloudrun.New(ctx, s.RunJobs.ClientOptions()...); err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	deps.RunJobs, deps.RunJobPoll = s.runClient, cfg.RunJobPoll
	// Metrics on a registry of this stack's own, served at /metrics.
	local, err := metrics.NewLocal(metrics.Options{})
	if err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	deps.Metrics, deps.MetricsHandler = local.Set, local.Handler
	if deps.TickLeaseTTL, err = config.Duration(config.EnvTickLeaseTTL); err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	if deps.ClockSkew, err = config.Duration(config.EnvClockSkew); err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	if deps.JobLeaseStore = cfg.JobLeaseStore; deps.JobLeaseStore == "" {
		if deps.JobLeaseStore, err = config.JobLeaseStore(); err != nil {
			return nil, fmt.Errorf("stack: %w", err)
		}
	} else if deps.JobLeaseStore != config.JobLeaseStoreGCS && deps.JobLeaseStore != config.JobLeaseStoreFirestore {
		return nil, fmt.Errorf("stack: job lease store %q: want %q or %q", deps.JobLeaseStore, config.JobLeaseStoreGCS, config.JobLeaseStoreFirestore)
	}
	s.Deps = deps
	// Listen before building the functions: the tasks Tick creates name
	// Run's URL, which needs the port.
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("stack: listen %s: %w", cfg.Addr, err)
	}
	s.URL = "http://" + ln.Addr().String()
	if deps.ConsoleURL == "" {
		// Notifications link to this stack's own console.
		deps.ConsoleURL = s.URL + console.DefaultPrefix
	}
	if s.queue, err = taskqueue.Open(ctx, taskqueue.Config{Queues: s.Queues, URL: s.URL + "/Run", ServiceAccount: LocalTasksAccount}, s.TasksHost); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("stack: %w", err)
	}
	deps.Tasks = s.queue
	// V as the deployment's (BATON_DECIDER_SHARDS), before any schedule
	// is normalised.
	vshards, err := strconv.Atoi(config.Get(config.EnvDeciderShards))
	if err != nil || vshards < 1 || vshards > schedule.MaxDeciderShards {
		_ = ln.Close()
		return nil, fmt.Errorf("stack: %s=%q: want 1 to %d", config.EnvDeciderShards, config.Get(config.EnvDeciderShards), schedule.MaxDeciderShards)
	}
	schedule.SetDeciderShards(vshards)
	if cfg.Partitions > 0 {
		if cfg.Partitions > schedule.DeciderShards() {
			_ = ln.Close()
			return nil, fmt.Errorf("stack: partitions %d: at most the %d decider shards", cfg.Partitions, schedule.DeciderShards())
		}
		// The schedules a store of an older baton kept have no decider
		// shard yet; the first coordinating tick backfills them too.
		if _, err := s.store.BackfillDeciderShards(ctx, schedule.DeciderShards(), 500); err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("stack: %w", err)
		}
		pq, err := taskqueue.Open(ctx, taskqueue.Config{Queue: TickQueue, URL: s.URL + "/Tick", ServiceAccount: LocalTasksAccount, DispatchDeadline: 15 * time.Minute}, s.TasksHost)
		if err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("stack: %w", err)
		}
		s.tickQueue = pq
		deps.Partitions = cfg.Partitions
		// As the cloud's Tick reads it: few busy shards are decided by
		// the coordinating tick itself.
		if deps.InlineShards, err = functions.InlineShardsFromEnv(schedule.DeciderShards()); err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("stack: %w", err)
		}
		if cfg.InlineShards != nil {
			// Above V it means V, as in the functions.
			deps.InlineShards = min(max(*cfg.InlineShards, 0), schedule.DeciderShards())
		}
		switch {
		case cfg.LapseShardLeases != nil:
			deps.LapseShardLeases = *cfg.LapseShardLeases
		case strings.TrimSpace(os.Getenv(config.EnvLapseShardLeases)) != "":
			if deps.LapseShardLeases, err = functions.LapseShardLeasesFromEnv(); err != nil {
				_ = ln.Close()
				return nil, fmt.Errorf("stack: %w", err)
			}
		}
		deps.PartitionQueue = func(string) (baton.PartitionDispatcher, error) { return pq, nil }
	}
	mux, err := functions.Mux(deps)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("stack: %w", err)
	}
	// No Write timeout: /Run holds its request while the run executes (up
	// to Cloud Tasks' 30-minute dispatch deadline), and a Tick that
	// executes runs itself waits for the slowest target.
	root, err := withConsole(mux, s, cfg)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("stack: %w", err)
	}
	s.http = httpapi.NewServer(accessLog(cfg.Logger, root), cfg.ServerTimeouts.WithWrite(0))
	s.served = make(chan error, 1)
	go func() { s.served <- s.http.Serve(ln) }()

	if s.gpu != nil {
		cmd := cfg.GPUCommand
		if len(cmd) == 0 {
			cmd = DefaultGPUCommand
		}
		s.gpu.serve(s, s.storage.Bucket(cfg.Bucket), cmd, cfg.ServerTimeouts)
	}

	for i, h := range cfg.Hooks {
		stop, err := h(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("stack: hook %d: %w", i, err)
		}
		if stop != nil {
			s.stops = append(s.stops, stop)
		}
	}

	s.Scheduler = scheduler.New(scheduler.Options{Clock: cfg.Clock, Logger: cfg.Logger})
	if cfg.Tick > 0 {
		if err := s.Scheduler.AddJob(scheduler.Job{Name: TickJob, URL: s.URL + "/Tick", Method: http.MethodPost, Every: cfg.Tick, Token: cfg.Token}); err != nil {
			return nil, fmt.Errorf("stack: tick job: %w", err)
		}
	}
	s.Scheduler.Start()
	cfg.Logger.Info("stack: up", "url", s.URL, "mongo", s.MongoURI, "storage", s.StorageHost, "bucket", s.Bucket, "tasks", s.TasksHost, "tick", cfg.Tick.String(), "functions", functions.Names(), "gpuPool", pool, "allowedTargets", allowed)
	return s, nil
}

// loopbackTargets are the hosts every local stack lets http targets call:
// a laptop's own services are the usual local targets.
var loopbackTargets = []string{"127.0.0.1", "localhost", "::1"}

// allowedTargets is the local stack's http target allowlist: loopback, and
// beside it the entries of BATON_ALLOWED_TARGETS, as the README lists that
// variable for the functions the stack runs. A user trying a schedule on a
// public API sets the variable as in the cloud, and the stack must not
// answer 400 "not on the allowlist" for a host the user listed. A malformed
// entry is an error naming the variable, as the deployed functions refuse
// to start on one (functions.FromEnv).
func allowedTargets() ([]string, error) {
	extra := config.List(config.EnvAllowedTargets)
	if err := schedule.CheckAllowlist(extra); err != nil {
		return nil, fmt.Errorf("%s: %w", config.EnvAllowedTargets, err)
	}
	return append(slices.Clone(loopbackTargets), extra...), nil
}

func withDefaults(cfg Config) Config {
	if cfg.ServerTimeouts == (httpapi.Timeouts{}) {
		cfg.ServerTimeouts = httpapi.DefaultTimeouts
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultBucket
	}
	if cfg.Database == "" {
		cfg.Database = DefaultDatabase
	}
	if cfg.Tick == 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.Token == "" {
		var b [16]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
		cfg.Token = hex.EncodeToString(b[:])
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// Close shuts the stack down in reverse order: the scheduler (its tick in
// flight finishes), hooks, the HTTP server (requests in flight finish), the
// clients, then the emulators. ctx bounds the graceful part; past it,
// requests are cut off. It is safe on a partly started stack.
func (s *Stack) Close(ctx context.Context) error {
	var errs []error
	defer func() {
		// Last: deliveries in flight may still publish.
		if s.publisher != nil {
			_ = s.publisher.Close()
		}
		if s.PubSub != nil {
			_ = s.PubSub.Close()
		}
		if s.runClient != nil {
			_ = s.runClient.Close()
		}
		if s.RunJobs != nil {
			// Its tasks are killed: an execution does not outlive the
			// emulator (docs/emulators-runjobs.md).
			_ = s.RunJobs.Close()
		}
	}()
	if s.Scheduler != nil {
		if err := s.Scheduler.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if s.Tasks != nil {
		// Deliveries in flight finish (their runs are under job leases);
		// tasks not yet delivered are lost with the in-memory emulator, and
		// the next stack's sweep recovers their pending runs.
		if err := s.Tasks.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stack: tasks emulator: %w", err))
		}
	}
	for i := len(s.stops) - 1; i >= 0; i-- {
		if err := s.stops[i](ctx); err != nil {
			errs = append(errs, fmt.Errorf("stack: stop hook %d: %w", i, err))
		}
	}
	s.stops = nil
	if s.gpu != nil {
		if err := s.gpu.close(ctx); err != nil {
			errs = append(errs, err)
		}
		s.gpu = nil
	}
	if s.http != nil {
		if err := s.http.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stack: http shutdown: %w", err))
			_ = s.http.Close()
		}
		if err := <-s.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("stack: serve: %w", err))
		}
		s.http = nil
	}
	if s.queue != nil {
		_ = s.queue.Close()
		s.queue = nil
	}
	if s.tickQueue != nil {
		_ = s.tickQueue.Close()
		s.tickQueue = nil
	}
	if s.Tasks != nil {
		_ = s.Tasks.Close()
		s.Tasks = nil
	}
	if s.store != nil {
		if err := s.store.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stack: close store: %w", err))
		}
		s.store = nil
	}
	if s.storage != nil {
		_ = s.storage.Close()
		s.storage = nil
	}
	if s.gcs != nil {
		if err := s.gcs.Close(); err != nil { //nolint:contextcheck // Close shuts the emulator down on its own bounded context, so cleanup runs even after ctx is cancelled
			errs = append(errs, err)
		}
		s.gcs = nil
	}
	if s.mongo != nil {
		if err := s.mongo.Close(); err != nil {
			errs = append(errs, fmt.Errorf("stack: close mongo: %w", err))
		}
		s.mongo = nil
	}
	if len(errs) > 0 {
		s.Logger.Warn("stack: closed with errors", "error", errors.Join(errs...).Error())
	} else {
		s.Logger.Info("stack: closed")
	}
	return errors.Join(errs...)
}

// MongoServer is the Mongo emulator, for benchmarks that read its
// meters (Billing, Stats).
func (s *Stack) MongoServer() *mongo.Server { return s.mongo }

// GCSServer is the GCS emulator, for benchmarks that read its meters
// (Ops).
func (s *Stack) GCSServer() *gcs.Server { return s.gcs }

// Exports returns shell lines that point a client at this stack, one
// `export NAME='value'` per line, for `eval "$(baton local ...)"`-style use.
func (s *Stack) Exports() string {
	var b strings.Builder
	for _, kv := range [][2]string{
		{config.EnvURL, s.URL},
		{config.EnvStorageEmu, s.StorageHost},
		{config.EnvBucket, s.Bucket},
		{config.EnvMongoURI, s.MongoURI},
		{config.EnvTasksEmu, s.TasksHost},
		{config.EnvTasksQueue, strings.Join(s.Queues, ",")},
		{config.EnvPubSubEmu, s.PubSubHost},
		{config.EnvRunEmu, s.RunJobsHost},
		{config.EnvToken, s.Token},
		// The CLI's lease commands look where the functions keep the
		// job leases.
		{config.EnvJobLeaseStore, s.Deps.JobLeaseStore},
	} {
		fmt.Fprintf(&b, "export %s=%s\n", kv[0], shellQuote(kv[1]))
	}
	return b.String()
}

// shellQuote single-quotes v for POSIX shells.
func shellQuote(v string) string {
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}

// accessLog logs every request at debug level (shown with --verbose or
// --log-level debug).
func accessLog(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		log.Debug("http", "method", r.Method, "path", r.URL.Path, "status", rec.status, "ms", time.Since(start).Milliseconds())
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) { r.status = code; r.ResponseWriter.WriteHeader(code) }

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// withDatabase puts db in the path of the emulator's URI, keeping its
// options (loadBalanced=true): mongodb://host:port/db?loadBalanced=true,
// the shape of Firestore's own connection strings.
func withDatabase(uri, db string) string {
	base, query, hasQuery := strings.Cut(uri, "?")
	out := strings.TrimSuffix(base, "/") + "/" + db
	if hasQuery {
		out += "?" + query
	}
	return out
}

// LocalJobs is the allowlist entry the stack adds to BATON_ALLOWED_JOBS:
// every job of the Run Admin API emulator.
const LocalJobs = "projects/local/locations/local/jobs/*"

// LocalTopics is the allowlist entry the stack adds to
// BATON_ALLOWED_TOPICS: every topic of the local project.
const LocalTopics = "projects/local/topics/*"

// startPubSub starts the Pub/Sub fake on addr ("" for a free port).
// pstest panics when it cannot listen; that becomes an error naming the
// address, as for the other emulators.
func startPubSub(addr string, reactors []pstest.ServerReactorOption) (srv *pstest.Server, err error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	defer func() {
		if r := recover(); r != nil {
			srv, err = nil, fmt.Errorf("pubsub fake: listen on %s: %v", addr, r)
		}
	}()
	return pstest.NewServerWithAddress(addr, reactors...), nil
}

// ensureTopic creates topic in the Pub/Sub fake unless it exists.
func (s *Stack) ensureTopic(ctx context.Context, topic string) error {
	_, err := s.PubSub.GServer.CreateTopic(ctx, &pubsubpb.Topic{Name: topic})
	if status.Code(err) == codes.AlreadyExists {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pubsub fake: create %s: %w", topic, err)
	}
	return nil
}
