package mongostore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/gpu/gpumodel"
	"github.com/baton-cron/baton/shared/store"
)

// TestClaimTenantJobSortsNoPayloads: Firestore caps a query's memory at
// 128 MiB and a job's payload may be 256 KiB, so the tenant claim must
// never sort whole job documents in memory. That happens when a sorted
// query's filter puts gpuType $in ahead of the sort fields: the index
// (status, gpuType, tenant, priority, createdAt, _id) then cannot give the
// order. The claim with two types must send no such query: every sorted
// command's filter is equalities on the index's prefix, and a sorted find
// projects the sort keys alone. It still claims the tenant's best job of
// the types asked.
func TestClaimTenantJobSortsNoPayloads(t *testing.T) {
	ctx := context.Background()
	st, log := openRecorded(t)
	var b store.Backend = st
	q := b.GPU()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	big := strings.Repeat("x", 200<<10)
	for _, j := range []gpumodel.Job{
		{ID: "a-low", Tenant: "a", Priority: 0, CreatedAt: t0},
		{ID: "a-l4-high", Tenant: "a", GPUType: "nvidia-l4", Priority: 5, CreatedAt: t0.Add(time.Hour)},
		{ID: "a-h100", Tenant: "a", GPUType: "nvidia-h100", Priority: 9, CreatedAt: t0},
	} {
		j.Status, j.MaxAttempts, j.Payload, j.Source = gpumodel.StatusQueued, 3, big, "api"
		if _, err := q.Enqueue(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	log.reset()
	for _, want := range []string{"a-l4-high", "a-low"} {
		job, err := q.ClaimTenantJob(ctx, "a", []string{"", "nvidia-l4"}, gpumodel.Slot{ID: "s0", Worker: "w", Epoch: 1}, "h", t0, t0.Add(time.Minute))
		if err != nil || job.ID != want {
			t.Fatalf("claim = %s, %v; want %s", job.ID, err, want)
		}
	}
	sent := log.commands()
	if len(sent) == 0 {
		t.Fatal("no command recorded")
	}
	for _, cmd := range sent {
		name := cmd.Index(0).Key()
		var filter, sort, projection bson.Raw
		switch name {
		case "find":
			filter, _ = cmd.Lookup("filter").DocumentOK()
			sort, _ = cmd.Lookup("sort").DocumentOK()
			projection, _ = cmd.Lookup("projection").DocumentOK()
		case "findAndModify":
			filter, _ = cmd.Lookup("query").DocumentOK()
			sort, _ = cmd.Lookup("sort").DocumentOK()
		default:
			continue
		}
		if sort == nil {
			continue
		}
		if v, err := filter.LookupErr("gpuType"); err == nil && v.Type != bson.TypeString {
			t.Errorf("%s sorts with gpuType %v ahead of the sort fields; want an equality (the index gives the order)", name, v)
		}
		if name == "find" {
			if projection == nil {
				t.Errorf("a sorted find with no projection reads whole jobs: %v", cmd)
			} else if _, err := projection.LookupErr("payload"); err == nil {
				t.Errorf("a sorted find's projection names payload: %v", projection)
			}
		}
	}
}
