package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// runNext runs `baton next` in-process with a fixed clock.
func runNext(t *testing.T, args ...string) (string, error) {
	t.Helper()
	now := func() time.Time { return time.Date(2026, 3, 29, 0, 50, 0, 0, time.UTC) }
	cmd := newNextCmd(now, schedulesClientFromEnv)
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestNextCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"berlin spring forward", []string{"*/15 * * * *", "--tz", "Europe/Berlin", "--from", "2026-03-29T01:30:00+01:00", "-n", "3"},
			[]string{"2026-03-29T01:45:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:15:00+02:00"}},
		{"default count and clock, UTC", []string{"0 * * * *"},
			[]string{"2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z", "2026-03-29T03:00:00Z", "2026-03-29T04:00:00Z", "2026-03-29T05:00:00Z"}},
		{"clock shown in the zone", []string{"30 2 * * *", "--tz", "Europe/Berlin", "--count", "2"},
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"}},
		{"new york fall back", []string{"0 * * * *", "--tz=America/New_York", "--from=2026-11-01T00:30:00-04:00", "-n=3"},
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T02:00:00-05:00", "2026-11-01T03:00:00-05:00"}},
	} {
		out, err := runNext(t, tc.args...)
		if err != nil {
			t.Errorf("%s: baton next %q: %v", tc.name, tc.args, err)
			continue
		}
		if diff := cmp.Diff(tc.want, strings.Fields(out)); diff != "" {
			t.Errorf("%s: baton next %q (-want,+got):\n%s", tc.name, tc.args, diff)
		}
	}
}

// TestNextCommandUsageErrors: bad input exits 2 and says what is wrong.
func TestNextCommandUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args   []string
		reason string
	}{
		{[]string{}, "exactly one argument"},
		{[]string{"*", "*"}, "exactly one argument"},
		{[]string{"61 * * * *"}, `minute field "61"`},
		{[]string{"* * *"}, "has 3 fields"},
		{[]string{"@every 1ms"}, "shorter than the minimum"},
		{[]string{"* * * * *", "--tz", "Mars/Base"}, "unknown time zone"},
		{[]string{"* * * * *", "--from", "yesterday"}, "--from"},
		{[]string{"* * * * *", "-n", "0"}, "-n 0"},
		{[]string{"* * * * *", "-n", "x"}, "invalid argument"},
		{[]string{"* * * * *", "--frobnicate"}, "unknown flag"},
	} {
		_, err := runNext(t, tc.args...)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != 2 {
			t.Errorf("baton next %q: got %v, want exit status 2", tc.args, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("baton next %q error (-want,+got):\n-…%s…\n+%v", tc.args, tc.reason, err)
		}
	}
}

// TestNextCommandOutput: -o json (and --json) and -o yaml print one
// document with the expression, the zone and the fire times in the zone.
func TestNextCommandOutput(t *testing.T) {
	t.Parallel()
	args := []string{"*/15 * * * *", "--tz", "Europe/Berlin", "--from", "2026-03-29T01:30:00+01:00", "-n", "2"}
	want := "{\n  \"expression\": \"*/15 * * * *\",\n  \"timeZone\": \"Europe/Berlin\",\n  \"fireTimes\": [\n" +
		"    \"2026-03-29T01:45:00+01:00\",\n    \"2026-03-29T03:00:00+02:00\"\n  ]\n}\n"
	for _, flag := range [][]string{{"-o", "json"}, {"--json"}} {
		out, err := runNext(t, append(append([]string{}, args...), flag...)...)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, out); diff != "" {
			t.Errorf("next %v (-want,+got):\n%s", flag, diff)
		}
	}
	// Without --tz the document names UTC, the zone the times are in.
	out, err := runNext(t, "0 * * * *", "-n", "1", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if want := "\"timeZone\": \"UTC\""; !strings.Contains(out, want) || !strings.Contains(out, "2026-03-29T01:00:00Z") {
		t.Errorf("next -o json without --tz lacks %s or the UTC time:\n%s", want, out)
	}
	out, err = runNext(t, append(args, "-o", "yaml")...)
	if err != nil {
		t.Fatal(err)
	}
	wantYAML := "expression: '*/15 * * * *'\nfireTimes:\n- \"2026-03-29T01:45:00+01:00\"\n- \"2026-03-29T03:00:00+02:00\"\ntimeZone: Europe/Berlin\n"
	if diff := cmp.Diff(wantYAML, out); diff != "" {
		t.Errorf("next -o yaml (-want,+got):\n%s", diff)
	}
}
