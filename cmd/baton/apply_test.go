package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/shared/schedule"
)

// apply runs one baton apply command line against b's server.
func (b *cliBundle) apply(t *testing.T, client clientFunc, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "baton", SilenceUsage: true, SilenceErrors: true}
	if client == nil {
		client = b.client
	}
	root.AddCommand(newApplyCmd(client))
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"apply"}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const (
	holidaysYAML = `kind: Calendar
id: holidays
weekdays: [sat, sun]
`
	nightlyYAML = `kind: Schedule
metadata:
  owner: team-a
id: nightly
cron: "30 2 * * *"
timeZone: Europe/Berlin
excludeCalendars: [holidays]
labels:
  team: data
target:
  type: builtin
  builtin: {name: noop}
`
	hourlyJSON = `{"kind": "Schedule", "id": "hourly", "cron": "@hourly", "target": {"type": "builtin", "builtin": {"name": "noop"}}}
`
)

// TestApplyPlanDryRunIdempotent: the plan names every create; --dry-run
// writes nothing and exits 2; apply writes, marks the owner, exits 2;
// the same files again write nothing and exit 0; one edited cron is one
// update, with its diff, that changes only that schedule.
func TestApplyPlanDryRunIdempotent(t *testing.T) {
	b := setupCLI(t)
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", holidaysYAML+"---\n"+nightlyYAML)
	writeFile(t, dir, "b.json", hourlyJSON)
	meter := b.st.Meter()

	w0 := meter.Writes()
	out, err := b.apply(t, nil, "-f", dir, "--owner", "team-a", "--dry-run")
	if exitCode(err) != applyChanged {
		t.Fatalf("dry run: exit %d (%v), want 2\n%s", exitCode(err), err, out)
	}
	for _, want := range []string{"+ calendar holidays (create)", "+ schedule nightly (create)", "+ schedule hourly (create)", "Plan: 3 to create, 0 to update, 0 unchanged, 0 to delete.", "Dry run: nothing written."} {
		if !strings.Contains(out, want) {
			t.Errorf("dry-run output lacks %q:\n%s", want, out)
		}
	}
	if n := meter.Writes() - w0; n != 0 {
		t.Errorf("--dry-run wrote %d documents", n)
	}

	out, err = b.apply(t, nil, "-f", dir, "--owner", "team-a")
	if exitCode(err) != applyChanged {
		t.Fatalf("apply: exit %d (%v), want 2\n%s", exitCode(err), err, out)
	}
	for _, id := range []string{"nightly", "hourly"} {
		if got := b.stored(t, id).Labels[schedule.OwnerLabel]; got != "team-a" {
			t.Errorf("%s: owner label %q, want team-a", id, got)
		}
	}

	w1 := meter.Writes()
	out, err = b.apply(t, nil, "-f", dir, "--owner", "team-a")
	if exitCode(err) != applyNoChanges || !strings.Contains(out, "Plan: 0 to create, 0 to update, 3 unchanged, 0 to delete.") {
		t.Errorf("second apply: exit %d (%v), want 0 and all unchanged\n%s", exitCode(err), err, out)
	}
	if n := meter.Writes() - w1; n != 0 {
		t.Errorf("applying the same files again wrote %d documents", n)
	}

	writeFile(t, dir, "b.json", strings.Replace(hourlyJSON, "@hourly", "5 * * * *", 1))
	out, err = b.apply(t, nil, "-f", dir, "--owner", "team-a")
	if exitCode(err) != applyChanged || !strings.Contains(out, "~ schedule hourly (update)\n    cron: \"@hourly\" → \"5 * * * *\"\n") ||
		!strings.Contains(out, "Plan: 0 to create, 1 to update, 2 unchanged, 0 to delete.") || !strings.Contains(out, "schedule hourly: updated\n") {
		t.Errorf("edited cron: exit %d (%v)\n%s", exitCode(err), err, out)
	}
	if sc := b.stored(t, "hourly"); sc.Cron != "5 * * * *" || sc.Version != 2 {
		t.Errorf("hourly after the edit: cron %q version %d, want 5 * * * * at version 2", sc.Cron, sc.Version)
	}
	if v := b.stored(t, "nightly").Version; v != 1 {
		t.Errorf("nightly was written too: version %d", v)
	}

	// A calendar is replaced whole, under If-Match, and its diff shown.
	writeFile(t, dir, "a.yaml", strings.Replace(holidaysYAML, "[sat, sun]", "[sun]", 1)+"---\n"+nightlyYAML)
	out, err = b.apply(t, nil, "-f", dir, "--owner", "team-a")
	if exitCode(err) != applyChanged || !strings.Contains(out, "~ calendar holidays (update)\n    weekdays: [\"sat\",\"sun\"] → [\"sun\"]\n") {
		t.Errorf("edited calendar: exit %d (%v)\n%s", exitCode(err), err, out)
	}
	cal, err := b.st.Calendars().GetCalendar(context.Background(), "holidays")
	if err != nil || cal.Version != 2 || len(cal.Weekdays) != 1 || cal.Labels[schedule.OwnerLabel] != "team-a" {
		t.Errorf("holidays after the edit: %+v, %v", cal, err)
	}
}

