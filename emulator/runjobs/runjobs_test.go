package runjobs_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	run "cloud.google.com/go/run/apiv2"
	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/baton-cron/baton/emulator/runjobs"
)

type clients struct {
	srv   *runjobs.Server
	jobs  *run.JobsClient
	execs *run.ExecutionsClient
}

func start(t *testing.T, jobs map[string]string) *clients {
	t.Helper()
	return startDir(t, jobs, "")
}

// startDir starts an emulator journalling in dir ("" for none).
func startDir(t *testing.T, jobs map[string]string, dir string) *clients {
	t.Helper()
	ctx := t.Context()
	srv, err := runjobs.Start(ctx, runjobs.Options{Jobs: jobs, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	jc, err := run.NewJobsClient(ctx, srv.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = jc.Close() })
	ec, err := run.NewExecutionsClient(ctx, srv.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ec.Close() })
	return &clients{srv: srv, jobs: jc, execs: ec}
}

func overrides(tasks int32, timeout time.Duration, args []string, env map[string]string) *runpb.RunJobRequest_Overrides {
	o := &runpb.RunJobRequest_Overrides{TaskCount: tasks}
	if timeout > 0 {
		o.Timeout = durationpb.New(timeout)
	}
	c := &runpb.RunJobRequest_Overrides_ContainerOverride{Args: args}
	for k, v := range env {
		c.Env = append(c.Env, &runpb.EnvVar{Name: k, Values: &runpb.EnvVar_Value{Value: v}})
	}
	o.ContainerOverrides = []*runpb.RunJobRequest_Overrides_ContainerOverride{c}
	return o
}

// TestRunJobTasksGetOverrides: each task runs the job's command with the
// overrides' args and env and the CLOUD_RUN_* variables, and the
// operation, polled through the Operations service, completes with the
// execution succeeded.
func TestRunJobTasksGetOverrides(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The args follow the command, as a container's follow its entrypoint.
	c := start(t, map[string]string{"report": `f() { echo "$CLOUD_RUN_TASK_INDEX/$CLOUD_RUN_TASK_COUNT $CLOUD_RUN_JOB $FOO $*" > ` + dir + `/out.$CLOUD_RUN_TASK_INDEX; }; f`})
	ctx := t.Context()
	op, err := c.jobs.RunJob(ctx, &runpb.RunJobRequest{Name: runjobs.JobName("report"), Overrides: overrides(3, 0, []string{"a", "b"}, map[string]string{"FOO": "bar"})})
	if err != nil {
		t.Fatal(err)
	}
	meta, err := op.Metadata()
	if err != nil || !strings.HasPrefix(meta.GetName(), runjobs.JobName("report")+"/executions/report-") {
		t.Fatalf("operation metadata = %v, %v; want the execution", meta, err)
	}
	x, err := op.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if x.GetSucceededCount() != 3 || x.GetFailedCount() != 0 || x.GetCompletionTime() == nil {
		t.Fatalf("execution = succeeded %d failed %d completed %v; want 3 succeeded", x.GetSucceededCount(), x.GetFailedCount(), x.GetCompletionTime())
	}
	for i, want := range []string{"0/3 report bar a b", "1/3 report bar a b", "2/3 report bar a b"} {
		got, err := os.ReadFile(filepath.Join(dir, "out."+string(rune('0'+i))))
		if err != nil || strings.TrimSpace(string(got)) != want {
			t.Errorf("task %d wrote %q, %v; want %q", i, got, err, want)
		}
	}
	env := x.GetTemplate().GetContainers()[0].GetEnv()
	if len(env) != 1 || env[0].GetName() != "FOO" || env[0].GetValue() != "bar" {
		t.Errorf("execution template env = %v; want the override FOO=bar", env)
	}
}

