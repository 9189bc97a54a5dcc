package functions

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/scheduler"
)

// TestCheckTaskNamesTheField: a Run body no scheduler would send, one
// schedule's or a page's, is refused with the field that is wrong; the
// shapes the scheduler sends pass.
func TestCheckTaskNamesTheField(t *testing.T) {
	one := scheduler.Task{ScheduleID: "a", Runs: []string{"a@1"}}
	many := scheduler.Task{ScheduleID: "m", Runs: make([]string, 60)}
	for i := range many.Runs {
		many.Runs[i] = "m@" + strings.Repeat("x", i+1)
	}
	for _, c := range []struct {
		name  string
		task  scheduler.Task
		field string // "" passes
	}{
		{"one schedule", one, ""},
		{"a page", scheduler.Task{Page: []scheduler.Task{one, {ScheduleID: "b", Runs: []string{"b@1", "b@2"}}}}, ""},
		{"no schedule", scheduler.Task{Runs: []string{"a@1"}}, "scheduleId"},
		{"no runs", scheduler.Task{ScheduleID: "a"}, "runs"},
		{"an empty run id", scheduler.Task{ScheduleID: "a", Runs: []string{"a@1", ""}}, "runs[1]"},
		{"a page with runs of its own", scheduler.Task{ScheduleID: "a", Runs: []string{"a@1"}, Page: []scheduler.Task{one}}, "page"},
		{"a page entry without a schedule", scheduler.Task{Page: []scheduler.Task{one, {Runs: []string{"b@1"}}}}, "page[1].scheduleId"},
		{"a page entry with an empty run id", scheduler.Task{Page: []scheduler.Task{{ScheduleID: "b", Runs: []string{""}}}}, "page[0].runs[0]"},
		{"a page in a page", scheduler.Task{Page: []scheduler.Task{{ScheduleID: "b", Runs: []string{"b@1"}, Page: []scheduler.Task{one}}}}, "page[0].page"},
		{"a page of too many runs", scheduler.Task{Page: []scheduler.Task{many, many}}, "page"},
	} {
		err := checkTask(c.task)
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: %v, want it accepted", c.name, err)
			}
			continue
		}
		var e *httpapi.Error
		if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Field != c.field {
			t.Errorf("%s: %v, want 400 on field %q", c.name, err, c.field)
		}
	}
}

// TestFromEnvRefusesBadTaskRuns: BATON_TASK_RUNS outside 1 to 100 stops
// Tick from starting, naming the variable.
func TestFromEnvRefusesBadTaskRuns(t *testing.T) {
	t.Setenv("BATON_MONGO_URI", "")
	t.Setenv("BATON_BUCKET", "")
	for _, bad := range []string{"0", "101", "ten"} {
		t.Setenv("BATON_TASK_RUNS", bad)
		if _, err := FromEnv(t.Context()); err == nil || !strings.Contains(err.Error(), "BATON_TASK_RUNS") {
			t.Errorf("BATON_TASK_RUNS=%s: FromEnv = %v, want an error naming the variable", bad, err)
		}
	}
	t.Setenv("BATON_TASK_RUNS", "7")
	if d, err := FromEnv(t.Context()); err != nil || d.TaskRuns != 7 {
		t.Errorf("BATON_TASK_RUNS=7: %v, TaskRuns %d", err, d.TaskRuns)
	}
}

// TestFromEnvReadsInlineShards: BATON_INLINE_SHARDS is 16 when unset, a
// value above V means V (so a deployment of fewer than 16 decider shards
// starts with the default), and it reaches the engine's config through
// Deps.
func TestFromEnvReadsInlineShards(t *testing.T) {
	t.Setenv("BATON_MONGO_URI", "")
	t.Setenv("BATON_BUCKET", "")
	if d, err := FromEnv(t.Context()); err != nil || d.InlineShards != 16 {
		t.Errorf("unset: %v, InlineShards %d; want 16", err, d.InlineShards)
	}
	t.Setenv("BATON_INLINE_SHARDS", "65")
	if d, err := FromEnv(t.Context()); err != nil || d.InlineShards != 64 {
		t.Errorf("BATON_INLINE_SHARDS=65 over 64 shards: %v, InlineShards %d; want 64", err, d.InlineShards)
	}
	t.Setenv("BATON_INLINE_SHARDS", "")
	t.Setenv("BATON_DECIDER_SHARDS", "8")
	t.Setenv("BATON_PARTITIONS", "4")
	d, err := FromEnv(t.Context())
	if err != nil || d.InlineShards != 8 {
		t.Errorf("default over 8 decider shards: %v, InlineShards %d; want 8", err, d.InlineShards)
	}
	t.Setenv("BATON_DECIDER_SHARDS", "64")
	t.Setenv("BATON_PARTITIONS", "0")
	for _, bad := range []string{"-1", "few"} {
		t.Setenv("BATON_INLINE_SHARDS", bad)
		if _, err := FromEnv(t.Context()); err == nil || !strings.Contains(err.Error(), "BATON_INLINE_SHARDS") {
			t.Errorf("BATON_INLINE_SHARDS=%s: FromEnv = %v, want an error naming the variable", bad, err)
		}
	}
	t.Setenv("BATON_INLINE_SHARDS", "0")
	if d, err := FromEnv(t.Context()); err != nil || d.InlineShards != 0 {
		t.Errorf("BATON_INLINE_SHARDS=0: %v, InlineShards %d", err, d.InlineShards)
	}
}

// TestFromEnvReadsLapseShardLeases: a decided shard's lease lapses by
// default in the functions; false turns it off, and anything but a boolean
// is an error naming the variable.
func TestFromEnvReadsLapseShardLeases(t *testing.T) {
	t.Setenv("BATON_MONGO_URI", "")
	t.Setenv("BATON_BUCKET", "")
	if d, err := FromEnv(t.Context()); err != nil || !d.LapseShardLeases {
		t.Errorf("unset: %v, LapseShardLeases %v; want true", err, d.LapseShardLeases)
	}
	t.Setenv("BATON_LAPSE_SHARD_LEASES", "false")
	if d, err := FromEnv(t.Context()); err != nil || d.LapseShardLeases {
		t.Errorf("false: %v, LapseShardLeases %v; want false", err, d.LapseShardLeases)
	}
	t.Setenv("BATON_LAPSE_SHARD_LEASES", "sometimes")
	if _, err := FromEnv(t.Context()); err == nil || !strings.Contains(err.Error(), "BATON_LAPSE_SHARD_LEASES") {
		t.Errorf("sometimes: FromEnv = %v, want an error naming the variable", err)
	}
}
