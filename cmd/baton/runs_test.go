package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/schedule"
)

// seedCLIRuns inserts runs of two schedules, a minute apart from at,
// ending a minute before at: r0 of a failed, r1 of b succeeded, r2 of a
// failed and manual, r3 of b pending.
func seedCLIRuns(t *testing.T, b *cliBundle, at time.Time) {
	t.Helper()
	c := b.st.Collection(schedule.RunsCollection)
	for i, r := range []schedule.Run{
		{ScheduleID: "a", Status: schedule.RunFailed, Source: schedule.SourceScheduled, Error: "exit 3"},
		{ScheduleID: "b", Status: schedule.RunSucceeded, Source: schedule.SourceScheduled, Output: "ok"},
		{ScheduleID: "a", Status: schedule.RunFailed, Source: schedule.SourceManual, Error: "timeout"},
		{ScheduleID: "b", Status: schedule.RunPending, Source: schedule.SourceScheduled},
	} {
		r.ID = fmt.Sprintf("r%d", i)
		r.FireTime = at.Add(time.Duration(i-4) * time.Minute).UTC().Truncate(time.Millisecond)
		r.CreatedAt, r.Attempt = r.FireTime, 1
		if _, err := c.InsertIdempotent(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

func runIDsOf(t *testing.T, out string) []string {
	t.Helper()
	var p catalog.RunPage
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	ids := []string{}
	for _, r := range p.Runs {
		ids = append(ids, r.ID)
	}
	return ids
}

// TestRunsListAcrossSchedules: `runs list` without --schedule lists the
// runs of every schedule through GET /runs, filtered by --status,
// --source and --since (a time or a duration before now), newest first.
func TestRunsListAcrossSchedules(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	now := time.Now()
	seedCLIRuns(t, b, now)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "[r3 r2 r1 r0]"},
		{[]string{"--status", "failed"}, "[r2 r0]"},
		{[]string{"--source", "manual"}, "[r2]"},
		{[]string{"--since", "150s"}, "[r3 r2]"},
		{[]string{"--since", now.Add(-3*time.Minute - time.Second).UTC().Format(time.RFC3339)}, "[r3 r2 r1]"},
		{[]string{"--status", "failed", "--schedule", "a", "--since", "1h"}, "[r2 r0]"},
		{[]string{"--schedule", "b"}, "[r3 r1]"},
		{[]string{"--schedule", "b", "--since", "90s"}, "[r3]"},
		{[]string{"--schedule", "b", "--status", "succeeded"}, "[r1]"},
	} {
		args := append([]string{"runs", "list", "--json"}, tc.args...)
		if got := fmt.Sprint(runIDsOf(t, b.ok(t, args...))); got != tc.want {
			t.Errorf("baton %s = %s; want %s", strings.Join(args, " "), got, tc.want)
		}
	}
	table := b.ok(t, "runs", "list", "--status", "failed")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "RUN") || !strings.Contains(lines[0], "SCHEDULE") ||
		!strings.Contains(lines[1], "r2") || !strings.Contains(lines[1], "timeout") || !strings.Contains(lines[2], "exit 3") {
		t.Errorf("runs list --status failed:\n%s", table)
	}
	// Pages continue with the hint, which names the time --since meant.
	out, errOut, err := b.run(t, "", "runs", "list", "--since", "1h", "--page-size", "1")
	if err != nil || !strings.Contains(out, "r3") {
		t.Fatalf("first page: %v\n%s", err, out)
	}
	hint := strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(errOut, "more: ")), " (or --all)")
	args := strings.Fields(hint)[1:] // drop "baton"
	if !strings.Contains(hint, "--since 20") || !strings.Contains(hint, "--page-token ") {
		t.Fatalf("hint %q; want a --since time and a --page-token", errOut)
	}
	if out := b.ok(t, args...); !strings.Contains(out, "r2") || strings.Contains(out, "r3") {
		t.Errorf("baton %s:\n%s; want the second page (r2)", hint, out)
	}
}

// TestRunsListFlagsValidated: a bad --status, --source or --since, or
// --source with --status or --schedule, is exit 2 naming the flag, with
// no request sent.
func TestRunsListFlagsValidated(t *testing.T) {
	t.Parallel()
	errSent := errors.New("a request would be sent")
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--status", "broken"}, "--status must be one of pending, running, succeeded, failed, skipped"},
		{[]string{"--status", "FAILED"}, "--status"},
		{[]string{"--source", "cron"}, "--source must be one of"},
		{[]string{"--since", "yesterday"}, "--since must be an RFC 3339 time"},
		{[]string{"--since", "-1h"}, "--since must be"},
		{[]string{"--since", "0s"}, "--since must be"},
		{[]string{"--source", "manual", "--status", "failed"}, "--source cannot be combined"},
		{[]string{"--source", "manual", "--schedule", "a"}, "--source cannot be combined"},
		{[]string{"--status", "failed", "--page-size", "0"}, "--page-size"},
	} {
		calls := 0
		b := &cliBundle{client: func() (*apiClient, error) { calls++; return nil, errSent }}
		args := append([]string{"runs", "list"}, tc.args...)
		_, _, err := b.run(t, "", args...)
		if code := exitCode(err); code != 2 || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("baton %s: exit %d, %v; want 2 saying %q", strings.Join(args, " "), code, err, tc.says)
		}
		if calls != 0 {
			t.Errorf("baton %s: made a client; want no request", strings.Join(args, " "))
		}
	}
}

