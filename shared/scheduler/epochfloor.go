package scheduler

import (
	"context"
	"fmt"
	"strings"

	"github.com/baton-cron/baton/shared/store"
)

// EpochFloor is the lease.Options.EpochFloor of the scheduler's leases: the
// highest epoch that a holder of the lease has written as a fence into b.
// The tick lease and the decider shards' tick leases fence schedules (field fence); a job lease fences its
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
		case name == TickLease || strings.HasPrefix(name, tickShardPrefix):
			// A decider shard's lease starts above every tick fence of
			// every shard, so fences only grow, whether the schedule was
			// last advanced under the single tick lease (before
			// partitions) or under this shard's lease. One indexed read
			// for all shards: a floor too high only skips epochs.
			f, err := schedules.HighestTickFence(ctx)
			if err != nil {
				return 0, fmt.Errorf("scheduler: epoch floor of %s: %w", name, err)
			}
			return f, nil
		case strings.HasPrefix(name, "job-"):
			// A shard's lease, job-<id>-<i>, cannot be told from the lease
			// of a schedule whose id ends in -<i>: take the floor of both.
			// The schedule's highest fence covers every shard's, and a
			// floor too high only skips epochs.
			var floor int64
			for _, id := range jobLeaseOwners(strings.TrimPrefix(name, "job-")) {
				f, err := runs.HighestFence(ctx, id)
				if err != nil {
					return 0, fmt.Errorf("scheduler: epoch floor of %s: %w", name, err)
				}
				g, err := schedules.JobFence(ctx, id)
				if err != nil {
					return 0, fmt.Errorf("scheduler: epoch floor of %s: %w", name, err)
				}
				floor = max(floor, f, g)
			}
			return floor, nil
		}
		return 0, nil
	}
}

// SharedFenceLease is the lease.Options.FloorEachAcquire of the
// scheduler's leases: the single tick lease and the decider shards' tick
// leases all write the schedules' fence field, so whichever of them is
// taken must start above the highest tick fence stored. Otherwise turning
// BATON_PARTITIONS off again (or on again, or a schedule that changed
// decider shard) leaves the lease now used behind the fences the others
// wrote meanwhile, and every advance under it is refused as a newer
// tick's: the runs it decided are undone, each minute, until its epoch
// catches up. One indexed read per Acquire of a tick lease.
func SharedFenceLease(name string) bool {
	return name == TickLease || strings.HasPrefix(name, tickShardPrefix)
}

// jobLeaseOwners is the schedule ids whose runs a job lease named job-<rest>
// may fence: rest itself, and, when rest ends in -<digits>, the sharded
// schedule whose shard lease it may be (ShardJobLease).
func jobLeaseOwners(rest string) []string {
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 || i == len(rest)-1 || strings.Trim(rest[i+1:], "0123456789") != "" {
		return []string{rest}
	}
	return []string{rest, rest[:i]}
}
