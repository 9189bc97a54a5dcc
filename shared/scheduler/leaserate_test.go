package scheduler_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// TestEverySecondScheduleWritesItsLeaseOnceASecond is finding 9 of issue
// 26: Cloud Storage allows about one write per second to one object
// (https://cloud.google.com/storage/quotas) and answers 429 to more. A
// schedule that fires every second takes and releases its job lease every
// second; with a release that wrote the lease object, that was two writes a
// second, and the strict emulator answered 429. Through a daemon on the
// real clock and the strict GCS emulator, the job lease object is written
// once per run, at most once a second, and meets no 429, and every fire
// runs.
//
// "At most once a second" is read from the emulator's applied-write times,
// not only from the 429s: its limiter lets a burst of two through after a
// quiet second (as Cloud Storage may), so a manager that wrote twice in a
// second now and then would meet no refusal here and many in the cloud.
// Every object the run path writes is checked: the job lease's (at its
// spread name, leases/hh/job-<id>.json), its release marker and the tick
// lease's. Without the manager's write spacing (lease.Options.ObjectWriteGap,
// Manager.space) the job lease's acquire follows the last run's marker
// write at once and the spacing check fails.
// writeGapFloor is the least spacing between two applied writes to one
// object that counts as "once a second": a second less the latency that
// separates a send from its application.
const writeGapFloor = 900 * time.Millisecond

func TestEverySecondScheduleWritesItsLeaseOnceASecond(t *testing.T) {
	s := emutest.Store(t)
	client, bucket := emutest.GCS(t)
	srv := emutest.GCSServer(t)
	if err := s.EnsureIndexes(context.Background(), mongostore.SchedulerIndexes...); err != nil {
		t.Fatal(err)
	}
	key, g := newGate(t, 0)
	insertNow(t, s, schedule.Schedule{ID: "every-second", Cron: "*/1 * * * * *", Target: gateTarget(key)})
	m := lease.NewManager(client.Bucket(bucket), "leases/", lease.Options{Holder: "daemon"})
	start := time.Now()
	d := startDaemon(t, s, m, nil)
	waitFor(t, d.lead, "the daemon to lead")
	const fires = 6
	for g.calls.Load() < fires {
		waitFor(t, g.started, "a run of the every-second schedule")
	}
	d.cancel()
	<-d.done
	elapsed := time.Since(start)

	jobObj := m.ObjectName(scheduler.JobLease("every-second"))
	if !strings.HasPrefix(jobObj, "leases/"+lease.SpreadDir(scheduler.JobLease("every-second"))) {
		t.Errorf("job lease object %s: want it under its hash directory", jobObj)
	}
	applied, refused := srv.ObjectWrites(bucket, jobObj)
	t.Logf("%s in %s: %d writes, %d refused; %d runs", jobObj, elapsed.Round(time.Millisecond), applied, refused, g.calls.Load())
	if refused != 0 {
		t.Errorf("the job lease object met %d 429s: it was written faster than GCS allows", refused)
	}
	if limit := int64(elapsed/time.Second) + 1; applied > limit {
		t.Errorf("%d writes to %s in %s: more than one a second", applied, jobObj, elapsed)
	}
	// One write per run (its acquire): a release that wrote the object too
	// made two, which spacing alone can only spread out by letting the
	// runs fall behind their fire times.
	if runs := g.calls.Load(); applied < runs || applied > runs+1 {
		t.Errorf("%d writes to %s for %d runs: want one per run", applied, jobObj, runs)
	}
	if _, tickRefused := srv.ObjectWrites(bucket, "leases/"+scheduler.TickLease+".json"); tickRefused != 0 {
		t.Errorf("the tick lease object met %d 429s", tickRefused)
	}
	for _, obj := range []string{jobObj, jobObj + ".released", m.ObjectName(scheduler.TickLease)} {
		ts := srv.ObjectWriteTimes(bucket, obj)
		for i := 1; i < len(ts); i++ {
			// The manager spaces its sends a second apart; what the server
			// applies can come a little closer (the earlier request's own
			// latency), never half a second.
			if gap := ts[i].Sub(ts[i-1]); gap < writeGapFloor {
				t.Errorf("%s: writes %d and %d applied %s apart; want one a second", obj, i-1, i, gap)
			}
		}
		t.Logf("%s: %d writes applied", obj, len(ts))
	}
	var skipped []bson.M
	if err := s.Collection(schedule.RunsCollection).Find(context.Background(), bson.D{{Key: "scheduleId", Value: "every-second"}, {Key: "status", Value: schedule.RunSkipped}}, &skipped); err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 0 {
		t.Errorf("%d fires skipped; want every fire run: %v", len(skipped), skipped)
	}
}

