package scheduler_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/schedule"
)

// TestFailoverDoesNotWakeARetryBeforeItsBackoff: the failover wakes the
// runs queued behind a dead holder (wakeBehind), so that they need not
// wait for their reservation. A retry of an earlier failure that is
// pending for its backoff is not behind the holder: it is not due, and
// waking it would run it before its backoff, which nothing else does. A
// retry marked waiting (it came due and met the lease) is behind it.
func TestFailoverDoesNotWakeARetryBeforeItsBackoff(t *testing.T) {
	b := setup(t)
	key, g := newGate(t, 0)
	s := b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "0 0 1 1 *", Overlap: schedule.OverlapSkip, Target: gateTarget(key)})
	ttl := s.LeaseTTL.D()
	hb := t0.Add(-ttl - lease.DefaultSkew - time.Second)
	f1 := t0.Add(-time.Minute)
	b.deadRun(t, s, f1, hb, 7)
	// A retry of an older fire, recorded with a ten-minute backoff.
	f0 := t0.Add(-2 * time.Minute)
	due := t0.Add(10 * time.Minute)
	retryID := schedule.RunID(s.ID, f0, schedule.SourceScheduled, 1) + "-a2"
	doc := bson.D{
		{Key: "_id", Value: retryID}, {Key: "scheduleId", Value: s.ID}, {Key: "fireTime", Value: f0},
		{Key: "source", Value: schedule.SourceRetry}, {Key: "status", Value: schedule.RunPending},
		{Key: "attempt", Value: 2}, {Key: "createdAt", Value: t0.Add(-30 * time.Second)}, {Key: "heartbeatAt", Value: t0.Add(-30 * time.Second)},
		{Key: "sweepAt", Value: due},
	}
	if ok, err := b.store.Collection(schedule.RunsCollection).InsertIdempotent(context.Background(), doc); err != nil || !ok {
		t.Fatal(ok, err)
	}
	// A retry that came due and met the dead holder's lease: marked
	// waiting, it is behind the holder, and goes in this sweep.
	fw := t0.Add(-3 * time.Minute)
	waitingID := schedule.RunID(s.ID, fw, schedule.SourceScheduled, 1) + "-a2"
	doc = bson.D{
		{Key: "_id", Value: waitingID}, {Key: "scheduleId", Value: s.ID}, {Key: "fireTime", Value: fw},
		{Key: "source", Value: schedule.SourceRetry}, {Key: "status", Value: schedule.RunPending},
		{Key: "attempt", Value: 2}, {Key: "createdAt", Value: t0.Add(-2 * time.Minute)}, {Key: "heartbeatAt", Value: t0.Add(-2 * time.Minute)},
		{Key: "sweepAt", Value: t0.Add(time.Minute)}, {Key: "waiting", Value: true},
	}
	if ok, err := b.store.Collection(schedule.RunsCollection).InsertIdempotent(context.Background(), doc); err != nil || !ok {
		t.Fatal(ok, err)
	}
	sum := b.tick(t)
	t.Logf("sweep: %+v", sum)
	if sum.Failed != 1 {
		t.Fatalf("sweep: %+v; want the dead run failed over", sum)
	}
	if w := b.run(t, waitingID); w.Status != schedule.RunSucceeded {
		t.Errorf("waiting retry behind the dead holder: %s %q, want succeeded in the failover's sweep", w.Status, w.Reason)
	}
	r := b.run(t, retryID)
	if r.Status != schedule.RunPending || g.calls.Load() != 1 {
		t.Errorf("retry due at %s, at %s: %s (target ran %d times); want still pending: its backoff has not passed",
			due.Format("15:04:05"), t0.Format("15:04:05"), r.Status, g.calls.Load())
	}
}