func wait(t *testing.T, c *clients, name string) *runpb.Execution {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := c.srv.Wait(ctx, name); err != nil {
		t.Fatal(err)
	}
	x, err := c.execs.GetExecution(t.Context(), &runpb.GetExecutionRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func runJob(t *testing.T, c *clients, job string, o *runpb.RunJobRequest_Overrides) string {
	t.Helper()
	op, err := c.jobs.RunJob(t.Context(), &runpb.RunJobRequest{Name: runjobs.JobName(job), Overrides: o})
	if err != nil {
		t.Fatal(err)
	}
	meta, err := op.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	return meta.GetName()
}

// TestFailedTasksCounted: tasks that exit non-zero are counted failed, and
// the Completed condition fails with the exit code in its message.
func TestFailedTasksCounted(t *testing.T) {
	t.Parallel()
	c := start(t, map[string]string{"half": `exit $(( CLOUD_RUN_TASK_INDEX % 2 * 3 ))`})
	x := wait(t, c, runJob(t, c, "half", overrides(4, 0, nil, nil)))
	if x.GetFailedCount() != 2 || x.GetSucceededCount() != 2 {
		t.Fatalf("failed %d succeeded %d; want 2 and 2", x.GetFailedCount(), x.GetSucceededCount())
	}
	cond := x.GetConditions()[0]
	if cond.GetState() != runpb.Condition_CONDITION_FAILED || cond.GetExecutionReason() != runpb.Condition_NON_ZERO_EXIT_CODE || !strings.Contains(cond.GetMessage(), "exit code of 3") {
		t.Errorf("condition = %v; want failed, NON_ZERO_EXIT_CODE, exit code of 3", cond)
	}
}

// TestTaskTimeout: a task that outlives the overrides' timeout is killed
// and counted failed, in memory and journalled.
func TestTaskTimeout(t *testing.T) {
	t.Parallel()
	for _, journal := range []bool{false, true} {
		t.Run(fmt.Sprintf("journal=%v", journal), func(t *testing.T) {
			t.Parallel()
			dir := ""
			if journal {
				dir = t.TempDir()
			}
			c := startDir(t, map[string]string{"slow": `sleep 60`}, dir)
			x := wait(t, c, runJob(t, c, "slow", overrides(1, time.Second, nil, nil)))
			if x.GetFailedCount() != 1 || !strings.Contains(x.GetConditions()[0].GetMessage(), "timed out") {
				t.Errorf("execution = failed %d, %v; want 1 failed, timed out", x.GetFailedCount(), x.GetConditions())
			}
		})
	}
}

// TestCancelExecution: a cancelled execution's tasks are killed, it
// completes cancelled, and cancelling it again is refused, in memory and
// journalled.
func TestCancelExecution(t *testing.T) {
	t.Parallel()
	t.Run("journal=false", func(t *testing.T) { t.Parallel(); testCancelExecution(t, "") })
	t.Run("journal=true", func(t *testing.T) { t.Parallel(); testCancelExecution(t, t.TempDir()) })
}

func testCancelExecution(t *testing.T, dir string) {
	c := startDir(t, map[string]string{"slow": `sleep 60`}, dir)
	name := runJob(t, c, "slow", overrides(2, 0, nil, nil))
	if _, err := c.execs.CancelExecution(t.Context(), &runpb.CancelExecutionRequest{Name: name}); err != nil {
		t.Fatal(err)
	}
	x := wait(t, c, name)
	if x.GetCancelledCount() != 2 || x.GetConditions()[0].GetExecutionReason() != runpb.Condition_CANCELLED {
		t.Errorf("execution = cancelled %d, %v; want 2 cancelled, CANCELLED", x.GetCancelledCount(), x.GetConditions())
	}
	if _, err := c.execs.CancelExecution(t.Context(), &runpb.CancelExecutionRequest{Name: name}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("cancel a completed execution: %v; want FailedPrecondition", err)
	}
}

// TestRefusals: what Cloud Run refuses, the emulator refuses: an unknown
// job or execution, a task count over 10,000, a task timeout over 168
// hours, an X_GOOGLE_ env name.
func TestRefusals(t *testing.T) {
	t.Parallel()
	c := start(t, map[string]string{"ok": `true`})
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		req  *runpb.RunJobRequest
		want codes.Code
	}{
		{"unknown job", &runpb.RunJobRequest{Name: runjobs.JobName("nope")}, codes.NotFound},
		{"too many tasks", &runpb.RunJobRequest{Name: runjobs.JobName("ok"), Overrides: overrides(10001, 0, nil, nil)}, codes.InvalidArgument},
		{"timeout over 168h", &runpb.RunJobRequest{Name: runjobs.JobName("ok"), Overrides: overrides(1, 169*time.Hour, nil, nil)}, codes.InvalidArgument},
		{"reserved env", &runpb.RunJobRequest{Name: runjobs.JobName("ok"), Overrides: overrides(1, 0, nil, map[string]string{"X_GOOGLE_A": "1"})}, codes.InvalidArgument},
	} {
		if _, err := c.jobs.RunJob(ctx, tc.req); status.Code(err) != tc.want {
			t.Errorf("%s: %v; want %s", tc.name, err, tc.want)
		}
	}
	if _, err := c.execs.GetExecution(ctx, &runpb.GetExecutionRequest{Name: runjobs.JobName("ok") + "/executions/ok-99999"}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown execution: %v; want NotFound", err)
	}
	if c.srv.Started() != 0 {
		t.Errorf("%d executions started by refused requests; want 0", c.srv.Started())
	}
}

// TestDroppedRunJobAnswer: the fault hook starts the execution and loses
// the answer; ListExecutions then shows it, newest first, with its env.
func TestDroppedRunJobAnswer(t *testing.T) {
	t.Parallel()
	c := start(t, map[string]string{"ok": `true`})
	ctx := t.Context()
	first := runJob(t, c, "ok", overrides(1, 0, nil, map[string]string{"RUN": "1"}))
	c.srv.DropRunJobAnswers(1)
	if _, err := c.jobs.RunJob(ctx, &runpb.RunJobRequest{Name: runjobs.JobName("ok"), Overrides: overrides(1, 0, nil, map[string]string{"RUN": "2"})}); status.Code(err) != codes.Unavailable {
		t.Fatalf("RunJob with its answer dropped: %v; want Unavailable", err)
	}
	var names, runs []string
	it := c.execs.ListExecutions(ctx, &runpb.ListExecutionsRequest{Parent: runjobs.JobName("ok"), PageSize: 1})
	for {
		x, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, x.GetName())
		runs = append(runs, x.GetTemplate().GetContainers()[0].GetEnv()[0].GetValue())
	}
	if len(names) != 2 || names[1] != first || !slices.Equal(runs, []string{"2", "1"}) {
		t.Errorf("executions = %v with RUN %v; want the dropped one (RUN 2) first, then %s", names, runs, first)
	}
}

