package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/schedule"
)

// TestOutputFlagValidated: on every command with -o, a bad value, or
// --json with another -o, is a usage error (exit 2) naming the flag, before
// any client is made (so before any request).
func TestOutputFlagValidated(t *testing.T) {
	t.Parallel()
	errSent := errors.New("a request would be sent")
	cmds := [][]string{
		{"schedules", "list"}, {"schedules", "get", "x"}, {"schedules", "describe", "x"},
		{"schedules", "create", "--cron", "@hourly", "--builtin", "noop"}, {"schedules", "update", "x", "--cron", "@hourly"},
		{"schedules", "pause", "x"}, {"schedules", "resume", "x"}, {"schedules", "trigger", "x"},
		{"runs", "list", "--schedule", "x"},
		{"gpu", "enqueue", "--payload", "p"}, {"gpu", "get", "j"}, {"gpu", "list"}, {"gpu", "cancel", "j"}, {"gpu", "pool"},
		{"lease", "status"}, {"next", "@hourly"},
	}
	for _, c := range cmds {
		for _, bad := range [][]string{{"-o", "xml"}, {"--output", "JSON"}, {"--json", "-o", "yaml"}} {
			calls := 0
			client := func() (*apiClient, error) { calls++; return nil, errSent }
			root := &cobra.Command{Use: "baton", SilenceUsage: true, SilenceErrors: true}
			lease := &cobra.Command{Use: "lease"}
			lease.AddCommand(newLeaseStatusCmd())
			root.AddCommand(newSchedulesCmd(client), newRunsCmd(client), newGPUCmd(client), lease, newNextCmd(time.Now, client))
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			args := append(append([]string{}, c...), bad...)
			root.SetArgs(args)
			err := root.ExecuteContext(context.Background())
			line := strings.Join(args, " ")
			want := "--output (-o)"
			if bad[0] == "--json" {
				want = "--json is -o json"
			}
			if code := exitCode(err); code != 2 || !strings.Contains(err.Error(), want) {
				t.Errorf("baton %s: exit %d, %v; want 2 naming %q", line, code, err, want)
			}
			if calls != 0 {
				t.Errorf("baton %s: made a client %d times; want no request", line, calls)
			}
		}
	}
}

// TestSchedulesOutputFormats: -o json and --json print the same document,
// -o yaml the same fields (the JSON names) as YAML, and table stays the
// default, for a resource, a list and a trigger's run.
func TestSchedulesOutputFormats(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.ok(t, "schedules", "create", "--id", "fmt", "--cron", "@hourly", "--builtin", "noop", "-o", "json")
	stored := b.stored(t, "fmt")

	asJSON := b.ok(t, "schedules", "get", "fmt", "-o", "json")
	if alias := b.ok(t, "schedules", "get", "fmt", "--json"); alias != asJSON {
		t.Errorf("--json and -o json differ:\n%s\n---\n%s", alias, asJSON)
	}
	asYAML := b.ok(t, "schedules", "get", "fmt", "-o", "yaml")
	if strings.HasPrefix(strings.TrimSpace(asYAML), "{") || !strings.Contains(asYAML, "cron: '@hourly'") || !strings.Contains(asYAML, "timeZone:") {
		t.Errorf("-o yaml is not YAML with the JSON field names:\n%s", asYAML)
	}
	var fromYAML schedule.Schedule
	if err := yaml.Unmarshal([]byte(asYAML), &fromYAML); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(stored, &fromYAML); diff != "" {
		t.Errorf("get -o yaml vs database (-db,+cli):\n%s", diff)
	}
	if table := b.ok(t, "schedules", "get", "fmt"); !strings.Contains(table, "Cron:") {
		t.Errorf("default output is not the card:\n%s", table)
	}
	if table := b.ok(t, "schedules", "get", "fmt", "-o", "table"); !strings.Contains(table, "Cron:") {
		t.Errorf("-o table is not the card:\n%s", table)
	}

	var page catalog.SchedulePage
	if err := yaml.Unmarshal([]byte(b.ok(t, "schedules", "list", "-o", "yaml")), &page); err != nil || len(page.Schedules) != 1 || page.Schedules[0].ID != "fmt" {
		t.Errorf("list -o yaml: %+v, %v", page, err)
	}

	var run schedule.Run
	if err := yaml.Unmarshal([]byte(b.ok(t, "schedules", "trigger", "fmt", "-o", "yaml")), &run); err != nil || run.ScheduleID != "fmt" || run.Source != schedule.SourceManual {
		t.Errorf("trigger -o yaml: %+v, %v", run, err)
	}
	var runs catalog.RunPage
	if err := yaml.Unmarshal([]byte(b.ok(t, "runs", "list", "--schedule", "fmt", "-o", "yaml")), &runs); err != nil || len(runs.Runs) != 1 || runs.Runs[0].ID != run.ID {
		t.Errorf("runs list -o yaml: %+v, %v; want the triggered run %s", runs, err, run.ID)
	}
	var paused schedule.Schedule
	if err := json.Unmarshal([]byte(b.ok(t, "schedules", "pause", "fmt", "-o", "json")), &paused); err != nil || paused.Enabled {
		t.Errorf("pause -o json: %+v, %v", paused, err)
	}
}

