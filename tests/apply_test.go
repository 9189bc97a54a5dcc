package tests

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/client"
	"github.com/baton-cron/baton/emulator/scheduler"
	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/shared/schedule"
)

// TestApplyAgainstLocal drives the baton binary against the stack baton
// local runs, as a CI job would: apply a directory, export → apply is
// "no changes", one edited cron is one update, pruning a removed file
// deletes only that owner's schedule (a hand-made one stays), a bad
// document stops the apply with nothing written, and schedules list -l
// filters by label. Exit codes are the process's own.
func TestApplyAgainstLocal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	clock := scheduler.NewManualClock(time.Now().Truncate(time.Second))
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Clock: clock, Tick: time.Hour})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	defer s.Close(context.Background())

	work := t.TempDir()
	bin := buildBaton(t, work)
	baton := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "BATON_URL="+s.URL, "BATON_SCHEDULES_URL="+s.URL+"/Schedules", "BATON_TOKEN="+s.Token)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatalf("baton %s: %v", strings.Join(args, " "), err)
		}
		return string(out), 0
	}
	c, err := client.New(s.URL+"/Schedules", client.WithToken(s.Token))
	if err != nil {
		t.Fatal(err)
	}
	versions := func() map[string]int64 {
		t.Helper()
		m := map[string]int64{}
		for sc, err := range c.ListSchedules(ctx, client.ListOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			m[sc.ID] = sc.Version
		}
		return m
	}
	if _, err := c.CreateScheduleJSON(ctx, []byte(`{"id":"by-hand","cron":"@daily","target":{"type":"builtin","builtin":{"name":"noop"}}}`)); err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(work, "cron")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	doc := func(id, cron string) string {
		return "kind: Schedule\nid: " + id + "\ncron: \"" + cron + "\"\nlabels: {team: data}\ntarget: {type: builtin, builtin: {name: noop}}\n"
	}
	write("a1.yaml", doc("a1", "0 * * * *"))
	write("a2.yaml", doc("a2", "30 * * * *"))

	if out, code := baton("apply", "-f", dir, "--owner", "team-a"); code != 2 || !strings.Contains(out, "Plan: 2 to create") {
		t.Fatalf("first apply: exit %d\n%s", code, out)
	}

	exported, code := baton("export")
	if code != 0 {
		t.Fatalf("export: exit %d\n%s", code, exported)
	}
	expFile := filepath.Join(work, "export.yaml")
	if err := os.WriteFile(expFile, []byte(exported), 0o600); err != nil {
		t.Fatal(err)
	}
	before := versions()
	if out, code := baton("apply", "-f", expFile); code != 0 || !strings.Contains(out, "Plan: 0 to create, 0 to update, 3 unchanged, 0 to delete.") {
		t.Errorf("export → apply: exit %d, want 0 and no changes\n%s", code, out)
	}

	write("a1.yaml", doc("a1", "5 * * * *"))
	if out, code := baton("apply", "-f", dir, "--owner", "team-a"); code != 2 || !strings.Contains(out, "Plan: 0 to create, 1 to update, 1 unchanged, 0 to delete.") {
		t.Errorf("edited cron: exit %d\n%s", code, out)
	}
	after := versions()
	if after["a1"] != before["a1"]+1 || after["a2"] != before["a2"] || after["by-hand"] != before["by-hand"] {
		t.Errorf("versions before %v, after %v: want only a1's moved", before, after)
	}

	if err := os.Remove(filepath.Join(dir, "a2.yaml")); err != nil {
		t.Fatal(err)
	}
	if out, code := baton("apply", "-f", dir, "--owner", "team-a", "--prune"); code != 2 || !strings.Contains(out, "- schedule a2 (delete)") {
		t.Errorf("prune: exit %d\n%s", code, out)
	}
	if got := versions(); len(got) != 2 || got["by-hand"] == 0 || got["a1"] == 0 {
		t.Errorf("after prune: %v, want a1 and by-hand", got)
	}

	before = versions()
	write("a3.yaml", "kind: Schedule\nid: a3\ncron: \"@daily\"\ntarget: {type: builtin, builtin: {name: noop, colour: red}}\n")
	out, code := baton("apply", "-f", dir, "--owner", "team-a")
	if code != 1 || !strings.Contains(out, "a3.yaml:4 (document 1): target.builtin.colour: unknown field") {
		t.Errorf("bad document: exit %d, want 1 naming a3.yaml:4\n%s", code, out)
	}
	if got := versions(); len(got) != len(before) || got["a1"] != before["a1"] {
		t.Errorf("a refused apply wrote: before %v, after %v", before, got)
	}

	out, code = baton("schedules", "list", "-l", "team=data,"+schedule.OwnerLabel+"=team-a")
	if code != 0 || !strings.Contains(out, "a1") || strings.Contains(out, "by-hand") {
		t.Errorf("schedules list -l: exit %d\n%s", code, out)
	}

	// The console's schedules page filters by label the same way, and
	// shows a refused selector as the API's error.
	page := func(q string) string {
		t.Helper()
		res, err := http.Get(s.URL + "/console/?labelSelector=" + url.QueryEscape(q))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	if html := page("team=data"); !strings.Contains(html, ">a1</a>") || strings.Contains(html, ">by-hand</a>") || !strings.Contains(html, "<code>team=data</code>") {
		t.Errorf("console with labelSelector=team=data:\n%s", html)
	}
	// != keeps by-hand, which has no team label (kubectl's rule); in
	// keeps a1; both through the CLI and the console.
	out, code = baton("schedules", "list", "-l", "team!=data")
	if code != 0 || strings.Contains(out, "a1") || !strings.Contains(out, "by-hand") {
		t.Errorf("schedules list -l team!=data: exit %d\n%s", code, out)
	}
	if html := page("team!=data"); strings.Contains(html, ">a1</a>") || !strings.Contains(html, ">by-hand</a>") {
		t.Errorf("console with labelSelector=team!=data:\n%s", html)
	}
	if html := page("team in (data,ops)"); !strings.Contains(html, ">a1</a>") || strings.Contains(html, ">by-hand</a>") {
		t.Errorf("console with labelSelector=team in (data,ops):\n%s", html)
	}
	if html := page("team notin (web)"); !strings.Contains(html, "labelSelector") || !strings.Contains(html, "notin is not supported") {
		t.Errorf("console with notin does not say why:\n%s", html)
	}
	if html := page("team"); !strings.Contains(html, "labelSelector") || !strings.Contains(html, "want key=value") {
		t.Errorf("console with a bad selector does not say why:\n%s", html)
	}
}