// TestGetJob: a job given at start is served with Cloud Run's defaults (one
// task, a 10-minute task timeout); another is NOT_FOUND, and the calls
// that manage jobs are not served.
func TestGetJob(t *testing.T) {
	t.Parallel()
	c := start(t, map[string]string{"ok": `true`})
	ctx := t.Context()
	j, err := c.jobs.GetJob(ctx, &runpb.GetJobRequest{Name: runjobs.JobName("ok")})
	if err != nil {
		t.Fatal(err)
	}
	if j.GetTemplate().GetTaskCount() != 1 || j.GetTemplate().GetTemplate().GetTimeout().AsDuration() != runjobs.DefaultTaskTimeout {
		t.Errorf("job = %v; want 1 task, timeout %s", j.GetTemplate(), runjobs.DefaultTaskTimeout)
	}
	if _, err := c.jobs.GetJob(ctx, &runpb.GetJobRequest{Name: runjobs.JobName("nope")}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown job: %v; want NotFound", err)
	}
	if _, err := c.jobs.DeleteJob(ctx, &runpb.DeleteJobRequest{Name: runjobs.JobName("ok")}); status.Code(err) != codes.Unimplemented {
		t.Errorf("DeleteJob: %v; want Unimplemented", err)
	}
}

// waitFor polls until ok, for what the test can only see from outside (a
// file a task wrote, a process gone).
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestReplay: with a journal dir, an emulator closed while tasks run
// leaves them running, and a new one on the same dir knows every
// execution again: a completed one with its outcome, running ones as
// running (listed, as the scheduler's idempotent start lists them), ending
// from their tasks' real exit statuses; cancel still kills a replayed
// task's process group; nothing is started twice, and a new execution gets
// a new name.
func TestReplay(t *testing.T) {
	t.Parallel()
	dir, sig := t.TempDir(), t.TempDir()
	jobs := map[string]string{
		"done":  `exit 0`,
		"gated": `touch ` + sig + `/up-$CLOUD_RUN_TASK_INDEX; while [ ! -e ` + sig + `/go ]; do sleep 0.05; done; exit $(( CLOUD_RUN_TASK_INDEX * 3 ))`,
		"slow":  `echo $$ > ` + sig + `/slow.pid.tmp; mv ` + sig + `/slow.pid.tmp ` + sig + `/slow.pid; sleep 60`,
	}
	// Tasks outlive their emulator: end them even when the test fails
	// before it does.
	t.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(sig, "go"), nil, 0o600)
		if b, err := os.ReadFile(filepath.Join(sig, "slow.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				if pgid, err := syscall.Getpgid(pid); err == nil && pgid > 1 {
					_ = syscall.Kill(-pgid, syscall.SIGKILL)
				}
			}
		}
	})
	c1 := startDir(t, jobs, dir)
	done := runJob(t, c1, "done", nil)
	wait(t, c1, done)
	gated := runJob(t, c1, "gated", overrides(2, 0, nil, map[string]string{"BATON_RUN_ID": "r1"}))
	slow := runJob(t, c1, "slow", nil)
	waitFor(t, "tasks up", func() bool {
		return exists(sig+"/up-0") && exists(sig+"/up-1") && exists(sig+"/slow.pid")
	})
	if err := c1.srv.Close(); err != nil {
		t.Fatal(err)
	}

	c2 := startDir(t, jobs, dir)
	byName := map[string]*runpb.Execution{}
	for _, job := range []string{"done", "gated", "slow"} {
		it := c2.execs.ListExecutions(t.Context(), &runpb.ListExecutionsRequest{Parent: runjobs.JobName(job)})
		for {
			x, err := it.Next()
			if errors.Is(err, iterator.Done) {
				break
			}
			if err != nil {
				t.Fatalf("list executions of %s after the restart: %v", job, err)
			}
			byName[x.GetName()] = x
		}
	}
	if len(byName) != 3 {
		t.Fatalf("after the restart, listed %v; want the 3 executions", slices.Collect(maps.Keys(byName)))
	}
	if x := byName[done]; x.GetCompletionTime() == nil || x.GetSucceededCount() != 1 {
		t.Errorf("replayed completed execution %v; want completed, 1 succeeded", x)
	}
	for _, n := range []string{gated, slow} {
		if x := byName[n]; x.GetCompletionTime() != nil || x.GetRunningCount() != x.GetTaskCount() {
			t.Errorf("replayed execution %s completed %v running %d; want still running", n, x.GetCompletionTime(), x.GetRunningCount())
		}
	}
	if !slices.ContainsFunc(byName[gated].GetTemplate().GetContainers()[0].GetEnv(), func(e *runpb.EnvVar) bool {
		return e.GetName() == "BATON_RUN_ID" && e.GetValue() == "r1"
	}) {
		t.Errorf("replayed execution's env %v; want BATON_RUN_ID=r1 (the scheduler finds a run's execution by it)", byName[gated].GetTemplate())
	}

	if err := os.WriteFile(filepath.Join(sig, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	x := wait(t, c2, gated)
	if x.GetSucceededCount() != 1 || x.GetFailedCount() != 1 || !strings.Contains(x.GetConditions()[0].GetMessage(), "exit code of 3") {
		t.Errorf("replayed execution ended %v; want 1 succeeded, 1 failed with exit code 3", x)
	}

	b, err := os.ReadFile(filepath.Join(sig, "slow.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.execs.CancelExecution(t.Context(), &runpb.CancelExecutionRequest{Name: slow}); err != nil {
		t.Fatal(err)
	}
	if x := wait(t, c2, slow); x.GetCancelledCount() != 1 {
		t.Errorf("cancelled replayed execution %v; want 1 cancelled", x)
	}
	waitFor(t, "the replayed task's process killed by cancel", func() bool { return syscall.Kill(pid, 0) != nil })

	if n := c2.srv.Started(); n != 0 {
		t.Errorf("the restarted emulator started %d executions; want 0", n)
	}
	again := runJob(t, c2, "done", nil)
	if again == done || again == gated || again == slow {
		t.Errorf("new execution %s reuses a replayed name", again)
	}
	if x := wait(t, c2, again); x.GetSucceededCount() != 1 {
		t.Errorf("new execution after the restart %v; want 1 succeeded", x)
	}
}
