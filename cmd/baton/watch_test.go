package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/schedule"
)

// watching is a baton command running in the background, as a user runs
// a watch in another terminal.
type watching struct {
	out, errOut *lockedBuffer
	cancel      context.CancelFunc
	done        chan struct{} // closed when the command has returned err
	err         error
}

// startWatch runs args in-process on b's stack until stop.
func (b *cliBundle) startWatch(t *testing.T, args ...string) *watching {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watching{out: newLockedBuffer(), errOut: newLockedBuffer(), cancel: cancel, done: make(chan struct{})}
	root := &cobra.Command{Use: "baton", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newSchedulesCmd(b.client), newRunsCmd(b.client))
	root.SetOut(w.out)
	root.SetErr(w.errOut)
	root.SetArgs(args)
	go func() {
		defer close(w.done)
		w.err = root.ExecuteContext(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-w.done
	})
	return w
}

// waitFor waits (at most 30s) for s in the watch's stdout.
func (w *watching) waitFor(t *testing.T, s string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := w.out.waitFor(ctx, s)
	if err != nil {
		w.errOut.mu.Lock()
		defer w.errOut.mu.Unlock()
		t.Fatalf("watch never printed %q: %v\nstdout:\n%s\nstderr:\n%s", s, err, out, w.errOut.b.String())
	}
	return out
}

// stop cancels the watch, as Ctrl-C does, and returns its error and
// output.
func (w *watching) stop(t *testing.T) (stdout, stderr string, err error) {
	t.Helper()
	w.cancel()
	select {
	case <-w.done:
		err = w.err
	case <-time.After(30 * time.Second):
		t.Fatal("watch did not end after its context was cancelled")
	}
	w.out.mu.Lock()
	defer w.out.mu.Unlock()
	w.errOut.mu.Lock()
	defer w.errOut.mu.Unlock()
	return w.out.b.String(), w.errOut.b.String(), err
}

func insertRun(t *testing.T, b *cliBundle, r schedule.Run) {
	t.Helper()
	if _, err := b.st.Collection(schedule.RunsCollection).InsertIdempotent(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

// TestRunsListWatchJSON: `runs list --watch -o json` prints the list as
// NDJSON, one run a line, then only runs that are new (inserted, or made
// by a trigger) or changed (a status moved); unchanged runs are never
// printed again, however many polls pass. Cancelling its context (Ctrl-C)
// ends it with no error.
func TestRunsListWatchJSON(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	now := time.Now()
	seedCLIRuns(t, b, now)
	w := b.startWatch(t, "runs", "list", "--watch", "--watch-interval", "50ms", "-o", "json")
	w.waitFor(t, `"id":"r0"`) // the last of the first listing, newest first

	// A change: r3 fails.
	if _, err := emutest.Raw(t, b.st).Collection(schedule.RunsCollection).UpdateOne(context.Background(),
		bson.D{{Key: "_id", Value: "r3"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: "failed"}, {Key: "error", Value: "boom"}}}}); err != nil {
		t.Fatal(err)
	}
	w.waitFor(t, `"error":"boom"`)

	// New: a run triggered through the API, which the engine runs to the end.
	b.ok(t, "schedules", "create", "--id", "watched", "--cron", "@yearly", "--builtin", "noop")
	var trig schedule.Run
	if err := json.Unmarshal([]byte(b.ok(t, "schedules", "trigger", "watched", "-o", "json")), &trig); err != nil || trig.ID == "" {
		t.Fatalf("trigger: %v %+v", err, trig)
	}
	w.waitFor(t, `"source":"manual","status":"succeeded"`) // no seeded run is both
	// New: a run inserted behind the API's back; by the time it shows,
	// many polls have passed over the unchanged ones.
	insertRun(t, b, schedule.Run{ID: "r9", ScheduleID: "a", Status: schedule.RunPending, Source: schedule.SourceManual,
		FireTime: now.UTC().Truncate(time.Millisecond), CreatedAt: now, Attempt: 1})
	w.waitFor(t, `"id":"r9"`)

	stdout, stderr, err := w.stop(t)
	if err != nil || stderr != "" {
		t.Fatalf("cancelled watch: err %v, stderr %q; want nil and nothing", err, stderr)
	}
	count := map[string]int{}
	var r3Statuses []schedule.RunStatus
	trigFinal := false
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		var r schedule.Run
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.ID == "" {
			t.Fatalf("line %q is not one JSON run: %v\n%s", line, err, stdout)
		}
		count[r.ID]++
		if marker := fmt.Sprint(r.ID, r.Status, r.Attempt, r.StartedAt, r.FinishedAt); seen[marker] {
			t.Errorf("run %s printed twice unchanged:\n%s", r.ID, stdout)
		} else {
			seen[marker] = true
		}
		switch r.ID {
		case "r3":
			r3Statuses = append(r3Statuses, r.Status)
		case trig.ID:
			trigFinal = trigFinal || r.Status == schedule.RunSucceeded
		}
	}
	for _, id := range []string{"r0", "r1", "r2", "r9"} {
		if count[id] != 1 {
			t.Errorf("run %s printed %d times; want once\n%s", id, count[id], stdout)
		}
	}
	if fmt.Sprint(r3Statuses) != "[pending failed]" {
		t.Errorf("r3 printed as %v; want [pending failed] (once, then its change)\n%s", r3Statuses, stdout)
	}
	if !trigFinal {
		t.Errorf("triggered run %s never printed as succeeded\n%s", trig.ID, stdout)
	}
}

