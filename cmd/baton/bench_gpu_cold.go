package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/emulator/mongo"
	"github.com/baton-cron/baton/internal/gpubench"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

func init() { benchCmd.AddCommand(newBenchGPUColdCmd()) }

func newBenchGPUColdCmd() *cobra.Command {
	o := gpubench.ColdDefaults()
	cmd := &cobra.Command{
		Use:   "gpu-cold",
		Short: "Time to first dispatch on a GPU pool whose instances are not started, against a warm pool",
		Long: `Enqueues --jobs jobs at once on --workers one-slot workers, first on a warm
pool and then on a cold one, with the real dispatcher and real workers.
On the cold pool the first request to each worker starts its instance,
which takes --cold-start; meanwhile a request waits (--mode delay, Cloud
Run scaling from zero) or gets 429 (--mode 429, Cloud Run unable to place
an instance). A request that waits longer than the dispatcher's
--run-timeout is dropped, as Cloud Run drops a request whose client left;
the job then waits for its lease to run out and for the sweep, which runs
every --sweep-every (a tick in production). docs/gpu.md ("Cold starts")
reads the numbers. The last line is machine-readable:

  cold_first_dispatch_ms=… cold_all_started_ms=… warm_first_dispatch_ms=… warm_all_started_ms=… cold_refused=… cold_start_ms=… mode=…`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Workers < 1 || o.Jobs < 0 || o.ColdStart < 0 || o.JobDuration <= 0 || o.SweepEvery <= 0 || o.RunTimeout < 0 {
				return usageError("bench gpu-cold: --workers, --job-duration and --sweep-every must be positive; --jobs, --cold-start and --run-timeout not negative")
			}
			if o.Mode != gpubench.ColdDelay && o.Mode != gpubench.ColdRefuse {
				return usageError("bench gpu-cold: --mode must be %s or %s, not %q", gpubench.ColdDelay, gpubench.ColdRefuse, o.Mode)
			}
			ctx := cmd.Context()
			emu, err := mongo.Start(ctx, mongo.Options{})
			if err != nil {
				return fmt.Errorf("bench gpu-cold: start Mongo emulator: %w", err)
			}
			defer emu.Close()
			o.Open = func(name string) (*mongostore.Store, error) {
				st, err := mongostore.Open(ctx, emu.URI(), mongostore.Options{Database: name})
				if err != nil {
					return nil, fmt.Errorf("bench gpu-cold: open database: %w", err)
				}
				return st, nil
			}
			rep, err := gpubench.RunCold(ctx, o)
			if err != nil {
				return err
			}
			rep.Print(cmd.OutOrStdout())
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Workers, "workers", o.Workers, "workers (one slot each)")
	f.IntVar(&o.Jobs, "jobs", o.Jobs, "jobs enqueued at t=0 (0: one per worker)")
	f.DurationVar(&o.ColdStart, "cold-start", o.ColdStart, "how long an instance takes to start")
	f.StringVar(&o.Mode, "mode", o.Mode, "what a request meets while its instance starts: delay (held) or 429 (refused)")
	f.DurationVar(&o.JobDuration, "job-duration", o.JobDuration, "each job's run time")
	f.DurationVar(&o.SweepEvery, "sweep-every", o.SweepEvery, "the dispatcher's sweep period (a tick in production)")
	f.DurationVar(&o.RunTimeout, "run-timeout", o.RunTimeout, "bound on POST /run (0: the dispatcher's default, 15s)")
	flagUsage(cmd)
	return cmd
}
