package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// runs: the run path's rules, through store.Runs. A run is claimed once and
// only from pending (exactly-once execution); the writes to a claimed run
// are fenced by its job lease epoch, or guarded by its status; a
// deterministic-id insert is idempotent; and a conditional write whose
// answer was lost is never taken for one refused.
func (s *suite) runs(t *testing.T) {
	t.Run("ClaimOnlyFromPending", s.runsClaimOnlyFromPending)
	t.Run("ClaimRace", s.runsClaimRace)
	t.Run("ClaimLostAnswer", s.runsClaimLostAnswer)
	t.Run("FencedWrites", s.runsFencedWrites)
	t.Run("StatusGuardedWrites", s.runsStatusGuardedWrites)
	t.Run("FinishLostAnswer", s.runsFinishLostAnswer)
	t.Run("InsertTwins", s.runsInsertTwins)
	t.Run("InsertLostAnswer", s.runsInsertLostAnswer)
	t.Run("ConditionalLostAnswer", s.runsConditionalLostAnswer)
	t.Run("ShardFilters", s.runsShardFilters)
	t.Run("StaleByDeciderShard", s.runsStaleByDeciderShard)
	t.Run("GroupLine", s.runsGroupLine)
	t.Run("CrashRecoveryQueries", s.runsCrashRecoveryQueries)
}

// runsStaleByDeciderShard: Insert stamps every run with its schedule's
// decider shard (schedule.RunDeciderShard), and Stale of shard v returns
// the stale runs of shard v only, oldest sweepAt first: a partition sweeps
// its own shards. The runs of one schedule are in one shard.
func (s *suite) runsStaleByDeciderShard(t *testing.T) {
	_, r, id := s.runsRig(t)
	ctx := t.Context()
	want := map[int][]string{} // shard → run ids, in sweepAt order
	for i := range 12 {
		sched := fmt.Sprintf("s-%s-%d", id, i%6)
		rd := pendingRecord(fmt.Sprintf("%s-%02d", id, i))
		rd.ScheduleID, rd.SweepAt = sched, runT0.Add(-time.Duration(12-i)*time.Second)
		rd.DeciderShard = 9999 // the store's to set, whatever the caller says
		insertRun(t, r, rd)
		v := schedule.RunDeciderShard(sched)
		if got := getRun(t, r, rd.ID); got.DeciderShard != v {
			t.Errorf("run %s of %s stored with vshard %d; want %d", rd.ID, sched, got.DeciderShard, v)
		}
		want[v] = append(want[v], rd.ID)
	}
	if len(want) < 2 {
		t.Fatalf("the runs fell in %d decider shard(s); the case needs at least 2", len(want))
	}
	for v, ids := range want {
		got, err := r.Stale(ctx, []int{v}, schedule.RunPending, runT0, 100)
		if err != nil {
			t.Fatalf("stale of shard %d: %v", v, err)
		}
		var gotIDs []string
		for _, g := range got {
			gotIDs = append(gotIDs, g.ID)
		}
		if fmt.Sprint(gotIDs) != fmt.Sprint(ids) {
			t.Errorf("stale pending runs of shard %d = %v; want %v", v, gotIDs, ids)
		}
	}
	if got, err := r.Stale(ctx, []int{store.LegacyRuns}, schedule.RunPending, runT0, 100); err != nil || len(got) != 0 {
		t.Errorf("stale runs without a shard = %d, %v; want none (every run here has one)", len(got), err)
	}
	// A partition's sweep is one query over all its shards: the union of
	// the shards asked for (and the legacy runs, here none), oldest
	// sweepAt first, cut at limit, and nothing of a shard not asked for.
	var two []int
	for v := range want {
		two = append(two, v)
		if len(two) == 2 {
			break
		}
	}
	var union []string
	for i := range 12 {
		rid := fmt.Sprintf("%s-%02d", id, i)
		for _, v := range two {
			if slices.Contains(want[v], rid) {
				union = append(union, rid)
			}
		}
	}
	for _, limit := range []int{100, 2} {
		got, err := r.Stale(ctx, append([]int{store.LegacyRuns}, two...), schedule.RunPending, runT0, limit)
		if err != nil {
			t.Fatalf("stale of shards %v: %v", two, err)
		}
		var gotIDs []string
		for _, g := range got {
			gotIDs = append(gotIDs, g.ID)
		}
		if w := union[:min(limit, len(union))]; fmt.Sprint(gotIDs) != fmt.Sprint(w) {
			t.Errorf("stale pending runs of shards %v (and the legacy), limit %d = %v; want %v", two, limit, gotIDs, w)
		}
	}
}

