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

// TestListAllRunsReadsAPage: however deep the page and whatever the
// filter, a page of n runs reads n documents (the store's Meter, op
// runs.page), over 300 runs of which every third failed.
func TestListAllRunsReadsAPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := emutest.Store(t)
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	docs := make([]any, 300)
	for i := range docs {
		status := schedule.RunSucceeded
		if i%3 == 0 {
			status = schedule.RunFailed
		}
		docs[i] = schedule.Run{
			ID: fmt.Sprintf("r%03d", i), ScheduleID: fmt.Sprintf("s%d", i%7), FireTime: t0.Add(time.Duration(i/2) * time.Minute),
			Source: schedule.SourceScheduled, Status: status, Attempt: 1, CreatedAt: t0,
		}
	}
	if _, err := emutest.Raw(t, st).Collection(schedule.RunsCollection).InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	m := st.Meter()
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
			page, next, err := st.Catalog().ListAllRuns(ctx, f, 10, token)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Op(schedule.RunsCollection + ".page"); got != int64(len(page)) || m.Total() != got {
				t.Fatalf("%+v page %d: %d runs read %d documents (%d in all); want %d", f, pages, len(page), got, m.Total(), len(page))
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
		if listed != want || pages != want/10+1 {
			t.Errorf("%+v: %d runs in %d pages; want %d in %d (full pages of 10, then one short or empty)", f, listed, pages, want, want/10+1)
		}
	}
}
