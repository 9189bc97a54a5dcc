package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/emulator/mongo"
	"github.com/baton-cron/baton/internal/gpubench"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

func init() { benchCmd.AddCommand(newBenchGPUCmd()) }

func newBenchGPUCmd() *cobra.Command {
	o := gpubench.Defaults()
	cmd := &cobra.Command{
		Use:   "gpu",
		Short: "Busy-aware GPU dispatch against round-robin and the ideal, on the same heavy-tailed job mixes",
		Long: `Runs each seed's job mix through two dispatchers at the same time, with
real local workers running real commands ("sleep d"):

  busy-aware   baton's dispatcher (database queue, slot leases, hand-off on completion)
  round-robin  job i is POSTed to worker i mod K, and workers queue locally

and simulates, on the same arrivals and durations, the ideal dispatcher: a
zero-overhead, work-conserving central queue in the same priority order,
in virtual time. Per seed it reports mean and p99 queue wait, utilisation,
makespan against max(Σd/K, max d), and the hand-off latency from one job's
end to the next job's start on that slot. Then, over the seeds, the median,
min and max of busy-aware's p99 wait and makespan over the ideal's,
round-robin's p99 wait over busy-aware's, and the hand-off p50. The
database is the embedded Mongo emulator. The last line is machine-readable:

  p99_wait_ratio_busy_over_ideal=… makespan_ratio_busy_over_ideal=… p99_wait_ratio_rr_over_busy=… handoff_p50_ms=… seeds=N goals_met=true|false`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Seeds < 1 {
				return usageError("bench gpu: --seeds must be at least 1")
			}
			if o.Jobs < 1 || o.Workers < 1 || o.Ideal <= 0 || o.Sigma < 0 || o.Clamp <= 0 || o.Load <= 0 || o.Backlog < 0 {
				return usageError("bench gpu: --jobs, --workers, --ideal, --clamp and --load must be positive; --sigma and --backlog not negative")
			}
			if o.Arrivals != gpubench.ArrivalsPoisson && o.Arrivals != gpubench.ArrivalsPaced {
				return usageError("bench gpu: --arrivals must be %s or %s, not %q", gpubench.ArrivalsPoisson, gpubench.ArrivalsPaced, o.Arrivals)
			}
			ctx := cmd.Context()
			emu, err := mongo.Start(ctx, mongo.Options{})
			if err != nil {
				return fmt.Errorf("bench gpu: start Mongo emulator: %w", err)
			}
			defer emu.Close()
			open := func(seed uint64) (*mongostore.Store, error) {
				st, err := mongostore.Open(ctx, emu.URI(), mongostore.Options{Database: fmt.Sprintf("benchgpu%d", seed)})
				if err != nil {
					return nil, fmt.Errorf("bench gpu: open database: %w", err)
				}
				return st, nil
			}
			out := cmd.OutOrStdout()
			meanJob := o.Ideal * time.Duration(o.Workers) / time.Duration(o.Jobs)
			fmt.Fprintf(out, "mix: %d jobs on %d workers, lognormal sigma=%.2f (capped at %.0f× mean), Σd/K=%s (mean job %s), backlog %d then %s arrivals at load %.2f, seeds %d–%d\n",
				o.Jobs, o.Workers, o.Sigma, o.Clamp, o.Ideal, meanJob, o.Backlog, o.Arrivals, o.Load, o.Seed, o.Seed+uint64(o.Seeds)-1) //nolint:gosec // Seeds ≥ 1, checked above
			start := time.Now()
			reps, err := gpubench.RunSeeds(ctx, o, open, func(r gpubench.Report) { r.Print(out) })
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "wall time %s\n", time.Since(start).Round(time.Second))
			gpubench.Summarize(reps).Print(out)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Jobs, "jobs", o.Jobs, "jobs in the mix")
	f.IntVar(&o.Workers, "workers", o.Workers, "workers (one slot each)")
	f.DurationVar(&o.Ideal, "ideal", o.Ideal, "scale durations so Σd/K is this long (the run takes a little longer)")
	f.Float64Var(&o.Sigma, "sigma", o.Sigma, "lognormal shape (heavier tail when larger)")
	f.Float64Var(&o.Clamp, "clamp", o.Clamp, "cap each duration at this many times the mean")
	f.Float64Var(&o.Load, "load", o.Load, "arrival rate after the backlog, relative to the pool's capacity")
	f.IntVar(&o.Backlog, "backlog", o.Backlog, "jobs submitted at t=0")
	f.StringVar(&o.Arrivals, "arrivals", o.Arrivals, "arrivals after the backlog: poisson (random gaps) or paced (each job d/(K×load) after the previous)")
	f.Uint64Var(&o.Seed, "seed", o.Seed, "random seed of the first mix")
	f.IntVar(&o.Seeds, "seeds", o.Seeds, "mixes to run, with seeds --seed, --seed+1, …; the summary is their median, min and max")
	flagUsage(cmd)
	return cmd
}
