package catalog_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/baton-cron/baton/shared/schedule"
)

// TestFireAggregateKeepsItsShardCount: GET /runs/{fireId} of a fire of a
// sharded schedule whose shards were edited since the fire. The fire's
// aggregate is over the shards it fanned out into (the count its runs
// carry), not the schedule's current count: with that, a fire of 2 shards,
// both succeeded, would read as 4 shards with 2 pending for ever.
func TestFireAggregateKeepsItsShardCount(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if res := b.do(t, http.MethodPost, "/schedules", `{"id":"sh","cron":"0 10 * * *","shards":2,"target":{"type":"builtin","builtin":{"name":"noop"}}}`); res.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	fire := schedule.RunID("sh", t0, schedule.SourceScheduled, 1)
	runs := b.st.Collection(schedule.RunsCollection)
	for i := range 2 {
		sh := i
		r := schedule.Run{ID: schedule.ShardRunID(fire, i), ScheduleID: "sh", FireTime: t0, Source: schedule.SourceScheduled,
			Status: schedule.RunSucceeded, Attempt: 1, CreatedAt: t0, StartedAt: t0, FinishedAt: t0, Shard: &sh, Shards: 2}
		if _, err := runs.InsertIdempotent(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if res := b.do(t, http.MethodPatch, "/schedules/sh", `{"shards":4}`); res.Status != http.StatusOK {
		t.Fatalf("edit shards: %d %s", res.Status, res.Body)
	}
	res := b.do(t, http.MethodGet, "/runs/"+fire, "")
	if res.Status != http.StatusOK {
		t.Fatalf("GET /runs/%s: %d %s", fire, res.Status, res.Body)
	}
	var agg schedule.Run
	if err := json.Unmarshal([]byte(res.Body), &agg); err != nil {
		t.Fatal(err)
	}
	if agg.Status != schedule.RunSucceeded || agg.Shards != 2 || len(agg.ShardRuns) != 2 {
		t.Errorf("aggregate: status %s, shards %d, %d shard runs; want succeeded over the fire's 2 shards: %s", agg.Status, agg.Shards, len(agg.ShardRuns), res.Body)
	}
}
