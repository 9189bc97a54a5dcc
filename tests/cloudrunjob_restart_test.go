package tests

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	run "cloud.google.com/go/run/apiv2"
	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/api/iterator"

	"github.com/baton-cron/baton/emulator/runjobs"
	"github.com/baton-cron/baton/shared/schedule"
)

// TestCloudRunJobSurvivesLocalRestart is issue 31's restart promise for
// cloudRunJob targets, with the real binary: `baton local` is SIGKILLed
// (its whole process group) while a triggered run's task runs, and
// started again on the same data dir. The task, in its own session, runs
// on; the restarted emulator replays its journal, so the run ends once,
// failed from the task's real exit status (3), and the run's attempt has
// exactly one execution; the schedule's retry is a new attempt, with its
// own execution.
func TestCloudRunJobSurvivesLocalRestart(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	bin := buildBaton(t, work)
	dataDir := filepath.Join(work, "data")
	runJobsAddr := freeAddr(t)
	args := []string{"local", "--tick", "1s", "--data-dir", dataDir, "--gpu-workers", "0", "--log-level", "info", "--log-format", "json",
		"--addr", freeAddr(t), "--mongo-addr", freeAddr(t), "--gcs-addr", freeAddr(t), "--tasks-addr", freeAddr(t), "--pubsub-addr", freeAddr(t),
		"--run-jobs-addr", runJobsAddr, "--run-job", "fails=sleep 6; exit 3"}
	logPath := filepath.Join(work, "baton.log")
	logFile, err := os.Create(logPath) //nolint:gosec // G304: the test's own log
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()

	var cur *batonProc
	start := func() *batonProc {
		t.Helper()
		cur = startLocal(t, bin, args, logFile)
		return cur
	}
	t.Cleanup(func() { cur.kill() })
	runs := func(p *batonProc) []schedule.Run {
		var page struct{ Runs []schedule.Run }
		api(t, p.url, p.token, http.MethodGet, "/Schedules/schedules/crj-restart/runs", nil, &page)
		return page.Runs
	}
	waitRun := func(p *batonProc, what string, ok func([]schedule.Run) bool) []schedule.Run {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			rs := runs(p)
			if ok(rs) {
				return rs
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 90 s: %+v; log:\n%s", what, rs, tail(logPath, 40))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	p := start()
	body := runJobSchedule("crj-restart", "fails", nil)
	body["retry"] = map[string]any{"maxAttempts": 2, "backoff": "1s"}
	if code := api(t, p.url, p.token, http.MethodPost, "/Schedules/schedules", body, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	if code := api(t, p.url, p.token, http.MethodPost, "/Schedules/schedules/crj-restart:trigger", nil, nil); code >= 300 {
		t.Fatalf("trigger: %d", code)
	}
	r := waitRun(p, "run running with its execution recorded", func(rs []schedule.Run) bool {
		return len(rs) == 1 && rs[0].Status == schedule.RunRunning && rs[0].Execution != ""
	})[0]
	p.kill()

	p = start()
	ended := func(r schedule.Run) bool { return r.Status != schedule.RunRunning && r.Status != schedule.RunPending }
	rs := waitRun(p, "both attempts ended after the restart", func(rs []schedule.Run) bool {
		return len(rs) == 2 && ended(rs[0]) && ended(rs[1])
	})
	var first, retry schedule.Run
	for _, x := range rs {
		if x.ID == r.ID {
			first = x
		} else {
			retry = x
		}
	}
	if first.ID == "" || retry.Attempt != 2 {
		t.Fatalf("runs after the restart %+v; want the run %s and its one retry", rs, r.ID)
	}
	if first.Status != schedule.RunFailed || first.Execution != r.Execution ||
		!strings.Contains(first.Error, "1 of 1 tasks failed") || !strings.Contains(first.Error, "exit code of 3") {
		t.Errorf("run after the restart %+v; want failed from execution %s's real outcome: 1 of 1 tasks failed, exit code of 3", first, r.Execution)
	}
	if retry.Execution == "" || retry.Execution == r.Execution {
		t.Errorf("retry %+v; want its own execution, not %s", retry, r.Execution)
	}

	ctx := context.Background()
	ec, err := run.NewExecutionsClient(ctx, runjobs.ClientOptions(runJobsAddr)...)
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	var names []string
	total := 0
	it := ec.ListExecutions(ctx, &runpb.ListExecutionsRequest{Parent: runjobs.JobName("fails")})
	for {
		x, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatalf("list executions: %v", err)
		}
		total++
		for _, e := range x.GetTemplate().GetContainers()[0].GetEnv() {
			if e.GetName() == "BATON_RUN_ID" && e.GetValue() == r.ID {
				names = append(names, x.GetName())
			}
		}
	}
	if len(names) != 1 || names[0] != r.Execution {
		t.Errorf("executions for run %s: %v; want exactly %s", r.ID, names, r.Execution)
	}
	if total != 2 {
		t.Errorf("%d executions of the job; want 2 (the run's and its retry's)", total)
	}
}
