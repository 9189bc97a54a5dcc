package storetest

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// t0 is the suite's clock for schedules: a whole millisecond, as BSON
// stores it, so a schedule read back equals the one written.
var t0 = time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)

// backend opens a store for the case t through the storage contract.
func (s *suite) backend(t *testing.T) store.Backend {
	t.Helper()
	return s.h.OpenBackend(t)
}

// newSchedule is an enabled schedule due at next, version 1, as the
// catalog would write it.
func newSchedule(id string, next time.Time) schedule.Schedule {
	return schedule.Schedule{
		ID: id, Cron: "* * * * *", TimeZone: "UTC",
		Target:  schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}},
		Overlap: schedule.OverlapBufferOne, Catchup: schedule.CatchupLatest,
		Enabled: true, NextRunAt: next.UTC(), Version: 1, CreatedAt: t0, UpdatedAt: t0,
	}
}

// create inserts sc through the catalog view.
func create(t *testing.T, b store.Backend, sc schedule.Schedule) {
	t.Helper()
	if err := b.Catalog().Create(t.Context(), &sc); err != nil {
		t.Fatalf("create schedule %s: %v", sc.ID, err)
	}
}

func getSchedule(t *testing.T, b store.Backend, id string) schedule.Schedule {
	t.Helper()
	sc, err := b.Schedules().Get(t.Context(), id)
	if err != nil {
		t.Fatalf("get schedule %s: %v", id, err)
	}
	return sc
}

