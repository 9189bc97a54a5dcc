package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestSchedulesListSelector: `schedules list -l team=data` lists only the
// labelled schedules, one page at a time, each page reading only what it
// shows, and the hint for the next page keeps the selector.
func TestSchedulesListSelector(t *testing.T) {
	b := setupCLI(t)
	for i := range 5 {
		team := "web"
		if i%2 == 0 {
			team = "data"
		}
		b.ok(t, "schedules", "create", "--id", fmt.Sprint("s", i), "--cron", "@daily", "--builtin", "noop", "--label", "team="+team, "--label", "tier=1")
	}
	before := b.st.Meter().Total()
	out, errOut, err := b.run(t, "", "schedules", "list", "-l", "team=data", "--page-size", "2")
	if err != nil {
		t.Fatalf("list -l: %v %s", err, errOut)
	}
	if read := b.st.Meter().Total() - before; read != 2 {
		t.Errorf("one page of 2 read %d documents", read)
	}
	if !strings.Contains(out, "s0") || !strings.Contains(out, "s2") || strings.Contains(out, "s1") || strings.Contains(out, "s4") {
		t.Errorf("first page:\n%s", out)
	}
	if !strings.Contains(errOut, "-l team=data --page-token ") {
		t.Errorf("next-page hint %q does not keep the selector", errOut)
	}
	out = b.ok(t, "schedules", "list", "-l", "team=data", "--all")
	if got := strings.Count(out, "\ns"); got != 3 {
		t.Errorf("--all -l team=data listed %d schedules, want 3:\n%s", got, out)
	}
	b.ok(t, "schedules", "update", "s1", "--label", "tier-", "--label", "team=data")
	if got := b.stored(t, "s1").Labels; len(got) != 1 || got["team"] != "data" {
		t.Errorf("labels after update --label tier- --label team=data: %v", got)
	}
	// != and in: s3 (s1 is team=data since the update), the hint quoted
	// for the shell.
	out, errOut, err = b.run(t, "", "schedules", "list", "-l", "team!=data,tier in (1,2)", "--page-size", "1")
	if err != nil || !strings.Contains(out, "s3") || strings.Contains(out, "s1") || !strings.Contains(errOut, "-l 'team!=data,tier in (1,2)' --page-token ") {
		t.Errorf("list -l 'team!=data,tier in (1,2)': %v\n%s%s", err, out, errOut)
	}
	if _, _, err := b.run(t, "", "schedules", "list", "-l", "team notin (a)"); exitCode(err) != 2 || !strings.Contains(err.Error(), "notin is not supported") {
		t.Errorf("-l team notin (a): %v, want a usage error with the reason", err)
	}
	if _, _, err := b.run(t, "", "schedules", "list", "-l", "team"); exitCode(err) != 2 {
		t.Errorf("-l team: %v, want a usage error", err)
	}
}