// runsCrashRecoveryQueries: PendingOf lists a schedule's pending runs,
// oldest fire time first, and StartedAfter finds a started (claimed) run
// of a later fire time, scheduled, catch-up or misfire, never a retry, a
// manual run or one that never started.
func (s *suite) runsCrashRecoveryQueries(t *testing.T) {
	_, r, id := s.runsRig(t)
	ctx := t.Context()
	sched := "s-" + id
	add := func(suffix string, fire time.Duration, src schedule.Source) *store.RunRecord {
		rd := pendingRecord(id + suffix)
		rd.ScheduleID, rd.FireTime, rd.Source = sched, runT0.Add(fire), src
		insertRun(t, r, rd)
		return rd
	}
	add("-late", 2*time.Second, schedule.SourceScheduled)
	add("-early", 0, schedule.SourceScheduled)
	retry := add("-retry", 5*time.Second, schedule.SourceRetry)
	manual := add("-manual", 6*time.Second, schedule.SourceManual)
	got, err := r.PendingOf(ctx, sched, nil, 10)
	if err != nil || len(got) != 4 || got[0].ID != id+"-early" || got[1].ID != id+"-late" {
		t.Errorf("PendingOf = %v, %v; want 4 runs, %s-early then %s-late first", got, err, id, id)
	}
	if _, err := r.StartedAfter(ctx, sched, nil, runT0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("StartedAfter with nothing started: %v; want ErrNotFound", err)
	}
	for i, rd := range []*store.RunRecord{retry, manual} {
		if err := r.Claim(ctx, rd.ID, claimOf(fmt.Sprintf("x%d", i), 3)); err != nil {
			t.Fatal(err)
		}
	}
	if x, err := r.StartedAfter(ctx, sched, nil, runT0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("StartedAfter with only a retry and a manual run started = %v, %v; want ErrNotFound", x, err)
	}
	if err := r.Claim(ctx, id+"-late", claimOf("y", 4)); err != nil {
		t.Fatal(err)
	}
	if x, err := r.StartedAfter(ctx, sched, nil, runT0); err != nil || x.ID != id+"-late" {
		t.Errorf("StartedAfter = %v, %v; want %s-late", x, err, id)
	}
	if _, err := r.StartedAfter(ctx, sched, nil, runT0.Add(2*time.Second)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("StartedAfter its own fire time: %v; want ErrNotFound", err)
	}
}

// runsShardFilters: RunningAt, NextWaiting, RunningGPU and LiveSibling keep
// to one shard's runs when given a shard (its job lease's epochs count
// apart from the other shards'), and look at every run of the schedule
// when given none.
func (s *suite) runsShardFilters(t *testing.T) {
	_, r, id := s.runsRig(t)
	ctx := t.Context()
	zero, one, two := 0, 1, 2
	sched := "s-" + id
	for i, sh := range []*int{&zero, &one} {
		rd := pendingRecord(fmt.Sprintf("%s#%d", id, i))
		rd.ScheduleID, rd.Shard, rd.Shards = sched, sh, 2
		insertRun(t, r, rd)
		c := claimOf(fmt.Sprintf("t%d", i), 7) // the same epoch on both shards' leases
		c.GPUJob = "job-" + rd.ID
		if err := r.Claim(ctx, rd.ID, c); err != nil {
			t.Fatalf("claim %s: %v", rd.ID, err)
		}
	}
	w := pendingRecord(id + "#1-a2")
	w.ScheduleID, w.Shard, w.Shards = sched, &one, 2
	insertRun(t, r, w)
	if err := r.MarkWaiting(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	if x, err := r.RunningAt(ctx, sched, &one, 7); err != nil || x.ID != id+"#1" {
		t.Errorf("RunningAt shard 1 = %v, %v; want %s#1", x, err, id)
	}
	if _, err := r.RunningAt(ctx, sched, &two, 7); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RunningAt shard 2: %v; want ErrNotFound", err)
	}
	if _, err := r.RunningAt(ctx, sched, nil, 7); err != nil {
		t.Errorf("RunningAt any shard: %v", err)
	}
	if _, err := r.NextWaiting(ctx, sched, &zero); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("NextWaiting shard 0: %v; want ErrNotFound (the waiting run is shard 1's)", err)
	}
	if x, err := r.NextWaiting(ctx, sched, &one); err != nil || x.ID != w.ID {
		t.Errorf("NextWaiting shard 1 = %v, %v; want %s", x, err, w.ID)
	}
	if x, err := r.RunningGPU(ctx, sched, &zero, ""); err != nil || x.ID != id+"#0" {
		t.Errorf("RunningGPU shard 0 = %v, %v; want %s#0", x, err, id)
	}
	if _, err := r.RunningGPU(ctx, sched, &zero, id+"#0"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RunningGPU shard 0 except its run: %v; want ErrNotFound", err)
	}
	if x, err := r.LiveSibling(ctx, sched, &one, runT0, runT0); err != nil || x.ID != id+"#1" {
		t.Errorf("LiveSibling shard 1 = %v, %v; want %s#1", x, err, id)
	}
	if _, err := r.LiveSibling(ctx, sched, &two, runT0, runT0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LiveSibling shard 2: %v; want ErrNotFound", err)
	}
}