// schedules: the scheduler's view. The advance is the tick's one decision
// per schedule: two ticks that read the same nextRunAt must not both
// advance it, or a fire time runs twice (or is skipped).
func (s *suite) schedules(t *testing.T) {
	t.Run("AdvanceOnce", func(t *testing.T) {
		for _, n := range []int{2, Racers} {
			t.Run(fmt.Sprintf("%dRacers", n), func(t *testing.T) { s.advanceRace(t, n) })
		}
	})
	t.Run("AdvanceStaleFence", func(t *testing.T) {
		b := s.backend(t)
		create(t, b, newSchedule("x", t0))
		read := getSchedule(t, b, "x")
		if err := b.Schedules().Advance(t.Context(), &read, t0.Add(time.Minute), nil, store.Fence{Epoch: 5}); err != nil {
			t.Fatalf("advance under epoch 5: %v", err)
		}
		// A tick of epoch 4 that read the schedule before epoch 5 advanced
		// it, and one that read it after: both are stale, not conflicts.
		after := getSchedule(t, b, "x")
		for what, r := range map[string]*schedule.Schedule{"read before": &read, "read after": &after} {
			err := b.Schedules().Advance(t.Context(), r, t0.Add(2*time.Minute), nil, store.Fence{Epoch: 4})
			if !errors.Is(err, store.ErrStaleFence) || errors.Is(err, store.ErrUnknownOutcome) {
				t.Errorf("epoch 4 (%s epoch 5 advanced) = %v; want ErrStaleFence", what, err)
			}
			wantCode(t, "stale advance ("+what+")", err, errcode.StaleFence)
		}
		if got := getSchedule(t, b, "x"); !got.NextRunAt.Equal(t0.Add(time.Minute)) || got.Fence != 5 {
			t.Errorf("after the stale advances: nextRunAt %v fence %d; want %v and 5 (epoch 5's advance)", got.NextRunAt, got.Fence, t0.Add(time.Minute))
		}
	})
	t.Run("AdvanceLosesToAnEdit", func(t *testing.T) {
		// An edit that recomputes the same nextRunAt still wins: the
		// advance is guarded on the version read too.
		b := s.backend(t)
		create(t, b, newSchedule("x", t0))
		read := getSchedule(t, b, "x")
		next := read
		next.Version, next.Description = 2, "edited"
		if err := b.Catalog().Update(t.Context(), &read, &next); err != nil {
			t.Fatalf("edit: %v", err)
		}
		err := b.Schedules().Advance(t.Context(), &read, t0.Add(time.Minute), nil, store.Fence{Epoch: 1})
		onlyConflict(t, "advance of a schedule edited since it was read", err)
		if got := getSchedule(t, b, "x"); !got.NextRunAt.Equal(t0) || got.Description != "edited" {
			t.Errorf("after the refused advance: %+v; want the edit's schedule", got)
		}
		gone := newSchedule("gone", t0)
		onlyConflict(t, "advance of a missing schedule", b.Schedules().Advance(t.Context(), &gone, t0.Add(time.Minute), nil, store.Fence{Epoch: 1}))
	})
	t.Run("DropChange", func(t *testing.T) {
		// The copy of a version's change leaves the document only at that
		// version: an edit that landed since keeps its own.
		b := s.backend(t)
		sc := newSchedule("x", t0)
		sc.LastChange = &schedule.Change{Version: 1, Op: schedule.ChangeCreate, Actor: "a", At: t0,
			Diff: []schedule.FieldChange{{Field: "cron", After: "* * * * *"}}}
		create(t, b, sc)
		onlyConflict(t, "drop the change of another version", b.Schedules().DropChange(t.Context(), "x", 2))
		if got := getSchedule(t, b, "x"); got.LastChange == nil || got.LastChange.Version != 1 {
			t.Fatalf("after a refused drop: lastChange %+v; want version 1's", got.LastChange)
		}
		// A write that keeps no change of its own (the document at
		// version 2 still carries version 1's) is not version 1: nothing
		// is dropped.
		v1 := getSchedule(t, b, "x")
		kept := v1
		kept.Version = 2
		if err := b.Catalog().Update(t.Context(), &v1, &kept); err != nil {
			t.Fatalf("a write that keeps no change: %v", err)
		}
		onlyConflict(t, "drop version 1's change at version 2", b.Schedules().DropChange(t.Context(), "x", 1))
		onlyConflict(t, "drop version 2's change, which the document does not carry", b.Schedules().DropChange(t.Context(), "x", 2))
		if got := getSchedule(t, b, "x"); got.LastChange == nil || got.LastChange.Version != 1 {
			t.Fatalf("after the refused drops at version 2: lastChange %+v; want version 1's kept", got.LastChange)
		}
		// Back to a version whose change the document carries.
		v2 := getSchedule(t, b, "x")
		again := v2
		again.Version = 3
		again.LastChange = &schedule.Change{Version: 3, Op: schedule.ChangeUpdate, Actor: "a", At: t0}
		if err := b.Catalog().Update(t.Context(), &v2, &again); err != nil {
			t.Fatalf("a write with its change: %v", err)
		}
		if err := b.Schedules().DropChange(t.Context(), "x", 3); err != nil {
			t.Fatalf("drop version 3's change: %v", err)
		}
		read := getSchedule(t, b, "x")
		if read.LastChange != nil || read.Version != 3 || read.Cron != v1.Cron || !read.NextRunAt.Equal(t0) {
			t.Fatalf("after the drop: %+v; want the schedule at version 3 without lastChange", read)
		}
		onlyConflict(t, "drop again", b.Schedules().DropChange(t.Context(), "x", 3))
		// An edit brings its own change; a late drop of version 3's
		// leaves it.
		next := read
		next.Version, next.Description = 4, "edited"
		next.LastChange = &schedule.Change{Version: 4, Op: schedule.ChangeUpdate, Actor: "a", At: t0.Add(time.Second)}
		if err := b.Catalog().Update(t.Context(), &read, &next); err != nil {
			t.Fatalf("edit: %v", err)
		}
		onlyConflict(t, "drop version 3's change after an edit", b.Schedules().DropChange(t.Context(), "x", 3))
		if got := getSchedule(t, b, "x"); got.LastChange == nil || got.LastChange.Version != 4 {
			t.Errorf("after the late drop: lastChange %+v; want version 4's", got.LastChange)
		}
	})
	t.Run("AdvanceStoresRemainingRuns", func(t *testing.T) {
		// The fires left move with the advance, in its guarded write: a
		// refused advance leaves them alone, so no decision is counted
		// twice and none is counted without its advance.
		b := s.backend(t)
		sc := newSchedule("x", t0)
		five := int64(5)
		sc.RemainingRuns = &five
		create(t, b, sc)
		read := getSchedule(t, b, "x")
		three := int64(3)
		if err := b.Schedules().Advance(t.Context(), &read, t0.Add(time.Minute), &three, store.Fence{Epoch: 1}); err != nil {
			t.Fatalf("advance: %v", err)
		}
		if got := getSchedule(t, b, "x"); got.RemainingRuns == nil || *got.RemainingRuns != 3 || !got.NextRunAt.Equal(t0.Add(time.Minute)) {
			t.Errorf("after the advance: remaining %v next %s; want 3 and t0+1m", got.RemainingRuns, got.NextRunAt)
		}
		one := int64(1)
		onlyConflict(t, "a second advance from the same read", b.Schedules().Advance(t.Context(), &read, t0.Add(time.Minute), &one, store.Fence{Epoch: 1}))
		if got := getSchedule(t, b, "x"); *got.RemainingRuns != 3 {
			t.Errorf("a refused advance changed remainingRuns to %d", *got.RemainingRuns)
		}
	})
	t.Run("TimedPauses", func(t *testing.T) {
		// PausedUntil reads only paused schedules whose pause is over, and
		// Unpause ends one once: a second unpause from the same read, or
		// one after an operator's edit, is refused.
		b := s.backend(t)
		over, later, plain, enabled := newSchedule("over", t0), newSchedule("later", t0), newSchedule("plain", t0), newSchedule("on", t0)
		over.Enabled, later.Enabled, plain.Enabled = false, false, false
		over.PausedUntil, later.PausedUntil, enabled.PausedUntil = t0.Add(-time.Minute), t0.Add(time.Hour), t0.Add(-time.Hour)
		over.PauseReason, over.PausedBy = "db migration", "local"
		for _, sc := range []schedule.Schedule{over, later, plain, enabled} {
			create(t, b, sc)
		}
		due, err := b.Schedules().PausedUntil(t.Context(), t0, 10)
		if err != nil || len(due) != 1 || due[0].ID != "over" {
			t.Fatalf("PausedUntil = %v, %v; want only the pause that is over", due, err)
		}
		read := due[0]
		if err := b.Schedules().Unpause(t.Context(), &read, t0.Add(time.Minute), t0); err != nil {
			t.Fatalf("unpause: %v", err)
		}
		got := getSchedule(t, b, "over")
		if !got.Enabled || got.Version != read.Version+1 || !got.NextRunAt.Equal(t0.Add(time.Minute)) || got.PauseReason != "" || got.PausedBy != "" || !got.PausedUntil.IsZero() {
			t.Errorf("after unpause: %+v; want enabled, version+1, next t0+1m, pause fields gone", got)
		}
		onlyConflict(t, "a second unpause from the same read", b.Schedules().Unpause(t.Context(), &read, t0.Add(time.Minute), t0))
		if due, _ := b.Schedules().PausedUntil(t.Context(), t0, 10); len(due) != 0 {
			t.Errorf("PausedUntil after the unpause = %v; want none", due)
		}
	})
	t.Run("AdvanceToNeverDisables", func(t *testing.T) {
		b := s.backend(t)
		create(t, b, newSchedule("x", t0))
		read := getSchedule(t, b, "x")
		if err := b.Schedules().Advance(t.Context(), &read, time.Time{}, nil, store.Fence{Epoch: 1}); err != nil {
			t.Fatalf("advance to never: %v", err)
		}
		if got := getSchedule(t, b, "x"); got.Enabled || got.Fence != 1 {
			t.Errorf("after advancing to never: enabled %v fence %d; want disabled, fence 1", got.Enabled, got.Fence)
		}
		page, _, err := b.Schedules().Due(t.Context(), t0.Add(time.Hour), 10, "")
		if err != nil || len(page) != 0 {
			t.Errorf("Due after disabling = %d schedules, %v; want none", len(page), err)
		}
	})
	t.Run("Misfire", s.misfire)
	t.Run("Due", s.due)
	t.Run("DueInShard", s.dueInShard)
	t.Run("NextDue", func(t *testing.T) {
		b := s.backend(t)
		if _, ok, err := b.Schedules().NextDue(t.Context()); ok || err != nil {
			t.Fatalf("NextDue with no schedules = %v, %v; want false, nil", ok, err)
		}
		create(t, b, newSchedule("late", t0.Add(time.Hour)))
		create(t, b, newSchedule("soon", t0.Add(time.Minute)))
		off := newSchedule("off", t0)
		off.Enabled = false
		create(t, b, off)
		at, ok, err := b.Schedules().NextDue(t.Context())
		if err != nil || !ok || !at.Equal(t0.Add(time.Minute)) {
			t.Errorf("NextDue = %v, %v, %v; want %v (the earliest enabled)", at, ok, err, t0.Add(time.Minute))
		}
	})
	t.Run("EpochFloor", func(t *testing.T) {
		b := s.backend(t)
		create(t, b, newSchedule("a", t0))
		create(t, b, newSchedule("b", t0))
		if f, err := b.Schedules().HighestTickFence(t.Context()); err != nil || f != 0 {
			t.Fatalf("HighestTickFence with no fence = %d, %v; want 0", f, err)
		}
		for id, epoch := range map[string]int64{"a": 7, "b": 3} {
			r := getSchedule(t, b, id)
			if err := b.Schedules().Advance(t.Context(), &r, t0.Add(time.Minute), nil, store.Fence{Epoch: epoch}); err != nil {
				t.Fatalf("advance %s: %v", id, err)
			}
		}
		if f, err := b.Schedules().HighestTickFence(t.Context()); err != nil || f != 7 {
			t.Errorf("HighestTickFence = %d, %v; want 7", f, err)
		}
		if f, err := b.Schedules().JobFence(t.Context(), "missing"); err != nil || f != 0 {
			t.Errorf("JobFence of a missing schedule = %d, %v; want 0", f, err)
		}
		if f, err := b.Runs().HighestFence(t.Context(), "a"); err != nil || f != 0 {
			t.Errorf("Runs.HighestFence with no runs = %d, %v; want 0", f, err)
		}
	})
	t.Run("Watch", func(t *testing.T) {
		// Watching is optional; a server that cannot must say so with
		// ErrCannotWatch, which the daemon takes for "poll".
		b := s.backend(t)
		w, ok := b.Schedules().(store.ScheduleWatcher)
		if !ok {
			t.Skip("this implementation's Schedules cannot watch")
		}
		create(t, b, newSchedule("x", t0))
		stream, err := w.WatchSchedules(t.Context())
		if err != nil {
			if !errors.Is(err, store.ErrCannotWatch) {
				t.Fatalf("WatchSchedules = %v; want a stream, or ErrCannotWatch", err)
			}
			wantCode(t, "WatchSchedules", err, errcode.Unimplemented)
			t.Skipf("the server cannot watch: %v", err)
		}
		defer func() { _ = stream.Close(t.Context()) }()
		read := getSchedule(t, b, "x")
		if err := b.Schedules().Advance(t.Context(), &read, t0.Add(time.Minute), nil, store.Fence{Epoch: 1}); err != nil {
			t.Fatal(err)
		}
		ev, ok := stream.Next(t.Context())
		if !ok || ev.ID != "x" || !ev.NextRunAt.Equal(t0.Add(time.Minute)) {
			t.Errorf("the stream's first edit = %+v, %v (err %v); want x at %v", ev, ok, stream.Err(), t0.Add(time.Minute))
		}
	})
	t.Run("AdvanceAnswerLost", func(t *testing.T) {
		// The advance landed and its answer was lost: the caller must hear
		// "unknown", never "conflict" (which would have it take an edit
		// for the winner) nor "stale" (which would stop the tick).
		st := s.h.OpenBackend(t)
		b := st
		f := s.faultsFor(t, st)
		create(t, b, newSchedule("x", t0))
		read := getSchedule(t, b, "x")
		f.LoseAnswer(t, s.viewColl(t, schedule.SchedulesCollection), 1, CodeDeadlineExceeded, "update", "findAndModify")
		err := b.Schedules().Advance(t.Context(), &read, t0.Add(time.Minute), nil, store.Fence{Epoch: 1})
		if !errors.Is(err, store.ErrUnknownOutcome) || errors.Is(err, store.ErrConflict) {
			t.Fatalf("advance whose answer was lost = %v; want ErrUnknownOutcome, not ErrConflict", err)
		}
		wantCode(t, "advance whose answer was lost", err, errcode.UnknownOutcome)
		if got := getSchedule(t, b, "x"); !got.NextRunAt.Equal(t0.Add(time.Minute)) || got.Fence != 1 {
			t.Errorf("the advance did not land once: nextRunAt %v fence %d", got.NextRunAt, got.Fence)
		}
	})
}

