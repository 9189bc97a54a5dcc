package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/internal/doctor"
)

// runDoctor runs `baton doctor ARGS` and returns its stdout and exit status.
func runDoctor(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newDoctorCmd()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.ExecuteContext(context.Background())
	code := 0
	if err != nil {
		code = 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
	}
	return out.String(), code
}

// sourceEnv sets the variables of `baton local`'s env file, as `. D/env`
// does.
func sourceEnv(t *testing.T, exports string) {
	t.Helper()
	for _, line := range strings.Split(exports, "\n") {
		kv, ok := strings.CutPrefix(line, "export ")
		if !ok {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, strings.Trim(v, "'"))
	}
}

// TestDoctorAgainstBatonLocal is the acceptance test of `baton doctor`: it
// passes against the stack `baton local` runs, and once an index is
// dropped it fails, exit status 1, with a FAIL line naming that index.
func TestDoctorAgainstBatonLocal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Tick: -1})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	defer func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	sourceEnv(t, s.Exports())

	out, code := runDoctor(t)
	if code != 0 || !strings.Contains(out, "all checks passed (local)") {
		t.Fatalf("baton doctor against baton local: exit %d\n%s", code, out)
	}
	for _, want := range []string{"PASS    mongo ", "PASS    index runs.history ", "PASS    bucket ", "PASS    tasks queue ", "PASS    http: /healthz "} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q line:\n%s", want, out)
		}
	}

	if err := emutest.RawClient(t, s.MongoURI).Database(s.Deps.Store.DatabaseName()).Collection("runs").Indexes().DropOne(ctx, "history"); err != nil {
		t.Fatalf("drop runs.history: %v", err)
	}
	out, code = runDoctor(t)
	if code != 1 {
		t.Errorf("with runs.history dropped: exit %d, want 1\n%s", code, out)
	}
	var failed []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "FAIL") {
			failed = append(failed, line)
		}
	}
	if len(failed) != 1 || !strings.Contains(failed[0], "index runs.history") || !strings.Contains(failed[0], "missing") {
		t.Errorf("want one FAIL line, naming runs.history; got %q\n%s", failed, out)
	}

	out, code = runDoctor(t, "--json")
	var rep doctor.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if code != 1 || rep.OK || rep.Mode != "local" {
		t.Errorf("--json: exit %d, ok %v, mode %q", code, rep.OK, rep.Mode)
	}
	for _, r := range rep.Results {
		if (r.Status == doctor.Fail) != (r.Check == "index runs.history") {
			t.Errorf("--json: %s %s: %s", r.Status, r.Check, r.Detail)
		}
	}
}

func TestDoctorUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
	}{
		{args: []string{"--local", "--cloud"}},
		{args: []string{"--no-such-flag"}},
		{args: []string{"--timeout", "0s", "--local"}},
		{args: []string{"--deep", "--local"}},
		{args: []string{"--deep", "--cloud"}},
		// The cloud needs a project, a bucket and a region for the job.
		{args: []string{"--cloud", "--bucket", "b"}, env: map[string]string{"BATON_PROJECT": ""}},
		{args: []string{"--cloud", "--project", "p", "--bucket", "b", "--region", ""}},
	} {
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		if _, code := runDoctor(t, c.args...); code != 2 {
			t.Errorf("baton doctor %v: exit %d, want 2", c.args, code)
		}
	}
}

// TestDoctorLocationFromEnvironment: --location defaults to
// BATON_FIRESTORE_LOCATION (which Terraform's cli_env exports), so a
// database Terraform put in firestore_location = "nam5" passes with no flag.
func TestDoctorLocationFromEnvironment(t *testing.T) {
	t.Setenv("BATON_FIRESTORE_LOCATION", "nam5")
	if got := newDoctorCmd().Flags().Lookup("location").DefValue; got != "nam5" {
		t.Fatalf("--location defaults to %q, want BATON_FIRESTORE_LOCATION's nam5", got)
	}
}

// TestDoctorDeepAgainstBatonLocal is the acceptance test of `baton doctor
// --deep`: against the stack `baton local` runs, every probe, explain,
// race, latency and bucket check passes (a WARN at most), with exit status
// 0 and no scratch collection left; with the runs.history index dropped,
// it exits 1 with one FAIL row, the explain of the run history page,
// naming the table scan and the index to create.
func TestDoctorDeepAgainstBatonLocal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Tick: -1})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	defer func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	sourceEnv(t, s.Exports())

	out, code := runDoctor(t, "--deep")
	if code != 0 || !strings.Contains(out, "all checks passed (deep)") {
		t.Fatalf("baton doctor --deep against baton local: exit %d\n%s", code, out)
	}
	t.Logf("baton doctor --deep:\n%s", out)
	for _, want := range []string{"PASS    probe GPU.ClaimBestJob ", "PASS    explain run history page (Catalog.ListRuns) ",
		"PASS    race: 20 conditional writers on one document ", "PASS    latency: conditional write ", "PASS    gcs: stale generation ",
		"PASS    deep: cleanup ", "PASS    deep: cost "} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q line:\n%s", want, out)
		}
	}
	raw := emutest.RawClient(t, s.MongoURI).Database(s.Deps.Store.DatabaseName())
	left := func() []string {
		names, err := raw.ListCollectionNames(ctx, map[string]any{})
		if err != nil {
			t.Fatalf("list collections: %v", err)
		}
		var out []string
		for _, n := range names {
			if strings.HasPrefix(n, doctor.ScratchPrefix) {
				out = append(out, n)
			}
		}
		return out
	}
	if l := left(); len(l) > 0 {
		t.Errorf("scratch collections left: %v", l)
	}

	if err := raw.Collection("runs").Indexes().DropOne(ctx, "history"); err != nil {
		t.Fatalf("drop runs.history: %v", err)
	}
	out, code = runDoctor(t, "--deep", "--json")
	var rep doctor.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--deep --json: %v\n%s", err, out)
	}
	if code != 1 || rep.OK || rep.Mode != "deep" {
		t.Errorf("with runs.history dropped: exit %d, ok %v, mode %q", code, rep.OK, rep.Mode)
	}
	for _, r := range rep.Results {
		isHistory := r.Check == "explain run history page (Catalog.ListRuns)"
		if (r.Status == doctor.Fail) != isHistory {
			t.Errorf("%s %s: %s", r.Status, r.Check, r.Detail)
		}
		if isHistory && (!strings.Contains(r.Detail, "TableScan") || !strings.Contains(r.Fix, "runs.history")) {
			t.Errorf("the failing row does not name the scan and the index: %+v", r)
		}
	}
	if l := left(); len(l) > 0 {
		t.Errorf("scratch collections left after a failing run: %v", l)
	}
}