// runsGroupLine: WaitForGroup records a pending run in its concurrency
// group's line, OldestGroupWaiting answers the oldest fire time first, and
// the claim takes the run out of the line.
func (s *suite) runsGroupLine(t *testing.T) {
	_, r, id := s.runsRig(t)
	ctx := t.Context()
	group := "g-" + id
	ids := []string{id + "-c", id + "-a", id + "-b"}
	for i, rid := range ids {
		rd := pendingRecord(rid)
		rd.FireTime = runT0.Add(time.Duration(2-i) * time.Second) // -c newest … -b oldest
		if i == 2 {
			rd.FireTime = runT0.Add(-time.Second)
		}
		insertRun(t, r, rd)
	}
	if _, err := r.OldestGroupWaiting(ctx, group); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("oldest waiting of an empty line = %v; want ErrNotFound", err)
	}
	later := runT0.Add(time.Minute)
	for _, rid := range ids {
		if err := r.WaitForGroup(ctx, rid, group, "group "+group, getRun(t, r, rid).FireTime, later); err != nil {
			t.Fatalf("wait for group %s: %v", rid, err)
		}
	}
	got := getRun(t, r, ids[2])
	if got.WaitingFor != "group "+group || got.Group != group || !got.SweepAt.Equal(later) {
		t.Fatalf("waiting run = waitingFor %q group %q sweepAt %s; want the group and %s", got.WaitingFor, got.Group, got.SweepAt, later)
	}
	for _, want := range []string{ids[2], ids[1], ids[0]} {
		head, err := r.OldestGroupWaiting(ctx, group)
		if err != nil || head.ID != want {
			t.Fatalf("oldest waiting = %v, %v; want %s", head, err, want)
		}
		if err := r.Claim(ctx, want, claimOf("g"+want, 0)); err != nil {
			t.Fatalf("claim %s: %v", want, err)
		}
		if c := getRun(t, r, want); c.WaitingFor != "" || c.Group != "" {
			t.Fatalf("claimed run still waits: waitingFor %q group %q", c.WaitingFor, c.Group)
		}
		// Running: no longer pending, so it cannot wait.
		onlyConflict(t, "wait for group of a running run", r.WaitForGroup(ctx, want, group, "group "+group, runT0, later))
	}
	if _, err := r.OldestGroupWaiting(ctx, group); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("oldest waiting after every claim = %v; want ErrNotFound", err)
	}
}

// runsRig opens a store for the case and returns its Runs view, with a
// run id unique to the case (cases may share a database).
func (s *suite) runsRig(t *testing.T) (store.Backend, store.Runs, string) {
	t.Helper()
	st := s.h.OpenBackend(t)
	return st, st.Runs(), s.collName(t)
}

// viewColl is the name of a domain view's collection in case t, for the
// fault injector and the Meter's op names: a harness that shares a
// database (CollectionPrefixer) opens each case's stores with
// ViewPrefix(t, its prefix) as their CollectionPrefix.
func (s *suite) viewColl(t *testing.T, name string) string {
	if s.prefixer != nil {
		return ViewPrefix(t, s.prefixer.CollectionPrefix()) + name
	}
	return name
}

