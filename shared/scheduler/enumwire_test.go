package scheduler_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/schedule"
)

// TestTypedRunFieldsMatchStoredStrings: the typed run status and source
// (schedule.RunStatus, schedule.Source) are the plain strings in the
// database. Filters built with the typed constants, in a bson.D and in an
// $in list as this package builds them, find documents written with plain
// strings (as every run stored before the types were named was), a typed
// run is stored as strings, and plain strings decode into the types.
func TestTypedRunFieldsMatchStoredStrings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	runs := emutest.Store(t).Collection(schedule.RunsCollection)
	if _, err := runs.InsertIdempotent(ctx, bson.D{{Key: "_id", Value: "old"}, {Key: "scheduleId", Value: "s"}, {Key: "status", Value: "pending"}, {Key: "source", Value: "manual"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := runs.InsertIdempotent(ctx, schedule.Run{ID: "new", ScheduleID: "s", Status: schedule.RunSucceeded, Source: schedule.SourceRetry}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		filter bson.D
		want   int64
	}{
		{"typed filter, plain document", bson.D{{Key: "status", Value: schedule.RunPending}, {Key: "source", Value: schedule.SourceManual}}, 1},
		{"typed $in", bson.D{{Key: "status", Value: bson.D{{Key: "$in", Value: bson.A{schedule.RunPending, schedule.RunSucceeded}}}}}, 2},
		{"plain filter, typed document", bson.D{{Key: "status", Value: "succeeded"}, {Key: "source", Value: "retry"}}, 1},
		{"typed filter, no match", bson.D{{Key: "status", Value: schedule.RunRunning}}, 0},
	} {
		n, err := runs.Count(ctx, tc.filter)
		if err != nil || n != tc.want {
			t.Errorf("%s: count %v = %d, %v; want %d", tc.name, tc.filter, n, err, tc.want)
		}
	}
	var old schedule.Run
	if err := runs.Get(ctx, "old", &old); err != nil || old.Status != schedule.RunPending || old.Source != schedule.SourceManual {
		t.Errorf("plain document read as a Run: status %q, source %q, %v; want pending, manual", old.Status, old.Source, err)
	}
	var raw bson.Raw
	if err := runs.Get(ctx, "new", &raw); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"status": "succeeded", "source": "retry"} {
		if got, ok := raw.Lookup(key).StringValueOK(); !ok || got != want {
			t.Errorf("typed run stored %s as %v, want the string %q", key, raw.Lookup(key), want)
		}
	}
}
