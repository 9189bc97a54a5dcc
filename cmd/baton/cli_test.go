package main

import (
	"bytes"
	"context"
	"runtime/debug"
	"strings"
	"testing"
)

// runRoot executes the real baton command tree (rootCmd, as main does)
// with args, and resets the flags it leaves set. Tests that use it are not
// parallel: the tree is shared.
func runRoot(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	rootCmd.SetOut(&out)
	rootCmd.SetErr(&errOut)
	rootCmd.SetArgs(args)
	t.Cleanup(func() {
		rootCmd.SetOut(nil)
		rootCmd.SetErr(nil)
		rootCmd.SetArgs(nil)
		_ = rootCmd.Flags().Set("version", "false")
	})
	err = rootCmd.ExecuteContext(context.Background())
	_ = rootCmd.Flags().Set("version", "false")
	return out.String(), errOut.String(), err
}

// TestVersion: `baton --version` and `baton version` exit 0 and print the
// same line, built from the binary's build info (under go test that is
// "(devel)", often without VCS settings).
func TestVersion(t *testing.T) {
	want := "baton " + buildVersion(debug.ReadBuildInfo()) + "\n"
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, errOut, err := runRoot(t, args...)
		if err != nil || out != want {
			t.Errorf("baton %s: %v, stdout %q, stderr %q; want %q", strings.Join(args, " "), err, out, errOut, want)
		}
	}
	if _, _, err := runRoot(t, "version", "extra"); exitCode(err) == 0 {
		t.Errorf("baton version extra: exit 0, want an error")
	}
}

// TestBuildVersion formats the build info: version, revision, commit time,
// whether the tree was modified, Go version; and never fails without it.
func TestBuildVersion(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.modified", Value: "true"}, {Key: "vcs", Value: "git"},
		{Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.revision", Value: "0123abcd"},
	}}
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"stamped", bi, true, "v1.2.3 (revision 0123abcd, 2026-12-01T10:00:00Z, modified, go1.99)"},
		{"clean", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "ff"}, {Key: "vcs.modified", Value: "false"}}}, true, "v1.2.3 (revision ff, clean)"},
		{"go test", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "(devel)"},
		{"empty version", &debug.BuildInfo{GoVersion: "go1.99"}, true, "(devel) (go1.99)"},
		{"no build info", nil, false, "unknown (no build info)"},
	}
	for _, tc := range tests {
		if got := buildVersion(tc.bi, tc.ok); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestUnknownSubcommand: a mistyped subcommand exits 2 with cobra's
// suggestions, at the root and under every group command; a bare group
// command still prints its help and exits 0.
func TestUnknownSubcommand(t *testing.T) {
	tests := []struct {
		args    []string
		suggest string // "" when nothing is close
	}{
		{[]string{"lst"}, ""},
		{[]string{"schedules", "lst"}, "list"},
		{[]string{"sched", "lst"}, "list"},
		{[]string{"runs", "lst"}, "list"},
		{[]string{"gpu", "lst"}, "list"},
		{[]string{"gpu", "pol"}, "pool"},
		{[]string{"lease", "stats"}, "status"},
		{[]string{"bench", "tik"}, "tick"},
		{[]string{"versoin"}, "version"},
	}
	for _, tc := range tests {
		line := strings.Join(tc.args, " ")
		out, _, err := runRoot(t, tc.args...)
		if code := exitCode(err); code != 2 {
			t.Errorf("baton %s: exit %d (%v), want 2", line, code, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "unknown command "+`"`+tc.args[len(tc.args)-1]+`"`) {
			t.Errorf("baton %s: %q does not name the unknown command", line, msg)
		}
		if tc.suggest != "" && (!strings.Contains(msg, "Did you mean this?\n") || !strings.Contains(msg, "\t"+tc.suggest)) {
			t.Errorf("baton %s: %q does not suggest %q", line, msg, tc.suggest)
		}
		if out != "" {
			t.Errorf("baton %s printed %q on stdout; want nothing (no help)", line, out)
		}
	}
	for _, group := range []string{"schedules", "runs", "gpu", "lease", "bench"} {
		out, _, err := runRoot(t, group)
		if err != nil || !strings.Contains(out, "Available Commands:") {
			t.Errorf("baton %s: %v, stdout %q; want its help and exit 0", group, err, out)
		}
	}
}