// runT0 is the suite's clock, in milliseconds as the database keeps them.
var runT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// pendingRecord is a pending run id, due for the sweep at runT0.
func pendingRecord(id string) *store.RunRecord {
	return &store.RunRecord{Run: schedule.Run{
		ID: id, ScheduleID: "s-" + id, FireTime: runT0, Source: schedule.SourceScheduled,
		Status: schedule.RunPending, Attempt: 1, CreatedAt: runT0, HeartbeatAt: runT0,
	}, SweepAt: runT0}
}

func insertRun(t *testing.T, r store.Runs, rd *store.RunRecord) {
	t.Helper()
	if ok, err := r.Insert(t.Context(), rd); err != nil || !ok {
		t.Fatalf("insert run %s = %v, %v; want true, nil", rd.ID, ok, err)
	}
}

func getRun(t *testing.T, r store.Runs, id string) *store.RunRecord {
	t.Helper()
	rd, err := r.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("get run %s: %v", id, err)
	}
	return rd
}

func claimOf(token string, epoch int64) store.RunClaim {
	return store.RunClaim{Token: token, Holder: "h-" + token, Epoch: epoch, At: runT0, SweepAt: runT0.Add(time.Minute)}
}

// runsClaimOnlyFromPending: a run that is running, or finished, is not
// claimed again, with or without a job lease epoch.
func (s *suite) runsClaimOnlyFromPending(t *testing.T) {
	_, r, id := s.runsRig(t)
	ctx := t.Context()
	insertRun(t, r, pendingRecord(id))
	if err := r.Claim(ctx, id, claimOf("first", 1)); err != nil {
		t.Fatalf("claim a pending run: %v", err)
	}
	// Running: a second claim, at the same epoch (a redelivery in the same
	// holder) or without one (allow), is refused.
	for _, epoch := range []int64{1, 0} {
		err := r.Claim(ctx, id, claimOf(fmt.Sprintf("again%d", epoch), epoch))
		onlyConflict(t, fmt.Sprintf("claim a running run (epoch %d)", epoch), err)
	}
	if got := getRun(t, r, id); got.Status != schedule.RunRunning || got.Holder != "h-first" {
		t.Fatalf("after refused claims: status %s, holder %q; want running by h-first", got.Status, got.Holder)
	}
	// Finished: refused too.
	if err := r.Finish(ctx, id, 1, store.RunOutcome{Status: schedule.RunSucceeded, FinishedAt: runT0.Add(time.Second)}); err != nil {
		t.Fatalf("finish: %v", err)
	}
	for _, epoch := range []int64{1, 0} {
		err := r.Claim(ctx, id, claimOf(fmt.Sprintf("late%d", epoch), epoch))
		onlyConflict(t, fmt.Sprintf("claim a succeeded run (epoch %d)", epoch), err)
	}
	if got := getRun(t, r, id); got.Status != schedule.RunSucceeded {
		t.Errorf("after refused claims: status %s; want succeeded, as finished", got.Status)
	}
}

// runsClaimRace: Racers executors claim one pending run at once; exactly
// one wins, and the run records the winner's claim.
func (s *suite) runsClaimRace(t *testing.T) {
	_, r, id := s.runsRig(t)
	for round, epoch := range []int64{0, 3} {
		rid := fmt.Sprintf("%s-%d", id, round)
		insertRun(t, r, pendingRecord(rid))
		winners := raceWinners(t, Racers, func(i int) string { return fmt.Sprintf("racer %d (epoch %d)", i, epoch) },
			func(i int) error { return r.Claim(t.Context(), rid, claimOf(fmt.Sprint(i), epoch)) })
		if len(winners) != 1 {
			t.Fatalf("epoch %d: %d claims won (%v); want exactly one", epoch, len(winners), winners)
		}
		if got := getRun(t, r, rid); got.Status != schedule.RunRunning || got.Holder != fmt.Sprintf("h-%d", winners[0]) {
			t.Errorf("epoch %d: run is %s by %q; want running by the winner h-%d", epoch, got.Status, got.Holder, winners[0])
		}
	}
}

