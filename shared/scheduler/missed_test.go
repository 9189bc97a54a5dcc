package scheduler_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-cron/baton/shared/metrics"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// TestMissedFireTimes is #15's missed-run acceptance on the scheduler's
// clock: ticks stop for three periods and start again; each catch-up
// policy runs what it says, the rest become one missed record per window
// with a missed event (delivered, with the window in its reason) and
// baton_runs_missed_total, and a duplicated tick records the window once.
func TestMissedFireTimes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		catchup schedule.Catchup
		runs    []string // the runs of fires 09:02..09:05 after the gap
		missed  int      // fire times reported missed
	}{
		// Ticks at 09:01, then none until 09:05:30: 09:02 and 09:03 are
		// older than the 90 s grace, 09:04 and 09:05 are on time.
		{schedule.CatchupNone, []string{"090400", "090500"}, 2},
		{schedule.CatchupLatest, []string{"090400", "090500"}, 2}, // on-time fires exist: latest adds none
		{schedule.CatchupAll, []string{"090200", "090300", "090400", "090500"}, 0},
	} {
		t.Run(string(tc.catchup), func(t *testing.T) {
			t.Parallel()
			p := newPayloads(t)
			local, err := metrics.NewLocal(metrics.Options{})
			if err != nil {
				t.Fatal(err)
			}
			b := setup(t, allowLoopback, func(c *scheduler.Config) { c.Metrics = local.Set })
			key, _ := newGate(t, 0)
			id := "m-" + string(tc.catchup)
			b.addSchedule(t, schedule.Schedule{ID: id, Cron: "* * * * *", Catchup: tc.catchup, Target: gateTarget(key),
				Notify: notifyOn(p.srv.URL, schedule.EventMissed)})
			b.clock.Set(t0.Add(time.Minute))
			b.tick(t)
			b.eng.Wait()
			b.clock.Set(t0.Add(5*time.Minute + 30*time.Second)) // three periods without a tick
			b.tick(t)
			b.tick(t) // a duplicated tick records nothing twice
			b.eng.Wait()
			var ran []string
			var records []schedule.Run
			for _, r := range b.allRuns(t, id) {
				switch {
				case strings.HasSuffix(r.ID, "-missed"):
					records = append(records, r)
				case r.FireTime.After(t0.Add(time.Minute)):
					ran = append(ran, r.FireTime.Format("150405"))
				}
			}
			if diff := cmp.Diff(tc.runs, ran); diff != "" {
				t.Errorf("runs after the gap (-want,+got):\n%s", diff)
			}
			text := scrape(t, local)
			if tc.missed == 0 {
				if len(records) != 0 || len(p.keys()) != 0 || strings.Contains(text, "baton_runs_missed_total{") {
					t.Errorf("catch-up all ran everything, yet: records %v, events %v", records, p.keys())
				}
				return
			}
			if len(records) != 1 || records[0].Status != schedule.RunSkipped || !strings.Contains(records[0].Reason, "missed: 2 fire time(s) from 2026-03-02T09:02:00Z to 2026-03-02T09:03:00Z") {
				t.Fatalf("missed records %+v; want one, skipped, naming the window 09:02-09:03", records)
			}
			want := id + "@20260302T090300Z-missed:missed"
			deadline := time.Now().Add(10 * time.Second)
			for len(p.keys()) == 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if diff := cmp.Diff([]string{want}, p.keys()); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
			if !strings.Contains(text, `baton_runs_missed_total{schedule="`+id+`"} 2`) {
				t.Errorf("metrics lack the 2 missed fires of %s:\n%s", id, text)
			}
		})
	}
}

func scrape(t *testing.T, l *metrics.Local) string {
	t.Helper()
	rec := httptest.NewRecorder()
	l.Handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}
