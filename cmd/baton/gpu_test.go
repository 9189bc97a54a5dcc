package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/httpapi"
)

// runGPU runs `baton gpu args…` against a real GPU API on the emulator.
func runGPU(t *testing.T, client clientFunc, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "baton", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newGPUCmd(client))
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"gpu"}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// TestGPUCLI enqueues, reads, lists, cancels and shows the pool through the
// CLI; bad input exits 1 naming the field and flag, a missing id exits 2.
func TestGPUCLI(t *testing.T) {
	d, err := gpu.New(gpu.Config{Store: emutest.Store(t), Pool: gpu.Pool{{URL: "http://127.0.0.1:1", Slots: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.RequireToken(cliToken, gpu.NewHandler(d)))
	t.Cleanup(srv.Close)
	client := func() (*apiClient, error) { return &apiClient{base: srv.URL, token: cliToken, http: srv.Client()}, nil }

	out, err := runGPU(t, client, "enqueue", "--id", "cli-1", "--payload", "echo hi", "--priority", "3", "--timeout", "90s")
	if err != nil {
		t.Fatalf("enqueue: %v\n%s", err, out)
	}
	var job gpu.Job
	if err := json.Unmarshal([]byte(out), &job); err != nil || job.ID != "cli-1" || job.Priority != 3 || job.Timeout.String() != "1m30s" {
		t.Fatalf("enqueue printed %s (%v)", out, err)
	}
	if out, err = runGPU(t, client, "get", "cli-1"); err != nil || !strings.Contains(out, `"payload": "echo hi"`) {
		t.Errorf("get: %v\n%s", err, out)
	}
	if out, err = runGPU(t, client, "list", "--status", "queued"); err != nil || !strings.Contains(out, "cli-1") {
		t.Errorf("list: %v\n%s", err, out)
	}
	if out, err = runGPU(t, client, "cancel", "cli-1"); err != nil || !strings.Contains(out, `"status": "cancelled"`) {
		t.Errorf("cancel: %v\n%s", err, out)
	}
	if out, err = runGPU(t, client, "pool"); err != nil || !strings.Contains(out, "http://127.0.0.1:1#0") {
		t.Errorf("pool: %v\n%s", err, out)
	}
	_, err = runGPU(t, client, "enqueue", "--payload", "x", "--priority", "-1")
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "priority") {
		t.Errorf("negative priority: exit %d, %v; want 1 naming priority", exitCode(err), err)
	}
	if _, err = runGPU(t, client, "get"); exitCode(err) != 2 {
		t.Errorf("get without an id: exit %d, want 2", exitCode(err))
	}
}
