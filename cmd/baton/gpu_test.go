package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

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
// CLI, as cards and tables by default and as -o json (--json) or yaml; bad
// input exits 1 naming the field and flag, a missing id exits 2.
func TestGPUCLI(t *testing.T) {
	d, err := gpu.New(gpu.Config{Store: emutest.Store(t), Pool: gpu.Pool{{URL: "http://127.0.0.1:1", Slots: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.RequireToken(cliToken, gpu.NewHandler(d)))
	t.Cleanup(srv.Close)
	client := func() (*apiClient, error) { return &apiClient{base: srv.URL, token: cliToken, http: srv.Client()}, nil }

	// table (the default) is a card for people, not JSON.
	out, err := runGPU(t, client, "enqueue", "--id", "cli-1", "--payload", "echo hi", "--priority", "3", "--timeout", "90s")
	if err != nil {
		t.Fatalf("enqueue: %v\n%s", err, out)
	}
	for _, w := range []string{"ID:", "cli-1", "Status:", "queued", "Priority:", "3", "Timeout:", "1m30s", "Payload:", "echo hi"} {
		if !strings.Contains(out, w) || strings.HasPrefix(out, "{") {
			t.Errorf("enqueue card lacks %q (or is JSON):\n%s", w, out)
		}
	}
	var job gpu.Job
	if out, err = runGPU(t, client, "get", "cli-1", "-o", "json"); err != nil {
		t.Fatalf("get -o json: %v\n%s", err, out)
	}
	if err := json.Unmarshal([]byte(out), &job); err != nil || job.ID != "cli-1" || job.Priority != 3 || job.Timeout.String() != "1m30s" || job.Payload != "echo hi" {
		t.Fatalf("get -o json printed %s (%v)", out, err)
	}
	if alias, err := runGPU(t, client, "get", "cli-1", "--json"); err != nil || alias != out {
		t.Errorf("get --json differs from -o json: %v\n%s", err, alias)
	}
	var fromYAML gpu.Job
	if out, err = runGPU(t, client, "get", "cli-1", "-o", "yaml"); err != nil || yaml.Unmarshal([]byte(out), &fromYAML) != nil || !strings.Contains(out, "payload: echo hi") {
		t.Errorf("get -o yaml: %v\n%s", err, out)
	}
	if diff := cmp.Diff(job, fromYAML); diff != "" {
		t.Errorf("get -o yaml vs -o json (-json,+yaml):\n%s", diff)
	}
	if out, err = runGPU(t, client, "list", "--status", "queued"); err != nil || !strings.Contains(out, "cli-1") {
		t.Errorf("list: %v\n%s", err, out)
	}
	var page gpu.JobPage
	if out, err = runGPU(t, client, "list", "-o", "yaml"); err != nil || yaml.Unmarshal([]byte(out), &page) != nil || len(page.Jobs) != 1 || page.Jobs[0].ID != "cli-1" {
		t.Errorf("list -o yaml: %v\n%s", err, out)
	}
	if out, err = runGPU(t, client, "cancel", "cli-1"); err != nil || !lineHasFields(out, "Status:", "cancelled") {
		t.Errorf("cancel: %v\n%s", err, out)
	}
	if out, err = runGPU(t, client, "pool"); err != nil || !lineHasFields(out, "SLOT", "STATE", "JOB", "EPOCH") || !strings.Contains(out, "http://127.0.0.1:1#0") {
		t.Errorf("pool: %v\n%s", err, out)
	}
	var pool struct {
		Slots []gpu.SlotView `json:"slots"`
	}
	if out, err = runGPU(t, client, "pool", "-o", "json"); err != nil || json.Unmarshal([]byte(out), &pool) != nil || len(pool.Slots) != 1 || pool.Slots[0].ID != "http://127.0.0.1:1#0" || pool.Slots[0].State == "" {
		t.Errorf("pool -o json: %v\n%s", err, out)
	}
	if out, err = runGPU(t, client, "pool", "-o", "yaml"); err != nil || !strings.Contains(out, "slots:") || !strings.Contains(out, "- epoch:") || !strings.Contains(out, "state: ") {
		t.Errorf("pool -o yaml: %v\n%s", err, out)
	}
	_, err = runGPU(t, client, "enqueue", "--payload", "x", "--priority", "-1")
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "priority") {
		t.Errorf("negative priority: exit %d, %v; want 1 naming priority", exitCode(err), err)
	}
	if _, err = runGPU(t, client, "get"); exitCode(err) != 2 {
		t.Errorf("get without an id: exit %d, want 2", exitCode(err))
	}
}

// TestGPUCLITenants: jobs enqueued with --tenant and --gpu-type show in
// gpu pool's tenants table (weight, quota) and queue heads, with the slot's
// type; gpu list --tenant lists that tenant's alone; a bad tenant or a type
// no pool entry has exits 1 naming the field.
func TestGPUCLITenants(t *testing.T) {
	pool, err := gpu.ParsePool("http://127.0.0.1:1=1@nvidia-l4")
	if err != nil {
		t.Fatal(err)
	}
	d, err := gpu.New(gpu.Config{Store: emutest.Store(t), Pool: pool, Weights: map[string]int{"research": 3}, Quotas: map[string]int{"batch": 1}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.RequireToken(cliToken, gpu.NewHandler(d)))
	t.Cleanup(srv.Close)
	client := func() (*apiClient, error) { return &apiClient{base: srv.URL, token: cliToken, http: srv.Client()}, nil }

	for _, args := range [][]string{
		{"enqueue", "--id", "r1", "--payload", "x", "--tenant", "research"},
		{"enqueue", "--id", "b1", "--payload", "x", "--tenant", "batch", "--gpu-type", "nvidia-l4"},
		{"enqueue", "--id", "b2", "--payload", "x", "--tenant", "batch"},
	} {
		if out, err := runGPU(t, client, args...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	out, err := runGPU(t, client, "list", "--tenant", "batch")
	if err != nil || !strings.Contains(out, "b1") || !strings.Contains(out, "b2") || strings.Contains(out, "r1") || !lineHasFields(out, "b1", "batch") {
		t.Errorf("list --tenant batch: %v\n%s", err, out)
	}
	if _, err := runGPU(t, client, "list", "--tenant", "no spaces"); exitCode(err) != 1 || !strings.Contains(err.Error(), "tenant") {
		t.Errorf("list --tenant 'no spaces': exit %d, %v; want 1 naming tenant", exitCode(err), err)
	}
	if _, err := runGPU(t, client, "enqueue", "--payload", "x", "--gpu-type", "nvidia-h100"); exitCode(err) != 1 || !strings.Contains(err.Error(), "gpuType") {
		t.Errorf("enqueue --gpu-type nvidia-h100: exit %d, %v; want 1 naming gpuType", exitCode(err), err)
	}
	out, err = runGPU(t, client, "pool")
	if err != nil {
		t.Fatalf("pool: %v\n%s", err, out)
	}
	for _, fields := range [][]string{
		{"SLOT", "TYPE", "STATE", "JOB", "TENANT"},
		{"http://127.0.0.1:1#0", "nvidia-l4"},
		{"TENANT", "QUEUED", "RUNNING", "WEIGHT", "QUOTA", "SHARE", "USAGE", "TARGET", "DEFICIT"},
		{"batch", "2", "0", "1", "1"},
		{"batch", "0.0s", "25%", "+0.0s"},
		{"research", "1", "0", "3", "-"},
		{"research", "0.0s", "75%", "+0.0s"},
		{"NEXT", "JOB", "TENANT", "PRIO", "TYPE"},
	} {
		if !lineHasFields(out, fields...) {
			t.Errorf("pool lacks a line with %v:\n%s", fields, out)
		}
	}
	var view gpu.PoolView
	if out, err = runGPU(t, client, "pool", "-o", "json"); err != nil || json.Unmarshal([]byte(out), &view) != nil {
		t.Fatalf("pool -o json: %v\n%s", err, out)
	}
	// Neither runs: research (weight 3) and batch (1) have nothing
	// running, so the older head (r1) goes first, then batch's best.
	if len(view.Next) != 2 || view.Next[0].JobID != "r1" || view.Next[0].Position != 1 || view.Next[1].Tenant != "batch" {
		t.Errorf("queue heads %+v; want r1 first, then batch's head", view.Next)
	}
}