// advanceRace: n ticks (one lease epoch: the same holder, or holders the
// lease let through one after another) read schedule x and advance it
// from the same read at once; exactly one may win each round.
func (s *suite) advanceRace(t *testing.T, n int) {
	b := s.backend(t)
	create(t, b, newSchedule("x", t0))
	for round := range rounds {
		read := getSchedule(t, b, "x")
		winners := raceWinners(t, n, func(i int) string { return fmt.Sprintf("round %d racer %d", round, i) }, func(i int) error {
			r := read
			next := t0.Add(time.Duration(round*Racers+i+1) * time.Minute)
			return b.Schedules().Advance(t.Context(), &r, next, nil, store.Fence{Epoch: 1})
		})
		if len(winners) != 1 {
			t.Fatalf("round %d: winners %v, want exactly one of %d ticks advancing from nextRunAt %v", round, winners, n, read.NextRunAt)
		}
		want := t0.Add(time.Duration(round*Racers+winners[0]+1) * time.Minute)
		if got := getSchedule(t, b, "x"); !got.NextRunAt.Equal(want) {
			t.Fatalf("round %d: stored nextRunAt %v, want the winner's %v", round, got.NextRunAt, want)
		}
	}
}

// misfire: buffer_one's flag. Setting is idempotent and joins an open
// window at its latest fire time; clearing is fenced by the job lease, so
// a holder that paused past its lease cannot take a newer holder's
// misfire run.
func (s *suite) misfire(t *testing.T) {
	ft := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	state := func(t *testing.T, b store.Backend) schedule.Schedule {
		t.Helper()
		return getSchedule(t, b, "x")
	}
	t.Run("SetJoinsTheOpenWindow", func(t *testing.T) {
		b := s.backend(t)
		create(t, b, newSchedule("x", t0))
		ms := b.Schedules()
		for _, m := range []int{2, 1, 3, 3} {
			if err := ms.SetMisfire(t.Context(), "x", ft(m), false); err != nil {
				t.Fatalf("set misfire at %d: %v", m, err)
			}
		}
		if on, err := ms.HasMisfire(t.Context(), "x"); err != nil || !on {
			t.Fatalf("HasMisfire after setting = %v, %v; want true", on, err)
		}
		got, err := ms.ClearMisfire(t.Context(), "x", 1)
		if err != nil {
			t.Fatalf("clear: %v", err)
		}
		if !got.At.Equal(ft(3)) || got.Set || got.JobFence != 1 || got.Seq != 0 {
			t.Errorf("cleared state %+v; want the window's latest fire %v, flag down, job fence 1, seq 0", got, ft(3))
		}
		if state(t, b).Misfire {
			t.Errorf("after the clear the flag is still up")
		}
		// A new window starts at its own fire time, even an earlier one.
		if err := ms.SetMisfire(t.Context(), "x", ft(1), true); err != nil {
			t.Fatalf("set misfire after the clear: %v", err)
		}
		if err := ms.SetMisfire(t.Context(), "x", ft(1), true); err != nil {
			t.Fatalf("set misfire again: %v", err)
		}
		got, err = ms.ClearMisfire(t.Context(), "x", 1)
		if err != nil || !got.At.Equal(ft(1)) || got.Seq != 2 {
			t.Errorf("second window = %+v, %v; want fire time %v (a new window, not the max over the schedule's life) and seq 2", got, err, ft(1))
		}
	})
	t.Run("ClearIsOnce", func(t *testing.T) {
		b := s.backend(t)
		create(t, b, newSchedule("x", t0))
		ms := b.Schedules()
		if err := ms.SetMisfire(t.Context(), "x", ft(1), true); err != nil {
			t.Fatal(err)
		}
		winners := raceWinners(t, Racers, func(i int) string { return fmt.Sprintf("clear racer %d", i) },
			func(int) error { _, err := ms.ClearMisfire(t.Context(), "x", 1); return err })
		if len(winners) != 1 {
			t.Fatalf("clears that won: %v; want exactly one of %d (each win records a misfire run)", winners, Racers)
		}
		if on, err := ms.HasMisfire(t.Context(), "x"); err != nil || on {
			t.Errorf("HasMisfire after the clear = %v, %v; want false", on, err)
		}
	})
	t.Run("ClearIsFenced", func(t *testing.T) {
		b := s.backend(t)
		create(t, b, newSchedule("x", t0))
		ms := b.Schedules()
		if err := ms.SetMisfire(t.Context(), "x", ft(1), true); err != nil {
			t.Fatal(err)
		}
		if _, err := ms.ClearMisfire(t.Context(), "x", 5); err != nil {
			t.Fatalf("clear under job epoch 5: %v", err)
		}
		if err := ms.SetMisfire(t.Context(), "x", ft(2), true); err != nil {
			t.Fatal(err)
		}
		_, err := ms.ClearMisfire(t.Context(), "x", 4)
		onlyConflict(t, "clear under job epoch 4 after epoch 5 cleared", err)
		if on, err := ms.HasMisfire(t.Context(), "x"); err != nil || !on {
			t.Fatalf("a stale holder's clear took the flag down (HasMisfire = %v, %v)", on, err)
		}
		if f, err := ms.JobFence(t.Context(), "x"); err != nil || f != 5 {
			t.Errorf("JobFence = %d, %v; want 5", f, err)
		}
		if got, err := ms.ClearMisfire(t.Context(), "x", 5); err != nil || got.JobFence != 5 || !got.At.Equal(ft(2)) {
			t.Errorf("clear under epoch 5 again = %+v, %v; want it cleared, fire time %v", got, err, ft(2))
		}
		if got, err := ms.ClearMisfire(t.Context(), "x", 6); !errors.Is(err, store.ErrConflict) {
			t.Errorf("clear of a flag that is down = %+v, %v; want ErrConflict", got, err)
		}
	})
	t.Run("Missing", func(t *testing.T) {
		b := s.backend(t)
		ms := b.Schedules()
		onlyConflict(t, "SetMisfire of a missing schedule", ms.SetMisfire(t.Context(), "gone", ft(1), false))
		_, err := ms.ClearMisfire(t.Context(), "gone", 1)
		onlyConflict(t, "ClearMisfire of a missing schedule", err)
		if on, err := ms.HasMisfire(t.Context(), "gone"); err != nil || on {
			t.Errorf("HasMisfire of a missing schedule = %v, %v; want false, nil", on, err)
		}
		if _, err := ms.Get(t.Context(), "gone"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get of a missing schedule = %v; want ErrNotFound", err)
		}
	})
	t.Run("Misfired", func(t *testing.T) {
		b := s.backend(t)
		for _, id := range []string{"a", "b", "c"} {
			create(t, b, newSchedule(id, t0))
		}
		for _, id := range []string{"a", "c"} {
			if err := b.Schedules().SetMisfire(t.Context(), id, ft(1), false); err != nil {
				t.Fatal(err)
			}
		}
		got, err := b.Schedules().Misfired(t.Context(), "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if ids := idsOf(got); fmt.Sprint(ids) != "[a c]" {
			t.Errorf("Misfired = %v; want [a c]", ids)
		}
		// Keyset pages in id order, whatever the natural order.
		if got, err := b.Schedules().Misfired(t.Context(), "", 1); err != nil || fmt.Sprint(idsOf(got)) != "[a]" {
			t.Errorf("Misfired(\"\", 1) = %v, %v; want [a]", idsOf(got), err)
		}
		if got, err := b.Schedules().Misfired(t.Context(), "a", 1); err != nil || fmt.Sprint(idsOf(got)) != "[c]" {
			t.Errorf("Misfired(\"a\", 1) = %v, %v; want [c]", idsOf(got), err)
		}
		if got, err := b.Schedules().Misfired(t.Context(), "c", 1); err != nil || len(got) != 0 {
			t.Errorf("Misfired(\"c\", 1) = %v, %v; want none", idsOf(got), err)
		}
	})
	t.Run("ClearAnswerLost", func(t *testing.T) {
		// The clear landed and its answer was lost: the read-back finds
		// the flag down under this epoch, and the clear is ours.
		st := s.h.OpenBackend(t)
		b := st
		f := s.faultsFor(t, st)
		create(t, b, newSchedule("x", t0))
		if err := b.Schedules().SetMisfire(t.Context(), "x", ft(4), true); err != nil {
			t.Fatal(err)
		}
		f.LoseAnswer(t, s.viewColl(t, schedule.SchedulesCollection), 1, CodeDeadlineExceeded, "findAndModify")
		got, err := b.Schedules().ClearMisfire(t.Context(), "x", 3)
		if err != nil || got.Set || got.JobFence != 3 || !got.At.Equal(ft(4)) || got.Seq != 1 {
			t.Errorf("clear whose answer was lost = %+v, %v; want the cleared state (fire %v, seq 1, job fence 3), nil", got, err, ft(4))
		}
	})
}

