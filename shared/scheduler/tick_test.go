package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// TestExactlyOnce scripts an hour of minutes. Each minute, 20 ticks race
// and then two more arrive with the same ScheduleTime (Cloud Scheduler's
// duplicate deliveries). Every fire time must run once: none twice, none
// missing.
func TestExactlyOnce(t *testing.T) {
	b := setup(t)
	type sched struct {
		id, cron string
		key      string
		g        *gate
	}
	scheds := []*sched{{id: "every-minute", cron: "* * * * *"}, {id: "quarter", cron: "*/15 * * * *"}, {id: "odd", cron: "7,29,53 * * * *"}}
	for _, s := range scheds {
		s.key, s.g = newGate(t, 0)
		b.addSchedule(t, schedule.Schedule{ID: s.id, Cron: s.cron, Target: gateTarget(s.key)})
	}
	const minutes = 60
	for m := 1; m <= minutes; m++ {
		st := t0.Add(time.Duration(m) * time.Minute)
		b.clock.Set(st.Add(2 * time.Second)) // delivered 2s after the ScheduleTime
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := b.eng.Tick(context.Background(), st); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("minute %d: tick: %v", m, err)
		}
		for range 2 {
			b.tick(t)
		}
	}
	for _, s := range scheds {
		spec, _ := schedule.Parse(s.cron)
		want := schedule.FireTimes(spec, time.UTC, t0, t0.Add(minutes*time.Minute), 0)
		var wantIDs, gotIDs []string
		for _, ft := range want {
			wantIDs = append(wantIDs, schedule.RunID(s.id, ft, schedule.SourceScheduled, 1)+" succeeded")
		}
		for _, r := range b.runs(t, s.id) {
			gotIDs = append(gotIDs, r.ID+" "+string(r.Status))
		}
		if diff := cmp.Diff(wantIDs, gotIDs); diff != "" {
			t.Errorf("%s: runs (-want,+got):\n%s", s.id, diff)
		}
		if got := s.g.calls.Load(); got != int64(len(want)) {
			t.Errorf("%s: executed %d times for %d fire times", s.id, got, len(want))
		}
	}
}

// TestKilledTick: a tick dies after inserting runs and before advancing
// nextRunAt. The next tick neither duplicates nor loses a run.
func TestKilledTick(t *testing.T) {
	t.Run("next tick re-decides", func(t *testing.T) {
		b := setup(t)
		key, g := newGate(t, 0)
		b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "* * * * *", Target: gateTarget(key)})
		crash := errors.New("killed")
		scheduler.SetAfterInsert(b.eng, func(string) error { return crash })
		b.clock.Set(t0.Add(time.Minute + time.Second))
		if _, err := b.eng.Tick(context.Background(), time.Time{}); !errors.Is(err, crash) {
			t.Fatalf("killed tick: got %v, want %v", err, crash)
		}
		if got := fireTimesOf(b.runs(t, "job")); !cmp.Equal(got, []string{"09:01 scheduled pending"}) {
			t.Fatalf("after the kill: runs %v, want one pending", got)
		}
		if g.calls.Load() != 0 {
			t.Fatal("the killed tick executed")
		}
		scheduler.SetAfterInsert(b.eng, nil)
		b.clock.Set(t0.Add(2*time.Minute + time.Second))
		b.tick(t)
		b.clock.Add(time.Second)
		b.tick(t) // a duplicate: must change nothing
		want := []string{"09:01 scheduled succeeded", "09:02 scheduled succeeded"}
		if diff := cmp.Diff(want, fireTimesOf(b.runs(t, "job"))); diff != "" {
			t.Errorf("runs (-want,+got):\n%s", diff)
		}
		if got := g.calls.Load(); got != 2 {
			t.Errorf("executed %d times, want 2", got)
		}
	})
	t.Run("sweep recovers the orphan", func(t *testing.T) {
		// The next tick comes so late that the orphan's fire time is no
		// longer on time and catch-up none would not re-decide it: the
		// pending-run sweep executes it instead, once.
		b := setup(t)
		key, g := newGate(t, 0)
		b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "* * * * *", Catchup: schedule.CatchupNone, Target: gateTarget(key)})
		scheduler.SetAfterInsert(b.eng, func(string) error { return errors.New("killed") })
		b.clock.Set(t0.Add(time.Minute + time.Second))
		_, _ = b.eng.Tick(context.Background(), time.Time{})
		scheduler.SetAfterInsert(b.eng, nil)
		b.clock.Set(t0.Add(5*time.Minute + time.Second))
		sum := b.tick(t)
		b.tick(t)
		// 09:04 is within the 90s grace at 09:05:01: on time, not missed.
		// The tick executes 09:04 and 09:05 before its sweep finds the
		// orphan; 09:01 does not start after them (the order rule): it is
		// folded into them, recorded skipped (buffer_one, the default).
		want := []string{"09:01 scheduled skipped", "09:04 scheduled succeeded", "09:05 scheduled succeeded"}
		if diff := cmp.Diff(want, fireTimesOf(b.runs(t, "job"))); diff != "" {
			t.Errorf("runs (-want,+got):\n%s", diff)
		}
		if got := g.calls.Load(); got != 2 {
			t.Errorf("executed %d times, want 2", got)
		}
		if r := b.runs(t, "job")[0]; !strings.Contains(r.Reason, scheduler.ReasonSuperseded) {
			t.Errorf("09:01's reason %q, want it to say a later fire time has started", r.Reason)
		}
		if sum.Recovered != 1 {
			t.Errorf("summary recovered %d, want 1", sum.Recovered)
		}
	})
}

