package schedule

import (
	"errors"
	"strings"
	"testing"
)

// TestShardValidation: shards and shardParams are refused with a 400
// naming the field, and a sharded schedule defaults to overlap skip and
// refuses buffer_one.
func TestShardValidation(t *testing.T) {
	for name, c := range map[string]struct {
		edit  func(*Schedule)
		field string
	}{
		"negative shards":           {func(s *Schedule) { s.Shards = -1 }, "shards"},
		"too many shards":           {func(s *Schedule) { s.Shards = MaxShards + 1 }, "shards"},
		"params without shards":     {func(s *Schedule) { s.ShardParams = []string{"a"} }, "shardParams"},
		"params of the wrong count": {func(s *Schedule) { s.Shards, s.ShardParams = 3, []string{"a", "b"} }, "shardParams"},
		"a param with a newline":    {func(s *Schedule) { s.Shards, s.ShardParams = 2, []string{"a", "b\nc"} }, "shardParams[1]"},
		"a param too long":          {func(s *Schedule) { s.Shards, s.ShardParams = 1, []string{strings.Repeat("x", MaxShardParamLen+1)} }, "shardParams[0]"},
		"buffer_one":                {func(s *Schedule) { s.Shards, s.Overlap = 2, OverlapBufferOne }, "overlap"},
	} {
		t.Run(name, func(t *testing.T) {
			s := validHTTP()
			c.edit(s)
			err := s.Normalize(testOpts)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("err %v; want a FieldError naming %q", err, c.field)
			}
		})
	}
	s := validHTTP()
	s.Shards, s.ShardParams = MaxShards, make([]string, MaxShards)
	if err := s.Normalize(testOpts); err != nil || s.Overlap != OverlapSkip {
		t.Fatalf("%d shards: %v, overlap %q; want valid, skip", MaxShards, err, s.Overlap)
	}
}

// TestAggregateFire: a fire is succeeded only when every shard's latest
// attempt is.
func TestAggregateFire(t *testing.T) {
	run := func(id string, st RunStatus, attempt int) Run {
		i := int(id[strings.Index(id, ShardSep)+1] - '0')
		return Run{ID: id, Status: st, Attempt: attempt, Shard: &i, Shards: 3}
	}
	for name, c := range map[string]struct {
		runs []Run
		want RunStatus
	}{
		"all succeeded":          {[]Run{run("f#0", RunSucceeded, 1), run("f#1", RunSucceeded, 1), run("f#2", RunSucceeded, 1)}, RunSucceeded},
		"a shard not recorded":   {[]Run{run("f#0", RunSucceeded, 1), run("f#1", RunSucceeded, 1)}, RunPending},
		"a shard running":        {[]Run{run("f#0", RunRunning, 1), run("f#1", RunSucceeded, 1), run("f#2", RunFailed, 1)}, RunRunning},
		"a shard failed":         {[]Run{run("f#0", RunSucceeded, 1), run("f#1", RunFailed, 1), run("f#2", RunSucceeded, 1)}, RunFailed},
		"a failed shard retried": {[]Run{run("f#0", RunSucceeded, 1), run("f#1", RunFailed, 1), run("f#1-a2", RunSucceeded, 2), run("f#2", RunSucceeded, 1)}, RunSucceeded},
		"a shard skipped":        {[]Run{run("f#0", RunSucceeded, 1), run("f#1", RunSkipped, 1), run("f#2", RunSucceeded, 1)}, RunSkipped},
		"another fire's runs":    {[]Run{run("g#0", RunSucceeded, 1), run("g#1", RunSucceeded, 1), run("g#2", RunSucceeded, 1)}, RunPending},
	} {
		t.Run(name, func(t *testing.T) {
			agg := AggregateFire("f", 3, LatestShards(c.runs, "f", 3))
			if agg.Status != c.want || len(agg.ShardRuns) != 3 {
				t.Fatalf("aggregate %s with %d shards (%s); want %s with 3", agg.Status, len(agg.ShardRuns), agg.Reason, c.want)
			}
		})
	}
	if got := FireID("job@20260302T090100Z#1-a2"); got != "job@20260302T090100Z" {
		t.Errorf("FireID: %q", got)
	}
}

// TestGPUJobIDOfAShard: a shard run's GPU job id is one the GPU pool
// accepts (no "#"), and stays distinct per shard.
func TestGPUJobIDOfAShard(t *testing.T) {
	a, b := GPUJobID(ShardRunID("job@20260302T090100Z", 0)), GPUJobID(ShardRunID("job@20260302T090100Z", 1))
	if strings.Contains(a, ShardSep) || a == b || a != "run-job@20260302T090100Z+0" {
		t.Fatalf("GPU job ids %q, %q", a, b)
	}
}