// runsClaimLostAnswer: a claim that landed with its answer lost is settled
// by its token: the claimer hears it won (and executes), and a claim that
// did not land still fails.
func (s *suite) runsClaimLostAnswer(t *testing.T) {
	st, r, id := s.runsRig(t)
	f := s.faultsFor(t, st)
	for round, epoch := range []int64{0, 2} {
		rid := fmt.Sprintf("%s-%d", id, round)
		insertRun(t, r, pendingRecord(rid))
		f.LoseAnswer(t, s.viewColl(t, schedule.RunsCollection), 1, CodeDeadlineExceeded, "update")
		if err := r.Claim(t.Context(), rid, claimOf("mine", epoch)); err != nil {
			t.Fatalf("epoch %d: a claim that landed, answer lost = %v; want nil (the run carries its token)", epoch, err)
		}
		if got := getRun(t, r, rid); got.Status != schedule.RunRunning || got.Holder != "h-mine" {
			t.Errorf("epoch %d: run is %s by %q; want running by h-mine", epoch, got.Status, got.Holder)
		}
	}
	// Refused without running: not there, so not won.
	rid := id + "-refused"
	insertRun(t, r, pendingRecord(rid))
	f.Refuse(t, s.viewColl(t, schedule.RunsCollection), 1, CodeDeadlineExceeded, "update")
	err := r.Claim(t.Context(), rid, claimOf("mine", 0))
	if !errors.Is(err, store.ErrUnknownOutcome) || errors.Is(err, store.ErrConflict) {
		t.Errorf("a claim refused by 262 = %v; want ErrUnknownOutcome, not ErrConflict", err)
	}
}

// runsFencedWrites: once a newer job lease holder has written a run, the
// older holder's heartbeat, hand-off and outcome are refused with
// ErrStaleFence, and the newer holder's writes stand.
func (s *suite) runsFencedWrites(t *testing.T) {
	_, r, id := s.runsRig(t)
	ctx := t.Context()
	insertRun(t, r, pendingRecord(id))
	if err := r.Claim(ctx, id, claimOf("old", 4)); err != nil {
		t.Fatalf("claim at epoch 4: %v", err)
	}
	if err := r.Heartbeat(ctx, id, 4, runT0.Add(time.Second), runT0.Add(time.Minute)); err != nil {
		t.Fatalf("heartbeat at the claim's epoch: %v", err)
	}
	newer := runT0.Add(2 * time.Second)
	if err := r.Heartbeat(ctx, id, 5, newer, newer.Add(time.Minute)); err != nil {
		t.Fatalf("heartbeat at a newer epoch: %v", err)
	}
	stale := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrStaleFence) || !errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrUnknownOutcome) {
			t.Errorf("%s at epoch 4 after epoch 5 wrote = %v; want ErrStaleFence", what, err)
		}
	}
	late := runT0.Add(3 * time.Second)
	stale("heartbeat", r.Heartbeat(ctx, id, 4, late, late.Add(time.Minute)))
	stale("hand-off", r.HandOff(ctx, id, 4, "gpu job old", late, late.Add(time.Minute)))
	stale("finish", r.Finish(ctx, id, 4, store.RunOutcome{Status: schedule.RunFailed, FinishedAt: late, Error: "old"}))
	got := getRun(t, r, id)
	if got.Status != schedule.RunRunning || !got.HeartbeatAt.Equal(newer) || got.Output != "" || got.Fence != 5 {
		t.Fatalf("after the stale writes: status %s, heartbeat %s, output %q, fence %d; want the newer holder's (running, %s, no output, fence 5)",
			got.Status, got.HeartbeatAt, got.Output, got.Fence, newer)
	}
	done := runT0.Add(4 * time.Second)
	if err := r.Finish(ctx, id, 5, store.RunOutcome{Status: schedule.RunSucceeded, FinishedAt: done, Output: "200"}); err != nil {
		t.Fatalf("finish at the newer epoch: %v", err)
	}
	if got := getRun(t, r, id); got.Status != schedule.RunSucceeded || got.Output != "200" || !got.FinishedAt.Equal(done) || !got.SweepAt.IsZero() {
		t.Errorf("after the newer holder's finish: %+v; want succeeded, output 200, finishedAt %s, no sweepAt", got, done)
	}
}