func idsOf(ss []schedule.Schedule) []string {
	ids := make([]string, 0, len(ss))
	for _, sc := range ss {
		ids = append(ids, sc.ID)
	}
	sort.Strings(ids)
	return ids
}

// due: the tick's query. Every due schedule comes exactly once, across
// pages, with ties on nextRunAt and with schedules inserted while it
// pages; a schedule not due or disabled never comes; and the reads are
// the due documents returned, nothing more (Firestore bills each one).
func (s *suite) due(t *testing.T) {
	b := s.backend(t)
	now := t0.Add(time.Hour)
	want := map[string]bool{}
	// Five fire times, five schedules on each: every page boundary falls
	// inside a tie.
	for i := range 25 {
		id := fmt.Sprintf("due-%02d", i)
		create(t, b, newSchedule(id, t0.Add(time.Duration(i/5)*time.Minute)))
		want[id] = true
	}
	for i := range 5 {
		create(t, b, newSchedule(fmt.Sprintf("later-%d", i), now.Add(time.Second)))
		off := newSchedule(fmt.Sprintf("off-%d", i), t0)
		off.Enabled = false
		create(t, b, off)
	}
	m := b.Meter()
	read0 := m.Total()
	seen := map[string]int{}
	token := ""
	returned := 0
	for pages := 0; ; pages++ {
		if pages > 50 {
			t.Fatal("Due never ended")
		}
		page, next, err := b.Schedules().Due(t.Context(), now, 4, token)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		returned += len(page)
		var prev *schedule.Schedule
		for i := range page {
			sc := &page[i]
			seen[sc.ID]++
			if prev != nil && (sc.NextRunAt.Before(prev.NextRunAt) || sc.NextRunAt.Equal(prev.NextRunAt) && sc.ID < prev.ID) {
				t.Errorf("page %d out of (nextRunAt, id) order: %s after %s", pages, sc.ID, prev.ID)
			}
			prev = sc
		}
		// Inserted while paging, due at every fire time: those behind the
		// cursor wait for the next tick, those ahead may come, none twice.
		id := fmt.Sprintf("new-%02d", pages)
		create(t, b, newSchedule(id, t0.Add(time.Duration(pages%6)*time.Minute)))
		if next == "" {
			break
		}
		token = next
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("due schedule %s returned %d times; want once", id, seen[id])
		}
	}
	for id, n := range seen {
		if !want[id] && (n != 1 || id[:4] != "new-") {
			t.Errorf("schedule %s returned %d times; want it not at all (not due, or disabled), or, inserted during the scan, at most once", id, n)
		}
	}
	if got := m.Total() - read0; got != int64(returned) {
		t.Errorf("paging read %d documents for %d due schedules returned; want one read per schedule returned (op reads %v)", got, returned, m.Snapshot())
	}
	if got := m.Op(s.viewColl(t, schedule.SchedulesCollection) + ".page"); got != int64(returned) {
		t.Errorf("Meter op %s.page = %d; want %d (the op name is what benchmarks read)", s.viewColl(t, schedule.SchedulesCollection), got, returned)
	}
	if _, _, err := b.Schedules().Due(t.Context(), now.Add(time.Second), 4, token); !errors.Is(err, store.ErrBadPageToken) && token != "" {
		t.Errorf("a token of another now = %v; want ErrBadPageToken", err)
	}
}

