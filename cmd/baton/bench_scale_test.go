package main

import (
	"bytes"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/baton-cron/baton/shared/schedule"
)

// TestBenchScaleSmoke runs `baton bench scale` small and fast, end to
// end, and checks the report's counts, never its times: every due fire
// time is decided and enqueued, each virtual shard's writes are exactly 2 ×
// its due schedules, and the last line carries every key=value that docs
// and scripts read.
func TestBenchScaleSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts fake-gcs-server")
	}
	t.Parallel()
	cmd := newBenchScaleCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	// V is the process's (schedule.SetDeciderShards): the default, so that
	// the package's other tests, which run beside this one, see the V they
	// normalise schedules with.
	cmd.SetArgs([]string{"--schedules", "300", "--shards", "64", "--partitions", "4", "--latency", "1ms", "--task-latency", "1ms"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("bench scale: %v\n%s", err, out.String())
	}
	report := out.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^scale: P=4: decided 300 of 300 fire times, last at \S+ s; enqueued 300 runs, last at \S+ s; 600 documents written; .*; 0 errors$`),
		regexp.MustCompile(`(?m)^scale: P=1: decided 300 of 300 fire times, last at \S+ s; enqueued 300 runs, last at \S+ s; 600 documents written; .*; 0 errors$`),
		regexp.MustCompile(`(?m)^scale: P=4: writes per virtual shard [0-9]+\.\.[0-9]+, each = 2 × its due schedules: true$`),
		regexp.MustCompile(`(?m)^scale: P=1: writes per virtual shard [0-9]+\.\.[0-9]+, each = 2 × its due schedules: true$`),
		regexp.MustCompile(`(?m)^scale: P=4: writes/due by virtual shard:( [0-9]+=[0-9]+/[0-9]+){64}$`),
	} {
		if !want.MatchString(report) {
			t.Errorf("report has no line matching %s:\n%s", want, report)
		}
	}
	lines := strings.Split(strings.TrimSpace(report), "\n")
	last := regexp.MustCompile(`^schedules=300 shards=64 partitions=4 decided_s=[0-9.]+ enqueued_s=[0-9.]+ p1_decided_s=[0-9.]+ p1_enqueued_s=[0-9.]+ ratio=[0-9.]+ writes_per_shard_ok=true goal_ok=(true|false)$`)
	if !last.MatchString(lines[len(lines)-1]) {
		t.Errorf("last line %q does not match %s", lines[len(lines)-1], last)
	}
}

// TestBenchScaleUsage: bad flags are a usage error, before anything starts.
func TestBenchScaleUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--schedules", "0"}, {"--partitions", "65"}, {"--shards", "0"}, {"--latency", "-1ms"}} {
		cmd := newBenchScaleCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		err := cmd.Execute()
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != 2 {
			t.Errorf("%v: err = %v, want a usage error (exit 2)", args, err)
		}
	}
}

// TestScaleHotRangesAreTheIndexes: the bench models the time-ordered
// indexes a decision writes with the prefixes they really have: runs'
// fireTime led by vshard (all) and by scheduleId (history), sweepAt led
// by vshard, the schedules' nextRunAt led by vshard (due_vshard), and no
// range on a time field a run insert writes without vshard or scheduleId
// before it.
func TestScaleHotRangesAreTheIndexes(t *testing.T) {
	got := map[string]bool{}
	for _, h := range scaleHotRanges(500) {
		key := h.Collection + "." + h.Field + "[" + strings.Join(h.Prefix, ",") + "]"
		got[key] = true
		if h.Collection == schedule.RunsCollection && (h.Field == "fireTime" || h.Field == "sweepAt" || h.Field == "createdAt") &&
			(len(h.Prefix) == 0 || (h.Prefix[0] != "vshard" && h.Prefix[0] != "scheduleId")) {
			t.Errorf("range %s: a time field every run insert writes, in an index led by neither vshard nor scheduleId: one hot range", key)
		}
		if h.Collection == schedule.SchedulesCollection && h.Field == "nextRunAt" && (len(h.Prefix) == 0 || h.Prefix[0] != "vshard") {
			t.Errorf("range %s: every advance writes nextRunAt; an index on it not led by vshard is one hot range", key)
		}
	}
	for _, want := range []string{"runs.fireTime[vshard]", "runs.fireTime[vshard,status]", "runs.fireTime[scheduleId]", "runs.sweepAt[vshard,status]", "schedules.nextRunAt[vshard,enabled]", "runs.groupAt[group,status]"} {
		if !got[want] {
			t.Errorf("no hot range %s; have %v", want, got)
		}
	}
}