// TestSchedulesDescribe: describe shows the config, the last 10 runs (one
// page of 10, though there are more) and the next 5 fire times in the
// schedule's zone, with the DST change marked in the table; -o json and
// yaml give one document of schedule, recentRuns and nextFireTimes.
func TestSchedulesDescribe(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	// Every other month at noon in Berlin: any 5 fire times in a row
	// span both UTC+01:00 and UTC+02:00.
	b.ok(t, "schedules", "create", "--id", "bimonthly", "--cron", "0 12 1 */2 *", "--tz", "Europe/Berlin", "--builtin", "noop")
	// 12 finished runs, as the tick would have left them, an hour apart
	// (manual triggers within one second are one run).
	base := time.Now().Add(-24 * time.Hour).UTC().Truncate(time.Second)
	for i := 0; i < 12; i++ {
		ft := base.Add(time.Duration(i) * time.Hour)
		run := schedule.Run{ID: schedule.RunID("bimonthly", ft, schedule.SourceScheduled, 1), ScheduleID: "bimonthly", FireTime: ft,
			Source: schedule.SourceScheduled, Status: schedule.RunSucceeded, Attempt: 1, CreatedAt: ft, FinishedAt: ft.Add(time.Second), Output: "ok"}
		if _, err := emutest.Raw(t, b.st).Collection(schedule.RunsCollection).InsertOne(context.Background(), run); err != nil {
			t.Fatal(err)
		}
	}
	before := time.Now()
	var doc struct {
		Schedule      schedule.Schedule `json:"schedule"`
		RecentRuns    []schedule.Run    `json:"recentRuns"`
		NextFireTimes []time.Time       `json:"nextFireTimes"`
	}
	if err := json.Unmarshal([]byte(b.ok(t, "schedules", "describe", "bimonthly", "-o", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(b.stored(t, "bimonthly"), &doc.Schedule); diff != "" {
		t.Errorf("describe's schedule vs database (-db,+cli):\n%s", diff)
	}
	if len(doc.RecentRuns) != 10 || !doc.RecentRuns[0].FireTime.Equal(base.Add(11*time.Hour)) {
		t.Errorf("recentRuns: %d runs, first %+v; want the last 10 of 12, newest first", len(doc.RecentRuns), doc.RecentRuns)
	}
	spec, err := schedule.Parse("0 12 1 */2 *")
	if err != nil {
		t.Fatal(err)
	}
	loc, err := schedule.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Time{}
	for from := before; len(want) < 5; {
		from = schedule.Next(spec, loc, from)
		want = append(want, from)
	}
	if diff := cmp.Diff(want, doc.NextFireTimes, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("nextFireTimes (-want,+got):\n%s", diff)
	}

	var fromYAML map[string]any
	if err := yaml.Unmarshal([]byte(b.ok(t, "schedules", "describe", "bimonthly", "-o", "yaml")), &fromYAML); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"schedule", "recentRuns", "nextFireTimes"} {
		if _, ok := fromYAML[k]; !ok {
			t.Errorf("describe -o yaml lacks %q: %v", k, fromYAML)
		}
	}

	table := b.ok(t, "schedules", "describe", "bimonthly")
	for _, w := range []string{"Cron:", "0 12 1 */2 *", "Recent runs (last 10):", "scheduled", "succeeded", "Next fire times (Europe/Berlin):", "DST: UTC offset", want[0].Format(time.RFC3339)} {
		if !strings.Contains(table, w) {
			t.Errorf("describe table lacks %q:\n%s", w, table)
		}
	}
	if n := strings.Count(table, "bimonthly@"); n != 10 {
		t.Errorf("describe table shows %d runs, want 10:\n%s", n, table)
	}

	_, _, err = b.run(t, "", "schedules", "describe", "nope")
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "404") {
		t.Errorf("describe of a missing schedule: exit %d, %v; want 1 naming 404", exitCode(err), err)
	}
}
