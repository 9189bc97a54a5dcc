package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// cliBundle is the real Schedules handler (catalog over the Mongo emulator,
// the scheduler Engine over the GCS emulator for :trigger) behind an
// httptest server, and a CLI client pointed at it.
type cliBundle struct {
	st     *mongostore.Store
	srv    *httptest.Server
	client clientFunc
}

const cliToken = "cli-token"

func setupCLI(t *testing.T) *cliBundle {
	t.Helper()
	st := emutest.Store(t)
	gcs, bucket := emutest.GCS(t)
	eng, err := scheduler.New(scheduler.Config{Store: st, Leases: lease.NewManager(gcs.Bucket(bucket), "leases/", lease.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Wait) // background runs finish before the store closes
	svc := catalog.New(st, catalog.Options{
		Validate:   schedule.ValidateOptions{AllowedHosts: []string{"api.example.com"}, AllowedTopics: []string{"projects/local/topics/*"}, AllowedJobs: []string{"projects/local/locations/local/jobs/*"}, Builtins: scheduler.Builtins()},
		Triggerer:  eng,
		Backfiller: eng,
	})
	srv := httptest.NewServer(httpapi.RequireToken(cliToken, catalog.NewHandler(svc, catalog.HandlerOptions{})))
	t.Cleanup(srv.Close)
	b := &cliBundle{st: st, srv: srv}
	b.client = func() (*apiClient, error) {
		return &apiClient{base: srv.URL, token: cliToken, http: srv.Client()}, nil
	}
	return b
}

// run executes one baton command line in-process.
func (b *cliBundle) run(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := &cobra.Command{Use: "baton", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newSchedulesCmd(b.client), newRunsCmd(b.client))
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err = root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// ok runs a command that must succeed and returns its stdout.
func (b *cliBundle) ok(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := b.run(t, "", args...)
	if err != nil {
		t.Fatalf("baton %s: %v (stderr %q)", strings.Join(args, " "), err, errOut)
	}
	return out
}

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if err != nil {
		return 1
	}
	return 0
}

func (b *cliBundle) stored(t *testing.T, id string) *schedule.Schedule {
	t.Helper()
	var sc schedule.Schedule
	if err := emutest.Raw(t, b.st).Collection(schedule.SchedulesCollection).FindOne(context.Background(), bson.D{{Key: "_id", Value: id}}).Decode(&sc); err != nil {
		t.Fatalf("read %s: %v", id, err)
	}
	// The change that produced the version, and the decider shard, are
	// bookkeeping the API does not answer (json:"-"); history_test.go
	// reads the change through the API.
	sc.LastChange, sc.DeciderShard = nil, 0
	return &sc
}

func (b *cliBundle) count(t *testing.T) int64 {
	t.Helper()
	n, err := emutest.Raw(t, b.st).Collection(schedule.SchedulesCollection).CountDocuments(context.Background(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSchedulesCLILifecycle(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)

	out := b.ok(t, "schedules", "create", "--id", "nightly", "--cron", "30 2 * * *", "--tz", "Europe/Berlin",
		"--target-url", "https://api.example.com/nightly", "--header", "X-Team: data", "--overlap", "skip", "--retry-attempts", "3")
	for _, want := range []string{"ID:", "nightly", "Cron:", "30 2 * * *", "Europe/Berlin", "POST https://api.example.com/nightly", "Overlap:", "skip", "3 attempt(s)", "Version:"} {
		if !strings.Contains(out, want) {
			t.Errorf("create output lacks %q:\n%s", want, out)
		}
	}
	sc := b.stored(t, "nightly")
	if diff := cmp.Diff(map[string]string{"X-Team": "data"}, sc.Target.HTTP.Headers); diff != "" {
		t.Errorf("stored headers (-want,+got):\n%s", diff)
	}
	if sc.Overlap != "skip" || sc.Retry.MaxAttempts != 3 || !sc.Enabled {
		t.Errorf("stored %+v", sc)
	}

	// get --json prints the schedule as the API has it.
	var got schedule.Schedule
	if err := json.Unmarshal([]byte(b.ok(t, "schedules", "get", "nightly", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sc, &got); diff != "" {
		t.Errorf("get --json vs database (-db,+cli):\n%s", diff)
	}

	// update changes only the flags given; switching target type drops the old one.
	b.ok(t, "schedules", "update", "nightly", "--cron", "0 3 * * *", "--builtin", "sleep", "--arg", "duration=1s", "--if-match", "1")
	sc = b.stored(t, "nightly")
	if sc.Cron != "0 3 * * *" || sc.Target.Type != "builtin" || sc.Target.HTTP != nil || sc.Target.Builtin.Name != "sleep" || sc.Overlap != "skip" || sc.Version != 2 {
		t.Errorf("after update: cron %q, target %+v, overlap %q, version %d", sc.Cron, sc.Target, sc.Overlap, sc.Version)
	}

	// A stale --if-match fails with exit 1 and says 412; nothing changes.
	_, _, err := b.run(t, "", "schedules", "update", "nightly", "--cron", "* * * * *", "--if-match", "1")
	if exitCode(err) != 1 || err == nil || !strings.Contains(err.Error(), "412") {
		t.Errorf("stale --if-match: exit %d, %v; want exit 1 naming 412", exitCode(err), err)
	}
	if b.stored(t, "nightly").Version != 2 {
		t.Error("stale --if-match changed the schedule")
	}

	// update -f - takes a merge patch on stdin.
	if _, errOut, err := b.run(t, `{"description":"from stdin","maxCatchup":4,"catchup":"all"}`, "schedules", "update", "nightly", "-f", "-"); err != nil {
		t.Fatalf("update -f -: %v %s", err, errOut)
	}
	if sc := b.stored(t, "nightly"); sc.Description != "from stdin" || sc.MaxCatchup != 4 || sc.Catchup != "all" {
		t.Errorf("after update -f -: %+v", sc)
	}

	if out := b.ok(t, "schedules", "pause", "nightly", "--reason", "vendor outage"); !strings.Contains(out, "vendor outage") {
		t.Errorf("pause --reason: the card does not show the reason:\n%s", out)
	}
	if sc := b.stored(t, "nightly"); sc.Enabled || sc.PauseReason != "vendor outage" {
		t.Errorf("after pause --reason: enabled %v, reason %q", sc.Enabled, sc.PauseReason)
	}
	if out := b.ok(t, "schedules", "list"); !strings.Contains(out, "paused") {
		t.Errorf("list does not show the pause:\n%s", out)
	}
	b.ok(t, "schedules", "resume", "nightly")
	if sc := b.stored(t, "nightly"); !sc.Enabled || sc.PauseReason != "" {
		t.Errorf("after resume: enabled %v, reason %q; want true and none", sc.Enabled, sc.PauseReason)
	}

	out = b.ok(t, "schedules", "trigger", "nightly")
	if !strings.HasPrefix(out, "triggered nightly: run nightly@") {
		t.Errorf("trigger output %q", out)
	}
	runs := b.ok(t, "runs", "list", "--schedule", "nightly")
	if lines := strings.Split(strings.TrimSpace(runs), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "RUN") || !strings.Contains(lines[1], "manual") {
		t.Errorf("runs list after one trigger:\n%s", runs)
	}

	b.ok(t, "schedules", "delete", "nightly")
	_, _, err = b.run(t, "", "schedules", "get", "nightly")
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "404 not_found") {
		t.Errorf("get after delete: exit %d, %v; want exit 1 naming 404", exitCode(err), err)
	}
}

// TestSchedulesCLIErrors: API validation errors name the field and the
// flag, exit 1, and store nothing; CLI misuse exits 2 without a request.
func TestSchedulesCLIErrors(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	tests := []struct {
		name  string
		args  []string
		code  int
		wants []string
	}{
		{"invalid cron", []string{"schedules", "create", "--id", "x", "--cron", "61 * * * *", "--builtin", "noop"}, 1, []string{"HTTP 400 invalid_argument", "cron (--cron)"}},
		{"unknown zone", []string{"schedules", "create", "--id", "x", "--cron", "* * * * *", "--tz", "Mars/Base", "--builtin", "noop"}, 1, []string{"timeZone (--tz)", "Mars/Base"}},
		{"ssrf", []string{"schedules", "create", "--id", "x", "--cron", "* * * * *", "--target-url", "http://169.254.169.254/"}, 1, []string{"target.http.url (--target-url)", "allow"}},
		{"unknown policy", []string{"schedules", "create", "--id", "x", "--cron", "* * * * *", "--builtin", "noop", "--overlap", "queue"}, 1, []string{"overlap (--overlap)"}},
		{"unknown field in file", []string{"schedules", "create", "-f", "-"}, 1, []string{"colour", "unknown field"}},
		{"bad gpu tenant", []string{"schedules", "create", "--id", "x", "--cron", "* * * * *", "--gpu", "--gpu-tenant", "a=b"}, 1, []string{"target.gpu.tenant (--gpu-tenant)"}},
		{"bad gpu type", []string{"schedules", "create", "--id", "x", "--cron", "* * * * *", "--gpu", "--gpu-type", "Nvidia L4"}, 1, []string{"target.gpu.gpuType (--gpu-type)"}},
		{"two targets", []string{"schedules", "create", "--id", "x", "--cron", "* * * * *", "--builtin", "noop", "--target-url", "https://api.example.com/"}, 2, []string{"choose one target"}},
		{"bad header", []string{"schedules", "create", "--id", "x", "--header", "novalue"}, 2, []string{"--header"}},
		{"unknown flag", []string{"schedules", "create", "--colour", "red"}, 2, []string{"unknown flag"}},
		{"get without id", []string{"schedules", "get"}, 2, []string{"exactly one argument"}},
		{"update nothing", []string{"schedules", "update", "x"}, 2, []string{"nothing to change"}},
		{"list bad page size", []string{"schedules", "list", "--page-size", "9999"}, 2, []string{"--page-size must be from 1 to 500, not 9999"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdin := ""
			if tc.name == "unknown field in file" {
				stdin = `{"id":"x","cron":"* * * * *","colour":"red","target":{"type":"builtin","builtin":{"name":"noop"}}}`
			}
			_, _, err := b.run(t, stdin, tc.args...)
			if got := exitCode(err); got != tc.code {
				t.Fatalf("exit %d (%v), want %d", got, err, tc.code)
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if n := b.count(t); n != 0 {
				t.Errorf("%d schedules stored after a failed command", n)
			}
		})
	}
}

func TestSchedulesCLIListPages(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	var want []string
	for i := range 7 {
		id := "job-" + string(rune('a'+i))
		want = append(want, id)
		b.ok(t, "schedules", "create", "--id", id, "--cron", "@every 1h", "--builtin", "noop")
	}
	// One page: a table of 3 and a hint on stderr.
	out, errOut, err := b.run(t, "", "schedules", "list", "--page-size", "3")
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 4 || !strings.HasPrefix(lines[0], "ID") {
		t.Errorf("first page:\n%s", out)
	}
	if !strings.Contains(errOut, "--page-token") {
		t.Errorf("no next-page hint on stderr: %q", errOut)
	}
	// --all --json follows the tokens.
	var page catalog.SchedulePage
	if err := json.Unmarshal([]byte(b.ok(t, "schedules", "list", "--page-size", "3", "--all", "--json")), &page); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sc := range page.Schedules {
		got = append(got, sc.ID)
	}
	if diff := cmp.Diff(want, got); diff != "" || page.NextPageToken != "" {
		t.Errorf("list --all (-want,+got):\n%s\nnext token %q", diff, page.NextPageToken)
	}
}

func TestSchedulesClientFromEnv(t *testing.T) {
	// Not parallel: it sets environment variables.
	t.Setenv("BATON_URL", "http://127.0.0.1:9999/")
	t.Setenv("BATON_SCHEDULES_URL", "")
	t.Setenv("BATON_TOKEN", "tok")
	c, err := schedulesClientFromEnv()
	if err != nil || c.base != "http://127.0.0.1:9999/Schedules" || c.token != "tok" {
		t.Errorf("from BATON_URL: %+v, %v", c, err)
	}
	t.Setenv("BATON_SCHEDULES_URL", "https://schedules-abc-ew.a.run.app")
	if c, err = schedulesClientFromEnv(); err != nil || c.base != "https://schedules-abc-ew.a.run.app" {
		t.Errorf("BATON_SCHEDULES_URL wins: %+v, %v", c, err)
	}
	t.Setenv("BATON_SCHEDULES_URL", "schedules.example.com")
	if _, err = schedulesClientFromEnv(); exitCode(err) != 2 || !strings.Contains(err.Error(), "BATON_SCHEDULES_URL") {
		t.Errorf("bad URL: %v; want exit 2 naming the variable", err)
	}
}

// TestAPIFailureKeepsWrappedExitCode: a usage error (exit 2) that reaches
// apiFailure wrapped keeps its code rather than turning into a failure (1).
func TestAPIFailureKeepsWrappedExitCode(t *testing.T) {
	err := apiFailure("list", fmt.Errorf("page 2: %w", usageError("bad --limit")))
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 {
		t.Errorf("apiFailure(wrapped usage error) = %v, want exit code 2", err)
	}
	err = apiFailure("list", errors.New("503"))
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Errorf("apiFailure(plain error) = %v, want exit code 1", err)
	}
}

// TestSchedulesCLIGPUTenant: --gpu-tenant, --gpu-type and --gpu-preemptible
// set the gpu target's fields on create, and update changes only the one
// given.
func TestSchedulesCLIGPUTenant(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.ok(t, "schedules", "create", "--id", "train", "--cron", "@daily", "--gpu", "--gpu-payload", "true",
		"--gpu-tenant", "research", "--gpu-type", "nvidia-l4", "--gpu-preemptible")
	want := schedule.GPUTarget{Payload: "true", MaxAttempts: schedule.DefaultGPUAttempts, Timeout: schedule.Duration(schedule.DefaultGPUTimeout),
		Tenant: "research", GPUType: "nvidia-l4", Preemptible: true}
	if diff := cmp.Diff(&want, b.stored(t, "train").Target.GPU); diff != "" {
		t.Errorf("stored gpu target after create (-want,+got):\n%s", diff)
	}
	b.ok(t, "schedules", "update", "train", "--gpu-preemptible=false")
	want.Preemptible = false
	if diff := cmp.Diff(&want, b.stored(t, "train").Target.GPU); diff != "" {
		t.Errorf("stored gpu target after update --gpu-preemptible=false (-want,+got):\n%s", diff)
	}
}

// TestSchedulesCLIPubSub: --pubsub-topic makes a pubsub target with its
// data, attributes and ordering key; update changes one attribute and
// removes another, and a second target kind is refused.
func TestSchedulesCLIPubSub(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.ok(t, "schedules", "create", "--id", "export", "--cron", "@daily", "--pubsub-topic", "projects/local/topics/exports",
		"--pubsub-data", "go", "--pubsub-attr", "team=data", "--pubsub-attr", "env=prod", "--ordering-key", "k1")
	want := schedule.PubSubTarget{Topic: "projects/local/topics/exports", Data: "go", Attributes: map[string]string{"team": "data", "env": "prod"}, OrderingKey: "k1"}
	if diff := cmp.Diff(&want, b.stored(t, "export").Target.PubSub); diff != "" {
		t.Errorf("stored pubsub target after create (-want,+got):\n%s", diff)
	}
	b.ok(t, "schedules", "update", "export", "--pubsub-attr", "team=ml", "--pubsub-attr", "env=")
	want.Attributes = map[string]string{"team": "ml"}
	if diff := cmp.Diff(&want, b.stored(t, "export").Target.PubSub); diff != "" {
		t.Errorf("stored pubsub target after update (-want,+got):\n%s", diff)
	}
	if _, stderr, err := b.run(t, "", "schedules", "create", "--id", "x", "--cron", "@daily", "--builtin", "noop", "--pubsub-topic", "projects/local/topics/exports"); err == nil || !strings.Contains(err.Error()+stderr, "choose one target") {
		t.Errorf("two targets: err %v stderr %q; want choose one target", err, stderr)
	}
}

// TestSchedulesCLICloudRunJob: --cloudrun-job makes a cloudRunJob target
// with its args, env, task count and timeout; update changes one env
// variable and removes another.
func TestSchedulesCLICloudRunJob(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	const job = "projects/local/locations/local/jobs/export"
	b.ok(t, "schedules", "create", "--id", "crj", "--cron", "@daily", "--cloudrun-job", job, "--cloudrun-region", "local",
		"--cloudrun-arg", "--day", "--cloudrun-arg", "today", "--cloudrun-env", "TEAM=data", "--cloudrun-env", "MODE=full",
		"--cloudrun-tasks", "4", "--cloudrun-task-timeout", "3h")
	want := schedule.CloudRunJobTarget{Job: job, Region: "local", Args: []string{"--day", "today"}, Env: map[string]string{"TEAM": "data", "MODE": "full"}, TaskCount: 4, Timeout: schedule.Duration(3 * time.Hour)}
	if diff := cmp.Diff(&want, b.stored(t, "crj").Target.CloudRunJob); diff != "" {
		t.Errorf("stored cloudRunJob target after create (-want,+got):\n%s", diff)
	}
	b.ok(t, "schedules", "update", "crj", "--cloudrun-env", "TEAM=ml", "--cloudrun-env", "MODE=")
	want.Env = map[string]string{"TEAM": "ml"}
	if diff := cmp.Diff(&want, b.stored(t, "crj").Target.CloudRunJob); diff != "" {
		t.Errorf("stored cloudRunJob target after update (-want,+got):\n%s", diff)
	}
}
