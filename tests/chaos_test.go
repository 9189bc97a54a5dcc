package tests

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// chaosFault is one fail point of the chaos test: a command on a
// collection, failed one of three ways.
type chaosFault struct {
	coll, cmd, kind string
}

func (f chaosFault) String() string { return f.coll + "." + f.cmd + " " + f.kind }

// data is the fail point's data document for f.
func (f chaosFault) data(db string) bson.D {
	d := bson.D{{Key: "failCommands", Value: bson.A{f.cmd}}, {Key: "namespace", Value: db + "." + f.coll}}
	switch f.kind {
	case "conflict":
		return append(d, bson.E{Key: "errorCode", Value: 112}) // WriteConflict, which the store retries
	case "deadline":
		// Firestore's lost answer: the write commits, and the answer is
		// DeadlineExceeded, which the store retries only for inserts.
		return append(d, bson.E{Key: "errorCodeAfterRun", Value: 262})
	case "drop":
		return append(d, bson.E{Key: "closeConnection", Value: true})
	default: // landed: the write applies, and its answer is an error
		return append(d, bson.E{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 64}, {Key: "errmsg", Value: "chaos: write landed, answer lost"}}})
	}
}

// chaosCall is one request that reached a target.
type chaosCall struct {
	run    string
	status int
}

