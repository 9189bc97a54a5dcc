package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/shared/config"
)

// recoveryBound is the functional bound (#17): a job whose worker
// died runs again on another slot within 20 s of the kill.
const recoveryBound = 20 * time.Second

// TestKilledGPUWorkerJobRunsAgainWithin20s: three real gpu-worker
// processes serve the local stack's pool, and the stack runs no tick, so
// nothing but the live workers' heartbeats can notice a dead one (as in
// the cloud, where the tick is a minute apart). Mid-job, one worker is
// killed with SIGKILL to its whole process session: its own process
// group and its command's (the worker puts the command in a group of its
// own; in a container both die together). The job must start again on
// another slot within 20 s of the kill, every job must succeed with its
// effect (the command's last line) written once, and no slot may run two
// commands at once.
func TestKilledGPUWorkerJobRunsAgainWithin20s(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "gpu-worker")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/baton-cron/baton/cmd/gpu-worker").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/gpu-worker: %v\n%s", err, out)
	}
	// The pool must be known before the stack builds its functions, and
	// the workers need the stack's URL: take three free ports first.
	var ports []string
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
		_ = ln.Close()
	}
	var pool []string
	for _, p := range ports {
		pool = append(pool, "http://127.0.0.1:"+p+"=1")
	}
	t.Setenv(config.EnvGPUPool, strings.Join(pool, ","))
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: -1})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	defer func() { _ = s.Close(context.Background()) }()

	type proc struct {
		url string
		cmd *exec.Cmd
	}
	procs := map[string]*proc{}
	for _, p := range ports {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(),
			config.EnvPort+"="+p,
			config.EnvControlURL+"="+s.URL+"/GPUCallback",
			config.EnvToken+"="+s.Token,
			config.EnvWorkerCommand+`=["sh"]`,
			config.EnvBucket+"=",
			config.EnvLogLevel+"=warn",
		)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
		u := "http://127.0.0.1:" + p
		procs[u] = &proc{url: u, cmd: cmd}
		for {
			resp, err := http.Get(u + "/healthz") //nolint:noctx // a local probe, bounded by the loop's deadline
			if err == nil {
				_ = resp.Body.Close()
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("worker %s never answered /healthz: %v", u, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	do := func(method, path string, body any, out any) int {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(ctx, method, s.URL+"/GPU"+path, strings.NewReader(string(b)))
		if body == nil {
			req.Body = http.NoBody
		}
		req.Header.Set("Authorization", "Bearer "+s.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		if out != nil {
			_ = json.NewDecoder(resp.Body).Decode(out)
		}
		return resp.StatusCode
	}
	// Each command logs its start and its end (the job's effect) with its
	// slot and a timestamp, and its pid, which is its process group.
	logFile := filepath.Join(dir, "log")
	payload := func(first, retry string) string {
		return fmt.Sprintf(`echo "start $BATON_JOB_ID $BATON_JOB_ATTEMPT $BATON_JOB_SLOT $(date +%%s%%N) $$" >> %[1]s
if [ "$BATON_JOB_ATTEMPT" = 1 ]; then sleep %[2]s; else sleep %[3]s; fi
echo "end $BATON_JOB_ID $BATON_JOB_ATTEMPT $BATON_JOB_SLOT $(date +%%s%%N) $$" >> %[1]s`, logFile, first, retry)
	}
	type job struct {
		ID, Status, Worker, Slot, Error string
		Attempts                        int
	}
	enqueue := func(id, p string) {
		var j job
		if code := do("POST", "/gpu/jobs", map[string]any{"id": id, "payload": p, "maxAttempts": 3}, &j); code/100 != 2 {
			t.Fatalf("enqueue %s: HTTP %d %+v", id, code, j)
		}
	}
	get := func(id string) job {
		var j job
		if code := do("GET", "/gpu/jobs/"+id, nil, &j); code != 200 {
			t.Fatalf("get %s: HTTP %d", id, code)
		}
		return j
	}
	// victim runs a minute on its first attempt (it is killed long before)
	// and 2 s on its retry; steady runs through the recovery, beating; quick
	// ends early and leaves its slot free for the retry.
	enqueue("victim", payload("60", "2"))
	enqueue("steady", payload("30", "2"))
	enqueue("quick", payload("4", "2"))

	type line struct {
		kind, job, slot string
		attempt         int
		at              time.Time
		pid             int
	}
	readLog := func() []line {
		f, err := os.Open(logFile)
		if err != nil {
			return nil
		}
		defer f.Close()
		var out []line
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) != 6 {
				t.Fatalf("log line %q", sc.Text())
			}
			att, _ := strconv.Atoi(fs[2])
			ns, _ := strconv.ParseInt(fs[4], 10, 64)
			pid, _ := strconv.Atoi(fs[5])
			out = append(out, line{kind: fs[0], job: fs[1], attempt: att, slot: fs[3], at: time.Unix(0, ns), pid: pid})
		}
		return out
	}
	find := func(kind, id string, attempt int) (line, bool) {
		for _, l := range readLog() {
			if l.kind == kind && l.job == id && l.attempt == attempt {
				return l, true
			}
		}
		return line{}, false
	}
	waitFor := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !cond() {
			if time.Now().After(deadline) || ctx.Err() != nil {
				t.Fatalf("%s: not within %s; log %+v", what, limit, readLog())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var first line
	waitFor("the victim starts and heartbeats", 30*time.Second, func() bool {
		var ok bool
		first, ok = find("start", "victim", 1)
		return ok && get("victim").Status == "running"
	})
	// Mid-job: a moment after its first heartbeat, at no chosen phase of
	// its beats.
	time.Sleep(2 * time.Second)
	v := get("victim")
	victim := procs[v.Worker]
	if victim == nil || v.Slot != first.slot {
		t.Fatalf("victim job %+v: no worker process at %q, or on another slot than its command's %s", v, v.Worker, first.slot)
	}
	killed := time.Now()
	if err := syscall.Kill(-victim.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the worker's process group: %v", err)
	}
	_ = syscall.Kill(-first.pid, syscall.SIGKILL) // the command's group
	_ = victim.cmd.Wait()
	t.Logf("killed worker %s (slot %s) at %s", victim.url, v.Slot, killed.Format(time.RFC3339Nano))
	enqueue("after", payload("1", "1")) // the pool keeps working

	var again line
	waitFor("the victim's job starts again", recoveryBound+10*time.Second, func() bool {
		var ok bool
		again, ok = find("start", "victim", 2)
		return ok
	})
	took := again.at.Sub(killed)
	t.Logf("recovery: kill → the job's second start on %s took %s (bound %s)", again.slot, took.Round(time.Millisecond), recoveryBound)
	if took > recoveryBound {
		t.Errorf("the victim's job started again %s after the kill; want within %s", took.Round(time.Millisecond), recoveryBound)
	}
	if again.slot == first.slot {
		t.Errorf("the victim's job ran again on the dead worker's slot %s", again.slot)
	}

	ids := []string{"victim", "steady", "quick", "after"}
	for _, id := range ids {
		waitFor(id+" succeeds", 90*time.Second, func() bool {
			j := get(id)
			if j.Status == "failed" || j.Status == "dead" || j.Status == "cancelled" {
				t.Fatalf("job %s ended %s: %+v", id, j.Status, j)
			}
			return j.Status == "succeeded"
		})
	}
	// Each job's effect once: one end line per job, and none from the
	// killed attempt.
	log := readLog()
	ends := map[string]int{}
	for _, l := range log {
		if l.kind == "end" {
			ends[l.job]++
			if l.job == "victim" && l.attempt == 1 {
				t.Errorf("the killed attempt wrote its effect: %+v", l)
			}
		}
	}
	for _, id := range ids {
		if ends[id] != 1 {
			t.Errorf("job %s wrote its effect %d times; want once (log %+v)", id, ends[id], log)
		}
	}
	if a := get("victim").Attempts; a != 1 {
		t.Errorf("victim used %d attempts; want 1 (the lost lease)", a)
	}
	// No slot runs two commands at once: per slot, each run's interval
	// (start to end, or to the kill for the killed attempt) is disjoint
	// from the others'.
	type run struct {
		name     string
		from, to time.Time
	}
	runs := map[string][]run{}
	for _, l := range log {
		if l.kind != "start" {
			continue
		}
		r := run{name: fmt.Sprintf("%s#%d", l.job, l.attempt), from: l.at, to: killed}
		if e, ok := find("end", l.job, l.attempt); ok {
			r.to = e.at
		}
		runs[l.slot] = append(runs[l.slot], r)
	}
	for slot, rs := range runs {
		for i := range rs {
			for j := i + 1; j < len(rs); j++ {
				if rs[i].from.Before(rs[j].to) && rs[j].from.Before(rs[i].to) {
					t.Errorf("slot %s ran %s (%s–%s) and %s (%s–%s) at once", slot, rs[i].name, rs[i].from.Format(time.StampMilli), rs[i].to.Format(time.StampMilli),
						rs[j].name, rs[j].from.Format(time.StampMilli), rs[j].to.Format(time.StampMilli))
				}
			}
		}
	}
}
