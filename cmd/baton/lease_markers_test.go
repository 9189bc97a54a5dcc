package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/emulator/gcs"
	"github.com/baton-cron/baton/shared/lease"
)

// TestLeaseStatusReadsStoreMarkers: a job lease the scheduler released
// (its release marker is a Firestore document, lease.Options.Markers)
// shows as free in baton lease status when BATON_MONGO_URI is set, not as
// held until its TTL runs out.
func TestLeaseStatusReadsStoreMarkers(t *testing.T) {
	ctx := context.Background()
	srv, err := gcs.Start(ctx, gcs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	if err := srv.CreateBucket(ctx, "e2e"); err != nil {
		t.Fatal(err)
	}
	client, err := srv.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	st := emutest.Store(t)
	m := lease.NewManager(client.Bucket("e2e"), "leases/", lease.Options{Holder: "scheduler", Markers: st.LeaseMarkers()})
	l, err := m.Acquire(ctx, "job-nightly", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(batonBinary(t), "lease", "status", "--name", "job-nightly", "-o", "json")
	cmd.Env = append(os.Environ(),
		"STORAGE_EMULATOR_HOST="+srv.Host(),
		"BATON_BUCKET=e2e",
		"BATON_LOG_LEVEL=warn",
		"BATON_MONGO_URI="+emutest.MongoURI(t),
		"BATON_DATABASE="+st.DatabaseName(),
	)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("lease status: %v\n%s", err, out)
	}
	var got leaseList
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	if len(got.Leases) != 1 || got.Leases[0].State != "free" {
		t.Errorf("lease status: %s; want job-nightly free (released by its marker)", out)
	}
}