// TestRunsGet: `runs get ID` prints one run as a card, or as JSON; a
// missing run is exit 1 naming it; no id is exit 2.
func TestRunsGet(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	seedCLIRuns(t, b, time.Now())
	card := b.ok(t, "runs", "get", "r2")
	for _, want := range []string{"Run:", "r2", "Schedule:", "a", "Status:", "failed", "Source:", "manual", "Error:", "timeout"} {
		if !strings.Contains(card, want) {
			t.Errorf("runs get r2 lacks %q:\n%s", want, card)
		}
	}
	var r schedule.Run
	if err := json.Unmarshal([]byte(b.ok(t, "runs", "get", "r1", "--json")), &r); err != nil || r.ID != "r1" || r.Output != "ok" {
		t.Errorf("runs get r1 --json = %+v, %v", r, err)
	}
	_, _, err := b.run(t, "", "runs", "get", "nope")
	if code := exitCode(err); code != 1 || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("runs get nope: exit %d, %v; want 1 naming the id", code, err)
	}
	if _, _, err := b.run(t, "", "runs", "get"); exitCode(err) != 2 {
		t.Errorf("runs get without an id: exit %d, %v; want 2", exitCode(err), err)
	}
}

// TestRunsListByLabel: `runs list -l` resolves the selector to the
// matching schedules and merges their newest runs, newest first; it reads
// only the matching schedules' runs, refuses a selector matching more
// than maxLabelRunSchedules schedules, and refuses the flags it cannot
// honour.
func TestRunsListByLabel(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.ok(t, "schedules", "create", "--id", "a", "--cron", "@daily", "--builtin", "noop", "--label", "team=data")
	b.ok(t, "schedules", "create", "--id", "b", "--cron", "@daily", "--builtin", "noop", "--label", "team=web")
	b.ok(t, "schedules", "create", "--id", "c", "--cron", "@daily", "--builtin", "noop")
	seedCLIRuns(t, b, time.Now())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-l", "team=data"}, "[r2 r0]"},
		{[]string{"-l", "team!=data"}, "[r3 r1]"},
		{[]string{"-l", "team in (data,web)"}, "[r3 r2 r1 r0]"},
		{[]string{"-l", "team in (data,web)", "--page-size", "3"}, "[r3 r2 r1]"},
		{[]string{"-l", "team in (data,web)", "--status", "failed"}, "[r2 r0]"},
		{[]string{"-l", "team=ops"}, "[]"},
	} {
		args := append([]string{"runs", "list", "--json"}, tc.args...)
		if got := fmt.Sprint(runIDsOf(t, b.ok(t, args...))); got != tc.want {
			t.Errorf("baton %s = %s; want %s", strings.Join(args, " "), got, tc.want)
		}
	}
	_, errOut, err := b.run(t, "", "runs", "list", "-l", "team in (data,web)", "--page-size", "1")
	if err != nil || !strings.Contains(errOut, "the newest 1 runs of 2 schedules") {
		t.Errorf("a cut list does not say so: %v %q", err, errOut)
	}
	for _, args := range [][]string{
		{"-l", "team=data", "--schedule", "a"},
		{"-l", "team=data", "--source", "manual"},
		{"-l", "team=data", "--all"},
		{"-l", "team notin (a)"},
	} {
		if _, _, err := b.run(t, "", append([]string{"runs", "list"}, args...)...); exitCode(err) != 2 {
			t.Errorf("runs list %v: %v, want a usage error", args, err)
		}
	}
	for i := range maxLabelRunSchedules {
		b.ok(t, "schedules", "create", "--id", fmt.Sprintf("m%02d", i), "--cron", "@daily", "--builtin", "noop", "--label", "many=yes")
	}
	if _, _, err := b.run(t, "", "runs", "list", "-l", "many=yes"); err != nil {
		t.Errorf("-l matching %d schedules: %v", maxLabelRunSchedules, err)
	}
	b.ok(t, "schedules", "update", "a", "--label", "many=yes")
	if _, _, err := b.run(t, "", "runs", "list", "-l", "many=yes"); exitCode(err) != 2 || !strings.Contains(err.Error(), "more than 50 schedules") {
		t.Errorf("-l matching %d schedules: %v, want a usage error naming the bound", maxLabelRunSchedules+1, err)
	}
}
