package gpubench_test

import (
	"testing"
	"time"

	"github.com/baton-cron/baton/internal/gpubench"
)

const s = time.Second

// TestIdeal checks the ideal dispatcher on cases small enough to work out
// by hand (the expected schedules are in the comments).
func TestIdeal(t *testing.T) {
	for _, tc := range []struct {
		name               string
		k                  int
		jobs               []gpubench.Job
		wantMean, wantP99  time.Duration
		wantMakespan       time.Duration
		wantUtilPercentX10 int
	}{
		{
			// One slot. a runs 0–3. At 3 both b and c wait; c has the
			// higher priority: c 3–4 (waited 2), then b 4–6 (waited 3).
			name: "priority first", k: 1,
			jobs: []gpubench.Job{
				{ID: "a", Arrival: 0, Duration: 3 * s},
				{ID: "b", Arrival: 1 * s, Duration: 2 * s},
				{ID: "c", Arrival: 1 * s, Duration: 1 * s, Priority: 5},
			},
			wantMean: 5 * s / 3, wantP99: 3 * s, wantMakespan: 6 * s, wantUtilPercentX10: 1000,
		},
		{
			// Two slots. a 0–4 and b 0–1; c waits for b's slot, 1–2;
			// the pool then idles until d arrives at 5 and runs 5–6.
			name: "work-conserving, idles only when nothing waits", k: 2,
			jobs: []gpubench.Job{
				{ID: "a", Arrival: 0, Duration: 4 * s},
				{ID: "b", Arrival: 0, Duration: 1 * s},
				{ID: "c", Arrival: 0, Duration: 1 * s},
				{ID: "d", Arrival: 5 * s, Duration: 1 * s},
			},
			wantMean: s / 4, wantP99: 1 * s, wantMakespan: 6 * s, wantUtilPercentX10: 583, // 7 s busy of 2×6 s
		},
		{
			// Equal priority and arrival: the id breaks the tie, as in
			// the store's sort. y (listed first) runs after x: x 0–2,
			// y 2–3 (waited 2).
			name: "ties by id", k: 1,
			jobs: []gpubench.Job{
				{ID: "y", Arrival: 0, Duration: 1 * s},
				{ID: "x", Arrival: 0, Duration: 2 * s},
			},
			wantMean: 1 * s, wantP99: 2 * s, wantMakespan: 3 * s, wantUtilPercentX10: 1000,
		},
		{
			// The makespan counts from the first arrival, not from 0.
			name: "late start", k: 3,
			jobs:     []gpubench.Job{{ID: "a", Arrival: 10 * s, Duration: 2 * s}},
			wantMean: 0, wantP99: 0, wantMakespan: 2 * s, wantUtilPercentX10: 333,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := gpubench.Ideal(tc.jobs, tc.k)
			if r.MeanWait != tc.wantMean || r.P99Wait != tc.wantP99 || r.Makespan != tc.wantMakespan {
				t.Errorf("mean wait %s, p99 wait %s, makespan %s; want %s, %s, %s", r.MeanWait, r.P99Wait, r.Makespan, tc.wantMean, tc.wantP99, tc.wantMakespan)
			}
			if got := int(r.Util * 1000); got != tc.wantUtilPercentX10 {
				t.Errorf("util %.4f, want %.3f", r.Util, float64(tc.wantUtilPercentX10)/1000)
			}
		})
	}
}

// TestIdealNeverWorseThanOneSlotPerJob: with as many slots as jobs nobody
// waits, and the makespan is the latest arrival plus its duration.
func TestIdealNeverWorseThanOneSlotPerJob(t *testing.T) {
	o := gpubench.Defaults()
	o.Jobs = 50
	jobs := gpubench.Mix(o)
	r := gpubench.Ideal(jobs, len(jobs))
	var end time.Duration
	for _, j := range jobs {
		end = max(end, j.Arrival+j.Duration)
	}
	if r.P99Wait != 0 || r.Makespan != end {
		t.Errorf("p99 wait %s, makespan %s; want 0 and %s", r.P99Wait, r.Makespan, end)
	}
}