// TestChaosRunPath is the fault-tolerance promise under fire, on the strict
// Mongo emulator with concurrent writers: every task reaches /Run twice at
// once (a duplicate delivery), so the writes of the two race on the same
// documents and meet the emulator's 112s. Six schedules
// (two each of skip, buffer_one and allow; retry maxAttempts 3; every 4 s,
// catch-up all), ticked every 2 s, run through Tick → Cloud Tasks emulator → Run for a minute
// while the Mongo emulator's failCommand fail point is armed on each write
// of the run path in turn: inserts, updates and findAndModify on runs and on
// schedules, each as a WriteConflict, a write that lands and answers
// DeadlineExceeded, a dropped connection, and a write that lands but answers
// a write concern error. Some targets outlast the cadence (so skip and
// buffer_one overlap) and fail some first attempts (so retries happen).
// Then the faults stop, ticks go on, and once the sweep has settled:
//   - no fire time reached its target again after a 2xx;
//   - no run is pending or running;
//   - every fire time in the window has a run (catch-up all), which ended
//     succeeded, failed, or skipped with a reason;
//   - a run whose target answered 2xx is never recorded failed;
//   - a failed run below maxAttempts has its retry.
func TestChaosRunPath(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: a minute of faults")
	}
	t.Parallel()
	// Every task is delivered to /Run twice at once, as Cloud Tasks'
	// at-least-once delivery may: the two deliveries race on the same run
	// and schedule documents, so the strict emulator answers some of their
	// writes 112 (real contention, not the fail point's).
	var dupes dupDelivery
	r := newHandOffRig(t, time.Now().UTC(), nil, func(self string) string {
		dupes.to = self + "/Run"
		dup := httptest.NewServer(&dupes)
		t.Cleanup(dup.Close)
		return dup.URL + "/Run"
	})
	conflictsBefore := emutest.MongoStats(t).ConflictsByDatabase[r.st.DatabaseName()]
	stopClock := make(chan struct{})
	go func() { // the rig's decisions follow real time
		for {
			r.set(time.Now().UTC())
			select {
			case <-stopClock:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	defer close(stopClock)

	var (
		mu    sync.Mutex
		calls = map[string][]chaosCall{} // schedule + " " + fire time
	)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		sched := strings.TrimPrefix(req.URL.Path, "/")
		fire := req.Header.Get(scheduler.HeaderFireTime)
		run := req.Header.Get(scheduler.HeaderRunID)
		ft, _ := time.Parse(time.RFC3339, fire)
		slow := !strings.HasPrefix(sched, "allow")
		// One skip or buffer_one run in five outlasts the 4 s cadence, so
		// the next fire meets it, without a backlog that the emulator (one
		// writer at a time, each write a scan) could never drain.
		d := time.Duration(rand.N(300)) * time.Millisecond
		if slow && rand.N(5) == 0 {
			d = time.Duration(4500+rand.N(1500)) * time.Millisecond
		}
		select {
		case <-time.After(d):
		case <-req.Context().Done():
		}
		status := http.StatusOK
		if (ft.Unix()/4)%4 == 0 && !strings.Contains(run, "-a") {
			status = http.StatusInternalServerError // first attempts of a quarter of the fire times
		}
		mu.Lock()
		calls[sched+" "+ft.UTC().Format(time.RFC3339)] = append(calls[sched+" "+ft.UTC().Format(time.RFC3339)], chaosCall{run, status})
		mu.Unlock()
		w.WriteHeader(status)
	}))
	defer target.Close()

	ids := []string{"skip-a", "skip-b", "buffer-a", "buffer-b", "allow-a", "allow-b"}
	for _, id := range ids {
		overlap := map[string]string{"skip": "skip", "buffer": "buffer_one", "allow": "allow"}[strings.SplitN(id, "-", 2)[0]]
		body := httpSchedule(id, "*/4 * * * * *", target.URL+"/"+id, "10s")
		body["overlap"] = overlap
		body["catchup"] = "all"
		body["retry"] = map[string]any{"maxAttempts": 3, "backoff": "1s"}
		body["leaseTTL"] = "9s"
		if code := api(t, r.srv.URL, "secret", "POST", "/Schedules/schedules", body, nil); code != http.StatusCreated {
			t.Fatalf("create %s: %d", id, code)
		}
	}
	start := time.Now().UTC()

	// Ticks every 2 s, as Cloud Scheduler would at its finest (the daemon).
	stopTicks := make(chan struct{})
	ticksDone := make(chan struct{})
	go func() {
		defer close(ticksDone)
		for {
			select {
			case <-stopTicks:
				return
			case <-time.After(2 * time.Second):
			}
			r.tick(t, time.Now().UTC())
		}
	}()

	var faults []chaosFault
	for _, coll := range []string{schedule.RunsCollection, schedule.SchedulesCollection} {
		for _, cmd := range []string{"insert", "update", "findAndModify"} {
			if coll == schedule.SchedulesCollection && cmd == "insert" || coll == schedule.RunsCollection && cmd == "findAndModify" {
				continue // not a command of the run path
			}
			for _, kind := range []string{"conflict", "deadline", "drop", "landed"} {
				faults = append(faults, chaosFault{coll, cmd, kind})
			}
		}
	}
	db := r.st.DatabaseName()
	admin := emutest.RawClient(t, emutest.MongoURI(t)).Database("admin")
	arm := func(mode any, data bson.D) int64 {
		cmd := bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: mode}}
		if data != nil {
			cmd = append(cmd, bson.E{Key: "data", Value: data})
		}
		var reply struct {
			Count int64 `bson:"count"`
		}
		var err error
		for range 10 { // a dropped connection clears the pool under us too
			if err = admin.RunCommand(context.Background(), cmd).Decode(&reply); err == nil {
				return reply.Count
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("configureFailPoint: %v", err)
		return 0
	}
	perFault := time.Minute / time.Duration(len(faults))
	hits := map[string]int64{}
	var last int64
	for _, f := range faults {
		// Re-armed every 300 ms for a couple of matches: faults come often,
		// and the writes between them get through.
		end := time.Now().Add(perFault)
		for time.Now().Before(end) {
			arm(bson.D{{Key: "times", Value: 2}}, f.data(db))
			time.Sleep(300 * time.Millisecond)
		}
		n := arm("off", nil)
		hits[f.String()] = n - last
		last = n
	}
	stop := time.Now().UTC()
	t.Logf("faults injected per write: %v", hits)
	if last == 0 {
		t.Fatal("no fault was injected: the chaos test tested nothing")
	}

	// The faults are over; ticks (and their sweeps) go on until nothing is
	// pending or running. A run left pending waits for its reservation (a
	// minute) before the sweep takes it, and an owed retry as long.
	open := func() []schedule.Run {
		var out []schedule.Run
		if err := r.st.Collection(schedule.RunsCollection).Find(context.Background(),
			bson.D{{Key: "status", Value: bson.D{{Key: "$in", Value: bson.A{schedule.RunPending, schedule.RunRunning}}}}}, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for deadline := time.Now().Add(4 * time.Minute); len(open()) > 0 && time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
	}
	close(stopTicks)
	<-ticksDone
	// One tick after stop, always: on a loaded machine the tick loop may
	// not have reached the last fire times before stop when open() first
	// came back empty, and those are checked below. A fire time that an
	// earlier tick passed over without a run is not decided again (the
	// schedule's nextRunAt is past it), so this hides no lost run.
	r.tick(t, time.Now().UTC())
	// That tick, or the loop's last, may have decided more: one
	// reservation for them.
	for deadline := time.Now().Add(90 * time.Second); len(open()) > 0 && time.Now().Before(deadline); {
		r.tick(t, time.Now().UTC())
		time.Sleep(2 * time.Second)
	}
	if left := open(); len(left) > 0 {
		var ids []string
		for _, run := range left {
			ids = append(ids, fmt.Sprintf("%s %s (created %s)", run.ID, run.Status, run.CreatedAt.Format("15:04:05")))
		}
		t.Errorf("%d runs still pending or running after the sweep: %v", len(left), ids)
	}

	var runs []schedule.Run
	if err := r.st.Collection(schedule.RunsCollection).Find(context.Background(), bson.D{}, &runs); err != nil {
		t.Fatal(err)
	}
	byID := map[string]schedule.Run{}
	fires := map[string]map[int64]bool{} // schedule → fire times with a run
	for _, run := range runs {
		byID[run.ID] = run
		if fires[run.ScheduleID] == nil {
			fires[run.ScheduleID] = map[int64]bool{}
		}
		fires[run.ScheduleID][run.FireTime.Unix()] = true
		switch run.Status {
		case schedule.RunSucceeded, schedule.RunFailed:
		case schedule.RunSkipped:
			if run.Reason == "" {
				t.Errorf("run %s skipped without a reason", run.ID)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	twice := 0
	for key, cs := range calls {
		for i, c := range cs {
			if c.status/100 == 2 {
				if i != len(cs)-1 {
					twice++
					t.Errorf("%s: the target answered 2xx to %s, and was called again: %+v", key, c.run, cs)
				}
				if got := byID[c.run]; got.Status != schedule.RunSucceeded {
					t.Errorf("%s: the target answered 2xx to %s, but the run is %s (%s)", key, c.run, got.Status, got.Error)
				}
			}
		}
	}
	for _, run := range runs {
		if run.Status == schedule.RunFailed && run.Attempt < 3 {
			next := strings.TrimSuffix(run.ID, fmt.Sprintf("-a%d", run.Attempt)) + fmt.Sprintf("-a%d", run.Attempt+1)
			if _, ok := byID[next]; !ok {
				t.Errorf("run %s failed on attempt %d and has no retry %s", run.ID, run.Attempt, next)
			}
		}
	}
	// Every fire time of each schedule from just after it was created to
	// when the faults stopped has a run: catch-up all decides each once.
	for _, id := range ids {
		var missing []string
		for ft := start.Truncate(4 * time.Second).Add(8 * time.Second); ft.Before(stop); ft = ft.Add(4 * time.Second) {
			if !fires[id][ft.Unix()] {
				missing = append(missing, ft.Format("15:04:05"))
			}
		}
		if len(missing) > 0 {
			t.Errorf("%s: fire times with no run: %v", id, missing)
		}
	}
	statuses := map[schedule.RunStatus]int{}
	for _, run := range runs {
		statuses[run.Status]++
	}
	keys := make([]string, 0, len(calls))
	for k := range calls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	t.Logf("%d runs %v; %d fire times reached a target; %d reached it again after a 2xx", len(runs), statuses, len(keys), twice)
	conflicts := emutest.MongoStats(t).ConflictsByDatabase[r.st.DatabaseName()] - conflictsBefore
	t.Logf("the strict Mongo emulator answered %d writes 112 (contention between concurrent writers); %d tasks were delivered twice at once",
		conflicts, dupes.n.Load())
	if conflicts == 0 {
		t.Error("no write met real contention (112 from the emulator): the concurrent writers did not overlap on one document")
	}
}

// dupDelivery delivers each task to /Run twice at once, and answers with
// the first delivery's answer: Cloud Tasks delivers at least once, and a
// duplicate may run beside the original.
type dupDelivery struct {
	to string
	n  atomic.Int64
}

func (d *dupDelivery) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d.n.Add(1)
	type answer struct {
		status int
		body   []byte
	}
	answers := make([]answer, 2)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := http.NewRequestWithContext(req.Context(), req.Method, d.to, bytes.NewReader(body))
			if err != nil {
				answers[i] = answer{http.StatusInternalServerError, []byte(err.Error())}
				return
			}
			out.Header = req.Header.Clone()
			resp, err := http.DefaultClient.Do(out)
			if err != nil {
				answers[i] = answer{http.StatusBadGateway, []byte(err.Error())}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			answers[i] = answer{resp.StatusCode, b}
		}()
	}
	wg.Wait()
	w.WriteHeader(answers[0].status)
	_, _ = w.Write(answers[0].body)
}
