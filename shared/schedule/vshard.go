package schedule

import (
	"hash/fnv"
	"sync/atomic"
)

// DefaultDeciderShards is V, the number of virtual decider shards, when
// BATON_DECIDER_SHARDS does not set it. 64 lets up to 64 partitions decide
// at once (each shard is decided by exactly one partition at a time), far
// more than a minute's decisions need at Firestore's latencies, while a
// tick still costs only 64 lease writes.
const DefaultDeciderShards = 64

// MaxDeciderShards bounds V: each shard is one lease object written about
// twice a tick.
const MaxDeciderShards = 4096

// deciderShards is V for this process (SetDeciderShards).
var deciderShards atomic.Int64

func init() { deciderShards.Store(DefaultDeciderShards) }

// DeciderShards is V, the number of virtual decider shards of this
// deployment. It is fixed per deployment: changing it re-homes almost
// every schedule, an offline migration (docs/scheduler.md).
func DeciderShards() int { return int(deciderShards.Load()) }

// SetDeciderShards sets V for this process (BATON_DECIDER_SHARDS); binaries
// call it once at start, before any schedule is normalised. Values outside
// 1..MaxDeciderShards are ignored.
func SetDeciderShards(v int) {
	if v >= 1 && v <= MaxDeciderShards {
		deciderShards.Store(int64(v))
	}
}

// DeciderShardOf is the virtual decider shard of schedule id among v
// shards: FNV-1a 32 of the id's bytes, mod v. The hash is fixed (never Go's
// randomised map hash) so that every process, and every version of baton,
// puts a schedule in the same shard. It is not the job sharding of
// Schedule.Shards: that splits one schedule's runs, this splits the
// deciding of many schedules.
func DeciderShardOf(id string, v int) int {
	if v <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % uint32(v)) //nolint:gosec // 1 < v ≤ MaxDeciderShards
}

// RunDeciderShard is the decider shard a run of schedule scheduleID is
// stored under: its schedule's, DeciderShardOf(scheduleID, DeciderShards()),
// so that the partition deciding a schedule also sweeps its runs.
func RunDeciderShard(scheduleID string) int {
	return DeciderShardOf(scheduleID, DeciderShards())
}