// startBlockedTick ticks at the given minute in the background and waits
// until the gate's first execution has started and is blocked.
func startBlockedTick(t *testing.T, b *bundle, g *gate, minute int) chan *scheduler.Summary {
	t.Helper()
	b.clock.Set(t0.Add(time.Duration(minute)*time.Minute + time.Second))
	done := make(chan *scheduler.Summary, 1)
	go func() {
		sum, err := b.eng.Tick(context.Background(), time.Time{})
		if err != nil {
			t.Errorf("blocked tick: %v", err)
		}
		done <- sum
	}()
	g.waitStarted(t)
	return done
}

func TestOverlapPolicies(t *testing.T) {
	t.Run("skip records a skipped run with its reason", func(t *testing.T) {
		b := setup(t)
		key, g := newGate(t, 1)
		b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "* * * * *", Overlap: schedule.OverlapSkip, Target: gateTarget(key)})
		done := startBlockedTick(t, b, g, 1)
		b.clock.Set(t0.Add(2*time.Minute + time.Second))
		sum := b.tick(t)
		if sum.Skipped != 1 || sum.Fired != 0 {
			t.Errorf("second tick: skipped %d fired %d, want 1 and 0", sum.Skipped, sum.Fired)
		}
		g.open()
		<-done
		runs := b.runs(t, "job")
		if diff := cmp.Diff([]string{"09:01 scheduled succeeded", "09:02 scheduled skipped"}, fireTimesOf(runs)); diff != "" {
			t.Log(runs)
			t.Fatalf("runs (-want,+got):\n%s", diff)
		}
		if r := runs[1].Reason; !strings.Contains(r, "overlap skip") || !strings.Contains(r, "job-job") {
			t.Errorf("skipped run's reason %q does not say why", r)
		}
	})
	t.Run("buffer_one turns 3 misfires into exactly 1 extra run", func(t *testing.T) {
		b := setup(t)
		key, g := newGate(t, 1)
		b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "* * * * *", Overlap: schedule.OverlapBufferOne, Target: gateTarget(key)})
		done := startBlockedTick(t, b, g, 1)
		for m := 2; m <= 4; m++ {
			b.clock.Set(t0.Add(time.Duration(m)*time.Minute + time.Second))
			if sum := b.tick(t); sum.Misfired != 1 {
				t.Errorf("minute %d: misfired %d, want 1", m, sum.Misfired)
			}
		}
		if s := b.getSchedule(t, "job"); !s.Misfire {
			t.Error("misfire flag not set while the run holds the lease")
		}
		g.open()
		sum := <-done
		if got := g.calls.Load(); got != 2 {
			t.Errorf("executions: %d, want 2 (the long run and one misfire run)", got)
		}
		want := []string{
			"09:01 scheduled succeeded",
			"09:02 scheduled skipped",
			"09:03 scheduled skipped",
			"09:04 scheduled skipped",
			"09:04 misfire succeeded",
		}
		runs := b.runs(t, "job")
		if diff := cmp.Diff(want, fireTimesOf(runs)); diff != "" {
			t.Errorf("runs (-want,+got):\n%s", diff)
		}
		for _, r := range runs {
			if r.Status == schedule.RunSkipped && !strings.Contains(r.Reason, scheduler.ReasonBuffered) {
				t.Errorf("run %s: reason %q, want it to say buffered", r.ID, r.Reason)
			}
		}
		if s := b.getSchedule(t, "job"); s.Misfire {
			t.Error("misfire flag still set after the extra run")
		}
		if sum.Fired != 2 {
			t.Errorf("holder's tick fired %d, want 2", sum.Fired)
		}
	})
	t.Run("buffer_one misfire set after the holder's last check is not lost", func(t *testing.T) {
		// The next fire time finds the run still running and buffers it,
		// but sets the flag only after the holder has finished, checked
		// the flag, released and checked again. The buffering side's own
		// acquire after setting the flag catches it: one extra run.
		b := setup(t)
		key, g := newGate(t, 1)
		b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "* * * * *", Target: gateTarget(key)})
		done := startBlockedTick(t, b, g, 1)
		var once sync.Once
		scheduler.SetBeforeMisfireWrite(b.eng, func(_, step string) {
			if step == "flag" {
				once.Do(func() { g.open(); <-done })
			}
		})
		b.clock.Set(t0.Add(2*time.Minute + time.Second))
		if sum := b.tick(t); sum.Misfired != 1 {
			t.Errorf("the racing tick misfired %d, want 1", sum.Misfired)
		}
		want := []string{"09:01 scheduled succeeded", "09:02 scheduled skipped", "09:02 misfire succeeded"}
		if diff := cmp.Diff(want, fireTimesOf(b.runs(t, "job"))); diff != "" {
			t.Errorf("runs (-want,+got):\n%s", diff)
		}
		if got := g.calls.Load(); got != 2 {
			t.Errorf("executions %d, want 2", got)
		}
	})
	t.Run("a fire that meets a holder running nothing is not buffered", func(t *testing.T) {
		// The holder has finished its run and is about to release when
		// the next fire comes: nothing overlaps it. It waits for the
		// release and runs as scheduled.
		b := setup(t)
		key, g := newGate(t, 0)
		b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "* * * * *", Target: gateTarget(key)})
		var once sync.Once
		release := make(chan struct{})
		scheduler.SetBeforeRelease(b.eng, func(string) {
			once.Do(func() { <-release })
		})
		b.clock.Set(t0.Add(time.Minute + time.Second))
		first := make(chan struct{})
		go func() { defer close(first); b.tick(t) }()
		g.waitStarted(t)
		go func() { time.Sleep(200 * time.Millisecond); close(release) }()
		b.clock.Set(t0.Add(2*time.Minute + time.Second))
		if sum := b.tick(t); sum.Misfired != 0 || sum.Skipped != 0 {
			t.Errorf("the next tick: %+v, want nothing buffered or skipped", sum)
		}
		<-first
		want := []string{"09:01 scheduled succeeded", "09:02 scheduled succeeded"}
		if diff := cmp.Diff(want, fireTimesOf(b.runs(t, "job"))); diff != "" {
			t.Errorf("runs (-want,+got):\n%s", diff)
		}
	})
	t.Run("allow overlaps", func(t *testing.T) {
		b := setup(t)
		key, g := newGate(t, 2)
		b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "* * * * *", Overlap: schedule.OverlapAllow,
			// allow runs have no job lease, so only their heartbeat shows
			// they are alive; the scripted clock jumps a minute in
			// milliseconds, faster than any heartbeat, so give them a TTL
			// longer than the jump.
			LeaseTTL: schedule.Duration(10 * time.Minute), Target: gateTarget(key)})
		done := startBlockedTick(t, b, g, 1)
		b.clock.Set(t0.Add(2*time.Minute + time.Second))
		done2 := make(chan struct{})
		go func() { b.tick(t); close(done2) }()
		// Both executions are inside the target at once.
		g.waitStarted(t)
		if got := g.calls.Load(); got != 2 {
			t.Fatalf("concurrent executions %d, want 2", got)
		}
		g.open()
		<-done
		<-done2
		if diff := cmp.Diff([]string{"09:01 scheduled succeeded", "09:02 scheduled succeeded"}, fireTimesOf(b.runs(t, "job"))); diff != "" {
			t.Errorf("runs (-want,+got):\n%s", diff)
		}
	})
}

