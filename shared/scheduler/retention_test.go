package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// TestRetentionExpiresFinishedRuns, on the injected clock: a run's
// outcome write gives it expireAt = finishedAt + the schedule's
// history.keep; the sweep deletes the runs past it, at most
// scheduler.ExpireBatch per sweep, with reads bounded by the batch, and
// never a run that is not finished (those carry no expireAt).
func TestRetentionExpiresFinishedRuns(t *testing.T) {
	b := setup(t, func(c *scheduler.Config) { c.HistoryKeep = 48 * time.Hour })
	b.addSchedule(t, schedule.Schedule{ID: "keep1h", Cron: "* * * * *", History: &schedule.History{Keep: "1h"},
		Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}})
	b.addSchedule(t, schedule.Schedule{ID: "default", Cron: "* * * * *",
		Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}})
	b.clock.Set(t0.Add(time.Minute))
	b.tick(t)
	b.eng.Wait()
	for id, keep := range map[string]time.Duration{"keep1h": time.Hour, "default": 48 * time.Hour} {
		runs := b.runs(t, id)
		if len(runs) != 1 || runs[0].Status != schedule.RunSucceeded {
			t.Fatalf("%s: runs %+v, want one succeeded", id, runs)
		}
		if want := runs[0].FinishedAt.Add(keep); !runs[0].ExpireAt.Equal(want) {
			t.Errorf("%s: expireAt %s, want finishedAt + %s = %s", id, runs[0].ExpireAt, keep, want)
		}
	}

	// A backlog: 1,200 finished runs past their expireAt, and unfinished
	// runs of every kind, which carry none (their sweepAt is far ahead, so
	// the other sweeps leave them alone).
	raw := emutest.Raw(t, b.store).Collection(schedule.RunsCollection)
	far := t0.Add(1000 * time.Hour)
	var docs []any
	const backlog = 1200
	for i := range backlog {
		ft := t0.Add(-time.Duration(i+1) * time.Minute)
		docs = append(docs, bson.D{{Key: "_id", Value: fmt.Sprintf("old-%04d", i)}, {Key: "scheduleId", Value: "gone"}, {Key: "fireTime", Value: ft},
			{Key: "status", Value: string(schedule.RunSucceeded)}, {Key: "finishedAt", Value: ft}, {Key: "expireAt", Value: ft.Add(time.Hour)}})
	}
	for _, st := range []schedule.RunStatus{schedule.RunPending, schedule.RunRunning, schedule.RunPending} {
		docs = append(docs, bson.D{{Key: "_id", Value: "live-" + string(st) + fmt.Sprint(len(docs))}, {Key: "scheduleId", Value: "gone"}, {Key: "fireTime", Value: t0.Add(-300 * time.Hour)},
			{Key: "status", Value: string(st)}, {Key: "heartbeatAt", Value: far}, {Key: "sweepAt", Value: far}, {Key: "waiting", Value: st == schedule.RunPending}})
	}
	if _, err := raw.InsertMany(context.Background(), docs); err != nil {
		t.Fatal(err)
	}
	count := func(filter bson.D) int64 {
		n, err := raw.CountDocuments(context.Background(), filter)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	expiredLeft := func() int64 { return count(bson.D{{Key: "_id", Value: bson.D{{Key: "$regex", Value: "^old-"}}}}) }

	// Two hours on: the keep1h run has expired too, the default one not.
	b.clock.Set(t0.Add(2*time.Hour + 30*time.Second))
	want := []int64{backlog + 1 - scheduler.ExpireBatch, backlog + 1 - 2*scheduler.ExpireBatch, 0}
	for sweep, left := range want {
		m := b.store.Meter()
		m.Reset()
		b.tick(t)
		b.eng.Wait()
		// The expire read is the runs.find of the batch's ids; the other
		// sweeps find nothing to do here.
		if n := m.Op(schedule.RunsCollection + ".find"); n > scheduler.ExpireBatch+10 {
			t.Errorf("sweep %d read %d runs, want at most the batch (%d) and a few", sweep, n, scheduler.ExpireBatch)
		}
		got := expiredLeft() + count(bson.D{{Key: "scheduleId", Value: "keep1h"}, {Key: "fireTime", Value: t0.Add(time.Minute)}})
		if got != left {
			t.Errorf("after sweep %d: %d expired runs left, want %d", sweep, got, left)
		}
	}
	if n := count(bson.D{{Key: "_id", Value: bson.D{{Key: "$regex", Value: "^live-"}}}}); n != 3 {
		t.Errorf("%d unfinished runs left, want all 3", n)
	}
	if n := count(bson.D{{Key: "scheduleId", Value: "default"}, {Key: "fireTime", Value: t0.Add(time.Minute)}}); n != 1 {
		t.Errorf("the default-keep run (48h) was deleted after 2h")
	}
}