// runsStatusGuardedWrites: the writes to a claimed run hold only while it
// is running. A run of an allow schedule (epoch 0) that the sweep failed
// over refuses its executor's heartbeat and outcome with ErrConflict; a
// sweep that read a sweepAt since moved finishes nothing.
func (s *suite) runsStatusGuardedWrites(t *testing.T) {
	_, r, id := s.runsRig(t)
	ctx := t.Context()
	insertRun(t, r, pendingRecord(id))
	if err := r.Claim(ctx, id, claimOf("allow", 0)); err != nil {
		t.Fatalf("claim: %v", err)
	}
	swept := runT0.Add(time.Minute) // the claim's sweepAt
	// A heartbeat moved sweepAt: the sweep that read the old one is refused.
	if err := r.Heartbeat(ctx, id, 0, runT0.Add(time.Second), runT0.Add(2*time.Minute)); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	onlyConflict(t, "fail over with a sweepAt a heartbeat moved", r.FailOver(ctx, id, swept, "dead", runT0.Add(3*time.Minute), runT0.Add(4*time.Minute), time.Time{}, nil))
	onlyConflict(t, "finish swept with a sweepAt a heartbeat moved", r.FinishSwept(ctx, id, swept, store.RunOutcome{Status: schedule.RunSucceeded, FinishedAt: runT0.Add(3 * time.Minute)}))
	if got := getRun(t, r, id); got.Status != schedule.RunRunning {
		t.Fatalf("after refused sweeps: status %s; want running", got.Status)
	}
	failed := runT0.Add(5 * time.Minute)
	if err := r.FailOver(ctx, id, runT0.Add(2*time.Minute), "dead", failed, failed.Add(time.Minute), time.Time{}, nil); err != nil {
		t.Fatalf("fail over with the sweepAt read: %v", err)
	}
	late := failed.Add(time.Second)
	onlyConflict(t, "heartbeat of a failed-over run", r.Heartbeat(ctx, id, 0, late, late.Add(time.Minute)))
	onlyConflict(t, "finish of a failed-over run", r.Finish(ctx, id, 0, store.RunOutcome{Status: schedule.RunSucceeded, FinishedAt: late, Output: "200"}))
	got := getRun(t, r, id)
	if got.Status != schedule.RunFailed || got.Error != "dead" || !got.FinishedAt.Equal(failed) || !got.SweepAt.Equal(failed.Add(time.Minute)) {
		t.Errorf("after refused writes: %+v; want the failover's (failed, dead, owed-retry mark kept)", got)
	}
}

// runsFinishLostAnswer: an outcome that landed with its answer lost is
// recognised by its status and finishedAt (Finish returns nil), so the
// executor neither reports it refused nor writes it again.
func (s *suite) runsFinishLostAnswer(t *testing.T) {
	st, r, id := s.runsRig(t)
	f := s.faultsFor(t, st)
	for round, epoch := range []int64{0, 6} {
		rid := fmt.Sprintf("%s-%d", id, round)
		insertRun(t, r, pendingRecord(rid))
		if err := r.Claim(t.Context(), rid, claimOf("x", epoch)); err != nil {
			t.Fatalf("claim: %v", err)
		}
		at := runT0.Add(time.Second)
		f.LoseAnswer(t, s.viewColl(t, schedule.RunsCollection), 1, CodeDeadlineExceeded, "update")
		if err := r.Finish(t.Context(), rid, epoch, store.RunOutcome{Status: schedule.RunSucceeded, FinishedAt: at, Output: "200"}); err != nil {
			t.Fatalf("epoch %d: finish that landed, answer lost = %v; want nil", epoch, err)
		}
		// A second attempt at the same outcome (the executor's retry)
		// finds it there as well.
		if err := r.Finish(t.Context(), rid, epoch, store.RunOutcome{Status: schedule.RunSucceeded, FinishedAt: at, Output: "200"}); err != nil {
			t.Errorf("epoch %d: finish again after it landed = %v; want nil (the outcome is there)", epoch, err)
		}
		if got := getRun(t, r, rid); got.Status != schedule.RunSucceeded || !got.FinishedAt.Equal(at) {
			t.Errorf("epoch %d: run %+v; want succeeded at %s", epoch, got, at)
		}
	}
}

// stalePending returns the ids of the pending runs of scheduleID's decider
// shard that the sweep would recover at runT0.
func stalePending(t *testing.T, r store.Runs, scheduleID string) []string {
	t.Helper()
	got, err := r.Stale(t.Context(), []int{schedule.RunDeciderShard(scheduleID)}, schedule.RunPending, runT0, 100)
	if err != nil {
		t.Fatalf("stale pending runs: %v", err)
	}
	ids := make([]string, len(got))
	for i := range got {
		ids[i] = got[i].ID
	}
	return ids
}

