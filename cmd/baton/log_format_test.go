package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestNewLoggerFormats: newLogger, which every logging command uses,
// writes what --log-format asks: text lines, JSON entries with Cloud
// Logging's severity and message, and for auto JSON when stderr is not a
// terminal (a buffer, a file).
func TestNewLoggerFormats(t *testing.T) {
	t.Parallel()
	logOnce := func(format string) string {
		t.Helper()
		var buf bytes.Buffer
		cmd := &cobra.Command{Use: "x"}
		v := logFormat(logFormatAuto)
		cmd.PersistentFlags().Var(&v, logFormatFlag, "")
		if format != "" {
			if err := cmd.PersistentFlags().Set(logFormatFlag, format); err != nil {
				t.Fatal(err)
			}
		}
		cmd.SetErr(&buf)
		newLogger(cmd, "info").Warn("renew failed", "lease", "l1")
		return buf.String()
	}
	if got := logOnce("text"); !strings.Contains(got, `level=WARNING msg="renew failed" lease=l1`) || strings.Contains(got, "{") {
		t.Errorf("text: %q", got)
	}
	for _, format := range []string{"json", "auto", ""} {
		var entry map[string]any
		got := logOnce(format)
		if err := json.Unmarshal([]byte(got), &entry); err != nil || entry["severity"] != "WARNING" || entry["message"] != "renew failed" || entry["lease"] != "l1" {
			t.Errorf("%q (stderr a buffer): %q (%v); want a JSON entry with severity and message", format, got, err)
		}
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := resolveLogFormat(logFormatAuto, f); got != "json" {
		t.Errorf("auto on a file = %s; want json", got)
	}
	if got := resolveLogFormat("text", f); got != "text" {
		t.Errorf("text on a file = %s; want text (asked for)", got)
	}
	var lf logFormat
	if err := lf.Set("yaml"); err == nil || !strings.Contains(err.Error(), "want text, json, auto") {
		t.Errorf("Set(yaml) = %v; want the values named", err)
	}
}

// TestLogFormatFlagRejected: a bad --log-format is a usage error (exit 2)
// naming the flag, on any command.
func TestLogFormatFlagRejected(t *testing.T) {
	_, _, err := runRoot(t, "--log-format", "xml", "version")
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "--log-format") || !strings.Contains(err.Error(), "want text, json, auto") {
		t.Errorf("--log-format xml: exit %d, %v; want 2 naming the flag and its values", exitCode(err), err)
	}
}