// TestCatchup: a */15 schedule last ticked at 09:05; nothing ticks for 3
// hours; the next tick is at 12:05. Twelve fire times were missed
// (09:15 … 12:00).
func TestCatchup(t *testing.T) {
	cases := []struct {
		name       string
		catchup    schedule.Catchup
		maxCatchup int
		window     time.Duration
		want       []string
	}{
		{"latest gives 1", schedule.CatchupLatest, 0, 4 * time.Hour, []string{"12:00"}},
		{"all gives 12", schedule.CatchupAll, 20, 4 * time.Hour, []string{"09:15", "09:30", "09:45", "10:00", "10:15", "10:30", "10:45", "11:00", "11:15", "11:30", "11:45", "12:00"}},
		{"all is bounded by maxCatchup", schedule.CatchupAll, 5, 4 * time.Hour, []string{"11:00", "11:15", "11:30", "11:45", "12:00"}},
		{"none gives 0", schedule.CatchupNone, 0, 4 * time.Hour, nil},
		{"nothing older than catchupWindow", schedule.CatchupAll, 20, time.Hour, []string{"11:15", "11:30", "11:45", "12:00"}},
		{"latest older than catchupWindow", schedule.CatchupLatest, 0, 3 * time.Minute, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			key, g := newGate(t, 0)
			b.clock.Set(t0.Add(5 * time.Minute))
			b.addSchedule(t, schedule.Schedule{ID: "q", Cron: "*/15 * * * *", Catchup: tc.catchup, MaxCatchup: tc.maxCatchup,
				CatchupWindow: schedule.Duration(tc.window), Target: gateTarget(key)})
			b.clock.Set(t0.Add(3*time.Hour + 5*time.Minute))
			sum := b.tick(t)
			var got []string
			for _, r := range b.runs(t, "q") {
				if r.Source != schedule.SourceCatchup || r.Status != schedule.RunSucceeded {
					t.Errorf("run %s: source %s status %s, want catchup succeeded", r.ID, r.Source, r.Status)
				}
				got = append(got, r.FireTime.Format("15:04"))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("fired (-want,+got):\n%s", diff)
			}
			if sum.CaughtUp != len(tc.want) || int(g.calls.Load()) != len(tc.want) {
				t.Errorf("summary caughtUp %d, executions %d, want %d", sum.CaughtUp, g.calls.Load(), len(tc.want))
			}
			if s := b.getSchedule(t, "q"); !s.NextRunAt.Equal(t0.Add(3*time.Hour + 15*time.Minute)) {
				t.Errorf("nextRunAt %s, want 12:15", s.NextRunAt)
			}
		})
	}
}