// TestBackToBackAcquireWaitsASecond is the case where the schedule's
// period does not space the writes by itself: a daemon that fell behind (its
// first run held the job lease for two renewals, past two fire times) runs
// the fires it owes one after another, each taking the job lease as soon as
// the last released it. The manager's write spacing
// (lease.Options.ObjectWriteGap, Manager.space) holds every acquire to a
// second after the previous write to the object; without it they come
// milliseconds apart, which the strict emulator refuses after its burst of
// two, and Cloud Storage would too. The test reads the applied write times;
// deleting the spacing fails it.
func TestBackToBackAcquireWaitsASecond(t *testing.T) {
	s := emutest.Store(t)
	client, bucket := emutest.GCS(t)
	srv := emutest.GCSServer(t)
	ctx := context.Background()
	if err := s.EnsureIndexes(ctx, mongostore.SchedulerIndexes...); err != nil {
		t.Fatal(err)
	}
	key, g := newGate(t, 0)
	insertNow(t, s, schedule.Schedule{ID: "back-to-back", Cron: "*/1 * * * * *", Target: gateTarget(key),
		Overlap: schedule.OverlapBufferOne, LeaseTTL: schedule.Duration(schedule.MinLeaseTTL)})
	m := lease.NewManager(client.Bucket(bucket), "leases/", lease.Options{Holder: "daemon"})
	jobObj := m.ObjectName(scheduler.JobLease("back-to-back"))
	var once sync.Once
	waited := make(chan struct{})
	d := startDaemon(t, s, m, func(cfg *scheduler.DaemonConfig) {
		scheduler.SetBeforeRelease(cfg.Engine, func(id string) {
			once.Do(func() {
				defer close(waited)
				// Hold the first run's lease until it has been renewed twice
				// (a 3 s TTL renews every second): two fire times have
				// passed meanwhile, and the release is followed by their
				// acquires. The renewals are the signal, polled on the
				// emulator's record.
				deadline := time.Now().Add(10 * time.Second)
				for time.Now().Before(deadline) {
					if len(srv.ObjectWriteTimes(bucket, jobObj)) >= 3 {
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
				t.Errorf("schedule %s: the held job lease was not renewed twice within 10s", id)
			})
		})
	})
	waitFor(t, d.lead, "the daemon to lead")
	<-waited
	for g.calls.Load() < 3 {
		waitFor(t, g.started, "a run after the back-to-back acquire")
	}
	d.cancel()
	<-d.done
	ts := srv.ObjectWriteTimes(bucket, jobObj)
	for i := 1; i < len(ts); i++ {
		if gap := ts[i].Sub(ts[i-1]); gap < writeGapFloor {
			t.Errorf("%s: writes %d and %d applied %s apart; want one a second", jobObj, i-1, i, gap)
		}
	}
	if _, refused := srv.ObjectWrites(bucket, jobObj); refused != 0 {
		t.Errorf("the job lease object met %d 429s", refused)
	}
	t.Logf("%s: %d writes applied, %d runs", jobObj, len(ts), g.calls.Load())
}
