package tests

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/shared/schedule"
)

// TestGPUShardsAreToldTheirShard: a sharded schedule with a gpu target
// makes one GPU job per shard, and each job's command (a real worker
// process) is told its shard in BATON_SHARD, BATON_SHARD_COUNT and
// BATON_SHARD_PARAM, as an http target is in X-Baton-Shard.
func TestGPUShardsAreToldTheirShard(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: 2 * time.Second, GPUWorkers: 2})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })

	body := map[string]any{
		"id": "shardgpu", "cron": "@yearly", "shards": 3, "shardParams": []string{"eu", "us", "ap"},
		"target": map[string]any{"type": "gpu", "gpu": map[string]any{"payload": `echo "shard=$BATON_SHARD/$BATON_SHARD_COUNT param=$BATON_SHARD_PARAM"`}},
	}
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", body, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules/shardgpu:trigger", nil, nil); code != http.StatusOK {
		t.Fatalf("trigger: %d", code)
	}
	type page struct{ Runs []schedule.Run }
	var runs []schedule.Run
	for {
		if ctx.Err() != nil {
			t.Fatalf("shard runs did not all succeed: %+v", runs)
		}
		var p page
		if code := api(t, s.URL, s.Token, "GET", "/Schedules/schedules/shardgpu/runs", nil, &p); code != http.StatusOK {
			t.Fatalf("list runs: %d", code)
		}
		runs = p.Runs
		done := len(runs) == 3
		for _, r := range runs {
			done = done && r.Status == schedule.RunSucceeded
		}
		if done {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	var got []string
	for _, r := range runs {
		var job struct{ Stdout string }
		if code := api(t, s.URL, s.Token, "GET", "/GPU/gpu/jobs/"+r.GPUJob, nil, &job); code != http.StatusOK {
			t.Fatalf("gpu job %s of run %s: %d", r.GPUJob, r.ID, code)
		}
		if r.Shard == nil {
			t.Fatalf("run %s has no shard", r.ID)
		}
		line := strings.TrimSpace(job.Stdout)
		if want := fmt.Sprintf("shard=%d/3 param=%s", *r.Shard, r.ShardParam); line != want {
			t.Errorf("run %s: its job printed %q, want %q", r.ID, line, want)
		}
		got = append(got, line)
	}
	sort.Strings(got)
	if want := []string{"shard=0/3 param=eu", "shard=1/3 param=us", "shard=2/3 param=ap"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("the shards' jobs printed %q, want %q", got, want)
	}
}