// TestRunsListWatchTable: the table is printed once with its header;
// later rows come without it, lined up under it.
func TestRunsListWatchTable(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	now := time.Now()
	seedCLIRuns(t, b, now)
	w := b.startWatch(t, "runs", "list", "--schedule", "b", "-w", "--watch-interval", "50ms")
	w.waitFor(t, "r1 ")
	fire := now.UTC().Truncate(time.Second)
	insertRun(t, b, schedule.Run{ID: "r5", ScheduleID: "b", Status: schedule.RunSucceeded, Source: schedule.SourceScheduled,
		FireTime: fire, CreatedAt: now, Attempt: 1, Output: "done"})
	w.waitFor(t, "r5 ")
	stdout, _, err := w.stop(t)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "RUN ") || strings.Contains(stdout[len(lines[0]):], "RUN ") ||
		!strings.HasPrefix(lines[1], "r3 ") || !strings.HasPrefix(lines[2], "r1 ") || !strings.HasPrefix(lines[3], "r5 ") {
		t.Fatalf("watch table: want the header, r3, r1, then r5 alone:\n%s", stdout)
	}
	col := strings.Index(lines[0], "FIRE TIME")
	if !strings.HasPrefix(lines[3][col:], fire.Format(time.RFC3339)) || !strings.Contains(lines[3], "done") {
		t.Errorf("r5's row is not under the header's FIRE TIME column %d:\n%s", col, stdout)
	}
}

// TestSchedulesListWatchYAML: -o yaml prints one --- document per row;
// pausing a schedule (a new version) prints it again, an untouched one
// is not.
func TestSchedulesListWatchYAML(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.ok(t, "schedules", "create", "--id", "one", "--cron", "@yearly", "--builtin", "noop")
	b.ok(t, "schedules", "create", "--id", "two", "--cron", "@yearly", "--builtin", "noop")
	w := b.startWatch(t, "schedules", "list", "--watch", "--watch-interval", "50ms", "-o", "yaml")
	w.waitFor(t, "id: two")
	b.ok(t, "schedules", "pause", "one")
	w.waitFor(t, "enabled: false")
	b.ok(t, "schedules", "create", "--id", "three", "--cron", "@yearly", "--builtin", "noop")
	out := w.waitFor(t, "id: three")
	if _, _, err := w.stop(t); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(strings.Count(out, "---\n"), strings.Count(out, "id: one"), strings.Count(out, "id: two"), strings.Count(out, "id: three")); got != "4 2 1 1" {
		t.Errorf("documents, one, two, three = %s; want 4 2 1 1 (one again when paused, two never again)\n%s", got, out)
	}
}

// TestWatchFlagsValidated: a --watch-interval that is not positive, or
// given without --watch, and --watch with --all or --page-token are
// usage errors (exit 2) naming the flag, before any request, on every
// list command that watches.
func TestWatchFlagsValidated(t *testing.T) {
	t.Parallel()
	errSent := errors.New("a request would be sent")
	for _, list := range [][]string{{"schedules", "list"}, {"runs", "list"}, {"gpu", "list"}, {"gpu", "pool"}, {"lease", "status"}} {
		for _, tc := range []struct {
			args []string
			says string
		}{
			{[]string{"-w", "--watch-interval", "0s"}, "--watch-interval must be more than 0, not 0s"},
			{[]string{"--watch", "--watch-interval=-1s"}, "--watch-interval must be more than 0"},
			{[]string{"--watch-interval", "1s"}, "--watch-interval needs --watch"},
			{[]string{"--watch", "--all"}, "cannot go with --all"},
			{[]string{"-w", "--page-token", "x"}, "cannot go with --page-token"},
		} {
			if list[0] == "gpu" && list[1] == "pool" || list[0] == "lease" {
				if strings.Contains(tc.says, "--all") || strings.Contains(tc.says, "--page-token") {
					continue // not paged: no such flags
				}
			}
			calls := 0
			client := func() (*apiClient, error) { calls++; return nil, errSent }
			root := &cobra.Command{Use: "baton", SilenceUsage: true, SilenceErrors: true}
			lease := &cobra.Command{Use: "lease"}
			lease.AddCommand(newLeaseStatusCmd())
			root.AddCommand(newSchedulesCmd(client), newRunsCmd(client), newGPUCmd(client), lease)
			root.SetOut(&strings.Builder{})
			root.SetErr(&strings.Builder{})
			args := append(append([]string{}, list...), tc.args...)
			root.SetArgs(args)
			err := root.ExecuteContext(context.Background())
			if exitCode(err) != 2 || !strings.Contains(fmt.Sprint(err), tc.says) || calls != 0 {
				t.Errorf("baton %s: exit %d, %v, %d client calls; want exit 2 saying %q and none", strings.Join(args, " "), exitCode(err), err, calls, tc.says)
			}
		}
	}
}
