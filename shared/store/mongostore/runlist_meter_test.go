package mongostore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// TestListAllRunsReadsAPage: however deep the page, a page of n runs of
// one schedule reads n documents (the store's Meter, op runs.page), and a
// page across schedules, which merges one query per decider shard, at
// most store.MaxMergedReads(n), over 150 runs of 7 schedules of which
// every third failed.
func TestListAllRunsReadsAPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := emutest.Store(t)
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	docs := make([]any, 150)
	for i := range docs {
		status := schedule.RunSucceeded
		if i%3 == 0 {
			status = schedule.RunFailed
		}
		docs[i] = schedule.Run{
			ID: fmt.Sprintf("r%03d", i), ScheduleID: fmt.Sprintf("s%d", i%7), FireTime: t0.Add(time.Duration(i/2) * time.Minute),
			Source: schedule.SourceScheduled, Status: status, Attempt: 1, CreatedAt: t0,
			DeciderShard: schedule.RunDeciderShard(fmt.Sprintf("s%d", i%7)),
		}
	}
	if _, err := emutest.Raw(t, st).Collection(schedule.RunsCollection).InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	m := st.Meter()
	// Each merged page is V+1 queries on the emulator: pages of 25 keep
	// the case to a few hundred.
	const pageSize = 25
	for _, f := range []store.RunFilter{{}, {Status: schedule.RunFailed}, {ScheduleID: "s3", Status: schedule.RunFailed}} {
		want := 0
		for _, d := range docs {
			r := d.(schedule.Run)
			if (f.Status == "" || r.Status == f.Status) && (f.ScheduleID == "" || r.ScheduleID == f.ScheduleID) {
				want++
			}
		}
		token, pages, listed := "", 0, 0
		for {
			m.Reset()
			page, next, err := st.Catalog().ListAllRuns(ctx, f, pageSize, token)
			if err != nil {
				t.Fatal(err)
			}
			got := m.Op(schedule.RunsCollection + ".page")
			switch {
			case m.Total() != got:
				t.Fatalf("%+v page %d: %d documents read outside the page query", f, pages, m.Total()-got)
			case f.ScheduleID != "" && got != int64(len(page)):
				t.Fatalf("%+v page %d: %d runs read %d documents; want %d", f, pages, len(page), got, len(page))
			case f.ScheduleID == "" && (got < int64(len(page)) || got > store.MaxMergedReads(pageSize)):
				t.Fatalf("%+v page %d: %d runs read %d documents; want %d to %d", f, pages, len(page), got, len(page), store.MaxMergedReads(pageSize))
			}
			for _, r := range page {
				if (f.Status != "" && r.Status != f.Status) || (f.ScheduleID != "" && r.ScheduleID != f.ScheduleID) {
					t.Fatalf("%+v listed %+v", f, r)
				}
			}
			pages++
			listed += len(page)
			if next == "" {
				break
			}
			token = next
		}
		if listed != want || pages != want/pageSize+1 {
			t.Errorf("%+v: %d runs in %d pages; want %d in %d (full pages of %d, then one short or empty)", f, listed, pages, want, want/pageSize+1, pageSize)
		}
	}
}