// TestApplyStopsOnConcurrentEdit: a schedule changed between the plan's
// read and apply's write is not overwritten: the update carries If-Match,
// the apply stops with exit 1 and says so.
func TestApplyStopsOnConcurrentEdit(t *testing.T) {
	b := setupCLI(t)
	dir := t.TempDir()
	writeFile(t, dir, "b.json", hourlyJSON)
	if _, err := b.apply(t, nil, "-f", dir); exitCode(err) != applyChanged {
		t.Fatalf("first apply: %v", err)
	}
	writeFile(t, dir, "b.json", strings.Replace(hourlyJSON, "@hourly", "5 * * * *", 1))

	// A hop that lets another writer in just before apply's PATCH.
	target, _ := url.Parse(b.srv.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var raced atomic.Bool
	hop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch && raced.CompareAndSwap(false, true) {
			req, _ := http.NewRequest(http.MethodPatch, b.srv.URL+"/schedules/hourly", strings.NewReader(`{"description":"theirs"}`))
			req.Header.Set("Authorization", "Bearer "+cliToken)
			res, err := http.DefaultClient.Do(req)
			if err != nil || res.StatusCode != http.StatusOK {
				t.Errorf("the other writer: %v %v", err, res)
			}
			if res != nil {
				res.Body.Close()
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(hop.Close)
	viaHop := func() (*apiClient, error) { return &apiClient{base: hop.URL, token: cliToken, http: hop.Client()}, nil }

	out, err := b.apply(t, viaHop, "-f", dir)
	if exitCode(err) != applyError || !strings.Contains(err.Error(), "schedule hourly changed since the plan read it") {
		t.Errorf("apply over a concurrent edit: exit %d, %v\n%s", exitCode(err), err, out)
	}
	if sc := b.stored(t, "hourly"); sc.Cron != "@hourly" || sc.Description != "theirs" || sc.Version != 2 {
		t.Errorf("after the refused apply: cron %q description %q version %d; want the other writer's version 2 untouched", sc.Cron, sc.Description, sc.Version)
	}
}

// TestApplyPruneScope: --prune --owner team-a deletes only team-a's
// schedule that the files no longer hold; another owner's and an unowned
// one, made by hand, stay; and a file cannot take over another owner's
// schedule.
func TestApplyPruneScope(t *testing.T) {
	b := setupCLI(t)
	b.ok(t, "schedules", "create", "--id", "a-gone", "--cron", "@daily", "--builtin", "noop", "--label", schedule.OwnerLabel+"=team-a")
	b.ok(t, "schedules", "create", "--id", "b-kept", "--cron", "@daily", "--builtin", "noop", "--label", schedule.OwnerLabel+"=team-b")
	b.ok(t, "schedules", "create", "--id", "by-hand", "--cron", "@daily", "--builtin", "noop")
	dir := t.TempDir()
	writeFile(t, dir, "b.json", hourlyJSON)

	if _, err := b.apply(t, nil, "-f", dir, "--prune"); exitCode(err) != applyError || !strings.Contains(err.Error(), "--prune needs --owner") {
		t.Errorf("--prune without --owner: %v", err)
	}
	b.ok(t, "schedules", "create", "--id", "a-web", "--cron", "@daily", "--builtin", "noop", "--label", schedule.OwnerLabel+"=team-a", "--label", "team=web")
	// -l narrows the prune: only team-a's schedules that match it too.
	for _, sel := range []string{"team=data", "team in (data,ops)"} {
		out, err := b.apply(t, nil, "-f", dir, "--owner", "team-a", "--prune", "-l", sel)
		if exitCode(err) == applyError || strings.Contains(out, "(delete)") {
			t.Errorf("prune -l %s: exit %d (%v), want no delete\n%s", sel, exitCode(err), err, out)
		}
	}
	// team!=web keeps what has no team label (a-gone), as kubectl's !=
	// does, and leaves a-web (team=web) out of scope.
	out, err := b.apply(t, nil, "-f", dir, "--owner", "team-a", "--prune", "-l", "team!=web")
	if exitCode(err) != applyChanged || !strings.Contains(out, "- schedule a-gone (delete)") || strings.Contains(out, "a-web") ||
		!strings.Contains(out, "Plan: 0 to create, 0 to update, 1 unchanged, 1 to delete.") {
		t.Errorf("prune -l team!=web: exit %d (%v)\n%s", exitCode(err), err, out)
	}
	if _, err := b.apply(t, nil, "-f", dir, "--owner", "team-a", "--prune", "-l", "team notin (web)"); exitCode(err) != applyError || !strings.Contains(err.Error(), "notin is not supported") {
		t.Errorf("-l with notin: %v", err)
	}
	b.ok(t, "schedules", "delete", "a-web")
	out, err = b.apply(t, nil, "-f", dir, "--owner", "team-a", "--prune")
	if exitCode(err) != applyNoChanges || !strings.Contains(out, "Plan: 0 to create, 0 to update, 1 unchanged, 0 to delete.") {
		t.Errorf("prune again: exit %d (%v)\n%s", exitCode(err), err, out)
	}
	if n := b.count(t); n != 3 { // hourly, b-kept, by-hand
		t.Errorf("%d schedules after prune, want 3", n)
	}
	b.stored(t, "b-kept")
	b.stored(t, "by-hand")

	writeFile(t, dir, "c.json", `{"kind":"Schedule","id":"b-kept","cron":"@daily","target":{"type":"builtin","builtin":{"name":"noop"}}}`)
	if _, err := b.apply(t, nil, "-f", dir, "--owner", "team-a"); exitCode(err) != applyError || !strings.Contains(err.Error(), `is owned by "team-b"`) {
		t.Errorf("taking over team-b's schedule: %v", err)
	}
}

// TestApplyRefusesBadDocuments: an unknown key, a bad value and a server
// field are refused with file:line, the document and the field, before
// anything (even the good documents of other files) is written.
func TestApplyRefusesBadDocuments(t *testing.T) {
	b := setupCLI(t)
	for _, tc := range []struct {
		name, text, want string
	}{
		{"unknown.yaml", "kind: Schedule\nid: x\ncrn: \"@daily\"\n", "unknown.yaml:3 (document 1): crn: unknown field"},
		{"nested.yaml", "kind: Schedule\nid: x\ncron: \"@daily\"\ntarget:\n  type: builtin\n  builtin:\n    name: noop\n    argz: {}\n", "nested.yaml:8 (document 1): target.builtin.argz: unknown field"},
		{"second.yaml", hourlyJSON + "---\nkind: Schedule\nid: y\ncron: \"not a cron\"\ntarget: {type: builtin, builtin: {name: noop}}\n", "second.yaml:5 (document 2): cron: has 3 fields"},
		{"label.yaml", "kind: Calendar\nid: c\nlabels:\n  \"bad key\": x\n", `label.yaml:4 (document 1): labels["bad key"]: invalid label key`},
		{"server.yaml", "kind: Schedule\nid: x\nversion: 3\n", "server.yaml:3 (document 1): version: set by the server"},
		{"kind.yaml", "kind: CronJob\nid: x\n", "kind.yaml:1 (document 1): kind: want Schedule or Calendar"},
		{"meta.yaml", "kind: Schedule\nmetadata:\n  name: x\n", "meta.yaml:3 (document 1): metadata.name: unknown field"},
	} {
		dir := t.TempDir()
		writeFile(t, dir, "0-good.json", strings.Replace(hourlyJSON, "hourly", "good", 1))
		writeFile(t, dir, tc.name, tc.text)
		w0 := b.st.Meter().Writes()
		_, err := b.apply(t, nil, "-f", dir)
		if exitCode(err) != applyError || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: exit %d, %v; want exit 1 with %q", tc.name, exitCode(err), err, tc.want)
		}
		if n := b.st.Meter().Writes() - w0; n != 0 {
			t.Errorf("%s: %d documents written before the refusal", tc.name, n)
		}
	}
}

// TestExportThenApplyChangesNothing: what baton export writes, baton
// apply takes back as it is: no changes, nothing written, exit 0; the
// owner label comes back as metadata.owner.
func TestExportThenApplyChangesNothing(t *testing.T) {
	b := setupCLI(t)
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", holidaysYAML+"---\n"+nightlyYAML)
	if _, err := b.apply(t, nil, "-f", dir); exitCode(err) != applyChanged {
		t.Fatalf("seed apply: %v", err)
	}
	b.ok(t, "schedules", "create", "--id", "by-hand", "--cron", "*/5 * * * *", "--tz", "America/New_York", "--target-url", "https://api.example.com/x",
		"--header", "X-Team: data", "--retry-attempts", "3", "--label", "team=web")
	b.ok(t, "schedules", "pause", "by-hand")

	root := &cobra.Command{Use: "baton", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newExportCmd(b.client))
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"export"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("export: %v", err)
	}
	if !strings.Contains(out.String(), "kind: Schedule\nmetadata:\n  owner: team-a\nid: nightly\n") {
		t.Errorf("export does not start nightly with kind, metadata.owner, id:\n%s", out.String())
	}
	t.Logf("export:\n%s", out.String())
	exported := writeFile(t, t.TempDir(), "all.yaml", out.String())
	w0 := b.st.Meter().Writes()
	got, err := b.apply(t, nil, "-f", exported)
	if exitCode(err) != applyNoChanges || !strings.Contains(got, "Plan: 0 to create, 0 to update, 3 unchanged, 0 to delete.") {
		t.Errorf("apply of the export: exit %d (%v)\n%s\nexport:\n%s", exitCode(err), err, got, out.String())
	}
	if n := b.st.Meter().Writes() - w0; n != 0 {
		t.Errorf("apply of the export wrote %d documents", n)
	}
}
