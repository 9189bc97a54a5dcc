package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"cloud.google.com/go/storage"
	"github.com/spf13/cobra"
	"google.golang.org/api/option"

	"github.com/baton-cron/baton/functions"
	"github.com/baton-cron/baton/shared/cloudrun"
	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/notify"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

func init() { rootCmd.AddCommand(newDaemonCmd()) }

// newDaemonCmd builds `baton daemon`: the never-sleeping runner for
// sub-minute schedules (a Cloud Run service with min-instances 1, or local
// use). The logic is scheduler.Daemon.
func newDaemonCmd() *cobra.Command {
	var (
		mongoURI, bucket, prefix string
		granularity, poll, idle  time.Duration
		ensureIndexes            bool
	)
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Hold the tick lease and tick at second granularity, reacting to schedule edits within a second",
		Long: `baton daemon holds the tick lease (leases/tick.json in the bucket), heartbeating
it, and ticks on its own timer: it sleeps until the next due schedule (at
second granularity, at most --max-idle), and wakes early when a schedule is
edited. It watches edits with a change stream where the server supports them
(detected at start) and otherwise polls on (updatedAt, _id) every --poll with
a keyset cursor. Several daemons may run: one leads, the others wait, and when
the leader loses the lease it stops ticking and another takes over.

Storage uses Application Default Credentials, or STORAGE_EMULATOR_HOST when
set (as under 'baton local').

When PORT is set (Cloud Run sets it), the daemon also listens there and
answers GET /healthz with {"status":"ok","leading":…,"watchMode":…}.`,
		Example: `  BATON_MONGO_URI='mongodb://127.0.0.1:27018/baton?loadBalanced=true' BATON_BUCKET=baton STORAGE_EMULATOR_HOST=127.0.0.1:4443 baton daemon`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if mongoURI == "" {
				return usageError("daemon: no database: set %s or pass --mongo-uri", config.EnvMongoURI)
			}
			if bucket == "" {
				return usageError("daemon: no bucket: set %s or pass --bucket", config.EnvBucket)
			}
			if granularity < time.Millisecond || poll < time.Millisecond || idle < granularity {
				return usageError("daemon: want --tick and --poll ≥ 1ms and --max-idle ≥ --tick")
			}
			ttl, err := config.Duration(config.EnvTickLeaseTTL)
			if err != nil {
				return usageError("daemon: %v", err)
			}
			skew, err := config.Duration(config.EnvClockSkew)
			if err != nil {
				return usageError("daemon: %v", err)
			}
			jobStore, err := config.JobLeaseStore()
			if err != nil {
				return usageError("daemon: %v", err)
			}
			log := newLogger(cmd, config.Get(config.EnvLogLevel))
			st, err := mongostore.Open(ctx, mongoURI, mongostore.Options{Database: config.Get(config.EnvDatabase)})
			if err != nil {
				return fmt.Errorf("daemon: %w", err)
			}
			defer st.Close(ctx)
			if ensureIndexes {
				if err := st.EnsureIndexes(ctx, mongostore.Indexes()...); err != nil {
					return fmt.Errorf("daemon: %w", err)
				}
			}
			gcs, err := storage.NewClient(ctx)
			if err != nil {
				return fmt.Errorf("daemon: storage client: %w", err)
			}
			defer gcs.Close()
			// gpu targets and the GPU sweep go through the same dispatcher as
			// the Tick and GPU functions, when a pool is configured.
			// On Cloud Run the daemon exports metrics as the functions do.
			met, err := functions.CloudMetrics(ctx, log)
			if err != nil {
				return usageError("daemon: %v", err)
			}
			var gpuPool scheduler.GPU
			if pool := config.Get(config.EnvGPUPool); pool != "" {
				dis, err := functions.NewGPUDispatcher(&functions.Deps{Store: st, GPUPool: pool, GPUWeights: config.Get(config.EnvGPUWeights), GPUQuotas: config.Get(config.EnvGPUQuotas), GPUFairHalfLife: config.Get(config.EnvGPUFairHalfLife), Token: config.Get(config.EnvToken), Logger: log, ClockSkew: skew, Metrics: met})
				if err != nil {
					return usageError("daemon: %v", err)
				}
				gpuPool = dis
			}
			allowed := config.List(config.EnvAllowedTargets)
			defaultNotify, err := functions.NotifyChannel(config.Get(config.EnvNotifyURL), config.Get(config.EnvNotifySecret), config.List(config.EnvNotifyOn), allowed)
			if err == nil {
				defaultNotify, err = functions.WithTopic(defaultNotify, config.Get(config.EnvNotifyTopic), config.List(config.EnvNotifyOn))
			}
			if err != nil {
				return usageError("daemon: %v", err)
			}
			keep, err := schedule.ParseKeep(config.Get(config.EnvHistoryKeep))
			if err != nil {
				return usageError("daemon: %s: %v", config.EnvHistoryKeep, err)
			}
			// cloudRunJob targets: the allowlist, and a Run Admin API
			// client when any job is allowed (or an emulator is named).
			jobs := config.List(config.EnvAllowedJobs)
			if err := schedule.CheckJobAllowlist(jobs); err != nil {
				return usageError("daemon: %s: %v", config.EnvAllowedJobs, err)
			}
			var runJobs scheduler.RunJobs
			if emu := config.Get(config.EnvRunEmu); len(jobs) > 0 || emu != "" {
				var opts []option.ClientOption
				if emu != "" {
					opts = cloudrun.EmulatorOptions(emu)
				}
				rc, err := cloudrun.New(cmd.Context(), opts...)
				if err != nil {
					return fmt.Errorf("daemon: %w", err)
				}
				defer func() { _ = rc.Close() }()
				runJobs = rc
			}
			// The job leases where BATON_JOB_LEASE_STORE says, as the
			// functions keep them (shared/lease/switch.go guards a switch).
			jobLeases, otherJobLeases, err := lease.JobLeaseStores(jobStore, gcs.Bucket(bucket), st.LeaseObjects())
			if err != nil {
				return fmt.Errorf("daemon: %s: %w", config.EnvJobLeaseStore, err)
			}
			eng, err := scheduler.New(scheduler.Config{
				AllowedJobs: jobs, RunJobs: runJobs,
				HistoryKeep: keep,
				Store:       st, Leases: lease.NewManager(gcs.Bucket(bucket), prefix, lease.Options{Skew: skew, Logger: log, EpochFloor: scheduler.EpochFloor(st), FloorEachAcquire: scheduler.SharedFenceLease, Metrics: met, Markers: st.LeaseMarkers(), JobLeases: jobLeases, OtherJobLeases: otherJobLeases, AlsoInJobLeases: scheduler.IsTickShardLease, ReleaseUnread: true}),
				TickLeaseTTL: ttl, AllowedTargets: allowed, AllowedTopics: config.List(config.EnvAllowedTopics), Logger: log,
				IDToken: config.Get(config.EnvTargetIDToken) == "true",
				GPU:     gpuPool,
				Metrics: met,
				Notify:  defaultNotify, ConsoleURL: config.Get(config.EnvConsoleURL), Publisher: notify.NewPubSub(),
			})
			if err != nil {
				return fmt.Errorf("daemon: %w", err)
			}
			d, err := scheduler.NewDaemon(scheduler.DaemonConfig{Engine: eng, Granularity: granularity, Poll: poll, MaxIdle: idle, Logger: log})
			if err != nil {
				return fmt.Errorf("daemon: %w", err)
			}
			// Cloud Run only starts a revision whose container listens on
			// $PORT, and probes it there. Listening only now, with the
			// database and the bucket open, makes "started" mean "connected".
			// config.Get cannot tell an unset PORT from its default, and
			// locally no port should open unasked.
			if port := os.Getenv(config.EnvPort); port != "" {
				stop, addr, err := startHealth(":"+port, d)
				if err != nil {
					return fmt.Errorf("daemon: health listener: %w", err)
				}
				defer stop()
				fmt.Fprintf(cmd.ErrOrStderr(), "baton daemon: GET /healthz on %s\n", addr)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "baton daemon: waiting for the tick lease in gs://%s/%stick.json\n", bucket, prefix)
			return d.Run(ctx)
		},
	}
	cmd.Flags().StringVar(&mongoURI, "mongo-uri", config.Get(config.EnvMongoURI), "database URI (default $"+config.EnvMongoURI+")")
	cmd.Flags().StringVar(&bucket, "bucket", config.Get(config.EnvBucket), "bucket holding the leases (default $"+config.EnvBucket+")")
	cmd.Flags().StringVar(&prefix, "prefix", "leases/", "object-name prefix of the leases")
	cmd.Flags().DurationVar(&granularity, "tick", scheduler.DefaultGranularity, "tick granularity: wake-ups are rounded up to it")
	cmd.Flags().DurationVar(&poll, "poll", scheduler.DefaultPoll, "how often to poll for schedule edits when the server has no change streams")
	cmd.Flags().DurationVar(&idle, "max-idle", scheduler.DefaultMaxIdle, "longest sleep between ticks (sweeps for failover and retries run at least this often)")
	cmd.Flags().BoolVar(&ensureIndexes, "ensure-indexes", false, "create the scheduler's and the GPU queue's indexes at start (local use; Terraform declares them in the cloud)")
	return cmd
}

// daemonState is what /healthz reports (*scheduler.Daemon has it), as an
// interface so that the handler can be tested without a database.
type daemonState interface {
	Leading() bool
	WatchMode() string
}

// healthHandler answers GET /healthz with the daemon's state. It answers 200
// whether or not this instance leads: a daemon waiting for the tick lease
// is healthy, and restarting it would not make it lead.
func healthHandler(d daemonState) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Status    string `json:"status"`
			Leading   bool   `json:"leading"`
			WatchMode string `json:"watchMode"`
		}{"ok", d.Leading(), d.WatchMode()})
	})
	return mux
}

// startHealth listens on addr before returning, so that a bad PORT fails
// the command at once rather than leaving Cloud Run probing nothing, and
// serves healthHandler until stop is called.
func startHealth(addr string, d daemonState) (stop func(), bound string, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	// Only /healthz is served, which answers at once.
	srv := httpapi.NewServer(healthHandler(d), httpapi.DefaultTimeouts.WithWrite(httpapi.QuickWriteTimeout))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}
	return stop, ln.Addr().String(), nil
}
