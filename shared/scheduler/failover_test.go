package scheduler_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// deadRun writes what an executor that died mid-run leaves behind: a
// running run whose last heartbeat was at hb, with sweepAt at the end of its
// heartbeat's validity, and a job lease that nobody renews.
func (b *bundle) deadRun(t *testing.T, s schedule.Schedule, fire, hb time.Time, epoch int64) string {
	t.Helper()
	id := schedule.RunID(s.ID, fire, schedule.SourceScheduled, 1)
	doc := bson.D{
		{Key: "_id", Value: id}, {Key: "scheduleId", Value: s.ID}, {Key: "fireTime", Value: fire},
		{Key: "source", Value: schedule.SourceScheduled}, {Key: "status", Value: schedule.RunRunning},
		{Key: "attempt", Value: 1}, {Key: "holder", Value: "dead-host"}, {Key: "epoch", Value: epoch},
		{Key: "createdAt", Value: fire}, {Key: "startedAt", Value: fire}, {Key: "heartbeatAt", Value: hb},
		{Key: "sweepAt", Value: hb.Add(s.LeaseTTL.D() + 2*time.Second)}, {Key: "fence", Value: epoch},
	}
	if ok, err := b.store.Collection(schedule.RunsCollection).InsertIdempotent(context.Background(), doc); err != nil || !ok {
		t.Fatal(ok, err)
	}
	return id
}

func TestFailover(t *testing.T) {
	t.Run("stopped heartbeat fails and retries", func(t *testing.T) {
		b := setup(t)
		key, g := newGate(t, 0)
		s := b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "0 0 1 1 *", Target: gateTarget(key),
			Retry: schedule.Retry{MaxAttempts: 2, Backoff: schedule.Duration(time.Minute)}})
		fire := t0.Add(-10 * time.Minute)
		id := b.deadRun(t, s, fire, fire.Add(time.Minute), 7)
		sum := b.tick(t) // t0: the heartbeat is 9 minutes old
		if sum.Failed != 1 || sum.Retried != 1 {
			t.Fatalf("summary failed %d retried %d, want 1 and 1", sum.Failed, sum.Retried)
		}
		b.clock.Add(61 * time.Second)
		if sum := b.tick(t); sum.Recovered != 1 || sum.Succeeded != 1 {
			t.Fatalf("retry tick: %+v", sum)
		}
		runs := b.runs(t, "job")
		var got []string
		for _, r := range runs {
			got = append(got, fmt.Sprintf("%s %s a%d %s", r.ID, r.Source, r.Attempt, r.Status))
		}
		want := []string{id + " scheduled a1 failed", id + "-a2 retry a2 succeeded"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("runs (-want,+got):\n%s", diff)
		}
		if !strings.Contains(runs[0].Error, "heartbeat stopped") {
			t.Errorf("failed run's error %q does not say the heartbeat stopped", runs[0].Error)
		}
		if g.calls.Load() != 1 {
			t.Errorf("executions %d, want 1 (the retry)", g.calls.Load())
		}
	})
	t.Run("no retry when the policy says one attempt", func(t *testing.T) {
		b := setup(t)
		s := b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "0 0 1 1 *", Target: gateTarget("unused")})
		fire := t0.Add(-10 * time.Minute)
		b.deadRun(t, s, fire, fire, 1)
		if sum := b.tick(t); sum.Failed != 1 || sum.Retried != 0 {
			t.Fatalf("summary failed %d retried %d, want 1 and 0", sum.Failed, sum.Retried)
		}
		if n := len(b.runs(t, "job")); n != 1 {
			t.Errorf("%d runs, want 1", n)
		}
	})
	t.Run("a live heartbeat is left alone", func(t *testing.T) {
		b := setup(t)
		s := b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "0 0 1 1 *", Target: gateTarget("unused")})
		b.deadRun(t, s, t0.Add(-10*time.Second), t0.Add(-5*time.Second), 1)
		if sum := b.tick(t); sum.Failed != 0 {
			t.Fatalf("failed %d runs whose heartbeat is fresh", sum.Failed)
		}
	})
	t.Run("a stale heartbeat under a live job lease is left alone", func(t *testing.T) {
		b := setup(t)
		s := b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "0 0 1 1 *", Target: gateTarget("unused")})
		l, err := b.leases.Acquire(context.Background(), scheduler.JobLease("job"), 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		// Cleanup only: the dead run is what the test sweeps.
		defer func() { _ = l.Release(context.Background()) }()
		fire := t0.Add(-10 * time.Minute)
		b.deadRun(t, s, fire, fire, l.Epoch())
		if sum := b.tick(t); sum.Failed != 0 {
			t.Fatalf("failed over a run whose executor still holds the job lease")
		}
	})
}