// dueInShard: a partition's read returns the due schedules of its decider
// shard and nothing of another's, in (nextRunAt, id) order across pages,
// and a token does not carry over to another shard.
func (s *suite) dueInShard(t *testing.T) {
	b := s.backend(t)
	now := t0.Add(time.Hour)
	want := map[int][]string{}
	for i := range 12 {
		id := fmt.Sprintf("vs-%02d", i)
		sc := newSchedule(id, t0.Add(time.Duration(i%4)*time.Minute))
		sc.DeciderShard = i % 3
		create(t, b, sc)
		want[i%3] = append(want[i%3], id)
	}
	later := newSchedule("vs-later", now.Add(time.Minute))
	later.DeciderShard = 1
	create(t, b, later)
	for v := range 3 {
		var got []string
		token := ""
		var prev *schedule.Schedule
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatalf("shard %d: DueInShard never ended", v)
			}
			page, next, err := b.Schedules().DueInShard(t.Context(), v, now, 2, token)
			if err != nil {
				t.Fatalf("shard %d page %d: %v", v, pages, err)
			}
			for i := range page {
				sc := &page[i]
				if sc.DeciderShard != v {
					t.Errorf("shard %d returned %s of shard %d", v, sc.ID, sc.DeciderShard)
				}
				if prev != nil && (sc.NextRunAt.Before(prev.NextRunAt) || sc.NextRunAt.Equal(prev.NextRunAt) && sc.ID < prev.ID) {
					t.Errorf("shard %d out of (nextRunAt, id) order: %s after %s", v, sc.ID, prev.ID)
				}
				prev = sc
				got = append(got, sc.ID)
			}
			if next == "" {
				break
			}
			if v == 1 && pages == 0 {
				if _, _, err := b.Schedules().DueInShard(t.Context(), 2, now, 2, next); !errors.Is(err, store.ErrBadPageToken) {
					t.Errorf("shard 1's token on shard 2 = %v; want ErrBadPageToken", err)
				}
			}
			token = next
		}
		sort.Strings(got)
		if strings.Join(got, ",") != strings.Join(want[v], ",") {
			t.Errorf("DueInShard(%d) = %v; want %v", v, got, want[v])
		}
	}
}