func TestRetryBackoff(t *testing.T) {
	b := setup(t)
	b.addSchedule(t, schedule.Schedule{ID: "flaky", Cron: "0 * * * *",
		Retry:  schedule.Retry{MaxAttempts: 3, Backoff: schedule.Duration(time.Minute)},
		Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "fail", Args: map[string]string{"message": "boom"}}}})
	b.clock.Set(t0.Add(time.Hour + time.Second))
	if sum := b.tick(t); sum.Failed != 1 || sum.Retried != 1 {
		t.Fatalf("first tick: failed %d retried %d, want 1 and 1", sum.Failed, sum.Retried)
	}
	b.clock.Add(61 * time.Second) // first backoff: 1m
	if sum := b.tick(t); sum.Recovered != 1 || sum.Failed != 1 || sum.Retried != 1 {
		t.Fatalf("second tick: %+v", sum)
	}
	b.clock.Add(61 * time.Second) // the second backoff is 2m: not due yet
	if sum := b.tick(t); sum.Recovered != 0 {
		t.Fatalf("third attempt ran after 1m; backoff should have doubled to 2m")
	}
	b.clock.Add(60 * time.Second)
	if sum := b.tick(t); sum.Recovered != 1 || sum.Failed != 1 || sum.Retried != 0 {
		t.Fatalf("last tick: %+v", sum)
	}
	var got []string
	for _, r := range b.runs(t, "flaky") {
		got = append(got, fmt.Sprintf("%s %s a%d %s %s", r.ID, r.Source, r.Attempt, r.Status, r.Error))
	}
	want := []string{
		"flaky@20260302T100000Z scheduled a1 failed boom",
		"flaky@20260302T100000Z-a2 retry a2 failed boom",
		"flaky@20260302T100000Z-a3 retry a3 failed boom",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("runs (-want,+got):\n%s", diff)
	}
}

func TestTriggerManual(t *testing.T) {
	b := setup(t)
	key, g := newGate(t, 0)
	b.addSchedule(t, schedule.Schedule{ID: "job", Cron: "0 0 1 1 *", Target: gateTarget(key)})
	run, err := b.eng.Trigger(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	if run.Source != schedule.SourceManual || run.Status != schedule.RunPending {
		t.Errorf("trigger returned source %s status %s", run.Source, run.Status)
	}
	b.eng.Wait()
	runs := b.runs(t, "job")
	if len(runs) != 1 || runs[0].ID != run.ID || runs[0].Status != schedule.RunSucceeded || g.calls.Load() != 1 {
		t.Errorf("after trigger: runs %v, executions %d", fireTimesOf(runs), g.calls.Load())
	}
	if _, err := b.eng.Trigger(context.Background(), "nope"); err == nil {
		t.Error("trigger of a missing schedule succeeded")
	}
}
