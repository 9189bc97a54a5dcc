package gpubench

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/baton-cron/baton/shared/store/mongostore"
)

// Goals are the targets for the medians over the seeds
// (docs/gpu.md): busy-aware within 25% of the ideal's p99 wait and 5% of
// its makespan, and round-robin's p99 wait at least 3× busy-aware's.
const (
	GoalBusyOverIdealP99      = 1.25
	GoalBusyOverIdealMakespan = 1.05
	GoalRROverBusyP99         = 3
)

// Stat is one metric over the seeds.
type Stat struct {
	Median, Min, Max float64
}

// stat is the median (the mean of the middle two for an even count), min
// and max of xs; zero for none.
func stat(xs []float64) Stat {
	if len(xs) == 0 {
		return Stat{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Stat{Median: m, Min: s[0], Max: s[len(s)-1]}
}

// Summary is the benchmark's result over several seeds.
type Summary struct {
	Seeds                 int
	BusyOverIdealP99      Stat
	BusyOverIdealMakespan Stat
	RROverBusyP99         Stat
	HandoffP50Ms          Stat
}

// Summarize reduces one report per seed to medians, minima and maxima.
func Summarize(reps []Report) Summary {
	var p99, mk, rr, ho []float64
	for _, r := range reps {
		p99 = append(p99, r.BusyOverIdealP99())
		mk = append(mk, r.BusyOverIdealMakespan())
		rr = append(rr, r.Ratio())
		ho = append(ho, float64(r.Busy.HandoffP50.Microseconds())/1000)
	}
	return Summary{Seeds: len(reps), BusyOverIdealP99: stat(p99), BusyOverIdealMakespan: stat(mk), RROverBusyP99: stat(rr), HandoffP50Ms: stat(ho)}
}

// Met reports whether the medians meet the three ratio goals.
func (s Summary) Met() bool {
	return s.BusyOverIdealP99.Median <= GoalBusyOverIdealP99 && s.BusyOverIdealMakespan.Median <= GoalBusyOverIdealMakespan &&
		s.RROverBusyP99.Median >= GoalRROverBusyP99
}

// Print writes each metric's median [min–max] against its goal and, last,
// the medians as one machine-readable key=value line.
func (s Summary) Print(w io.Writer) {
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT MET"
	}
	row := func(name string, x Stat, goal string, ok bool) {
		fmt.Fprintf(w, "%-32s median %7.3f  [min %7.3f, max %7.3f]  goal %-8s %s\n", name, x.Median, x.Min, x.Max, goal, verdict(ok))
	}
	fmt.Fprintf(w, "over %d seeds:\n", s.Seeds)
	row("p99_wait_ratio_busy_over_ideal", s.BusyOverIdealP99, fmt.Sprintf("≤ %.2f", GoalBusyOverIdealP99), s.BusyOverIdealP99.Median <= GoalBusyOverIdealP99)
	row("makespan_ratio_busy_over_ideal", s.BusyOverIdealMakespan, fmt.Sprintf("≤ %.2f", GoalBusyOverIdealMakespan), s.BusyOverIdealMakespan.Median <= GoalBusyOverIdealMakespan)
	row("p99_wait_ratio_rr_over_busy", s.RROverBusyP99, fmt.Sprintf("≥ %.0f", float64(GoalRROverBusyP99)), s.RROverBusyP99.Median >= GoalRROverBusyP99)
	fmt.Fprintf(w, "%-32s median %7.1f  [min %7.1f, max %7.1f]  (printed, no goal)\n", "handoff_p50_ms", s.HandoffP50Ms.Median, s.HandoffP50Ms.Min, s.HandoffP50Ms.Max)
	fmt.Fprintf(w, "p99_wait_ratio_busy_over_ideal=%.3f makespan_ratio_busy_over_ideal=%.3f p99_wait_ratio_rr_over_busy=%.2f handoff_p50_ms=%.1f seeds=%d goals_met=%t\n",
		s.BusyOverIdealP99.Median, s.BusyOverIdealMakespan.Median, s.RROverBusyP99.Median, s.HandoffP50Ms.Median, s.Seeds, s.Met())
}

// RunSeeds runs o.Seeds mixes (seeds o.Seed, o.Seed+1, …) one after the
// other, so they do not compete for the machine, each on a fresh database
// from open, and calls each with its report as it lands.
func RunSeeds(ctx context.Context, o Options, open func(seed uint64) (*mongostore.Store, error), each func(Report)) ([]Report, error) {
	n := max(o.Seeds, 1)
	var reps []Report
	for i := range n {
		so := o
		so.Seed = o.Seed + uint64(i) //nolint:gosec // i is a small non-negative count
		st, err := open(so.Seed)
		if err != nil {
			return reps, fmt.Errorf("bench: open store for seed %d: %w", so.Seed, err)
		}
		so.Store = st
		rep, err := Run(ctx, so)
		_ = st.Close(context.WithoutCancel(ctx)) // a fresh database per seed; a failed close loses nothing measured
		if err != nil {
			return reps, fmt.Errorf("bench: seed %d: %w", so.Seed, err)
		}
		if each != nil {
			each(rep)
		}
		reps = append(reps, rep)
	}
	return reps, nil
}
