package tests

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/functions"
	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// envRunProcess makes this test binary serve the functions from the
// environment, as a deployed Run instance does (TestHelperRunProcess).
const envRunProcess = "BATON_TEST_RUN_PROCESS"

// TestHelperRunProcess is not a test: TestKilledRunFailsOverOnce runs this
// binary again with envRunProcess set, so that a real process, which the
// test can kill with SIGKILL, executes a run. It serves every function
// built by functions.FromEnv, and prints its address.
func TestHelperRunProcess(t *testing.T) {
	if os.Getenv(envRunProcess) != "1" {
		t.Skip("helper process for TestKilledRunFailsOverOnce")
	}
	d, err := functions.FromEnv(context.Background())
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	mux, err := functions.Mux(d)
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Println("LISTEN", ln.Addr().String())
	_ = http.Serve(ln, mux) // until killed
	os.Exit(0)
}

// TestKilledRunFailsOverOnce kills the process executing a run, mid-target,
// with SIGKILL to its whole process group. The job lease then expires, the
// sweep fails the run over, and its retry policy decides: with
// maxAttempts 2 the target is called once more and the retry succeeds; with
// maxAttempts 1 the run stays failed. Cloud Tasks also delivers the killed
// task again (its request got no answer); that delivery finds the run
// claimed, or failed over, and executes nothing, so the queue's retry and
// the sweep's never run the same attempt.
func TestKilledRunFailsOverOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		attempts int
		want     []string
		calls    int64
	}{
		{1, []string{"killed@%s-manual failed a1"}, 1},
		{2, []string{"killed@%s-manual failed a1", "killed@%s-manual-a2 succeeded a2"}, 2},
	} {
		t.Run(fmt.Sprintf("maxAttempts=%d", tc.attempts), func(t *testing.T) {
			t.Parallel()
			killedRun(t, tc.attempts, tc.want, tc.calls)
		})
	}
}

func killedRun(t *testing.T, attempts int, want []string, wantCalls int64) {
	// The queue retries the killed delivery after a second.
	retry := &cloudtaskspb.RetryConfig{MaxAttempts: 10, MinBackoff: durationpb.New(time.Second), MaxBackoff: durationpb.New(2 * time.Second), MaxDoublings: 1}
	// Run is reached through a switch: the child process first, this
	// process once the child is dead.
	var runTarget atomic.Pointer[url.URL]
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(runTarget.Load())
	}})
	t.Cleanup(proxy.Close)
	r := newHandOffRig(t, time.Now().UTC(), retry, func(string) string { return proxy.URL + "/Run" })
	self, _ := url.Parse(r.srv.URL)

	var calls atomic.Int64
	started := make(chan struct{}, 1)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if calls.Add(1) == 1 {
			started <- struct{}{}
			<-req.Context().Done() // hangs until its caller dies
			return
		}
	}))
	t.Cleanup(target.Close)

	// The child: a real process serving the functions from the environment,
	// against the same database, bucket and queue.
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRunProcess$", "-test.v=false")
	cmd.Env = append(os.Environ(),
		envRunProcess+"=1",
		config.EnvMongoURI+"="+emutest.MongoURI(t),
		config.EnvDatabase+"="+r.db,
		config.EnvBucket+"="+r.bucket,
		config.EnvStorageEmu+"="+emutest.GCSServer(t).Host(),
		config.EnvToken+"=secret",
		config.EnvAllowedTargets+"=127.0.0.1",
		config.EnvClockSkew+"=1s",
		config.EnvTasksEmu+"="+r.tasks.Addr(),
		config.EnvTasksQueue+"=projects/test/locations/here/queues/baton-runs",
		config.EnvRunURL+"="+proxy.URL+"/Run",
		config.EnvLogLevel+"=error",
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	var child *url.URL
	for lines.Scan() {
		if addr, ok := strings.CutPrefix(lines.Text(), "LISTEN "); ok {
			child, _ = url.Parse("http://" + addr)
			break
		}
		if strings.HasPrefix(lines.Text(), "ERROR") {
			t.Fatalf("run process: %s", lines.Text())
		}
	}
	if child == nil {
		t.Fatal("run process printed no address")
	}
	go func() {
		for lines.Scan() { // keep its stdout drained; its errors help a failure
			if strings.Contains(lines.Text(), `"ERROR"`) {
				t.Logf("run process: %s", lines.Text())
			}
		}
	}()
	runTarget.Store(child)

	body := httpSchedule("killed", "@yearly", target.URL, "60s")
	body["leaseTTL"] = "3s"
	body["retry"] = map[string]any{"maxAttempts": attempts, "backoff": "1s"}
	if code := api(t, r.srv.URL, "secret", "POST", "/Schedules/schedules", body, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	var run schedule.Run
	if code := api(t, r.srv.URL, "secret", "POST", "/Schedules/schedules/killed:trigger", nil, &run); code != http.StatusOK {
		t.Fatalf("trigger: %d", code)
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatalf("the child never called the target; deliveries: %+v", r.tasks.Attempts())
	}
	var claimed schedule.Run
	if err := r.st.Collection(schedule.RunsCollection).Get(context.Background(), run.ID, &claimed); err != nil || claimed.Status != schedule.RunRunning {
		t.Fatalf("run before the kill: %+v %v, want running", claimed, err)
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	runTarget.Store(self)

	// Ticks sweep: once the job lease has expired, the run is failed over.
	deadline := time.Now().Add(45 * time.Second)
	for {
		r.set(time.Now().UTC())
		if code, _ := r.tick(t, time.Now()); code != http.StatusOK {
			t.Errorf("tick: %d", code)
		}
		var runs []schedule.Run
		if err := r.st.Collection(schedule.RunsCollection).Find(context.Background(), bson.D{{Key: "scheduleId", Value: "killed"}}, &runs); err != nil {
			t.Fatal(err)
		}
		done := len(runs) == len(want)
		for _, x := range runs {
			done = done && (x.Status == schedule.RunFailed || x.Status == schedule.RunSucceeded)
		}
		if done {
			stamp := run.FireTime.UTC().Format("20060102T150405Z")
			var w []string
			for _, s := range want {
				w = append(w, fmt.Sprintf(s, stamp))
			}
			if diff := cmp.Diff(w, fmtRuns(runs)); diff != "" {
				t.Errorf("runs (-want,+got):\n%s", diff)
			}
			for _, x := range runs {
				if x.Attempt == 1 && !strings.Contains(x.Error, "heartbeat stopped") {
					t.Errorf("killed run's error %q, want it failed over (heartbeat stopped)", x.Error)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs not settled after the kill: %s", fmtRuns(runs))
		}
		time.Sleep(500 * time.Millisecond)
	}
	// The queue's redelivery of the killed task has landed by now, or
	// lands later and changes nothing: wait for it, then count.
	redelivered := false
	for range 20 {
		n := 0
		for _, a := range r.tasks.Attempts() {
			if strings.HasSuffix(a.Task, "/tasks/"+scheduler.TaskName([]string{run.ID}, "")) {
				n++
			}
		}
		if n >= 2 {
			redelivered = true
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if !redelivered {
		t.Errorf("the killed task was not delivered again; attempts: %+v", r.tasks.Attempts())
	}
	if n := calls.Load(); n != wantCalls {
		t.Errorf("target called %d times, want %d", n, wantCalls)
	}
}
