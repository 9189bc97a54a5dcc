package scheduler_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// TestHeartbeatUnderContentionKeepsTheRun: a run's heartbeat whose every
// attempt meets Firestore's Aborted (112) was not applied, and refused
// nothing: the run still holds its claim. It used to be taken for a
// conflict ("failed over, or fenced out"), and the target's call was
// cancelled mid-run. Now the next beat tries again, and the run ends
// succeeded, its target called once.
func TestHeartbeatUnderContentionKeepsTheRun(t *testing.T) {
	b := setup(t)
	key, g := newGate(t, 1)
	b.addSchedule(t, schedule.Schedule{ID: "hb", Cron: "* * * * *", LeaseTTL: schedule.Duration(3 * time.Second), Target: gateTarget(key)})
	done := startBlockedTick(t, b, g, 1)

	// Every runs update answers 112 until one heartbeat has used all its
	// attempts; the fail point's count says when (there is no other
	// signal: the refused beats change nothing).
	admin := emutest.RawClient(t, emutest.MongoURI(t)).Database("admin")
	arm := func() int64 {
		t.Helper()
		var res struct {
			Count int64 `bson:"count"`
		}
		cmd := bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"}, {Key: "data", Value: bson.D{
			{Key: "failCommands", Value: bson.A{"update"}}, {Key: "namespace", Value: b.store.DatabaseName() + "." + schedule.RunsCollection},
			{Key: "errorCode", Value: int32(112)}}}}
		if err := admin.RunCommand(context.Background(), cmd).Decode(&res); err != nil {
			t.Fatalf("arm the fail point: %v", err)
		}
		return res.Count
	}
	t.Cleanup(func() { emutest.FailCommandOff(t, b.store) })
	base := arm()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for arm()-base < mongostore.WriteAttempts {
		if time.Now().After(deadline) {
			t.Fatal("no heartbeat met the fail point within 30s")
		}
		<-tick.C
	}
	emutest.FailCommandOff(t, b.store)
	g.open()
	<-done
	var got []schedule.RunStatus
	for _, r := range b.runs(t, "hb") {
		got = append(got, r.Status)
	}
	if len(got) != 1 || got[0] != schedule.RunSucceeded {
		t.Errorf("runs %v; want one, succeeded (the heartbeat's contention refused nothing)", got)
	}
	if n := g.calls.Load(); n != 1 {
		t.Errorf("target called %d times; want once", n)
	}
}
