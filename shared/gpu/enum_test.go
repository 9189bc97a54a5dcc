package gpu_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/internal/enumtest"
	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// TestJobStatusEnum: AllJobStatuses holds exactly the JobStatus constants
// declared in gpumodel, which this package aliases (read from the source,
// so a status added without being listed fails here), Valid accepts those and nothing else, and each
// is the plain string on the wire. Terminal answers only for listed
// statuses.
func TestJobStatusEnum(t *testing.T) {
	t.Parallel()
	enumtest.Check(t, "gpumodel", "JobStatus", gpu.AllJobStatuses(), gpu.JobStatus.Valid, "pending", "done", "canceled")
	var terminal []gpu.JobStatus
	for _, s := range gpu.AllJobStatuses() {
		if gpu.Terminal(s) {
			terminal = append(terminal, s)
		}
	}
	want := []gpu.JobStatus{gpu.StatusSucceeded, gpu.StatusFailed, gpu.StatusDead, gpu.StatusCancelled}
	if diff := cmp.Diff(want, terminal); diff != "" {
		t.Errorf("terminal statuses (-want,+got):\n%s", diff)
	}
	if gpu.Terminal("") || gpu.Terminal("Succeeded") {
		t.Error("Terminal is true for a status that is not one")
	}
}

// TestTypedJobStatusMatchesStoredStrings: gpu.JobStatus is the plain string
// in the database. The dispatcher's filters, built with the typed
// constants (a bson.D, and the active statuses' $in list), find jobs
// written with plain strings, and a typed job is stored as a string.
func TestTypedJobStatusMatchesStoredStrings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	jobs := emutest.Store(t).Collection(mongostore.GPUJobsCollection)
	if _, err := jobs.InsertIdempotent(ctx, bson.D{{Key: "_id", Value: "old"}, {Key: "status", Value: "dispatched"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.InsertIdempotent(ctx, gpu.Job{ID: "new", Status: gpu.StatusRunning}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		filter bson.D
		want   int64
	}{
		{"typed filter, plain document", bson.D{{Key: "status", Value: gpu.StatusDispatched}}, 1},
		{"typed $in", bson.D{{Key: "status", Value: bson.D{{Key: "$in", Value: bson.A{gpu.StatusDispatched, gpu.StatusRunning}}}}}, 2},
		{"plain filter, typed document", bson.D{{Key: "status", Value: "running"}}, 1},
		{"typed filter, no match", bson.D{{Key: "status", Value: gpu.StatusQueued}}, 0},
	} {
		n, err := jobs.Count(ctx, tc.filter)
		if err != nil || n != tc.want {
			t.Errorf("%s: count %v = %d, %v; want %d", tc.name, tc.filter, n, err, tc.want)
		}
	}
	var old gpu.Job
	if err := jobs.Get(ctx, "old", &old); err != nil || old.Status != gpu.StatusDispatched {
		t.Errorf("plain document read as a Job: status %q, %v; want dispatched", old.Status, err)
	}
	var raw bson.Raw
	if err := jobs.Get(ctx, "new", &raw); err != nil {
		t.Fatal(err)
	}
	if got, ok := raw.Lookup("status").StringValueOK(); !ok || got != "running" {
		t.Errorf("typed job stored status as %v, want the string \"running\"", raw.Lookup("status"))
	}
}