// runsInsertTwins: Racers inserts of one deterministic id record it once;
// one hears inserted, the rest "it is there", none an error.
func (s *suite) runsInsertTwins(t *testing.T) {
	_, r, id := s.runsRig(t)
	var mu sync.Mutex
	inserted := 0
	race(Racers, func(i int) {
		ok, err := r.Insert(t.Context(), pendingRecord(id))
		if err != nil {
			t.Errorf("twin %d: %v; want nil (the run is there)", i, err)
		}
		if ok {
			mu.Lock()
			inserted++
			mu.Unlock()
		}
	})
	if inserted != 1 {
		t.Errorf("%d twins inserted; want exactly one", inserted)
	}
	if ids := stalePending(t, r, "s-"+id); len(ids) != 1 || ids[0] != id {
		t.Errorf("runs recorded %v; want one, %s", ids, id)
	}
}

// runsInsertLostAnswer: an insert that landed with its answer lost reports
// "it is there" (false, nil), and the run is recorded once.
func (s *suite) runsInsertLostAnswer(t *testing.T) {
	st, r, id := s.runsRig(t)
	f := s.faultsFor(t, st)
	f.LoseAnswer(t, s.viewColl(t, schedule.RunsCollection), 1, CodeDeadlineExceeded, "insert")
	ok, err := r.Insert(t.Context(), pendingRecord(id))
	if ok || err != nil {
		t.Fatalf("insert that landed, answer lost = %v, %v; want false, nil (it is there)", ok, err)
	}
	if got := getRun(t, r, id); got.Status != schedule.RunPending {
		t.Errorf("run %+v; want pending", got)
	}
	if ids := stalePending(t, r, "s-"+id); len(ids) != 1 {
		t.Errorf("runs recorded %v; want one", ids)
	}
}

// runsConditionalLostAnswer: a conditional write whose answer was lost
// (262 after it ran) reports ErrUnknownOutcome, never ErrConflict: taken
// for refused, a sweep's reservation that landed would be dropped, or a
// heartbeat that landed would stop its target. The write did land.
func (s *suite) runsConditionalLostAnswer(t *testing.T) {
	st, r, id := s.runsRig(t)
	f := s.faultsFor(t, st)
	ctx := t.Context()
	unknown := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrUnknownOutcome) || errors.Is(err, store.ErrConflict) {
			t.Errorf("%s, answer lost = %v; want ErrUnknownOutcome, not ErrConflict", what, err)
		}
	}
	insertRun(t, r, pendingRecord(id))
	reserved := runT0.Add(time.Minute)
	f.LoseAnswer(t, s.viewColl(t, schedule.RunsCollection), 1, CodeDeadlineExceeded, "update")
	unknown("reserve (MoveSweep)", r.MoveSweep(ctx, id, schedule.RunPending, runT0, reserved))
	if got := getRun(t, r, id); !got.SweepAt.Equal(reserved) {
		t.Errorf("sweepAt %s; want the reservation that landed, %s", got.SweepAt, reserved)
	}
	if err := r.Claim(ctx, id, claimOf("x", 7)); err != nil {
		t.Fatalf("claim: %v", err)
	}
	hb := runT0.Add(time.Second)
	f.LoseAnswer(t, s.viewColl(t, schedule.RunsCollection), 1, CodeDeadlineExceeded, "update")
	unknown("fenced heartbeat", r.Heartbeat(ctx, id, 7, hb, hb.Add(time.Minute)))
	if got := getRun(t, r, id); !got.HeartbeatAt.Equal(hb) {
		t.Errorf("heartbeatAt %s; want the heartbeat that landed, %s", got.HeartbeatAt, hb)
	}
	f.LoseAnswer(t, s.viewColl(t, schedule.RunsCollection), 1, CodeDeadlineExceeded, "update")
	unknown("fail over", r.FailOver(ctx, id, hb.Add(time.Minute), "dead", hb.Add(2*time.Minute), hb.Add(3*time.Minute), time.Time{}, nil))
	if got := getRun(t, r, id); got.Status != schedule.RunFailed {
		t.Errorf("status %s; want the failover that landed", got.Status)
	}
}
