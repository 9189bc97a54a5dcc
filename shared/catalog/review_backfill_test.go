package catalog_test

import (
	"context"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/schedule"
)

type stubBackfiller struct{ calls int }

func (s *stubBackfiller) Backfill(_ context.Context, id string, req schedule.BackfillRequest, _ time.Time) (*schedule.BackfillResult, error) {
	s.calls++
	return &schedule.BackfillResult{Schedule: id, DryRun: req.DryRun}, nil
}

// TestBackfillEndJustBeforeNowIsNotTheFuture: an end a fraction of a
// millisecond before the server's clock (what `baton schedules backfill
// --to 0s` sends, its own now, when the call lands within the same
// millisecond) is in the past, and is not refused as the future.
func TestBackfillEndJustBeforeNowIsNotTheFuture(t *testing.T) {
	st := emutest.Store(t)
	now := time.Date(2026, 3, 1, 10, 0, 30, 900_000, time.UTC) // .0009 s
	c := &clock{t: now}
	bf := &stubBackfiller{}
	svc := catalog.New(st, catalog.Options{Clock: c, Backfiller: bf,
		Validate: schedule.ValidateOptions{Builtins: []string{"noop"}}})
	if _, err := svc.Create(context.Background(), &schedule.Schedule{ID: "bf", Cron: "* * * * *", Enabled: true,
		Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}}); err != nil {
		t.Fatal(err)
	}
	end := now.Add(-400 * time.Microsecond) // .0005 s: before now
	if _, err := svc.Backfill(context.Background(), "bf", schedule.BackfillRequest{Start: end.Add(-time.Hour), End: end}); err != nil {
		t.Errorf("backfill ending %s at now %s: %v; want it accepted", end.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano), err)
	}
	if bf.calls != 1 {
		t.Errorf("backfiller called %d times; want 1", bf.calls)
	}
}
