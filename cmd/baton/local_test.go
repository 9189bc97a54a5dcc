package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is an io.Writer the command writes while the test reads.
type lockedBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{}
}

func newLockedBuffer() *lockedBuffer { return &lockedBuffer{changed: make(chan struct{})} }

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.changed)
	l.changed = make(chan struct{})
	return l.b.Write(p)
}

// waitFor blocks until the output contains s.
func (l *lockedBuffer) waitFor(ctx context.Context, s string) (string, error) {
	for {
		l.mu.Lock()
		out, ch := l.b.String(), l.changed
		l.mu.Unlock()
		if strings.Contains(out, s) {
			return out, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return out, ctx.Err()
		}
	}
}

func TestLocalCommand(t *testing.T) {
	dir := t.TempDir()
	stdout, stderr := newLockedBuffer(), newLockedBuffer()
	cmd := newLocalCmd()
	cmd.SetArgs([]string{"--addr", "127.0.0.1:0", "--mongo-addr", "127.0.0.1:0", "--gcs-addr", "127.0.0.1:0", "--tasks-addr", "127.0.0.1:0", "--pubsub-addr", "127.0.0.1:0", "--run-jobs-addr", "127.0.0.1:0",
		"--data-dir", dir, "--tick", "0", "--bucket", "test-bucket"})
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	out, err := stdout.waitFor(wctx, "# Ctrl-C stops it.")
	if err != nil {
		t.Fatalf("no export lines: %v\nstdout: %s\nstderr: %s", err, out, stderr.b.String())
	}
	env := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if kv, ok := strings.CutPrefix(line, "export "); ok {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = strings.Trim(v, "'")
		} else if line != "" && !strings.HasPrefix(line, "#") {
			t.Errorf("stdout line %q is neither an export nor a comment; eval would choke", line)
		}
	}
	for _, k := range []string{"BATON_URL", "STORAGE_EMULATOR_HOST", "BATON_BUCKET", "BATON_MONGO_URI", "CLOUD_TASKS_EMULATOR_HOST", "BATON_TASKS_QUEUE", "BATON_TOKEN"} {
		if env[k] == "" {
			t.Errorf("no export of %s in:\n%s", k, out)
		}
	}
	if env["BATON_BUCKET"] != "test-bucket" {
		t.Errorf("BATON_BUCKET = %q, want the --bucket value", env["BATON_BUCKET"])
	}
	if file, err := os.ReadFile(filepath.Join(dir, "env")); err != nil || !strings.Contains(string(file), "export BATON_TOKEN='"+env["BATON_TOKEN"]+"'") {
		t.Errorf("env file: %v %q", err, file)
	}

	resp, err := http.Get(env["BATON_URL"] + "/Rent?jeonse=300000000&deposit=100000000&rate=4.5")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"monthlyRent":750000`) {
		t.Errorf("Rent: %d %s", resp.StatusCode, body)
	}

	cancel() // what SIGINT does to the root context
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("baton local ended with %v, want a clean shutdown", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("baton local did not shut down")
	}
	if _, err := stderr.waitFor(context.Background(), `"message":"stack: closed"`); err != nil {
		t.Error(err)
	}
	if resp, err := http.Get(env["BATON_URL"] + "/healthz"); err == nil {
		resp.Body.Close()
		t.Error("server still answers after shutdown")
	}
}

func TestLocalCommandRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--tick", "-1s"}, {"--log-level", "loud"}} {
		cmd := newLocalCmd()
		cmd.SetArgs(args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.ExecuteContext(context.Background())
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != 2 {
			t.Errorf("baton local %v = %v, want a usage error (exit 2)", args, err)
		}
	}
}
