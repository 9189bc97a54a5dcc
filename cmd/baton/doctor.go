package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/internal/doctor"
	"github.com/baton-cron/baton/shared/config"
)

func init() { rootCmd.AddCommand(newDoctorCmd()) }

// newDoctorCmd builds `baton doctor`.
func newDoctorCmd() *cobra.Command {
	var (
		asJSON, local, cloud, deep, probeIndexes bool
		cc                                       doctor.CloudConfig
		timeout                                  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check a deployment (or baton local) and say how to fix what is wrong",
		Long: `Check that a deployment is fit to run, and print one line per check:
status (PASS, FAIL, WARN or SKIP), what was checked, what was found and,
when it failed, the terraform or gcloud command that fixes it.

In the cloud (run it after terraform apply, with application-default
credentials) it reads, through the Google APIs, and changes nothing:
  - the Firestore database: Enterprise edition, MongoDB-compatible access on,
    the expected location (--location, default BATON_FIRESTORE_LOCATION, then
    --region), point-in-time recovery on (off is a WARN);
  - every index the code needs, present and READY (CREATING fails: wait);
  - the change stream on schedules, opened through BATON_MONGO_URI when it is set
    (the Go admin client has no change stream API; otherwise SKIP). A refusal
    is a WARN (the daemon polls), a failed connection a SKIP;
  - the bucket: uniform bucket-level access on, versioning off, no retention
    policy or default event-based hold, no lifecycle rule that could delete leases/;
  - the Cloud Scheduler job (--job): present, enabled, its last attempt OK and
    recent, POSTing to Tick with OIDC as the scheduler account (without
    --tick-url only the host prefix is compared: a WARN).

Locally (against baton local: run . DATA_DIR/env first) it checks the
emulators: the MongoDB API answers and holds every index, the bucket exists,
the Cloud Tasks queue is served, and BATON_URL/healthz answers 200.

The local checks run when --local is given, or when STORAGE_EMULATOR_HOST or
CLOUD_TASKS_EMULATOR_HOST is set (baton local's env file sets both); the cloud
checks otherwise, or with --cloud.

With --deep it proves the deployment by using it, with the settings the
functions read (BATON_MONGO_URI, BATON_DATABASE, BATON_BUCKET, and
STORAGE_EMULATOR_HOST for baton local), in scratch collections
(baton_doctor_<random>_*) and scratch objects (gs://BUCKET/baton_doctor_<random>_/)
that it removes at the end, on failure and on Ctrl-C too:
  - a probe per store operation, through the methods baton calls: every
    command shape baton sends (a refusal names the command, its operators
    and options);
  - explain (plan only, no documents read) of the hot queries on the real
    collections: the due page, a run history page, the sweeps, the GPU
    queue claim; a table scan fails, naming the index to create
    (--probe-indexes adds a createIndexes probe on a scratch collection:
    the functions never send it, and on Firestore the index may outlive
    the run);
  - 20 conditional writers racing on one document: one wins, every other
    gets a clean conflict;
  - the p50 and p99 latency of a conditional write;
  - the bucket: create-if-absent, generation match, 412 on a stale
    generation, and the answer to writes to one object faster than once a
    second (a 429 is expected; none is a WARN).
Against baton local it costs 74 document reads, 102 document writes and 19
Cloud Storage operations (the cost row counts them on every run);
docs/deploy.md, "Proving a deployment".

Exit status: 0 when no check failed (WARN and SKIP allowed), 1 when one did,
2 on bad flags.`,
		Example: `  . .baton/env && baton doctor
  baton doctor --project my-proj --region europe-west4 --bucket my-baton-bucket
  eval "$(terraform -chdir=infra/terraform output -raw cli_env)" && baton doctor --json
  eval "$(terraform -chdir=infra/terraform output -raw cli_env)" && baton doctor --deep`,
		Args: cobra.NoArgs,
		// As under the root command: a failed check is a report, not a
		// usage mistake (and tests run this command alone).
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if local && cloud {
				return usageError("doctor: --local and --cloud: give one")
			}
			if timeout <= 0 {
				return usageError("doctor: --timeout %s: want a positive duration", timeout)
			}
			if deep && (local || cloud) {
				return usageError("doctor: --deep checks the deployment BATON_* names, local or cloud: give it alone")
			}
			if deep && !cmd.Flags().Changed("timeout") {
				timeout = deepTimeout
			}
			if !local && !cloud {
				local = config.Get(config.EnvStorageEmu) != "" || config.Get(config.EnvTasksEmu) != ""
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			var rep *doctor.Report
			switch {
			case deep:
				// Ctrl-C or a TERM ends the checks between commands; the
				// scratch data is removed all the same.
				sctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
				rep = doctor.Deep(sctx, doctor.DeepConfig{
					MongoURI: config.Get(config.EnvMongoURI),
					// BATON_DATABASE or --database when given; otherwise the
					// URI's database (baton local's names it), as Open reads it.
					Database:   deepDatabase(cmd, cc.Database),
					Bucket:     cc.Bucket,
					IndexProbe: probeIndexes,
				})
			case local:
				rep = doctor.Local(ctx, doctor.LocalConfig{
					MongoURI: config.Get(config.EnvMongoURI),
					// The URI of baton local names its database; only an
					// explicit flag overrides it.
					Database:    flagIf(cmd, "database", cc.Database),
					StorageHost: config.Get(config.EnvStorageEmu),
					Bucket:      cc.Bucket,
					TasksHost:   config.Get(config.EnvTasksEmu),
					TasksQueue:  config.Get(config.EnvTasksQueue),
					URL:         config.Get(config.EnvURL),
					Token:       config.Get(config.EnvToken),
				})
			default:
				if cc.Location == "" {
					cc.Location = cc.Region
				}
				cc.MongoURI = config.Get(config.EnvMongoURI)
				if err := cc.Check(); err != nil {
					return usageError("%v (flags --project, --database, --bucket, --region, or BATON_PROJECT, BATON_DATABASE, BATON_BUCKET, BATON_REGION)", err)
				}
				var err error
				if rep, err = doctor.Cloud(ctx, cc); err != nil {
					return usageError("%v", err)
				}
			}
			out := cmd.OutOrStdout()
			var err error
			if asJSON {
				err = rep.WriteJSON(out)
			} else {
				err = rep.WriteTable(out)
			}
			if err != nil {
				return err
			}
			if !rep.OK {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageError("doctor: %v", err)
	})
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print the report as JSON instead of a table")
	f.BoolVar(&local, "local", false, "check baton local's emulators (the default when STORAGE_EMULATOR_HOST or CLOUD_TASKS_EMULATOR_HOST is set)")
	f.BoolVar(&cloud, "cloud", false, "check the cloud deployment even when emulator hosts are set")
	f.BoolVar(&deep, "deep", false, "prove the deployment by using it, in scratch collections and objects it removes (see above; default --timeout 5m)")
	f.BoolVar(&probeIndexes, "probe-indexes", false, "with --deep, also create (and drop) an index on a scratch collection; on Firestore it may be left behind (dropIndexes is refused)")
	f.StringVar(&cc.Project, "project", config.Get(config.EnvProject), "Google Cloud project (BATON_PROJECT)")
	f.StringVar(&cc.Database, "database", config.Get(config.EnvDatabase), "Firestore database ID (BATON_DATABASE; Terraform's database_name)")
	f.StringVar(&cc.Bucket, "bucket", config.Get(config.EnvBucket), "baton's bucket (BATON_BUCKET; terraform output bucket)")
	f.StringVar(&cc.Region, "region", config.Get(config.EnvRegion), "region of the Scheduler job (BATON_REGION; Terraform's region)")
	f.StringVar(&cc.Location, "location", config.Get(config.EnvFirestoreLocation), "the database's expected location (BATON_FIRESTORE_LOCATION; Terraform's firestore_location); empty means --region")
	f.StringVar(&cc.Job, "job", "baton-tick", "the Cloud Scheduler job that calls Tick; empty skips the Scheduler checks")
	f.StringVar(&cc.TickURL, "tick-url", config.Get(config.EnvTickURL), "the Tick function's URL (BATON_TICK_URL; terraform output function_urls); empty checks only that the job's host is baton-tick's")
	f.DurationVar(&timeout, "timeout", time.Minute, "bound on all the checks together")
	return cmd
}

// deepTimeout is --timeout's default with --deep: the probes, the race,
// the latency and the rate check take seconds each on a healthy database.
const deepTimeout = 5 * time.Minute

// deepDatabase is the database --deep opens: the flag's or
// BATON_DATABASE's value when either is given, else "" (the URI's).
func deepDatabase(cmd *cobra.Command, v string) string {
	if cmd.Flags().Changed("database") || os.Getenv(config.EnvDatabase) != "" {
		return v
	}
	return ""
}

// flagIf is the flag's value when it was given on the command line, and ""
// otherwise.
func flagIf(cmd *cobra.Command, name, v string) string {
	if cmd.Flags().Changed(name) {
		return v
	}
	return ""
}
