package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// runCal runs one baton command line with the calendars, schedules and
// next commands, against b's API.
func (b *cliBundle) runCal(t *testing.T, now time.Time, args ...string) (string, string, error) {
	t.Helper()
	root := &cobra.Command{Use: "baton", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newCalendarsCmd(b.client), newSchedulesCmd(b.client), newNextCmd(func() time.Time { return now }, b.client))
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// TestCalendarsCLI: put (flags), get, list and delete through the real
// API; a refused field names its flag and exits 1; `next --schedule`
// and `describe` mark the fire times the schedule's calendars skip.
func TestCalendarsCLI(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	now := time.Date(2026, 12, 23, 12, 0, 0, 0, time.UTC)
	ok := func(args ...string) string {
		t.Helper()
		out, errOut, err := b.runCal(t, now, args...)
		if err != nil {
			t.Fatalf("baton %s: %v (stderr %q)", strings.Join(args, " "), err, errOut)
		}
		return out
	}
	out := ok("calendars", "put", "xmas", "--tz", "Europe/Berlin", "--date", "2026-12-25", "--rule", "11/thu/4", "--range", "2026-12-31..2027-01-01")
	if !strings.Contains(out, "2026-12-25 2026-12-31..2027-01-01 every 11/thu/4") || !strings.Contains(out, "Version:    1") {
		t.Errorf("put printed:\n%s", out)
	}
	if out := ok("calendars", "get", "xmas"); !strings.Contains(out, "Europe/Berlin") {
		t.Errorf("get printed:\n%s", out)
	}
	ok("calendars", "put", "weekend", "--weekday", "sat", "--weekday", "sun")
	if out := ok("calendars", "list"); !strings.Contains(out, "weekend") || !strings.Contains(out, "xmas") {
		t.Errorf("list printed:\n%s", out)
	}
	_, _, err := b.runCal(t, now, "calendars", "put", "bad", "--date", "2026-02-30")
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "dates[0]") || !strings.Contains(err.Error(), "--date") {
		t.Errorf("bad date: %v (exit %d); want exit 1 naming dates[0] and --date", err, exitCode(err))
	}
	if _, _, err := b.runCal(t, now, "calendars", "put", "bad", "--rule", "christmas"); exitCode(err) != 2 {
		t.Errorf("unparsable --rule: exit %d, want 2 (%v)", exitCode(err), err)
	}

	// 23:30 UTC on the 24th is 00:30 on the 25th in Berlin: skipped.
	ok("schedules", "create", "--id", "late", "--cron", "30 23 * * *", "--builtin", "noop")
	_, _, err = b.runCal(t, now, "schedules", "update", "late", "--exclude-calendar", "xmas,nope")
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "excludeCalendars[1]") || !strings.Contains(err.Error(), "unknown calendar id") {
		t.Errorf("an unknown calendar: %v (exit %d); want exit 1 naming excludeCalendars[1]", err, exitCode(err))
	}
	ok("schedules", "update", "late", "--exclude-calendar", "weekend", "--only-calendar", "xmas")
	ok("schedules", "update", "late", "--only-calendar", "")
	if sc := b.stored(t, "late"); len(sc.OnlyCalendars) != 0 || len(sc.ExcludeCalendars) != 1 {
		t.Errorf("after clearing --only-calendar: exclude %v only %v", sc.ExcludeCalendars, sc.OnlyCalendars)
	}
	ok("schedules", "update", "late", "-f", writeTemp(t, `{"excludeCalendars":["xmas"]}`))
	out = ok("next", "--schedule", "late", "-n", "3")
	want := "2026-12-23T23:30:00Z\n2026-12-24T23:30:00Z  (skipped: excluded by calendar xmas)\n2026-12-25T23:30:00Z\n"
	if out != want {
		t.Errorf("next --schedule printed:\n%s\nwant:\n%s", out, want)
	}
	if out := ok("next", "--schedule", "late", "-n", "3", "-o", "json"); !strings.Contains(out, `"reason": "excluded by calendar xmas"`) {
		t.Errorf("next -o json lacks the skipped time:\n%s", out)
	}
	ok("calendars", "delete", "xmas")
	out, errOut, err := b.runCal(t, now, "next", "--schedule", "late", "-n", "2")
	if err != nil || strings.Contains(out, "skipped") || !strings.Contains(errOut, "calendar xmas named by schedule late does not exist") {
		t.Errorf("next after the calendar was deleted: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
}

// writeTemp writes body to a file of the test's and returns its path.
func writeTemp(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