// TestTimedResumeRecordsItsChange: the sweep's end of a timed pause is a
// write of the schedule like an operator's, so it keeps the history's
// protocol: the pause's change is copied into the history first, and the
// resume's own change (by "baton") travels in the schedule.
func TestTimedResumeRecordsItsChange(t *testing.T) {
	b := setup(t)
	svc := catalog.New(b.store, catalog.Options{Clock: b.clock, Validate: schedule.ValidateOptions{Builtins: scheduler.Builtins()}})
	ctx := catalog.WithActor(context.Background(), "ops@example.com")
	if _, err := svc.CreateJSON(ctx, []byte(`{"id":"p","cron":"*/5 * * * *","target":{"type":"builtin","builtin":{"name":"noop"}}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Pause(ctx, "p", catalog.PauseRequest{Reason: "db", Until: t0.Add(3 * time.Minute), By: "ops@example.com"}, 0); err != nil {
		t.Fatal(err)
	}
	// The pause's own copy is lost (as if its best-effort copy failed):
	// only the document holds it now.
	if _, err := emutest.Raw(t, b.store).Collection(schedule.VersionsCollection).DeleteOne(context.Background(), bson.D{{Key: "version", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	b.clock.Set(t0.Add(4 * time.Minute))
	b.tick(t)
	b.eng.Wait()
	if got := b.getSchedule(t, "p"); !got.Enabled || got.Version != 3 {
		t.Fatalf("after the timed pause: enabled %t version %d, want resumed at version 3", got.Enabled, got.Version)
	}
	page, err := svc.ListVersions(context.Background(), "p", catalog.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range page.Versions {
		got = append(got, fmt.Sprintf("%d:%s:%s", v.Version, v.Op, v.Actor))
	}
	if want := "[3:resume:baton 2:pause:ops@example.com 1:create:ops@example.com]"; fmt.Sprint(got) != want {
		t.Errorf("history = %v, want %s", got, want)
	}
	// A later edit copies the resume's change in too.
	if _, err := svc.Update(ctx, "p", map[string]any{"description": "x"}, 0); err != nil {
		t.Fatal(err)
	}
	n, err := emutest.Raw(t, b.store).Collection(schedule.VersionsCollection).CountDocuments(context.Background(), bson.D{{Key: "scheduleId", Value: "p"}})
	if err != nil || n != 4 {
		t.Errorf("%d records stored after the edit, want 4 (%v)", n, err)
	}
}

// TestAdvanceDropsTheRecordedChange: the first advance after a write moves
// the change that produced the schedule's version out of its document,
// into the history (docs/cost.md: the create's change put every advance
// over 1 KiB, two write units a run). The history still lists it, with its
// fields; the document no longer carries it, so later advances rewrite a
// smaller one. It holds when the catalog's own best-effort copy was lost:
// the record is written before the copy goes. An edit after it brings its
// own change, and the history lists both.
func TestAdvanceDropsTheRecordedChange(t *testing.T) {
	b := setup(t)
	svc, ctx := createOnlyInDocument(t, b, "c")
	size := func() int {
		raw, err := emutest.Raw(t, b.store).Collection(schedule.SchedulesCollection).FindOne(context.Background(), bson.D{{Key: "_id", Value: "c"}}).Raw()
		if err != nil {
			t.Fatal(err)
		}
		return len(raw)
	}
	before := size()
	if got := b.getSchedule(t, "c"); got.LastChange == nil || got.LastChange.Version != 1 {
		t.Fatalf("after the create: lastChange %+v; want version 1's", got.LastChange)
	}
	b.clock.Set(t0.Add(time.Minute))
	b.tick(t)
	b.eng.Wait()
	got := b.getSchedule(t, "c")
	if got.LastChange != nil {
		t.Errorf("after the first advance: lastChange %+v; want it moved into the history", got.LastChange)
	}
	if !got.NextRunAt.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("nextRunAt %s; want %s (advanced once)", got.NextRunAt, t0.Add(2*time.Minute))
	}
	if after := size(); after+500 > before {
		t.Errorf("document %d bytes before, %d after; want the create's change (several hundred bytes) gone", before, after)
	}
	history := func() ([]schedule.VersionRecord, string) {
		t.Helper()
		page, err := svc.ListVersions(context.Background(), "c", catalog.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, v := range page.Versions {
			out = append(out, fmt.Sprintf("%d:%s:%s:%d", v.Version, v.Op, v.Actor, len(v.Diff)))
		}
		return page.Versions, fmt.Sprint(out)
	}
	vs, h := history()
	if len(vs) != 1 || vs[0].Version != 1 || vs[0].Actor != "ops@example.com" || len(vs[0].Diff) == 0 || vs[0].ExpireAt.IsZero() {
		t.Fatalf("history after the advance: %s; want the create by ops@example.com with its fields, and its expiry", h)
	}
	if _, err := svc.Update(ctx, "c", map[string]any{"description": "x"}, 0); err != nil {
		t.Fatal(err)
	}
	if _, h := history(); h != "[2:update:ops@example.com:1 1:create:ops@example.com:"+fmt.Sprint(len(vs[0].Diff))+"]" {
		t.Errorf("history after an edit: %s; want the update and the create", h)
	}
	if got := b.getSchedule(t, "c"); got.LastChange == nil || got.LastChange.Version != 2 {
		t.Errorf("after the edit: lastChange %+v; want version 2's, in the document", got.LastChange)
	}
}

// TestDropChangeUnderFaults: the document's copy of a change goes only
// after its record is written. The record's write (a replace, the "update"
// command on schedule_versions) fails as Firestore fails: contention
// (retried), a dropped connection (nothing written: the copy stays, and
// the next tick moves it), a write that landed and answered an error (read
// back: written). Whatever happened, the history lists the create, and
// each tick advances the schedule once.
func TestDropChangeUnderFaults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inject func(b *bundle)
		kept   bool // the first tick leaves the copy in the document
	}{
		{"WriteConflict", func(b *bundle) {
			emutest.FailCommandCode(t, b.store, schedule.VersionsCollection, bson.D{{Key: "times", Value: 1}}, 112, "update")
		}, false},
		{"dropped connection", func(b *bundle) {
			emutest.FailCommandDrop(t, b.store, schedule.VersionsCollection, bson.D{{Key: "times", Value: 1}}, "update")
		}, true},
		{"landed, answered an error", func(b *bundle) {
			emutest.FailCommandAfterWrite(t, b.store, schedule.VersionsCollection, bson.D{{Key: "times", Value: 1}}, "update")
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			svc, _ := createOnlyInDocument(t, b, "f")
			tc.inject(b)
			b.clock.Set(t0.Add(time.Minute))
			b.tick(t)
			b.eng.Wait()
			emutest.FailCommandOff(t, b.store)
			got := b.getSchedule(t, "f")
			if kept := got.LastChange != nil; kept != tc.kept {
				t.Errorf("after the first tick: lastChange kept %t; want %t", kept, tc.kept)
			}
			if !got.NextRunAt.Equal(t0.Add(2 * time.Minute)) {
				t.Errorf("after the first tick: nextRunAt %s; want %s", got.NextRunAt, t0.Add(2*time.Minute))
			}
			b.clock.Set(t0.Add(2 * time.Minute))
			b.tick(t)
			b.eng.Wait()
			got = b.getSchedule(t, "f")
			if got.LastChange != nil || !got.NextRunAt.Equal(t0.Add(3*time.Minute)) {
				t.Errorf("after the second tick: lastChange %+v, nextRunAt %s; want none, %s", got.LastChange, got.NextRunAt, t0.Add(3*time.Minute))
			}
			page, err := svc.ListVersions(context.Background(), "f", catalog.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Versions) != 1 || page.Versions[0].Version != 1 || len(page.Versions[0].Diff) == 0 {
				t.Errorf("history: %+v; want the create, with its fields", page.Versions)
			}
			if runs := b.runs(t, "f"); len(runs) != 2 {
				t.Errorf("%d runs; want 2 (one a tick)", len(runs))
			}
		})
	}
}

// createOnlyInDocument creates every-minute schedule id through the
// catalog as ops@example.com, then deletes the change record the catalog
// copied after its write (best effort, so it may be lost): the create's
// change is then only in the schedule's document. It returns the catalog
// and the actor's context.
func createOnlyInDocument(t *testing.T, b *bundle, id string) (*catalog.Service, context.Context) {
	t.Helper()
	svc := catalog.New(b.store, catalog.Options{Clock: b.clock, Validate: schedule.ValidateOptions{Builtins: scheduler.Builtins()}})
	ctx := catalog.WithActor(context.Background(), "ops@example.com")
	if _, err := svc.CreateJSON(ctx, []byte(`{"id":"`+id+`","cron":"* * * * *","target":{"type":"builtin","builtin":{"name":"noop"}}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := emutest.Raw(t, b.store).Collection(schedule.VersionsCollection).DeleteMany(context.Background(), bson.D{{Key: "scheduleId", Value: id}}); err != nil {
		t.Fatal(err)
	}
	return svc, ctx
}
