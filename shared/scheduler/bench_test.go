package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/internal/skipscan"
	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// benchSchedules inserts total schedules, of which due are due at now, with
// raw InsertMany (setup only).
func benchSchedules(b *testing.B, s *mongostore.Store, total, due int, overlap schedule.Overlap, now time.Time) {
	b.Helper()
	every := max(total/due, 1)
	var docs []any
	made := 0
	for i := range total {
		sc := schedule.Schedule{ID: fmt.Sprintf("s%06d", i), Cron: "* * * * *", Overlap: overlap,
			Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}}
		if err := sc.Normalize(schedule.ValidateOptions{}); err != nil {
			b.Fatal(err)
		}
		sc.NextRunAt = now.Add(time.Duration(1+i%1000) * time.Minute)
		if i%every == 0 && made < due {
			sc.NextRunAt = now.Truncate(time.Minute)
			made++
		}
		sc.Enabled, sc.CreatedAt, sc.UpdatedAt = true, now, now
		docs = append(docs, sc)
	}
	if _, err := emutest.Raw(b, s).Collection(schedule.SchedulesCollection).InsertMany(context.Background(), docs); err != nil {
		b.Fatal(err)
	}
}

func benchEngine(b *testing.B, total, due int, overlap schedule.Overlap) (*mongostore.Store, *scheduler.Engine) {
	s := emutest.Store(b)
	client, bucket := emutest.GCS(b)
	if err := s.EnsureIndexes(context.Background(), mongostore.SchedulerIndexes...); err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 3, 2, 9, 0, 10, 0, time.UTC)
	benchSchedules(b, s, total, due, overlap, now)
	e, err := scheduler.New(scheduler.Config{Store: s, Leases: lease.NewManager(client.Bucket(bucket), "leases/", lease.Options{}),
		Clock: newClock(now)})
	if err != nil {
		b.Fatal(err)
	}
	return s, e
}

// BenchmarkTickReads: 2,000 schedules, 100 due. Reports the schedule
// documents one tick reads, and, as the baseline in the same run, a
// skip-paginated scan of all schedules (page 100). `baton bench tick` runs
// the same comparison at 10,000 or 100,000 schedules.
func BenchmarkTickReads(b *testing.B) {
	const total, due = 2000, 100
	for b.Loop() {
		b.StopTimer()
		s, e := benchEngine(b, total, due, schedule.OverlapAllow)
		b.StartTimer()
		sum, err := e.Tick(context.Background(), time.Time{})
		if err != nil || sum.Due != due {
			b.Fatalf("tick: %v %+v", err, sum)
		}
		b.StopTimer()
		_, skip, err := skipscan.Scan(context.Background(), emutest.Raw(b, s).Collection(schedule.SchedulesCollection), "nextRunAt", 100)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(sum.SchedulesRead), "schedule-reads/tick")
		b.ReportMetric(float64(skip), "skip-scan-reads")
		b.ReportMetric(float64(skip)/float64(sum.SchedulesRead), "skip/cursor")
		if sum.SchedulesRead > due+due/10 {
			b.Errorf("a tick read %d schedule documents for %d due; want at most %d", sum.SchedulesRead, due, due+due/10)
		}
		b.StartTimer()
	}
}

// BenchmarkTickTime: one tick over 100 due noop schedules (default overlap
// policy, so each run takes its job lease), end to end through the
// emulators.
func BenchmarkTickTime(b *testing.B) {
	const due = 100
	for b.Loop() {
		b.StopTimer()
		_, e := benchEngine(b, due, due, "")
		b.StartTimer()
		sum, err := e.Tick(context.Background(), time.Time{})
		if err != nil || sum.Succeeded != due {
			b.Fatalf("tick: %v %+v", err, sum)
		}
	}
}
