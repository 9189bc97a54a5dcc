package main

import (
	"bytes"
	"errors"
	"regexp"
	"strings"
	"testing"
)

// TestBenchTickSmoke runs `baton bench tick` small, end to end, and checks
// the report's shape and counts, never its times: every case of the time
// part is reported, the hand-offs enqueue every run and their runs all
// succeed through the real /Run, the tick writes two documents per due
// schedule with the hand-off and four inline, and the last line carries
// every key=value ratio that docs and scripts read.
func TestBenchTickSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts FerretDB, fake-gcs-server and the Cloud Tasks emulator")
	}
	t.Parallel()
	cmd := newBenchTickCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--schedules", "30", "--due", "5", "--timed", "6", "--swaps", "0", "--slow", "200ms"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("bench tick: %v\n%s", err, out.String())
	}
	report := out.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^reads: tick over 30 schedules, 5 due: 5 schedule documents read`),
		regexp.MustCompile(`(?m)^time: inline \(.*\), 6 due noop schedules: tick \S+ \(\S+ ms per schedule\), 4\.00 documents written .* 0 enqueued, 0 errors$`),
		regexp.MustCompile(`(?m)^time: floor, `),
		regexp.MustCompile(`(?m)^time: hand-off \(.*\), 6 due noop schedules: tick .*, 2\.00 documents written .* 6 enqueued, 0 errors$`),
		regexp.MustCompile(`(?m)^time: hand-off \(.*\), 6 due sleep 200ms schedules: tick .*, 2\.00 documents written .* 6 enqueued, 0 errors$`),
		regexp.MustCompile(`(?m)^time: diagnostic: hand-off with the queue paused, 6 due noop schedules: .* 6 enqueued, 0 errors$`),
		regexp.MustCompile(`(?m)^time:   the tick: deciding \S+, enqueueing \S+ \(CreateTask \S+ ms each, 16 at a time\), sweeping \S+$`),
		regexp.MustCompile(`(?m)^time:   its runs: every task done .*; [0-9]+ deliveries; .*; runs: 6 succeeded$`),
		regexp.MustCompile(`(?m)^time: per due schedule, inline/hand-off = \S+ \(goal ≥ 5: (PASS|FAIL)\); hand-off slow/noop = `),
	} {
		if !want.MatchString(report) {
			t.Errorf("report has no line matching %s:\n%s", want, report)
		}
	}
	if n := strings.Count(report, "its runs: every task done"); n != 2 {
		t.Errorf("%d hand-offs waited for their runs, want 2 (noop, slow):\n%s", n, report)
	}
	lines := strings.Split(strings.TrimSpace(report), "\n")
	last := regexp.MustCompile(`^reads_ratio_skip_over_cursor=[0-9.]+ tick_ratio_inline_over_handoff=[0-9.]+ tick_ratio_slow_over_noop_handoff=[0-9.]+$`)
	if !last.MatchString(lines[len(lines)-1]) {
		t.Errorf("last line %q does not match %s", lines[len(lines)-1], last)
	}
}

// TestBenchTickUsage: a bad --slow is a usage error, before anything starts.
func TestBenchTickUsage(t *testing.T) {
	t.Parallel()
	for _, slow := range []string{"0s", "-1s", "11m"} {
		cmd := newBenchTickCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs([]string{"--slow", slow})
		err := cmd.Execute()
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != 2 {
			t.Errorf("--slow %s: err = %v, want a usage error (exit 2)", slow, err)
		}
	}
}
