package scheduler

import (
	"context"
	"strconv"

	"github.com/baton-cron/baton/shared/schedule"
)

// Sharded jobs (schedule.Shards): the tick's decision fans each fire out
// into one run per shard, <run>#<i>, with deterministic ids, so a
// duplicated or concurrent tick inserts nothing new, exactly as for an
// unsharded fire. From there on a shard is a lane of its own: its runs are
// handed off and executed apart from the other shards' (splitShards), under
// the job lease job-<id>-<i> (ShardJobLease), and the overlap policy,
// retries and the sweep's failover and recovery apply to each shard on its
// own. remainingRuns counts fires, not shards, and a missed window is one
// record for the schedule: nothing ran, in any shard.

// ShardJobLease is the name of shard i's job lease of a sharded schedule
// (object leases/<hh>/job-<id>-<i>.json, lease.SpreadDir).
func ShardJobLease(scheduleID string, shard int) string {
	return JobLease(scheduleID) + "-" + strconv.Itoa(shard)
}

// runJobLease is the name of the job lease run r executes under.
func runJobLease(r *schedule.Run) string {
	if r.Shard == nil {
		return JobLease(r.ScheduleID)
	}
	return ShardJobLease(r.ScheduleID, *r.Shard)
}

type laneKey struct{}

// withLane tells the execution of w's runs which shard they are (all of a
// split work's runs are of one shard), so that the job lease it takes and
// the runs it looks for under that lease (the holder's run, waiting
// retries, a GPU job in flight) are the shard's, not the schedule's.
func withLane(ctx context.Context, w *scheduleWork) context.Context {
	if len(w.runs) == 0 || w.runs[0].Shard == nil {
		return ctx
	}
	return context.WithValue(ctx, laneKey{}, *w.runs[0].Shard)
}

// laneOf is the shard withLane set on ctx, or nil for an unsharded run.
func laneOf(ctx context.Context) *int {
	if i, ok := ctx.Value(laneKey{}).(int); ok {
		return &i
	}
	return nil
}

// jobLeaseFor is the job lease of schedule scheduleID in ctx's lane: the
// schedule's own, or its shard's.
func jobLeaseFor(ctx context.Context, scheduleID string) string {
	if i := laneOf(ctx); i != nil {
		return ShardJobLease(scheduleID, *i)
	}
	return JobLease(scheduleID)
}

// fanOut is the first-attempt runs of the fire rd: rd itself for an
// unsharded schedule, one copy per shard otherwise (schedule.ShardRuns).
func fanOut(s *schedule.Schedule, rd *runDoc) []*runDoc {
	if s.Shards <= 0 {
		return []*runDoc{rd}
	}
	runs := schedule.ShardRuns(s, rd.Run)
	out := make([]*runDoc, len(runs))
	for i := range runs {
		x := *rd
		x.Run = runs[i]
		out[i] = &x
	}
	return out
}

// splitShards splits each work into one work per shard, keeping the order
// of its runs, so that every shard is handed off (one task chain) and
// executed (one goroutine, its own job lease) apart from the others: a slow
// shard holds back only its own later runs. Unsharded work is unchanged.
func splitShards(work []*scheduleWork) []*scheduleWork {
	out := make([]*scheduleWork, 0, len(work))
	for _, w := range work {
		if len(w.runs) == 0 || w.s.Overlap == schedule.OverlapAllow {
			// allow runs are executed and handed off one by one anyway.
			out = append(out, w)
			continue
		}
		var lanes []*scheduleWork
		byShard := map[int]*scheduleWork{}
		var plain *scheduleWork
		for _, r := range w.runs {
			var lw *scheduleWork
			if r.Shard == nil {
				if plain == nil {
					plain = &scheduleWork{s: w.s, salt: w.salt}
					lanes = append(lanes, plain)
				}
				lw = plain
			} else {
				lw = byShard[*r.Shard]
				if lw == nil {
					lw = &scheduleWork{s: w.s, salt: w.salt}
					byShard[*r.Shard] = lw
					lanes = append(lanes, lw)
				}
			}
			lw.runs = append(lw.runs, r)
		}
		out = append(out, lanes...)
	}
	return out
}
