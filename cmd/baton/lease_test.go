package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/emulator/gcs"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// These tests drive the real baton binary, built here with `go build`, as
// separate processes against a GCS emulator started in the test process and
// reached through STORAGE_EMULATOR_HOST, as two terminals would.

var (
	batonOnce sync.Once
	batonBin  string
	batonErr  error
)

func batonBinary(t *testing.T) string {
	t.Helper()
	batonOnce.Do(func() {
		dir, err := os.MkdirTemp("", "baton-bin-")
		if err != nil {
			batonErr = err
			return
		}
		batonBin = filepath.Join(dir, "baton")
		out, err := exec.Command("go", "build", "-o", batonBin, ".").CombinedOutput()
		if err != nil {
			batonErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if batonErr != nil {
		t.Fatal(batonErr)
	}
	return batonBin
}

// leaseEnv starts an emulator with a bucket and returns the environment a
// baton process needs to use it.
func leaseEnv(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	srv, err := gcs.Start(ctx, gcs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	if err := srv.CreateBucket(ctx, "e2e"); err != nil {
		t.Fatal(err)
	}
	return append(os.Environ(),
		"STORAGE_EMULATOR_HOST="+srv.Host(),
		"BATON_BUCKET=e2e",
		"BATON_CLOCK_SKEW=1s",
		"BATON_LOG_LEVEL=warn",
	)
}

// leaseProc is a running baton process.
type leaseProc struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	done   chan struct{}
	code   int
}

func startLeaseBaton(t *testing.T, env []string, args ...string) *leaseProc {
	t.Helper()
	p := &leaseProc{cmd: exec.Command(batonBinary(t), args...), done: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		err := p.cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			p.code = ee.ExitCode()
		default:
			p.code = -1
		}
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait returns the exit code, failing the test if the process is still
// running after limit (a guard against hanging).
func (p *leaseProc) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(limit):
		t.Fatalf("%v still running after %s; stderr:\n%s", p.cmd.Args, limit, p.stderr.String())
		return 0
	}
}

// waitFile waits for a file to have content, and returns it.
func waitLeaseFile(t *testing.T, path string, limit time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 && bytes.HasSuffix(b, []byte("\n")) {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not written within %s", path, limit)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// TestLeaseRunNeverOverlaps: concurrent `baton lease run --wait` processes
// run a command that appends start and end stamps to a file; the stamps
// never interleave and the epochs go up.
func TestLeaseRunNeverOverlaps(t *testing.T) {
	leaseRunNeverOverlaps(t, leaseEnv(t), "stamp")
}

// TestLeaseRunNeverOverlapsFirestore is the same torture with the job
// lease kept in Firestore (BATON_JOB_LEASE_STORE=firestore, the strict
// emulator): a job-… name lives in the job_leases collection.
func TestLeaseRunNeverOverlapsFirestore(t *testing.T) {
	st := emutest.Store(t)
	env := append(leaseEnv(t),
		"BATON_MONGO_URI="+emutest.MongoURI(t),
		"BATON_DATABASE="+st.DatabaseName(),
		"BATON_JOB_LEASE_STORE=firestore",
	)
	leaseRunNeverOverlaps(t, env, "job-stamp")
	n, err := emutest.Raw(t, st).Collection(mongostore.LeaseObjectsCollection).CountDocuments(context.Background(), bson.D{})
	if err != nil || n != 1 {
		t.Fatalf("job_leases documents (-want,+got): -1 +%d %v", n, err)
	}
}

func leaseRunNeverOverlaps(t *testing.T, env []string, name string) {
	t.Helper()
	stamps := filepath.Join(t.TempDir(), "stamps")
	script := `echo "start $BATON_LEASE_NAME $BATON_LEASE_EPOCH $$" >> "$0"; sleep 0.3; echo "end $BATON_LEASE_NAME $BATON_LEASE_EPOCH $$" >> "$0"`
	const procs, runs = 3, 2
	var ps []*leaseProc
	for i := range procs * runs {
		_ = i
		ps = append(ps, startLeaseBaton(t, env, "lease", "run", "--name", name, "--ttl", "3s", "--wait", "--", "sh", "-c", script, stamps))
	}
	for _, p := range ps {
		if code := p.wait(t, 60*time.Second); code != 0 {
			t.Fatalf("exit (-want,+got): -0 +%d; stderr:\n%s", code, p.stderr.String())
		}
	}
	b, err := os.ReadFile(stamps)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2*procs*runs {
		t.Fatalf("stamp lines (-want,+got): -%d +%d:\n%s", 2*procs*runs, len(lines), b)
	}
	lastEpoch := int64(0)
	for i := 0; i < len(lines); i += 2 {
		s, e := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if s[0] != "start" || e[0] != "end" || s[1] != name || s[2] != e[2] || s[3] != e[3] {
			t.Fatalf("runs overlap or env missing at line %d:\n%s", i, b)
		}
		epoch, _ := strconv.ParseInt(s[2], 10, 64)
		if epoch <= lastEpoch {
			t.Fatalf("epoch did not go up (%d after %d):\n%s", epoch, lastEpoch, b)
		}
		lastEpoch = epoch
	}
}

func TestLeaseRunExitCodes(t *testing.T) {
	env := leaseEnv(t)
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	holder := startLeaseBaton(t, env, "lease", "run", "--name", "busy", "--ttl", "3s", "--", "sh", "-c", `echo up > "$0"; sleep 30`, started)
	waitLeaseFile(t, started, 30*time.Second)

	busy := startLeaseBaton(t, env, "lease", "run", "--name", "busy", "--", "true")
	if code := busy.wait(t, 30*time.Second); code != exitLeaseHeld {
		t.Fatalf("held lease without --wait: exit (-want,+got): -%d +%d; stderr:\n%s", exitLeaseHeld, code, busy.stderr.String())
	}
	if !strings.Contains(busy.stderr.String(), "held by") {
		t.Fatalf("want the holder named on stderr, got:\n%s", busy.stderr.String())
	}

	own := startLeaseBaton(t, env, "lease", "run", "--name", "other", "--", "sh", "-c", "exit 7")
	if code := own.wait(t, 30*time.Second); code != 7 {
		t.Fatalf("child's exit code (-want,+got): -7 +%d; stderr:\n%s", code, own.stderr.String())
	}

	st := exec.Command(batonBinary(t), "lease", "status")
	st.Env = env
	out, err := st.CombinedOutput()
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	if !lineHasFields(string(out), "busy", "held") || !lineHasFields(string(out), "other", "free") {
		t.Fatalf("status: want busy held and other free, got:\n%s", out)
	}

	// --json (-o json) is one document naming each lease's state.
	for _, flag := range []string{"--json", "-o=json"} {
		stj := exec.Command(batonBinary(t), "lease", "status", flag)
		stj.Env = env
		jout, err := stj.Output()
		if err != nil {
			t.Fatalf("status %s: %v\n%s", flag, err, jout)
		}
		var doc struct {
			Leases []struct {
				Name, State, Holder string
				Epoch               int64
			} `json:"leases"`
		}
		if err := json.Unmarshal(jout, &doc); err != nil {
			t.Fatalf("status %s: %v\n%s", flag, err, jout)
		}
		states := map[string]string{}
		for _, l := range doc.Leases {
			states[l.Name] = l.State
			if l.Name == "busy" && (l.Holder == "" || l.Epoch < 1) {
				t.Errorf("status %s: busy lease %+v, want its holder and epoch", flag, l)
			}
		}
		if states["busy"] != "held" || states["other"] != "free" {
			t.Errorf("status %s: states %v, want busy held and other free\n%s", flag, states, jout)
		}
	}

	brk := exec.Command(batonBinary(t), "lease", "break", "--name", "busy")
	brk.Env = env
	if out, err := brk.CombinedOutput(); procExitCode(err) != 2 {
		t.Fatalf("break without --yes: exit (-want,+got): -2 +%d\n%s", procExitCode(err), out)
	}
	brk = exec.Command(batonBinary(t), "lease", "break", "--name", "busy", "--yes")
	brk.Env = env
	if out, err := brk.CombinedOutput(); err != nil {
		t.Fatalf("break: %v\n%s", err, out)
	}
	if code := holder.wait(t, 30*time.Second); code != exitLeaseLost {
		t.Fatalf("broken holder: exit (-want,+got): -%d +%d; stderr:\n%s", exitLeaseLost, code, holder.stderr.String())
	}

	bad := exec.Command(batonBinary(t), "lease", "run", "--name", "x", "true")
	bad.Env = env
	if out, err := bad.CombinedOutput(); procExitCode(err) != 2 {
		t.Fatalf("command without --: exit (-want,+got): -2 +%d\n%s", procExitCode(err), out)
	}
}

// TestLeaseRunStopCont: the holder is stopped (kill -STOP) for longer than
// its ttl; a waiting contender takes over; after kill -CONT the first one
// kills its child and exits 76.
func TestLeaseRunStopCont(t *testing.T) {
	env := leaseEnv(t)
	dir := t.TempDir()
	aFile, bFile := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	a := startLeaseBaton(t, env, "lease", "run", "--name", "job", "--ttl", "3s", "--grace", "2s", "--",
		"sh", "-c", `echo "$BATON_LEASE_EPOCH $$" > "$0"; exec sleep 60`, aFile)
	aStamp := strings.Fields(waitLeaseFile(t, aFile, 30*time.Second))
	childPid, _ := strconv.Atoi(aStamp[1])

	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	b := startLeaseBaton(t, env, "lease", "run", "--name", "job", "--ttl", "3s", "--wait", "--",
		"sh", "-c", `echo "$BATON_LEASE_EPOCH" > "$0"`, bFile)
	if code := b.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("contender: exit (-want,+got): -0 +%d; stderr:\n%s", code, b.stderr.String())
	}
	bEpoch := strings.TrimSpace(waitLeaseFile(t, bFile, time.Second))
	if want := fmt.Sprint(leaseAtoi(t, aStamp[0]) + 1); bEpoch != want {
		t.Fatalf("contender's epoch (-want,+got): -%s +%s", want, bEpoch)
	}
	if err := syscall.Kill(childPid, 0); err != nil {
		t.Fatalf("the stopped holder's child should still be running while baton is stopped: %v", err)
	}

	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(t, 30*time.Second); code != exitLeaseLost {
		t.Fatalf("resumed holder: exit (-want,+got): -%d +%d; stderr:\n%s", exitLeaseLost, code, a.stderr.String())
	}
	if err := syscall.Kill(childPid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("resumed holder's child %d: want it killed (ESRCH), got %v", childPid, err)
	}
}

func leaseAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func procExitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// regexpLine reports whether some line of out has all the given fields.
func lineHasFields(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		all := true
		for _, want := range fields {
			found := false
			for _, got := range f {
				if got == want {
					found = true
				}
			}
			all = all && found
		}
		if all {
			return true
		}
	}
	return false
}

// runBaton runs the baton binary to the end and returns its stdout,
// stderr and exit code.
func runBaton(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	c := exec.Command(batonBinary(t), args...)
	c.Env, c.Stdout, c.Stderr = env, &out, &errOut
	err := c.Run()
	return out.String(), errOut.String(), procExitCode(err)
}

// TestLeaseRunQuietUnlessVerbose: lease run leaves the user's terminal to
// CMD: without -v a run that goes well adds nothing to stderr, and CMD's
// stdout and exit code pass through unchanged; -v logs the lease's life,
// as JSON when stderr is not a terminal or as text with --log-format text.
// A lost lease is still said without -v.
func TestLeaseRunQuietUnlessVerbose(t *testing.T) {
	env := append(leaseEnv(t), "BATON_LOG_LEVEL=") // the default level, not the tests' warn
	for _, tc := range []struct {
		script string
		code   int
	}{{"echo out", 0}, {"echo out; exit 3", 3}} {
		stdout, stderr, code := runBaton(t, env, "lease", "run", "--name", "quiet", "--", "sh", "-c", tc.script)
		if stdout != "out\n" || stderr != "" || code != tc.code {
			t.Errorf("lease run -- sh -c %q: stdout %q, stderr %q, exit %d; want \"out\\n\", nothing, %d", tc.script, stdout, stderr, code, tc.code)
		}
	}

	stdout, stderr, code := runBaton(t, env, "lease", "run", "-v", "--name", "quiet", "--", "sh", "-c", "echo out")
	if stdout != "out\n" || code != 0 || stderr == "" {
		t.Fatalf("lease run -v: stdout %q, exit %d, stderr %q; want out, 0 and logs", stdout, code, stderr)
	}
	var messages []string
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var entry struct{ Severity, Message string }
		if err := json.Unmarshal([]byte(line), &entry); err != nil || entry.Severity == "" || entry.Message == "" {
			t.Fatalf("lease run -v (stderr not a terminal): line %q is not a JSON entry with severity and message: %v", line, err)
		}
		messages = append(messages, entry.Message)
	}
	if !slices.Contains(messages, "lease acquired") {
		t.Errorf("lease run -v: messages %q; want \"lease acquired\"", messages)
	}

	stdout, stderr, code = runBaton(t, env, "lease", "run", "--verbose", "--log-format", "text", "--name", "quiet", "--", "sh", "-c", "echo out")
	if stdout != "out\n" || code != 0 || !strings.Contains(stderr, `level=INFO msg="lease acquired"`) || strings.Contains(stderr, "{") {
		t.Errorf("lease run --verbose --log-format text: stdout %q, exit %d, stderr %q; want text lines with level=INFO", stdout, code, stderr)
	}
	if _, stderr, code = runBaton(t, env, "--log-format", "pretty", "lease", "run", "--name", "quiet", "--", "true"); code != 2 || !strings.Contains(stderr, `invalid argument "pretty" for "--log-format"`) {
		t.Errorf("--log-format pretty: exit %d, stderr %q; want 2 naming the flag", code, stderr)
	}

	// Without -v, losing the lease is still reported.
	started := filepath.Join(t.TempDir(), "started")
	holder := startLeaseBaton(t, env, "lease", "run", "--name", "lost", "--ttl", "3s", "--grace", "1s", "--", "sh", "-c", `echo up > "$0"; exec sleep 30`, started)
	waitLeaseFile(t, started, 30*time.Second)
	if out, _, code := runBaton(t, env, "lease", "break", "--name", "lost", "--yes"); code != 0 {
		t.Fatalf("break: exit %d\n%s", code, out)
	}
	if code := holder.wait(t, 30*time.Second); code != exitLeaseLost || !strings.Contains(holder.stderr.String(), `"severity":"ERROR","message":"lease lost; stopping the command"`) {
		t.Errorf("broken holder without -v: exit %d, stderr:\n%s\nwant %d and the ERROR entry", code, holder.stderr.String(), exitLeaseLost)
	}
}

// TestLeaseStatusWatchSIGINT: `baton lease status -w -o json`, a real
// process, prints each lease as one JSON line, then a line again when a
// new holder takes it (a new epoch); Ctrl-C (SIGINT) ends it with exit 0.
func TestLeaseStatusWatchSIGINT(t *testing.T) {
	env := leaseEnv(t)
	if _, stderr, code := runBaton(t, env, "lease", "run", "--name", "w1", "--", "true"); code != 0 {
		t.Fatalf("lease run: exit %d\n%s", code, stderr)
	}
	out := newLockedBuffer()
	w := exec.Command(batonBinary(t), "lease", "status", "-w", "--watch-interval", "100ms", "-o", "json")
	w.Env, w.Stdout = env, out
	var errOut bytes.Buffer
	w.Stderr = &errOut
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Wait() }()
	t.Cleanup(func() { _ = w.Process.Kill() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got, err := out.waitFor(ctx, `"name":"w1"`); err != nil {
		t.Fatalf("watch never printed w1: %v\n%s", err, got)
	}
	if _, stderr, code := runBaton(t, env, "lease", "run", "--name", "w1", "--", "true"); code != 0 {
		t.Fatalf("lease run: exit %d\n%s", code, stderr)
	}
	got, err := out.waitFor(ctx, `"epoch":2`)
	if err != nil {
		t.Fatalf("watch never printed the new epoch: %v\n%s", err, got)
	}
	if err := w.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if procExitCode(err) != 0 || errOut.Len() != 0 {
			t.Fatalf("watch after SIGINT: exit %d, stderr %q; want 0 and nothing", procExitCode(err), errOut.String())
		}
	case <-ctx.Done():
		t.Fatal("watch still running after SIGINT")
	}
	// w1 free at epoch 1, then maybe held at epoch 2 (if a poll caught the
	// short run), then free at epoch 2: each state once.
	var states []string
	for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
		var l struct {
			Name, State string
			Epoch       int64
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("line %q is not one JSON lease: %v", line, err)
		}
		if l.Name == "w1" {
			states = append(states, fmt.Sprint(l.State, l.Epoch))
		}
	}
	if s := fmt.Sprint(states); s != "[free1 free2]" && s != "[free1 held2 free2]" && s != "[free1 held2]" {
		t.Errorf("w1 printed as %v; want free1, then epoch 2 once per state\n%s", states, got)
	}
}
