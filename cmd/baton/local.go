package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/emulator/runjobs"
	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/functions"
	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/schedule"
)

// localShutdownTimeout bounds the graceful part of shutdown: requests and
// the tick in flight get this long to finish.
const localShutdownTimeout = 30 * time.Second

// localHooks start extra parts of `baton local` (local GPU workers, say)
// once the HTTP server is up. Another file adds to it in its own init,
// and may add flags there with localCmd.Flags(); local.go need not change.
var localHooks []stack.Hook

// localCmd is a package variable (initialised before any init runs) so that
// other files' init functions can add flags to it.
var localCmd = newLocalCmd()

func init() { rootCmd.AddCommand(localCmd) }

// newLocalCmd builds `baton local`.
func newLocalCmd() *cobra.Command {
	var (
		cfg      stack.Config
		runJobs  []string
		tick     time.Duration
		verbose  bool
		logLevel string
	)
	cmd := &cobra.Command{
		Use:   "local",
		Short: "Run all of baton locally against embedded emulators",
		Long: `Run all of baton in one process, with no cloud account and nothing to install:
the MongoDB API (FerretDB on SQLite, data kept in --data-dir), a GCS emulator
(fake-gcs-server, objects kept in --data-dir too) with the bucket created, every function on one
port (/Rent, /Schedules, /Tick, /Run, /GPU, /healthz), a Cloud Scheduler
emulator that POSTs /Tick every --tick with the real headers, a Cloud Tasks
emulator (gRPC) to which Tick hands each decided run and which delivers it
to /Run with the real headers, and
--gpu-workers local GPU workers that run --gpu-command on the CPU.

http targets may call loopback (127.0.0.1, localhost, ::1) and, beside it,
the hosts on BATON_ALLOWED_TARGETS, as in the cloud. A Run Admin API v2
emulator runs the Cloud Run jobs given with --run-job NAME=COMMAND (region
local) for cloudRunJob targets, each task a local process that outlives
baton local (its executions are journalled in DATA_DIR/runjobs and found
again after a restart).

It prints export lines on stdout (and writes them to DATA_DIR/env), so another
shell can run:  . .baton/env
Logs go to stderr (--log-format: text on a terminal, else JSON). SIGINT or SIGTERM shuts down cleanly: the tick and
requests in flight finish (up to 30s), then the emulators stop.`,
		Example: `  baton local
  baton local --tick 5s --fresh
  baton local --run-job export='sleep 40; exit 3'
  baton local --addr 127.0.0.1:0 --mongo-addr 127.0.0.1:0 --gcs-addr 127.0.0.1:0 --tasks-addr 127.0.0.1:0 --data-dir /tmp/b`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			began := time.Now()
			if cfg.Queues < 1 || cfg.Queues > 20 {
				return usageError("local: --queues %d: want 1 to 20, as Terraform's tasks_queue_count", cfg.Queues)
			}
			if cfg.GPUWorkers < 0 || cfg.GPUWorkers > 64 {
				return usageError("local: --gpu-workers %d: want 0 to 64", cfg.GPUWorkers)
			}
			if tick < 0 {
				return usageError("local: --tick %s: want a positive period, or 0 to turn ticking off", tick)
			}
			switch strings.ToLower(logLevel) {
			case "debug", "info", "warn", "warning", "error":
			default:
				return usageError("local: --log-level %q: want debug, info, warn or error", logLevel)
			}
			if cfg.Partitions < 0 || cfg.Partitions > schedule.DeciderShards() {
				return usageError("local: --partitions %d: want 0 to %d (the decider shards)", cfg.Partitions, schedule.DeciderShards())
			}
			cfg.RunJobs = map[string]string{}
			for _, j := range runJobs {
				name, command, ok := strings.Cut(j, "=")
				if _, _, _, valid := schedule.ParseJobName(runjobs.JobName(name)); !ok || !valid || command == "" {
					return usageError("local: --run-job %q: want NAME=COMMAND, NAME a Cloud Run job id (lowercase letters, digits, hyphens)", j)
				}
				cfg.RunJobs[name] = command
			}
			cfg.Tick = tick
			if tick == 0 {
				cfg.Tick = -1 // no tick job
			}
			if verbose {
				logLevel = "debug"
			}
			log := newLogger(cmd, logLevel)
			cfg.Logger, cfg.Verbose = log, verbose
			cfg.Hooks = append(cfg.Hooks, localHooks...)
			// The package default too, so httpapi's 500 logs are JSON on stderr.
			slog.SetDefault(log)

			ctx := cmd.Context()
			s, err := stack.Start(ctx, cfg)
			if err != nil {
				return fmt.Errorf("local: %w", err)
			}
			exports := s.Exports()
			envFile := ""
			if cfg.DataDir != "" {
				envFile = filepath.Join(cfg.DataDir, "env")
				// 0600: the file holds the bearer token.
				if err := os.WriteFile(envFile, []byte(exports), 0o600); err != nil {
					log.Warn("local: could not write the env file", "file", envFile, "error", err.Error())
					envFile = ""
				}
			}
			out := cmd.OutOrStdout()
			fmt.Fprint(out, exports)
			fmt.Fprint(out, tryLines(envFile, s.URL+stack.ConsolePath))
			log.Info("local: ready", "startup_ms", time.Since(began).Milliseconds(), "url", s.URL, "functions", functions.Names())

			<-ctx.Done()
			log.Info("local: shutting down", "reason", context.Cause(ctx).Error())
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), localShutdownTimeout)
			defer cancel()
			if err := s.Close(sctx); err != nil {
				return fmt.Errorf("local: shutdown: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Addr, "addr", stack.DefaultAddr, "listen address of the functions (BATON_URL); port 0 picks a free one")
	f.StringVar(&cfg.MongoAddr, "mongo-addr", "127.0.0.1:27018", "listen address of the MongoDB API emulator (BATON_MONGO_URI); port 0 picks a free one")
	f.StringVar(&cfg.GCSAddr, "gcs-addr", "127.0.0.1:4443", "listen address of the GCS emulator (STORAGE_EMULATOR_HOST); port 0 picks a free one")
	f.StringVar(&cfg.TasksAddr, "tasks-addr", "127.0.0.1:8123", "listen address of the Cloud Tasks emulator (CLOUD_TASKS_EMULATOR_HOST), which delivers runs to /Run; port 0 picks a free one")
	f.StringVar(&cfg.PubSubAddr, "pubsub-addr", "127.0.0.1:8085", "listen address of the Pub/Sub fake (PUBSUB_EMULATOR_HOST), where pubsub targets and notification channels publish and subscribers pull; port 0 picks a free one")
	f.StringVar(&cfg.RunJobsAddr, "run-jobs-addr", "127.0.0.1:8095", "listen address of the Run Admin API v2 emulator (CLOUD_RUN_EMULATOR_HOST), where cloudRunJob targets start executions; port 0 picks a free one")
	f.StringArrayVar(&runJobs, "run-job", nil, "a Cloud Run job of the emulator, NAME=COMMAND (repeatable): projects/local/locations/local/jobs/NAME runs COMMAND with sh -c for each task, the execution's args after it and its env overrides and CLOUD_RUN_TASK_INDEX/CLOUD_RUN_TASK_COUNT set")
	f.StringVar(&cfg.DataDir, "data-dir", ".baton", "directory for the database (DATA_DIR/mongo), the bucket's objects (DATA_DIR/gcs: leases, job outputs) the Cloud Tasks queue (DATA_DIR/tasks) and the Cloud Run executions (DATA_DIR/runjobs), kept across restarts, and the env file; empty keeps nothing")
	f.BoolVar(&cfg.Fresh, "fresh", false, "wipe DATA_DIR/mongo, DATA_DIR/gcs, DATA_DIR/tasks and DATA_DIR/runjobs before starting")
	f.DurationVar(&tick, "tick", stack.DefaultTick, "how often the scheduler emulator POSTs /Tick (e.g. 5s for demos); 0 turns it off")
	f.IntVar(&cfg.Partitions, "partitions", 1, "P: each tick is a coordinator that creates P partition tasks on the Cloud Tasks emulator's baton-ticks queue, and each decides the decider shards v mod P == p under leases/tick-<v>.json, as a partitioned deployment does; 0 decides in the tick itself under leases/tick.json")
	f.StringVar(&cfg.Bucket, "bucket", stack.DefaultBucket, "bucket to create in the GCS emulator (BATON_BUCKET)")
	// BATON_JOB_LEASE_STORE's value (gcs unless set). Not yet Terraform's
	// firestore: the crash loop (tests/crashloop_test.go) runs this stack
	// and with firestore has called a few fire times later than its 45 s
	// bound on the loaded development machine (0 doubles, 0 lost); until
	// that is understood the local stack keeps the bucket.
	f.StringVar(&cfg.JobLeaseStore, "job-lease-store", config.Get(config.EnvJobLeaseStore), "where the job leases live (BATON_JOB_LEASE_STORE; Terraform's job_lease_store defaults to firestore): firestore (documents in job_leases, a write unit per run) or gcs (objects in the bucket, a Class A write per run); the tick lease stays in the bucket")
	f.IntVar(&cfg.Queues, "queues", 1, "run queues on the Cloud Tasks emulator, as Terraform's tasks_queue_count: schedules spread over them by a hash of their id")
	f.IntVar(&cfg.GPUWorkers, "gpu-workers", 2, "local GPU workers (one slot each) that run real commands on the CPU; 0 uses BATON_GPU_POOL instead")
	f.StringSliceVar(&cfg.GPUCommand, "gpu-command", stack.DefaultGPUCommand, "the local GPU workers' command (argv, comma-separated); the job's payload is its stdin")
	f.BoolVar(&cfg.Lax, "lax-emulators", false, "turn the emulators' strict mode off, for debugging: writes wait their turn instead of answering 112, handshakes without loadBalanced, unsorted results in insertion order and over-limit documents are accepted (logged at warn)")
	f.BoolVar(&verbose, "verbose", false, "log every request and the emulators' own logs (implies --log-level debug)")
	f.StringVar(&logLevel, "log-level", config.Get(config.EnvLogLevel), "debug, info, warn or error; BATON_LOG_LEVEL sets the default")
	return cmd
}

// tryLines are shell comments, so the whole stdout stays safe to eval.
// consoleURL is the operator console's address, printed in full so a
// terminal can open it.
func tryLines(envFile, consoleURL string) string {
	var b strings.Builder
	b.WriteString("# baton local is up. In another shell:\n")
	if envFile != "" {
		fmt.Fprintf(&b, "#   . %s\n", envFile)
	} else {
		b.WriteString("#   (paste the export lines above)\n")
	}
	fmt.Fprintf(&b, "#   open %s in a browser: the operator console (schedules, runs, GPU, leases)\n", consoleURL)
	b.WriteString(`#   curl "$BATON_URL/Rent?jeonse=300000000&deposit=100000000&rate=4.5"` + "\n")
	b.WriteString(`#   curl "$BATON_URL/healthz"` + "\n")
	b.WriteString(`#   go run ./cmd/baton schedules create --id demo --cron '*/10 * * * * *' --builtin noop` + "\n")
	b.WriteString(`#   go run ./cmd/baton gpu enqueue --payload 'echo hello from a GPU slot'` + "\n")
	b.WriteString("# Ctrl-C stops it.\n")
	return b.String()
}
