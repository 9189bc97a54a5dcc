package gpubench_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/internal/gpubench"
)

// TestSummarize: the medians, minima and maxima over hand-made reports,
// and the machine-readable last line that docs/gpu.md and scripts parse.
func TestSummarize(t *testing.T) {
	rep := func(busyP99, idealP99, rrP99, busyMk, idealMk, handoff time.Duration) gpubench.Report {
		return gpubench.Report{
			Busy:       gpubench.Result{P99Wait: busyP99, Makespan: busyMk, HandoffP50: handoff},
			RoundRobin: gpubench.Result{P99Wait: rrP99},
			Ideal:      gpubench.Result{P99Wait: idealP99, Makespan: idealMk},
		}
	}
	ms := time.Millisecond
	reps := []gpubench.Report{
		rep(1200*ms, 1000*ms, 6000*ms, 102*s, 100*s, 20*ms), // 1.2, 5, 1.02
		rep(1100*ms, 1000*ms, 2200*ms, 101*s, 100*s, 30*ms), // 1.1, 2, 1.01
		rep(1500*ms, 1000*ms, 4500*ms, 110*s, 100*s, 10*ms), // 1.5, 3, 1.10
	}
	sum := gpubench.Summarize(reps)
	near := func(got, want float64) bool { return got > want-1e-9 && got < want+1e-9 }
	if x := sum.BusyOverIdealP99; !near(x.Median, 1.2) || !near(x.Min, 1.1) || !near(x.Max, 1.5) {
		t.Errorf("busy/ideal p99 = %+v, want median 1.2 in [1.1, 1.5]", x)
	}
	if x := sum.BusyOverIdealMakespan; !near(x.Median, 1.02) || !near(x.Min, 1.01) || !near(x.Max, 1.10) {
		t.Errorf("busy/ideal makespan = %+v, want median 1.02 in [1.01, 1.10]", x)
	}
	if x := sum.RROverBusyP99; !near(x.Median, 3) || !near(x.Min, 2) || !near(x.Max, 5) {
		t.Errorf("rr/busy p99 = %+v, want median 3 in [2, 5]", x)
	}
	if x := sum.HandoffP50Ms; !near(x.Median, 20) {
		t.Errorf("hand-off = %+v, want median 20 ms", x)
	}
	if !sum.Met() {
		t.Errorf("goals not met on medians 1.2, 1.02, 3: %+v", sum)
	}
	var buf bytes.Buffer
	sum.Print(&buf)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	last := lines[len(lines)-1]
	for _, kv := range []string{"p99_wait_ratio_busy_over_ideal=1.200", "makespan_ratio_busy_over_ideal=1.020", "p99_wait_ratio_rr_over_busy=3.00", "handoff_p50_ms=20.0", "seeds=3", "goals_met=true"} {
		if !strings.Contains(" "+last+" ", " "+kv+" ") {
			t.Errorf("last line %q lacks %s", last, kv)
		}
	}
	// One seed short of a goal on the median fails it.
	reps[0].RoundRobin.P99Wait = 2400 * ms // rr/busy 2: the median drops to 2
	if gpubench.Summarize(reps).Met() {
		t.Error("goals met with a median rr/busy of 2")
	}
}