// TestFailoverNotStarvedByLiveRuns: stale runs whose job lease still lives
// are read first (their sweepAt is oldest) and left alone. More of them
// than one sweep reads must not keep a run whose executor died from ever
// being failed over.
func TestFailoverNotStarvedByLiveRuns(t *testing.T) {
	b := setup(t, func(c *scheduler.Config) { c.PageSize = 2 })
	fire := t0.Add(-10 * time.Minute)
	for i := range 3 {
		id := fmt.Sprintf("live%d", i)
		s := b.addSchedule(t, schedule.Schedule{ID: id, Cron: "0 0 1 1 *", Target: gateTarget("unused")})
		l, err := b.leases.Acquire(context.Background(), scheduler.JobLease(id), 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		// Cleanup only: the dead run is what the test sweeps.
		defer func() { _ = l.Release(context.Background()) }()
		b.deadRun(t, s, fire, fire, l.Epoch()) // oldest heartbeats: first in the sweep's order
	}
	dead := b.addSchedule(t, schedule.Schedule{ID: "dead", Cron: "0 0 1 1 *", Target: gateTarget("unused")})
	b.deadRun(t, dead, fire, fire.Add(time.Minute), 1)
	for range 3 {
		b.tick(t)
	}
	if runs := b.runs(t, "dead"); len(runs) != 1 || runs[0].Status != schedule.RunFailed {
		t.Fatalf("the dead executor's run after 3 ticks: %+v, want it failed over", runs)
	}
	for i := range 3 {
		if runs := b.runs(t, fmt.Sprintf("live%d", i)); len(runs) != 1 || runs[0].Status != schedule.RunRunning {
			t.Errorf("live%d: %+v, want its run still running (its job lease lives)", i, runs)
		}
	}
}

func TestHTTPTarget(t *testing.T) {
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		if r.URL.Path == "/bad" {
			http.Error(w, "nope", http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	b := setup(t, func(c *scheduler.Config) { c.AllowedTargets = []string{u.Host} })
	target := func(path string) schedule.Target {
		return schedule.Target{Type: schedule.TargetHTTP, HTTP: &schedule.HTTPTarget{URL: srv.URL + path, Headers: map[string]string{"X-Custom": "yes"}}}
	}
	b.addSchedule(t, schedule.Schedule{ID: "ok", Cron: "* * * * *", Target: target("/ok")})
	b.clock.Set(t0.Add(time.Minute + time.Second))
	if sum := b.tick(t); sum.Succeeded != 1 {
		t.Fatalf("summary %+v", sum)
	}
	h := <-got
	if h.Get(scheduler.HeaderRunID) != "ok@20260302T090100Z" || h.Get(scheduler.HeaderFireTime) != "2026-03-02T09:01:00Z" || h.Get("X-Custom") != "yes" {
		t.Errorf("headers %v", h)
	}
	// The job lease's fencing token, as the run records it.
	if runs := b.runs(t, "ok"); h.Get("X-Baton-Fence") != fmt.Sprintf("job-ok:%d", runs[0].Epoch) || runs[0].Epoch < 1 {
		t.Errorf("X-Baton-Fence %q, want job-ok:<the run's epoch %d>", h.Get("X-Baton-Fence"), runs[0].Epoch)
	}
	// The allowlist shrank after the schedule was written: refused at
	// execution, nothing sent.
	b2 := setup(t, func(c *scheduler.Config) { c.AllowedTargets = []string{"example.com"} })
	b2.addSchedule(t, schedule.Schedule{ID: "ssrf", Cron: "* * * * *", Target: target("/ok")})
	b2.clock.Set(t0.Add(time.Minute + time.Second))
	b2.tick(t)
	runs := b2.runs(t, "ssrf")
	if len(runs) != 1 || runs[0].Status != schedule.RunFailed || !strings.Contains(runs[0].Error, "BATON_ALLOWED_TARGETS") {
		t.Errorf("disallowed host: runs %+v", runs)
	}
	select {
	case <-got:
		t.Error("a request reached a host that is not on the allowlist")
	default:
	}
}

// TestQueuedSiblingsAreNotSweptIntoTheirOwnOverlap: one tick executes a
// schedule's catch-up runs one after another under the job lease. Runs
// still waiting when the decider's reservation ends are the sweep's to
// recover; executing them then meets the job lease held by their own
// sibling, and the overlap policy (skip here) used to drop them. A
// recovered run whose schedule has a live running run waits for it.
func TestQueuedSiblingsAreNotSweptIntoTheirOwnOverlap(t *testing.T) {
	b := setup(t)
	key, g := newGate(t, 1)
	b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "* * * * *", Overlap: schedule.OverlapSkip,
		Catchup: schedule.CatchupAll, Target: gateTarget(key)})
	done := startBlockedTick(t, b, g, 3) // 09:01, 09:02, 09:03 decided; 09:01 blocks
	// The reservation (1 minute) ends while 09:01 still runs.
	b.clock.Set(t0.Add(4*time.Minute + 30*time.Second))
	b.tick(t)
	g.open()
	<-done
	got := fireTimesOf(b.runs(t, "job"))
	want := []string{"09:01 catchup succeeded", "09:02 scheduled succeeded", "09:03 scheduled succeeded", "09:04 scheduled skipped"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("runs (-want,+got):\n%s", diff)
	}
}
