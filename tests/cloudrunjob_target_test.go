package tests

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/runjobs"
	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/shared/schedule"
)

// runJobStack starts a stack ticking every second (the sweep ends
// cloudRunJob runs), whose Run Admin API emulator has jobs.
func runJobStack(t *testing.T, jobs map[string]string) *stack.Stack {
	t.Helper()
	s, err := stack.Start(context.Background(), stack.Config{Addr: "127.0.0.1:0", Tick: time.Second, RunJobs: jobs, RunJobPoll: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// gate is a shell fragment that waits until file exists: the test's signal
// to a task that it may end.
func gate(file string) string {
	return `while [ ! -e ` + file + ` ]; do sleep 0.05; done; `
}

func runJobSchedule(id, job string, extra map[string]any) map[string]any {
	crj := map[string]any{"job": runjobs.JobName(job), "region": "local"}
	for k, v := range extra {
		crj[k] = v
	}
	return map[string]any{"id": id, "cron": "@daily", "target": map[string]any{"type": "cloudRunJob", "cloudRunJob": crj}}
}

// runsOf lists the runs of schedule id.
func runsOf(t *testing.T, s *stack.Stack, id string) []schedule.Run {
	t.Helper()
	var page struct{ Runs []schedule.Run }
	api(t, s.URL, s.Token, "GET", "/Schedules/schedules/"+id+"/runs", nil, &page)
	return page.Runs
}

// waitRuns polls the runs of id until ok says they are as wanted, for at
// most a minute.
func waitRuns(t *testing.T, s *stack.Stack, id, what string, ok func([]schedule.Run) bool) []schedule.Run {
	t.Helper()
	return waitRunsFor(t, s, id, what, time.Minute, ok)
}

// waitRunsFor is waitRuns for at most within.
func waitRunsFor(t *testing.T, s *stack.Stack, id, what string, within time.Duration, ok func([]schedule.Run) bool) []schedule.Run {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		runs := runsOf(t, s, id)
		if ok(runs) {
			return runs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %+v", what, within, runs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// finished reports whether r has ended.
func finished(r schedule.Run) bool {
	return r.Status == schedule.RunSucceeded || r.Status == schedule.RunFailed || r.Status == schedule.RunSkipped
}

// TestCloudRunJobTarget: a triggered run starts one execution with the
// target's args and env, the run id and fire time in the env, and two
// tasks; the run stays running, with the execution recorded, while the
// tasks run, and succeeds when they do.
func TestCloudRunJobTarget(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := runJobStack(t, map[string]string{
		"export": `f() { echo "$CLOUD_RUN_TASK_INDEX/$CLOUD_RUN_TASK_COUNT $BATON_RUN_ID $GREETING $*" >> ` + dir + `/out; ` + gate(dir+"/go") + `}; f`,
	})
	body := runJobSchedule("crj-export", "export", map[string]any{"args": []string{"--day", "today"}, "env": map[string]any{"GREETING": "hi"}, "taskCount": 2, "timeout": "1h"})
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", body, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules/crj-export:trigger", nil, nil); code >= 300 {
		t.Fatalf("trigger: %d", code)
	}
	runs := waitRuns(t, s, "crj-export", "run running with its execution recorded", func(rs []schedule.Run) bool {
		return len(rs) == 1 && rs[0].Status == schedule.RunRunning && rs[0].Execution != ""
	})
	r := runs[0]
	if !strings.HasPrefix(r.Execution, runjobs.JobName("export")+"/executions/") || r.RunJob != runjobs.JobName("export") {
		t.Errorf("run %+v; want its job and execution recorded", r)
	}
	// Both tasks have written their line before the gate opens: the run
	// is still running then.
	waitFile(t, filepath.Join(dir, "out"), 2)
	if got := runsOf(t, s, "crj-export"); got[0].Status != schedule.RunRunning {
		t.Fatalf("run %s while its tasks wait: %+v; want running", r.ID, got[0])
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	runs = waitRuns(t, s, "crj-export", "run finished", func(rs []schedule.Run) bool { return rs[0].Status != schedule.RunRunning })
	if runs[0].Status != schedule.RunSucceeded || !strings.Contains(runs[0].Output, "2 of 2 tasks succeeded") {
		t.Errorf("run %+v; want succeeded, 2 of 2 tasks", runs[0])
	}
	out, _ := os.ReadFile(filepath.Join(dir, "out"))
	for _, want := range []string{"0/2 " + r.ID + " hi --day today", "1/2 " + r.ID + " hi --day today"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("tasks wrote %q; want a line %q", out, want)
		}
	}
	if n := s.RunJobs.Started(); n != 1 {
		t.Errorf("%d executions started; want 1", n)
	}
}

// waitFile waits until file has n lines.
func waitFile(t *testing.T, file string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(file)
		if strings.Count(string(b), "\n") >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %q; want %d lines", file, b, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCloudRunJobFailedRetried: an execution whose task exits 3 fails the
// run with the failed-task count and the exit code, and the schedule's
// retry policy runs it once more, as a new execution.
func TestCloudRunJobFailedRetried(t *testing.T) {
	t.Parallel()
	s := runJobStack(t, map[string]string{"fails": `exit 3`})
	body := runJobSchedule("crj-fails", "fails", nil)
	body["retry"] = map[string]any{"maxAttempts": 2, "backoff": "1s"}
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", body, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules/crj-fails:trigger", nil, nil); code >= 300 {
		t.Fatalf("trigger: %d", code)
	}
	runs := waitRuns(t, s, "crj-fails", "both attempts failed", func(rs []schedule.Run) bool {
		return len(rs) == 2 && rs[0].Status == schedule.RunFailed && rs[1].Status == schedule.RunFailed
	})
	for _, r := range runs {
		if !strings.Contains(r.Error, "1 of 1 tasks failed") || !strings.Contains(r.Error, "exit code of 3") {
			t.Errorf("run %s error %q; want the failed-task count and exit code 3", r.ID, r.Error)
		}
	}
	if n := s.RunJobs.Started(); n != 2 {
		t.Errorf("%d executions started; want 2 (the run and its one retry)", n)
	}
}

// TestCloudRunJobLostAnswer: RunJob starts the execution but its answer is
// lost. The executor does not call RunJob again (the execution may not be
// listed yet while Google still processes the request): the run stays
// starting, and once its job lease is free the sweep finds the execution
// by the run id in its env and records it, so one execution runs and the
// run ends from it.
func TestCloudRunJobLostAnswer(t *testing.T) {
	t.Parallel()
	s := runJobStack(t, map[string]string{"once": `true`})
	body := runJobSchedule("crj-lost", "once", nil)
	body["leaseTTL"] = "3s"
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", body, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	s.RunJobs.DropRunJobAnswers(1)
	r := triggeredRun(t, s, "crj-lost")
	if r.Status != schedule.RunSucceeded || r.Execution == "" {
		t.Errorf("run %+v; want succeeded with its execution", r)
	}
	if n := s.RunJobs.Started(); n != 1 {
		t.Errorf("%d executions started after a lost RunJob answer; want 1", n)
	}
}

// TestCloudRunJobSweepFindsLostExecution: RunJob lands but its answer is
// lost, and the sweep's first lookup fails too. A failed lookup is not
// "none": the sweep starts nothing and looks again a reservation later,
// then finds the execution by the run id in its env and records it rather
// than starting another; the run then ends from that execution.
func TestCloudRunJobSweepFindsLostExecution(t *testing.T) {
	t.Parallel()
	s := runJobStack(t, map[string]string{"once": `true`})
	body := runJobSchedule("crj-sweep", "once", nil)
	body["leaseTTL"] = "3s"
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", body, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	s.RunJobs.DropRunJobAnswers(1)
	s.RunJobs.FailListExecutions(1)
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules/crj-sweep:trigger", nil, nil); code >= 300 {
		t.Fatalf("trigger: %d", code)
	}
	// The failed lookup postpones the run by a reservation (a minute).
	r := waitRunsFor(t, s, "crj-sweep", "the run finished", 3*time.Minute, func(rs []schedule.Run) bool {
		return len(rs) == 1 && (rs[0].Status == schedule.RunSucceeded || rs[0].Status == schedule.RunFailed)
	})[0]
	if r.Status != schedule.RunSucceeded || r.Execution == "" {
		t.Errorf("run %+v; want succeeded with the execution the sweep found", r)
	}
	if n := s.RunJobs.Started(); n != 1 {
		t.Errorf("%d executions started; want 1", n)
	}
}

// TestCloudRunJobDeletedScheduleCancels: a schedule deleted while its
// run's execution runs: the sweep cancels the execution (its tasks stop
// though their gate never opens) and ends the run failed, not retried.
func TestCloudRunJobDeletedScheduleCancels(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := runJobStack(t, map[string]string{"stuck": gate(dir + "/never")})
	body := runJobSchedule("crj-del", "stuck", nil)
	body["retry"] = map[string]any{"maxAttempts": 3, "backoff": "1s"}
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", body, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules/crj-del:trigger", nil, nil); code >= 300 {
		t.Fatalf("trigger: %d", code)
	}
	r := waitRuns(t, s, "crj-del", "run running with its execution", func(rs []schedule.Run) bool {
		return len(rs) == 1 && rs[0].Execution != ""
	})[0]
	if code := api(t, s.URL, s.Token, "DELETE", "/Schedules/schedules/crj-del", nil, nil); code >= 300 {
		t.Fatalf("delete: %d", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.RunJobs.Wait(ctx, r.Execution); err != nil {
		t.Fatalf("execution of the deleted schedule's run not ended: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got schedule.Run
		api(t, s.URL, s.Token, "GET", "/Schedules/runs/"+url.PathEscape(r.ID), nil, &got)
		if got.Status == schedule.RunFailed {
			if !strings.Contains(got.Error, "cancelled") {
				t.Errorf("run %+v; want failed saying its execution was cancelled", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s not ended: %+v", r.ID, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := s.RunJobs.Started(); n != 1 {
		t.Errorf("%d executions started; want 1 (no retry)", n)
	}
}

// TestCloudRunJobOverlap: a skip schedule whose execution is still running
// skips the next fire, naming the execution: the run holds no job lease,
// and the overlap policy sees the running execution all the same.
func TestCloudRunJobOverlap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := runJobStack(t, map[string]string{"long": gate(dir + "/go")})
	body := runJobSchedule("crj-skip", "long", nil)
	body["cron"], body["overlap"] = "* * * * * *", "skip"
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", body, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	waitRuns(t, s, "crj-skip", "a fire skipped behind the running execution", func(rs []schedule.Run) bool {
		for _, r := range rs {
			if r.Status == schedule.RunSkipped && strings.Contains(r.Reason, "Cloud Run execution") {
				return true
			}
		}
		return false
	})
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules/crj-skip:pause", map[string]any{}, nil); code >= 300 {
		t.Fatalf("pause: %d", code)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if n := s.RunJobs.Started(); n != 1 {
		t.Errorf("%d executions started while the first ran; want 1", n)
	}
}

// TestCloudRunJobValidation: bad cloudRunJob targets are 400s naming the
// field.
func TestCloudRunJobValidation(t *testing.T) {
	t.Parallel()
	s, err := stack.Start(context.Background(), stack.Config{Addr: "127.0.0.1:0", Tick: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	for _, tc := range []struct {
		name  string
		extra map[string]any
		job   string
		field string
	}{
		{"bad name", nil, "projects/local/locations/local/jobs/Bad_Name", "target.cloudRunJob.job"},
		{"unknown region", nil, "projects/local/locations/mars-north1/jobs/x", "target.cloudRunJob.job"},
		{"not allowed", nil, "projects/other/locations/us-central1/jobs/x", "target.cloudRunJob.job"},
		{"region mismatch", map[string]any{"region": "us-east1"}, runjobs.JobName("x"), "target.cloudRunJob.region"},
		{"too many tasks", map[string]any{"taskCount": 10001}, runjobs.JobName("x"), "target.cloudRunJob.taskCount"},
		{"timeout over 168h", map[string]any{"timeout": "169h"}, runjobs.JobName("x"), "target.cloudRunJob.timeout"},
		{"reserved env", map[string]any{"env": map[string]any{"BATON_RUN_ID": "x"}}, runjobs.JobName("x"), "target.cloudRunJob.env.BATON_RUN_ID"},
		{"bad env name", map[string]any{"env": map[string]any{"1A": "x"}}, runjobs.JobName("x"), "target.cloudRunJob.env.1A"},
	} {
		body := runJobSchedule("crj-bad", "x", tc.extra)
		body["target"].(map[string]any)["cloudRunJob"].(map[string]any)["job"] = tc.job
		if tc.extra == nil || tc.extra["region"] == nil {
			delete(body["target"].(map[string]any)["cloudRunJob"].(map[string]any), "region")
		}
		var resp struct {
			Error struct{ Code, Message, Field string }
		}
		code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", body, &resp)
		if code != http.StatusBadRequest || resp.Error.Field != tc.field {
			t.Errorf("%s: %d %+v; want 400 naming %s", tc.name, code, resp.Error, tc.field)
		}
	}
}

// TestCloudRunJobFortySecondsThenExit3 is the scenario as a user
// would set it up: a job whose command sleeps 40 s and exits 3. The run is
// running (with its execution recorded) through those 40 s, then failed
// with the exit reason, and its one retry runs once: two executions in
// all. It checks the run's status along the way, never a duration.
func TestCloudRunJobFortySecondsThenExit3(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two 40 s executions")
	}
	t.Parallel()
	s := runJobStack(t, map[string]string{"export": `sleep 40; exit 3`})
	body := runJobSchedule("crj-forty", "export", nil)
	body["retry"] = map[string]any{"maxAttempts": 2, "backoff": "1s"}
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", body, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules/crj-forty:trigger", nil, nil); code >= 300 {
		t.Fatalf("trigger: %d", code)
	}
	// While the first execution's task sleeps, the first run is running
	// with its execution, and no retry exists.
	first := waitRuns(t, s, "crj-forty", "the run running with its execution", func(rs []schedule.Run) bool {
		return len(rs) == 1 && rs[0].Status == schedule.RunRunning && rs[0].Execution != ""
	})[0]
	for range 3 {
		time.Sleep(8 * time.Second)
		rs := runsOf(t, s, "crj-forty")
		if len(rs) != 1 || rs[0].ID != first.ID || rs[0].Status != schedule.RunRunning {
			if s.RunJobs.Started() == 1 && len(rs) >= 1 && rs[len(rs)-1].Status == schedule.RunFailed {
				break // the 40 s passed on a slow machine: the end is checked below
			}
			t.Fatalf("during the 40 s: runs %+v; want only %s, running", rs, first.ID)
		}
	}
	rs := waitRunsFor(t, s, "crj-forty", "both attempts failed", 3*time.Minute, func(rs []schedule.Run) bool {
		return len(rs) == 2 && rs[0].Status == schedule.RunFailed && rs[1].Status == schedule.RunFailed
	})
	for _, r := range rs {
		if !strings.Contains(r.Error, "exit code of 3") || r.Execution == "" {
			t.Errorf("run %s: error %q, execution %q; want the exit reason and its execution", r.ID, r.Error, r.Execution)
		}
	}
	if rs[0].Execution == rs[1].Execution {
		t.Errorf("the retry reused execution %s; want one of its own", rs[0].Execution)
	}
	if n := s.RunJobs.Started(); n != 2 {
		t.Errorf("%d executions started; want 2 (the run and its one retry)", n)
	}
}
