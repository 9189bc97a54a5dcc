package scheduler

import (
	"context"
	"fmt"
	"strings"

	"github.com/baton-cron/baton/shared/store"
)

// EpochFloor is the lease.Options.EpochFloor of the scheduler's leases: the
// highest epoch that a holder of the lease has written as a fence into b.
// The tick lease fences schedules (field fence); a job lease fences its
// schedule's runs (fence) and the schedule's misfire bookkeeping
// (jobFence). Other leases (baton lease run's) fence nothing here: 0.
//
// It is asked only when a lease object is missing, so it costs nothing in
// steady state: one or two indexed reads (the "fence" indexes in Indexes)
// after a lease store forgot.
func EpochFloor(b store.Backend) func(ctx context.Context, name string) (int64, error) {
	schedules, runs := b.Schedules(), b.Runs()
	return func(ctx context.Context, name string) (int64, error) {
		switch {
		case name == TickLease:
			f, err := schedules.HighestTickFence(ctx)
			if err != nil {
				return 0, fmt.Errorf("scheduler: epoch floor of %s: %w", name, err)
			}
			return f, nil
		case strings.HasPrefix(name, "job-"):
			id := strings.TrimPrefix(name, "job-")
			f, err := runs.HighestFence(ctx, id)
			if err != nil {
				return 0, fmt.Errorf("scheduler: epoch floor of %s: %w", name, err)
			}
			g, err := schedules.JobFence(ctx, id)
			if err != nil {
				return 0, fmt.Errorf("scheduler: epoch floor of %s: %w", name, err)
			}
			return max(f, g), nil
		}
		return 0, nil
	}
}
