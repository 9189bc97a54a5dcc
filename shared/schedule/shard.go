package schedule

import (
	"fmt"
	"strings"
	"time"
)

// MaxShards bounds shards: each fire of a sharded schedule inserts that
// many runs in the tick's decision, and its aggregate reads each.
const MaxShards = 100

// MaxShardParamLen bounds one shardParams entry: it travels in a request
// header.
const MaxShardParamLen = 1024

// Headers that tell an http target which shard of its fire a request is.
const (
	// ShardHeader is "i/N": shard i (from 0) of N.
	ShardHeader = "X-Baton-Shard"
	// ShardParamHeader is shard i's entry of shardParams, when given.
	ShardParamHeader = "X-Baton-Shard-Param"
)

// ShardSep separates a fire's run id from the shard number in a shard
// run's id (<run>#<i>). Schedule ids cannot contain it (IDPattern).
const ShardSep = "#"

// ShardRunID is the id of shard i's run of the fire whose unsharded run id
// is fireID: deterministic, like fireID, so a duplicated decision inserts
// nothing new.
func ShardRunID(fireID string, i int) string { return fmt.Sprintf("%s%s%d", fireID, ShardSep, i) }

// FireID is the id of the fire a run belongs to: a shard run's id up to
// ShardSep (so retries, <run>#<i>-a2, belong to it as well); any other
// run's own id.
func FireID(runID string) string {
	base, _, _ := strings.Cut(runID, ShardSep)
	return base
}

// ShardRuns fans the first-attempt run r of a fire out into the runs of
// s's shards, or returns r alone when s is not sharded. Each copy has its
// shard's id, shard number and parameter.
func ShardRuns(s *Schedule, r Run) []Run {
	if s.Shards <= 0 {
		return []Run{r}
	}
	out := make([]Run, s.Shards)
	for i := range out {
		x := r
		x.ID = ShardRunID(r.ID, i)
		x.Shard, x.Shards = &i, s.Shards
		if i < len(s.ShardParams) {
			x.ShardParam = s.ShardParams[i]
		}
		out[i] = x
	}
	return out
}

// ShardValue is the value of ShardHeader (and of BATON_SHARD/BATON_SHARD_COUNT
// as a pair) for run r: "i/N", or "" for a run that is not a shard.
func ShardValue(r *Run) string {
	if r.Shard == nil {
		return ""
	}
	return fmt.Sprintf("%d/%d", *r.Shard, r.Shards)
}

// ShardRun is one shard of a fire in its aggregate: its latest attempt.
type ShardRun struct {
	Shard   int       `json:"shard"`
	RunID   string    `json:"runId,omitempty"`
	Status  RunStatus `json:"status"`
	Attempt int       `json:"attempt,omitempty"`
}

// AggregateFire is the aggregate of a sharded fire fireID of s, from the
// latest attempt of each shard (latest[i], nil when shard i has no run
// yet): a Run whose id is fireID, whose status is the fire's, and whose
// ShardRuns list every shard.
//
// The fire is succeeded only when every shard's latest attempt succeeded.
// While any shard is pending, running or not recorded, it is running when
// one is running and pending otherwise. Once all are finished, it is failed
// when any shard failed, succeeded when all did, and skipped otherwise.
// A failed shard whose retry is not yet recorded counts as failed until the
// retry is there (a moment, or the sweep's next pass).
func AggregateFire(fireID string, shards int, latest []*Run) Run {
	agg := Run{ID: fireID, Shards: shards}
	var pending, running, failed, succeeded int
	for i := range shards {
		sr := ShardRun{Shard: i, Status: RunPending}
		var r *Run
		if i < len(latest) {
			r = latest[i]
		}
		if r != nil {
			sr.RunID, sr.Status, sr.Attempt = r.ID, r.Status, r.Attempt
			if agg.ScheduleID == "" {
				agg.ScheduleID, agg.FireTime, agg.Source, agg.CreatedAt = r.ScheduleID, r.FireTime, r.Source, r.CreatedAt
			}
			if r.Source != SourceRetry {
				agg.Source = r.Source
			}
			if agg.StartedAt.IsZero() || (!r.StartedAt.IsZero() && r.StartedAt.Before(agg.StartedAt)) {
				agg.StartedAt = r.StartedAt
			}
			if r.FinishedAt.After(agg.FinishedAt) {
				agg.FinishedAt = r.FinishedAt
			}
			agg.Attempt = max(agg.Attempt, r.Attempt)
		}
		switch sr.Status {
		case RunPending:
			pending++
		case RunRunning:
			running++
		case RunFailed:
			failed++
		case RunSucceeded:
			succeeded++
		}
		agg.ShardRuns = append(agg.ShardRuns, sr)
	}
	switch {
	case running > 0:
		agg.Status = RunRunning
	case pending > 0:
		agg.Status = RunPending
	case failed > 0:
		agg.Status = RunFailed
	case succeeded == shards:
		agg.Status = RunSucceeded
	default:
		agg.Status = RunSkipped
	}
	if agg.Status == RunPending || agg.Status == RunRunning {
		agg.FinishedAt = time.Time{} // not finished until every shard is
	}
	agg.Reason = fmt.Sprintf("%d/%d shard(s) succeeded, %d failed, %d running, %d pending", succeeded, shards, failed, running, pending)
	return agg
}

// LatestShards picks, of runs, each shard's latest attempt of fire fireID
// (the one with the highest attempt), for AggregateFire: index i is shard
// i's, nil when runs hold none of it.
func LatestShards(runs []Run, fireID string, shards int) []*Run {
	latest := make([]*Run, shards)
	for k := range runs {
		r := &runs[k]
		if r.Shard == nil || *r.Shard < 0 || *r.Shard >= shards || FireID(r.ID) != fireID {
			continue
		}
		if cur := latest[*r.Shard]; cur == nil || r.Attempt > cur.Attempt {
			latest[*r.Shard] = r
		}
	}
	return latest
}
