package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/metrics"
)

// scrape reads l's Prometheus text.
func scrape(t *testing.T, l *metrics.Local) string {
	t.Helper()
	rec := httptest.NewRecorder()
	l.Handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

func mustContain(t *testing.T, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("metrics text lacks %q; got:\n%s", w, text)
		}
	}
}

// TestNamesAreThePrometheusNames: the instruments come out under exactly
// the names the docs, the dashboard and the alerts use, with no suffix
// added by the exporter (no _total_total, no _seconds_seconds).
func TestNamesAreThePrometheusNames(t *testing.T) {
	l, err := metrics.NewLocal(metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fire := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s := l.Set
	s.RunStarted(ctx, "nightly", "scheduled", fire, fire.Add(3*time.Second))
	s.RunFinished(ctx, "nightly", "scheduled", "failed", fire.Add(3*time.Second), fire.Add(5*time.Second))
	s.RunFinished(ctx, "nightly", "scheduled", "skipped", time.Time{}, fire)
	s.Tick(ctx, "ok", 40*time.Millisecond, 7)
	s.Tick(ctx, "skipped", time.Millisecond, 0)
	s.LeaseConflict(ctx, "job-nightly")
	s.LeaseLost(ctx, "tick")
	s.GPUDispatched(ctx, fire, fire.Add(90*time.Second))
	if err := s.ObserveGPU(func(context.Context) (metrics.GPUState, error) {
		return metrics.GPUState{Queued: 4, Slots: map[string]int64{"busy": 2, "free": 1}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	text := scrape(t, l)
	mustContain(t, text,
		`baton_runs_total{schedule="nightly",source="scheduled",status="failed"} 1`,
		`baton_runs_total{schedule="nightly",source="scheduled",status="skipped"} 1`,
		`baton_run_start_lateness_seconds_bucket{schedule="nightly",source="scheduled",le="5"} 1`,
		`baton_run_start_lateness_seconds_count{schedule="nightly",source="scheduled"} 1`,
		`baton_run_duration_seconds_count{schedule="nightly",source="scheduled",status="failed"} 1`,
		`baton_tick_duration_seconds_count 1`,
		`baton_tick_docs_read_sum 7`,
		`baton_ticks_total{result="ok"} 1`,
		`baton_ticks_total{result="skipped"} 1`,
		`baton_lease_conflicts_total{lease="job"} 1`,
		`baton_lease_lost_total{lease="tick"} 1`,
		`baton_gpu_wait_seconds_count 1`,
		`baton_gpu_queue_depth 4`,
		`baton_gpu_slots{state="busy"} 2`,
		`baton_gpu_slots{state="free"} 1`,
	)
	for _, bad := range []string{"_total_total", "seconds_seconds", "otel_scope"} {
		if strings.Contains(text, bad) {
			t.Errorf("metrics text has %q: the exporter renamed an instrument", bad)
		}
	}
	// A skipped run has no duration: it never ran.
	if strings.Contains(text, `baton_run_duration_seconds_count{schedule="nightly",source="scheduled",status="skipped"}`) {
		t.Error("a skipped run recorded a duration")
	}
}

// TestNoScheduleLabel: with the label off, two schedules' runs are one
// series, so the series count does not grow with the schedules.
func TestNoScheduleLabel(t *testing.T) {
	l, err := metrics.NewLocal(metrics.Options{NoScheduleLabel: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l.Set.RunFinished(ctx, "a", "scheduled", "succeeded", time.Time{}, time.Time{})
	l.Set.RunFinished(ctx, "b", "scheduled", "succeeded", time.Time{}, time.Time{})
	text := scrape(t, l)
	mustContain(t, text, `baton_runs_total{schedule="",source="scheduled",status="succeeded"} 2`)
	if strings.Contains(text, `schedule="a"`) {
		t.Error("the schedule label is still there")
	}
}

// TestGPUSourceErrorDropsTheGauge: a failed read shows no gauge rather
// than a zero that would look like an empty queue.
func TestGPUSourceErrorDropsTheGauge(t *testing.T) {
	l, err := metrics.NewLocal(metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Set.ObserveGPU(func(context.Context) (metrics.GPUState, error) {
		return metrics.GPUState{}, errors.New("database down")
	}); err != nil {
		t.Fatal(err)
	}
	if text := scrape(t, l); strings.Contains(text, "baton_gpu_queue_depth ") {
		t.Errorf("a failed read exported a queue depth:\n%s", text)
	}
}

// TestNilSetRecordsNothing: packages may hold a nil *Set.
func TestNilSetRecordsNothing(t *testing.T) {
	var s *metrics.Set
	ctx := context.Background()
	s.RunStarted(ctx, "a", "scheduled", time.Now(), time.Now())
	s.RunFinished(ctx, "a", "scheduled", "failed", time.Now(), time.Now())
	s.Tick(ctx, "ok", time.Second, 1)
	s.LeaseConflict(ctx, "tick")
	s.LeaseLost(ctx, "tick")
	s.GPUDispatched(ctx, time.Now(), time.Now())
	if err := s.ObserveGPU(nil); err != nil {
		t.Fatal(err)
	}
}

func TestLeaseKind(t *testing.T) {
	for name, want := range map[string]string{"tick": "tick", "job-nightly": "job", "gpu-slot-0": "gpu", "weird": "other"} {
		if got := metrics.LeaseKind(name); got != want {
			t.Errorf("LeaseKind(%q) = %q; want %q", name, got, want)
		}
	}
}
