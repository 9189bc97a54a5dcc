package tests

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// envSoak selects the crash loop's long form (make soak): two minutes of
// kills, then two clean minutes, as issue 27 measured by hand.
const envSoak = "BATON_SOAK"

// crashCall is one request a target got.
type crashCall struct {
	sched string
	run   string
	fire  time.Time
	at    time.Time
	epoch int64 // kills so far when the call arrived
}

// crashTargets are the loopback http targets of the crash loop: /fast/ID
// answers at once, /slow/ID after 3 s. Each call is logged with the run id
// and fire time baton sends in its headers.
type crashTargets struct {
	srv   *httptest.Server
	kills *atomic.Int64
	mu    sync.Mutex
	calls []crashCall
}

func newCrashTargets(t *testing.T, kills *atomic.Int64) *crashTargets {
	ct := &crashTargets{kills: kills}
	ct.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind, sched, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		fire, err := time.Parse(time.RFC3339, r.Header.Get(scheduler.HeaderFireTime))
		if err != nil {
			t.Errorf("call without a fire time: %v", err)
		}
		ct.mu.Lock()
		ct.calls = append(ct.calls, crashCall{sched: sched, run: r.Header.Get(scheduler.HeaderRunID), fire: fire, at: time.Now(), epoch: kills.Load()})
		ct.mu.Unlock()
		if kind == "slow" {
			select {
			case <-time.After(3 * time.Second):
			case <-r.Context().Done():
				return
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(ct.srv.Close)
	return ct
}

// batonProc is one `baton local` process, started by startLocal.
type batonProc struct {
	cmd   *exec.Cmd
	url   string
	token string
}

// kill SIGKILLs p's whole process group (the functions and the
// emulators, as a crash would) and waits for it.
func (p *batonProc) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	_ = p.cmd.Wait()
}

// buildBaton builds cmd/baton into dir, for the tests that run the real
// binary as a user would, and returns its path.
func buildBaton(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "baton")
	build := exec.Command("go", "build", "-o", bin, "./cmd/baton")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/baton: %v\n%s", err, out)
	}
	return bin
}

// startLocal starts `bin args...` (a `baton local` command line) in a
// process group of its own, its stderr to logFile, and returns once its
// export lines gave BATON_URL and BATON_TOKEN; otherwise it kills it and
// fails the test with the log's tail.
func startLocal(t *testing.T, bin string, args []string, logFile *os.File) *batonProc {
	t.Helper()
	cmd := exec.Command(bin, args...) //nolint:gosec // the binary the test just built
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &batonProc{cmd: cmd}
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		line := lines.Text()
		if v, ok := strings.CutPrefix(line, "export BATON_TOKEN="); ok {
			p.token = strings.Trim(v, "'")
		}
		if v, ok := strings.CutPrefix(line, "export BATON_URL="); ok {
			p.url = strings.Trim(v, "'")
		}
		if strings.HasPrefix(line, "# Ctrl-C") {
			break
		}
	}
	go func() { _, _ = bufio.NewReader(out).WriteTo(discard{}) }()
	if p.token == "" || p.url == "" {
		p.kill()
		t.Fatalf("baton local printed no BATON_URL/BATON_TOKEN; log in %s:\n%s", logFile.Name(), tail(logFile.Name(), 40))
	}
	return p
}

