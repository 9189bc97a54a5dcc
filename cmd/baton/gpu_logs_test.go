package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/shared/gpu"
)

// runGPULogs runs `baton gpu logs args…` on a fresh command tree (its
// flags start unset each time), against the GPU function of client, and
// returns stdout and stderr apart: the bytes printed must be the job's.
func runGPULogs(t *testing.T, client clientFunc, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := &cobra.Command{Use: "baton", SilenceUsage: true, SilenceErrors: true}
	g := newGPUCmd(client)
	g.AddCommand(gpuLogsCmd(client))
	root.AddCommand(g)
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"gpu", "logs"}, args...))
	err = root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// TestGPULogsCLI runs jobs on the local stack's GPU workers (real shell
// commands) and reads their output with `baton gpu logs`: a failed job's
// stderr with --stderr, stdout by default, --follow waiting for a job
// that is still running, a running job without --follow failing with a
// clear message, and usage errors exiting 2.
func TestGPULogsCLI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: -1, GPUWorkers: 1})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	client := func() (*apiClient, error) {
		return &apiClient{base: s.URL + "/GPU", token: s.Token, http: &http.Client{Timeout: 30 * time.Second}}, nil
	}
	c, _ := client()
	enqueue := func(payload string) string {
		t.Helper()
		var job gpu.Job
		if _, err := c.do(ctx, "POST", "/gpu/jobs", nil, nil, gpu.EnqueueRequest{Payload: payload, MaxAttempts: 1}, &job); err != nil {
			t.Fatalf("enqueue: %v", err)
		}
		return job.ID
	}

	failed := enqueue("echo to-stdout; echo boom >&2; exit 1")
	if err := waitTerminal(ctx, c, failed); err != nil {
		t.Fatal(err)
	}
	if out, errOut, err := runGPULogs(t, client, failed, "--stderr"); err != nil || out != "boom\n" || errOut != "" {
		t.Errorf("logs --stderr: %v, stdout %q stderr %q; want exactly the job's stderr %q", err, out, errOut, "boom\n")
	}
	if out, _, err := runGPULogs(t, client, failed); err != nil || out != "to-stdout\n" {
		t.Errorf("logs: %v, %q; want the job's stdout", err, out)
	}
	if out, _, err := runGPULogs(t, client, failed, "--attempt", "1", "--stderr"); err != nil || out != "boom\n" {
		t.Errorf("logs --attempt 1 --stderr: %v, %q", err, out)
	}

	// A job still running: no output yet. Without --follow that is exit 1
	// saying so; with it, the command waits for the end and prints.
	slow := enqueue("sleep 2; echo late >&2")
	for {
		var job gpu.Job
		if _, err := c.do(ctx, "GET", "/gpu/jobs/"+slow, nil, nil, nil, &job); err != nil {
			t.Fatal(err)
		}
		if job.Status == gpu.StatusRunning || job.Status == gpu.StatusDispatched {
			break
		}
		if gpu.Terminal(job.Status) || ctx.Err() != nil {
			t.Fatalf("job %s: %s before it was checked running", slow, job.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, _, err = runGPULogs(t, client, slow, "--stderr")
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "has no stderr for attempt 1 yet") || !strings.Contains(err.Error(), "--follow") {
		t.Errorf("logs of a running job: exit %d, %v; want 1 saying it has no output yet and naming --follow", exitCode(err), err)
	}
	if out, _, err := runGPULogs(t, client, slow, "--stderr", "--follow"); err != nil || out != "late\n" {
		t.Errorf("logs --follow: %v, %q; want it to wait and print %q", err, out, "late\n")
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{}, 2, "job id"},
		{[]string{failed, "--attempt", "0"}, 2, "--attempt"},
		{[]string{failed, "--bogus"}, 2, "bogus"},
		{[]string{"no-such-job"}, 1, `no GPU job "no-such-job"`},
	} {
		_, _, err := runGPULogs(t, client, tc.args...)
		if exitCode(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.want) || (tc.code == 1 && strings.Contains(err.Error(), "--follow")) {
			t.Errorf("logs %v: exit %d, %v; want %d naming %s", tc.args, exitCode(err), err, tc.code, tc.want)
		}
	}

	// The real command tree has it under gpu, from the environment
	// `baton local` writes.
	sourceEnv(t, s.Exports())
	logs, _, err := rootCmd.Find([]string{"gpu", "logs"})
	if err != nil || logs.Name() != "logs" {
		t.Fatalf("baton gpu logs is not in the command tree: %v", err)
	}
	t.Cleanup(func() { _ = logs.Flags().Set("stderr", "false") })
	if out, _, err := runRoot(t, "gpu", "logs", failed, "--stderr"); err != nil || out != "boom\n" {
		t.Errorf("baton gpu logs --stderr (root): %v, %q", err, out)
	}
}
