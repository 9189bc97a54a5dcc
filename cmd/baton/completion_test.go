package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/schedule"
)

// complete runs cobra's hidden `__complete` (what the shell scripts of
// `baton completion bash|zsh|fish` call on <TAB>) on root and returns the
// offered values (descriptions cut off), the directive line and stderr.
func complete(t *testing.T, root *cobra.Command, args ...string) (values []string, directive, stderr string) {
	t.Helper()
	// runRoot leaves --version set (to false) on the shared tree, and
	// cobra completes nothing once --version or --help is present.
	if f := root.Flags().Lookup("version"); f != nil {
		f.Changed = false
	}
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{cobra.ShellCompRequestCmd}, args...))
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("__complete %s: %v", strings.Join(args, " "), err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	for _, l := range lines[:len(lines)-1] {
		v, _, _ := strings.Cut(l, "\t")
		values = append(values, v)
	}
	return values, lines[len(lines)-1], errOut.String()
}

// noFileDirective is how __complete prints ShellCompDirectiveNoFileComp.
const noFileDirective = ":4"

// TestCompletionOfIDs: against a real Schedules API (two schedules, a
// triggered run) and a real GPU API (a job), <TAB> offers the schedule
// ids on every command that takes one and on runs list --schedule, run
// ids on runs get, and job ids on gpu get, cancel and a gpu logs command
// added to the tree by another file; never file names.
func TestCompletionOfIDs(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.ok(t, "schedules", "create", "--id", "alpha", "--cron", "@yearly", "--builtin", "noop")
	b.ok(t, "schedules", "create", "--id", "beta", "--cron", "@daily", "--builtin", "noop")
	var run schedule.Run
	if err := json.Unmarshal([]byte(b.ok(t, "schedules", "trigger", "alpha", "-o", "json")), &run); err != nil {
		t.Fatal(err)
	}

	d, err := gpu.New(gpu.Config{Store: emutest.Store(t), Pool: gpu.Pool{{URL: "http://127.0.0.1:1", Slots: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	gsrv := httptest.NewServer(httpapi.RequireToken(cliToken, gpu.NewHandler(d)))
	t.Cleanup(gsrv.Close)
	gpuClient := func() (*apiClient, error) {
		return &apiClient{base: gsrv.URL, token: cliToken, http: gsrv.Client()}, nil
	}
	if out, err := runGPU(t, gpuClient, "enqueue", "--id", "job-1", "--payload", "true"); err != nil {
		t.Fatalf("enqueue: %v\n%s", err, out)
	}

	root := &cobra.Command{Use: "baton", SilenceUsage: true, SilenceErrors: true}
	gpuCmd := newGPUCmd(gpuClient)
	if find(gpuCmd, "logs") == nil { // as gpu_logs.go adds it, when it is there
		gpuCmd.AddCommand(&cobra.Command{Use: "logs JOB_ID", RunE: func(*cobra.Command, []string) error { return nil }})
	}
	root.AddCommand(newSchedulesCmd(b.client), newRunsCmd(b.client), gpuCmd)
	registerCompletions(root, b.client, gpuClient)

	check := func(want []string, args ...string) {
		t.Helper()
		got, directive, stderr := complete(t, root, args...)
		if !slices.Equal(got, want) || directive != noFileDirective || stderr != "Completion ended with directive: ShellCompDirectiveNoFileComp\n" {
			t.Errorf("__complete %q = %q %s (stderr %q); want %q %s", args, got, directive, stderr, want, noFileDirective)
		}
	}
	for _, name := range []string{"get", "describe", "update", "pause", "resume", "trigger", "delete"} {
		check([]string{"alpha", "beta"}, "schedules", name, "")
	}
	check([]string{"beta"}, "schedules", "describe", "b")
	check(nil, "schedules", "describe", "alpha", "") // one id only
	check([]string{"alpha", "beta"}, "runs", "list", "--schedule", "")
	check([]string{run.ID}, "runs", "get", "")
	for _, name := range []string{"get", "cancel", "logs"} {
		check([]string{"job-1"}, "gpu", name, "")
	}
	// The description is what the API says of each.
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{cobra.ShellCompRequestCmd, "schedules", "get", ""})
	if err := root.Execute(); err != nil || !strings.Contains(out.String(), "alpha\t@yearly\n") {
		t.Errorf("want alpha described by its cron: %v\n%s", err, out.String())
	}
}

var registerRootOnce sync.Once

// registeredRoot is the real command tree with its completions, as main
// sets it up, for tests that use runRoot (not parallel).
func registeredRoot() *cobra.Command {
	registerRootOnce.Do(func() { registerCompletions(rootCmd, schedulesClientFromEnv, gpuClientFromEnv) })
	return rootCmd
}

// TestCompletionOfEnumFlags: on the real command tree, the enum flags
// offer their values, taken from the domain packages.
func TestCompletionOfEnumFlags(t *testing.T) {
	root := registeredRoot()
	t.Cleanup(func() { root.SetOut(nil); root.SetErr(nil); root.SetArgs(nil) })
	runStatuses := []string{}
	for _, s := range schedule.AllRunStatuses() {
		runStatuses = append(runStatuses, string(s))
	}
	jobStatuses := []string{}
	for _, s := range gpu.AllJobStatuses() {
		jobStatuses = append(jobStatuses, string(s))
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"runs", "list", "--status", ""}, runStatuses},
		{[]string{"runs", "list", "--source", ""}, []string{"scheduled", "misfire", "catchup", "retry", "manual", "backfill"}},
		{[]string{"gpu", "list", "--status", ""}, jobStatuses},
		{[]string{"schedules", "create", "--overlap", ""}, []string{"skip", "buffer_one", "allow"}},
		{[]string{"schedules", "update", "x", "--catchup", ""}, []string{"latest", "all", "none"}},
		{[]string{"schedules", "list", "-o", ""}, []string{"table", "json", "yaml"}},
		{[]string{"lease", "status", "--output", ""}, []string{"table", "json", "yaml"}},
		{[]string{"runs", "get", "x", "-o", ""}, []string{"table", "json", "yaml"}},
		{[]string{"--log-format", ""}, []string{"text", "json", "auto"}},
		{[]string{"lease", "run", "--log-format", ""}, []string{"text", "json", "auto"}},
	} {
		got, directive, _ := complete(t, root, tc.args...)
		if !slices.Equal(got, tc.want) || directive != noFileDirective {
			t.Errorf("__complete %q = %q %s; want %q %s", tc.args, got, directive, tc.want, noFileDirective)
		}
	}
	// cobra's script generator is there, for the README's instructions
	// (run as a process: cobra binds its output when first executed).
	for _, shell := range []string{"bash", "zsh", "fish"} {
		out, err := exec.Command(batonBinary(t), "completion", shell).Output()
		if err != nil || !strings.Contains(string(out), "__complete") {
			t.Errorf("baton completion %s: %v, %d bytes without __complete", shell, err, len(out))
		}
	}
}

// TestCompletionAPIUnreachable: when the API refuses connections or never
// answers, a completion offers nothing, says nothing on stderr but
// cobra's directive line (which the scripts drop), and still forbids file
// names: an error must never land in the user's shell.
func TestCompletionAPIUnreachable(t *testing.T) {
	root := registeredRoot()
	t.Cleanup(func() { root.SetOut(nil); root.SetErr(nil); root.SetArgs(nil) })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String()
	_ = l.Close()
	hang := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hang.Close)
	for _, base := range []string{refused, hang.URL} {
		t.Setenv("BATON_URL", base)
		t.Setenv("BATON_SCHEDULES_URL", "")
		t.Setenv("BATON_GPU_URL", "")
		for _, args := range [][]string{{"schedules", "describe", ""}, {"runs", "get", ""}, {"runs", "list", "--schedule", ""}, {"gpu", "get", ""}} {
			got, directive, stderr := complete(t, root, args...)
			if len(got) != 0 || directive != noFileDirective || stderr != "Completion ended with directive: ShellCompDirectiveNoFileComp\n" {
				t.Errorf("API at %s: __complete %q = %q %s, stderr %q; want nothing, %s and only the directive line", base, args, got, directive, stderr, noFileDirective)
			}
		}
	}
	t.Setenv("BATON_URL", "not a url")
	if got, directive, stderr := complete(t, root, "schedules", "get", ""); len(got) != 0 || directive != noFileDirective || strings.Contains(stderr, "baton:") {
		t.Errorf("bad BATON_URL: %q %s, stderr %q", got, directive, stderr)
	}
}