// freeAddr returns a loopback address with a free port, to reuse across
// restarts: tasks kept in the data dir name /Run's URL.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestCrashLoop is issue 27's crash test, in the repository: `baton local`
// (built as a binary) on a data dir, six schedules every 2 s (fast and 3 s
// http targets; skip, buffer_one, allow; 2 attempts), the whole process
// group SIGKILLed at random moments (every 6 to 18 s) and started again on
// the same data dir, then left to run cleanly. Counted from the targets'
// own logs and the runs API:
//
//   - 0 fire times called twice without a kill between the calls;
//   - 0 calls with a run id the API does not know;
//   - 0 fire times lost: every fire time of a window when the stack was up
//     has a run (executed, skipped, buffered or missed, with its reason);
//   - 0 fire times first called more than 45 s after their fire time;
//   - 0 out-of-order starts on skip and buffer_one schedules: no first
//     attempt of a fire time is called after a first attempt of a later
//     fire time of the same schedule (a retry re-runs a fire time that had
//     started, and is not a start);
//   - 0 runs pending or running 90 s after their fire time.
//
// The short form (make test) kills for a minute and runs 45 s cleanly; the
// long form (BATON_SOAK=1, make soak) two minutes each.
func TestCrashLoop(t *testing.T) {
	crashFor, cleanFor := time.Minute, 45*time.Second
	if os.Getenv(envSoak) != "" {
		crashFor, cleanFor = 2*time.Minute, 2*time.Minute
	}
	work := t.TempDir()
	bin := buildBaton(t, work)
	dataDir := filepath.Join(work, "data")
	addrs := []string{"--addr", freeAddr(t), "--mongo-addr", freeAddr(t), "--gcs-addr", freeAddr(t), "--tasks-addr", freeAddr(t), "--pubsub-addr", freeAddr(t), "--run-jobs-addr", freeAddr(t)}
	logPath := filepath.Join(work, "baton.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()

	var kills atomic.Int64
	targets := newCrashTargets(t, &kills)

	start := func() *batonProc {
		t.Helper()
		return startLocal(t, bin, append([]string{"local", "--tick", "2s", "--data-dir", dataDir, "--gpu-workers", "0", "--log-level", "info", "--log-format", "json"}, addrs...), logFile)
	}
	kill := func(p *batonProc) {
		kills.Add(1)
		p.kill()
	}

	p := start()
	t.Cleanup(func() {
		if p != nil {
			p.kill()
		}
	})
	type sched struct{ id, kind, overlap string }
	var scheds []sched
	for _, kind := range []string{"fast", "slow"} {
		for _, ov := range []string{"skip", "buffer_one", "allow"} {
			s := sched{id: kind + "-" + strings.ReplaceAll(ov, "_", ""), kind: kind, overlap: ov}
			body := httpSchedule(s.id, "*/2 * * * * *", targets.srv.URL+"/"+kind+"/"+s.id, "10s")
			body["overlap"] = ov
			body["retry"] = map[string]any{"maxAttempts": 2, "backoff": "1s"}
			if code := api(t, p.url, p.token, http.MethodPost, "/Schedules/schedules", body, nil); code != http.StatusCreated {
				t.Fatalf("create %s: %d", s.id, code)
			}
			scheds = append(scheds, s)
		}
	}
	created := time.Now()

	// up are the windows when a stack was serving: [ready, killed).
	type window struct{ from, to time.Time }
	var up []window
	upFrom := created
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 27)) //nolint:gosec // G404: kill timing, not a secret
	crashEnd := created.Add(crashFor)
	for {
		wait := 6*time.Second + time.Duration(rng.Int64N(int64(12*time.Second)))
		if time.Now().Add(wait).After(crashEnd) {
			break
		}
		time.Sleep(wait) // the kill moment is the point: nothing to await
		up = append(up, window{upFrom, time.Now()})
		kill(p)
		p = start()
		upFrom = time.Now()
	}
	restarts := kills.Load()
	time.Sleep(time.Until(crashEnd.Add(cleanFor)))
	end := time.Now()
	up = append(up, window{upFrom, end})

	// The calls first, then the runs: the last stack keeps deciding and
	// calling while the runs are listed, and a call taken after the listing
	// could be of a run decided after it, which would count as unknown. A
	// run is inserted before it is dispatched, so every call in this
	// snapshot has its run in the listing below.
	targets.mu.Lock()
	calls := append([]crashCall(nil), targets.calls...)
	targets.mu.Unlock()

	// The runs, from the API of the last stack.
	runs := map[string]schedule.Run{}
	byFire := map[string][]schedule.Run{} // sched@fire → runs
	decided := map[string]time.Time{}     // sched → its nextRunAt: every fire time before it is decided
	for _, s := range scheds {
		var cur schedule.Schedule
		if code := api(t, p.url, p.token, http.MethodGet, "/Schedules/schedules/"+s.id, nil, &cur); code != http.StatusOK {
			t.Fatalf("get %s: %d", s.id, code)
		}
		decided[s.id] = cur.NextRunAt
		token := ""
		for {
			var page struct {
				Runs          []schedule.Run `json:"runs"`
				NextPageToken string         `json:"nextPageToken"`
			}
			path := "/Schedules/schedules/" + s.id + "/runs?pageSize=500"
			if token != "" {
				path += "&pageToken=" + url.QueryEscape(token)
			}
			if code := api(t, p.url, p.token, http.MethodGet, path, nil, &page); code != http.StatusOK {
				t.Fatalf("list runs of %s: %d", s.id, code)
			}
			for _, r := range page.Runs {
				runs[r.ID] = r
				k := s.id + "@" + r.FireTime.UTC().Format(time.RFC3339)
				byFire[k] = append(byFire[k], r)
			}
			if token = page.NextPageToken; token == "" {
				break
			}
		}
	}
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].at.Before(calls[j].at) })

	var doubles, unknown, lost, late, disorder, stuck []string
	type fireKey struct {
		sched string
		fire  time.Time
	}
	seen := map[fireKey][]crashCall{}
	for _, c := range calls {
		if _, ok := runs[c.run]; !ok {
			unknown = append(unknown, c.run)
		}
		k := fireKey{c.sched, c.fire}
		if prev := seen[k]; len(prev) > 0 && prev[len(prev)-1].epoch == c.epoch {
			doubles = append(doubles, fmt.Sprintf("%s %s (runs %s, %s; no kill between)", c.sched, c.fire.Format(time.TimeOnly), prev[len(prev)-1].run, c.run))
		}
		seen[k] = append(seen[k], c)
	}
	for k, cs := range seen {
		if d := cs[0].at.Sub(k.fire); d > 45*time.Second {
			late = append(late, fmt.Sprintf("%s %s first called %s after", k.sched, k.fire.Format(time.TimeOnly), d.Round(time.Second)))
		}
	}
	for _, s := range scheds {
		if s.overlap == "allow" {
			continue
		}
		var maxStarted time.Time
		var maxRun string
		for _, c := range calls {
			if c.sched != s.id || strings.Contains(c.run, "-a") || seen[fireKey{c.sched, c.fire}][0].run != c.run {
				continue // another schedule, a retry, or not the fire's first call
			}
			if c.fire.Before(maxStarted) {
				disorder = append(disorder, fmt.Sprintf("%s: %s (run %s) started after %s (run %s)", s.id, c.fire.Format(time.TimeOnly), c.run, maxStarted.Format(time.TimeOnly), maxRun))
			}
			if c.fire.After(maxStarted) {
				maxStarted, maxRun = c.fire, c.run
			}
		}
		// Every fire time of a window when the stack was up, up to the
		// schedule's nextRunAt (the ticks, slow on a busy machine, may
		// not have decided the last seconds yet), has a run.
		for _, w := range up {
			first := w.from.Truncate(2 * time.Second).Add(2 * time.Second)
			for f := first; f.Before(w.to) && f.Before(decided[s.id]); f = f.Add(2 * time.Second) {
				if f.Before(created.Add(2 * time.Second)) {
					continue
				}
				if len(byFire[s.id+"@"+f.UTC().Format(time.RFC3339)]) == 0 && len(seen[fireKey{s.id, f.UTC()}]) == 0 {
					lost = append(lost, fmt.Sprintf("%s %s", s.id, f.Format(time.TimeOnly)))
				}
			}
		}
	}
	for _, s := range scheds {
		if s.overlap != "allow" {
			continue
		}
		for _, w := range up {
			first := w.from.Truncate(2 * time.Second).Add(2 * time.Second)
			for f := first; f.Before(w.to) && f.Before(decided[s.id]); f = f.Add(2 * time.Second) {
				if f.Before(created.Add(2*time.Second)) || len(byFire[s.id+"@"+f.UTC().Format(time.RFC3339)]) > 0 {
					continue
				}
				lost = append(lost, fmt.Sprintf("%s %s", s.id, f.Format(time.TimeOnly)))
			}
		}
	}
	for _, r := range runs {
		if (r.Status == schedule.RunPending || r.Status == schedule.RunRunning) && end.Sub(r.FireTime) > 90*time.Second {
			stuck = append(stuck, fmt.Sprintf("%s %s since %s", r.ID, r.Status, r.FireTime.Format(time.TimeOnly)))
		}
	}
	executed := 0
	for _, r := range runs {
		if r.Status == schedule.RunSucceeded {
			executed++
		}
	}
	t.Logf("crash loop: %s of kills (%d restarts), %s clean; %d calls, %d runs (%d succeeded), %d fire times called", crashFor, restarts, cleanFor, len(calls), len(runs), executed, len(seen))
	t.Logf("counts: doubles=%d unknown=%d lost=%d late>45s=%d out-of-order=%d stuck=%d", len(doubles), len(unknown), len(lost), len(late), len(disorder), len(stuck))
	for name, list := range map[string][]string{"doubles": doubles, "unknown run ids": unknown, "lost fire times": lost, "late (>45 s)": late, "out of order": disorder, "stuck (90 s)": stuck} {
		if len(list) > 0 {
			sort.Strings(list)
			t.Errorf("%s: %d: %s", name, len(list), strings.Join(list[:min(len(list), 20)], "; "))
		}
	}
	if restarts < 3 {
		t.Errorf("only %d restarts in %s", restarts, crashFor)
	}
	if t.Failed() {
		t.Logf("baton local's log (last lines of %s):\n%s", logPath, tail(logPath, 60))
		if os.Getenv("BATON_CRASH_KEEP") != "" {
			keep := filepath.Join(os.TempDir(), "baton-crash-"+strconv.FormatInt(time.Now().Unix(), 10)+".log")
			_ = os.Rename(logPath, keep)
			t.Logf("log kept at %s", keep)
		}
	}

	// A clean stop of the last stack.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(40 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	p = nil
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path) //nolint:gosec // G304: the test's own log
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
