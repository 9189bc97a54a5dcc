package gpubench_test

import (
	"context"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/internal/gpubench"
)

// TestMix: the mix is reproducible, scaled to the target, and its backlog
// arrives at t=0 with the stream after it in order.
func TestMix(t *testing.T) {
	o := gpubench.Defaults()
	a, b := gpubench.Mix(o), gpubench.Mix(o)
	var sum time.Duration
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("job %d differs between two draws with one seed: %+v vs %+v", i, a[i], b[i])
		}
		sum += a[i].Duration
		if i < o.Backlog && a[i].Arrival != 0 || i > 0 && a[i].Arrival < a[i-1].Arrival {
			t.Fatalf("job %d arrives at %s", i, a[i].Arrival)
		}
	}
	if got := sum / time.Duration(o.Workers); got < o.Ideal-time.Millisecond || got > o.Ideal+time.Millisecond {
		t.Errorf("Σd/K = %s, want %s", got, o.Ideal)
	}
}

// TestPacedMix: paced arrivals feed the pool work at Load times its
// capacity, so each gap is the previous job's duration over K × Load.
func TestPacedMix(t *testing.T) {
	o := gpubench.Defaults()
	o.Arrivals, o.Load, o.Backlog = gpubench.ArrivalsPaced, 0.95, 4
	jobs := gpubench.Mix(o)
	for i := o.Backlog; i < len(jobs); i++ {
		gap := jobs[i].Arrival - jobs[i-1].Arrival
		want := time.Duration(float64(jobs[i-1].Duration) / (o.Load * float64(o.Workers)))
		if d := gap - want; d < -time.Millisecond || d > time.Millisecond {
			t.Fatalf("job %d arrives %s after job %d, want %s (its duration %s over K×load)", i, gap, i-1, want, jobs[i-1].Duration)
		}
	}
}

// BenchmarkMix runs a small mix through both dispatchers per iteration and
// reports round-robin's p99 wait over busy-aware's (the baseline is
// measured in the same run) and busy-aware's hand-off p50.
func BenchmarkMix(b *testing.B) {
	o := gpubench.Defaults()
	o.Jobs, o.Workers, o.Ideal = 60, 4, 8*time.Second
	for b.Loop() {
		o.Store = emutest.Store(b)
		rep, err := gpubench.Run(context.Background(), o)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(rep.Ratio(), "p99_wait_ratio_rr/busy")
		b.ReportMetric(float64(rep.Busy.HandoffP50.Microseconds())/1000, "handoff_p50_ms")
		b.ReportMetric(rep.Busy.Makespan.Seconds()/rep.Busy.Bound.Seconds(), "makespan/bound")
	}
}
