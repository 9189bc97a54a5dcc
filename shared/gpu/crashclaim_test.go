package gpu_test

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// TestDispatcherCrashMidClaim plays a dispatcher that dies part-way
// through the claim protocol, by making its writes by hand and never the
// rest. Died after step 1 (slot claimed, no job): the slot is unusable
// until its lease runs out, then dispatch uses it again. Died after step 2
// (job claimed, never sent): the job's lease runs out and the sweep
// requeues it with attempts+1, and it runs.
func TestDispatcherCrashMidClaim(t *testing.T) {
	b := setup(t, setupOpts{workers: 1})
	if err := b.d.Init(b.ctx); err != nil {
		t.Fatal(err)
	}
	slotID := gpu.SlotID(b.workers[0].URL, 0)
	lease := b.clock.Now().Add(b.d.LeaseTTL())

	// Step 1 only: the slot is claimed (epoch+1) and then nothing.
	var slot gpu.Slot
	if err := b.st.Collection(mongostore.GPUSlotsCollection).FindOneAndUpdate(b.ctx, bson.D{{Key: "_id", Value: slotID}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "leaseUntil", Value: lease}}}, {Key: "$inc", Value: bson.D{{Key: "epoch", Value: 1}}}}, &slot); err != nil {
		t.Fatal(err)
	}
	if j := b.enqueue(gpu.EnqueueRequest{ID: "after-step1", Payload: "true"}); j.Status != gpu.StatusQueued {
		t.Fatalf("with the only slot mid-claim the job is %s, want queued", j.Status)
	}
	b.clock.Advance(b.d.LeaseTTL() + time.Second)
	if _, _, err := b.d.Sweep(b.ctx); err != nil {
		t.Fatal(err)
	}
	if j := b.waitStatus("after-step1", gpu.StatusSucceeded); j.Attempts != 0 {
		t.Errorf("after-step1: attempts=%d, want 0 (it never ran before)", j.Attempts)
	}

	// Steps 1 and 2: slot and job claimed and stamped, never sent or linked.
	b.waitFor("the slot to be free", func() bool { s, _ := b.d.Slots(b.ctx); return len(s) == 1 && s[0].State == "free" })
	if err := b.st.Collection(mongostore.GPUSlotsCollection).FindOneAndUpdate(b.ctx, bson.D{{Key: "_id", Value: slotID}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "leaseUntil", Value: b.clock.Now().Add(b.d.LeaseTTL())}}}, {Key: "$inc", Value: bson.D{{Key: "epoch", Value: 1}}}}, &slot); err != nil {
		t.Fatal(err)
	}
	now := b.clock.Now()
	leaseUntil := now.Add(b.d.LeaseTTL())
	orphan := gpu.Job{ID: "after-step2", Status: gpu.StatusDispatched, MaxAttempts: 3, Timeout: 60e9, Payload: "true", Source: gpu.SourceAPI,
		CreatedAt: now, Slot: slotID, Worker: b.workers[0].URL, Epoch: slot.Epoch, LeaseUntil: &leaseUntil, DispatchedAt: &now}
	if _, err := b.st.Collection(mongostore.GPUJobsCollection).InsertIdempotent(b.ctx, orphan); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(b.d.LeaseTTL() + time.Second)
	requeued, dead, err := b.d.Sweep(b.ctx)
	if err != nil || requeued != 1 || dead != 0 {
		t.Fatalf("sweep: requeued=%d dead=%d err=%v, want 1, 0", requeued, dead, err)
	}
	if j := b.waitStatus("after-step2", gpu.StatusSucceeded); j.Attempts != 1 {
		t.Errorf("after-step2: attempts=%d, want 1 (its lease expired once)", j.Attempts)
	}
	if s := b.workers[0].Stats(); s.Refused != 0 || s.Runs != 2 {
		t.Errorf("worker: %+v, want 2 runs and no refusals", s)
	}
}
