package stack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/storage"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/emulator/scheduler"
	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/shared/config"
	batonsched "github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

func start(t *testing.T, cfg stack.Config) *stack.Stack {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := stack.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	return s
}

func closeStack(t *testing.T, s *stack.Stack) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestStackServesTicksAndRunsHooks(t *testing.T) {
	clock := scheduler.NewManualClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	var events []string
	hook := func(ctx context.Context, s *stack.Stack) (func(context.Context) error, error) {
		// The server is already up when a hook runs.
		if code, _ := get(t, s.URL+"/healthz"); code != 200 {
			t.Errorf("healthz from a hook: %d, want 200", code)
		}
		events = append(events, "start")
		return func(context.Context) error {
			// ...and still up while hooks stop.
			resp, err := http.Get(s.URL + "/healthz")
			if err != nil {
				return err
			}
			resp.Body.Close()
			events = append(events, "stop")
			return nil
		}, nil
	}
	s := start(t, stack.Config{Clock: clock, Tick: 30 * time.Second, Hooks: []stack.Hook{hook}})

	if code, body := get(t, s.URL+"/Rent?jeonse=300000000&deposit=100000000&rate=4.5"); code != 200 || !strings.Contains(body, `"monthlyRent":750000`) {
		t.Errorf("Rent: %d %s", code, body)
	}

	// The scheduler ticks /Tick with the stack's token on its clock.
	done := make(chan struct{})
	defer close(done)
	if !clock.WaitPending(done, 1) {
		t.Fatal("tick job never parked")
	}
	if d, _ := clock.AdvanceToNext(); d != 30*time.Second {
		t.Errorf("first tick after %s, want 30s", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	as, err := s.Scheduler.WaitAttempts(ctx, stack.TickJob, 1)
	if err != nil {
		t.Fatal(err)
	}
	// 404 until a Tick function is registered; never 401 (the token is
	// wired) and never 0 (the server was reached).
	if st := as[0].Status; st == 0 || st == http.StatusUnauthorized {
		t.Errorf("tick attempt %+v: want the server reached with the right token", as[0])
	}

	closeStack(t, s)
	if got := strings.Join(events, ","); got != "start,stop" {
		t.Errorf("hook events %q, want start,stop", got)
	}
	if resp, err := http.Get(s.URL + "/healthz"); err == nil {
		resp.Body.Close()
		t.Error("server still answers after Close")
	}
}

func TestDataDirPersistsAndFreshWipes(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := start(t, stack.Config{DataDir: dir, Tick: -1})
	if _, err := s.Deps.Store.Collection("things").InsertIdempotent(ctx, bson.M{"_id": "kept"}); err != nil {
		t.Fatal(err)
	}
	// The bucket's objects too: leases keep their epochs across a restart.
	obj := func(s *stack.Stack) *storage.ObjectHandle {
		return s.Deps.Storage.Bucket(s.Bucket).Object("leases/kept.json")
	}
	w := obj(s).If(storage.Conditions{DoesNotExist: true}).NewWriter(ctx)
	_, _ = w.Write([]byte(`{"epoch":7}`))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	closeStack(t, s)

	s = start(t, stack.Config{DataDir: dir, Tick: -1})
	var doc bson.M
	if err := s.Deps.Store.Collection("things").Get(ctx, "kept", &doc); err != nil {
		t.Errorf("after restart: %v, want the document kept", err)
	}
	if attrs, err := obj(s).Attrs(ctx); err != nil || attrs.Size == 0 {
		t.Errorf("after restart: object %v %v, want it kept", attrs, err)
	}
	closeStack(t, s)

	s = start(t, stack.Config{DataDir: dir, Fresh: true, Tick: -1})
	defer closeStack(t, s)
	if err := s.Deps.Store.Collection("things").Get(ctx, "kept", &doc); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after --fresh: %v, want ErrNotFound", err)
	}
	if _, err := obj(s).Attrs(ctx); !errors.Is(err, storage.ErrObjectNotExist) {
		t.Errorf("after --fresh: object %v, want it gone", err)
	}
}

func TestExports(t *testing.T) {
	s := start(t, stack.Config{Tick: -1, Token: "t0k", Bucket: "b-1"})
	defer closeStack(t, s)
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(s.Exports()), "\n") {
		kv, ok := strings.CutPrefix(line, "export ")
		k, v, ok2 := strings.Cut(kv, "=")
		if !ok || !ok2 || !strings.HasPrefix(v, "'") || !strings.HasSuffix(v, "'") {
			t.Fatalf("line %q is not export NAME='value'", line)
		}
		got[k] = strings.Trim(v, "'")
	}
	want := map[string]string{
		"BATON_URL": s.URL, "STORAGE_EMULATOR_HOST": s.StorageHost, "BATON_BUCKET": "b-1",
		"BATON_MONGO_URI": s.MongoURI, "BATON_TOKEN": "t0k",
		"CLOUD_TASKS_EMULATOR_HOST": s.TasksHost, "BATON_TASKS_QUEUE": stack.TasksQueue,
		"PUBSUB_EMULATOR_HOST": s.PubSubHost, "CLOUD_RUN_EMULATOR_HOST": s.RunJobsHost,
		// The CLI's lease commands must look in the store the functions use.
		"BATON_JOB_LEASE_STORE": s.Deps.JobLeaseStore,
	}
	for k, v := range want {
		if got[k] != v || v == "" {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("exports %v, want exactly %v", got, want)
	}
	// The database in the path, and load balanced mode, as Firestore's
	// connection strings have it.
	if !strings.HasSuffix(s.MongoURI, "/baton?loadBalanced=true") {
		t.Errorf("MongoURI %q should name the database and carry loadBalanced=true", s.MongoURI)
	}
}

func TestHookErrorUnwindsStart(t *testing.T) {
	boom := errors.New("no GPU today")
	_, err := stack.Start(context.Background(), stack.Config{Addr: "127.0.0.1:0", Tick: -1, Hooks: []stack.Hook{
		func(context.Context, *stack.Stack) (func(context.Context) error, error) { return nil, boom },
	}})
	if !errors.Is(err, boom) {
		t.Fatalf("Start = %v, want the hook's error", err)
	}
}

// TestCloseDrainsRequestsInFlight sends a request whose body is still
// arriving when Close starts. The server stops accepting connections, yet
// the request in flight completes: nothing is lost.
func TestCloseDrainsRequestsInFlight(t *testing.T) {
	stopping := make(chan struct{})
	hook := func(context.Context, *stack.Stack) (func(context.Context) error, error) {
		return func(context.Context) error { close(stopping); return nil }, nil
	}
	s := start(t, stack.Config{Tick: -1, Hooks: []stack.Hook{hook}})
	host := strings.TrimPrefix(s.URL, "http://")

	pr, pw := io.Pipe()
	type result struct {
		code int
		body string
		err  error
	}
	res := make(chan result, 1)
	// Expect: 100-continue holds the body back until the handler reads it,
	// so once the first write below returns, the handler is running. (A
	// request whose headers arrive after Shutdown began is refused by
	// net/http by design; it was never in flight.)
	client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: time.Minute}}
	go func() {
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/Rent", pr)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Expect", "100-continue")
		resp, err := client.Do(req)
		if err != nil {
			res <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		res <- result{code: resp.StatusCode, body: string(b)}
	}()
	if _, err := pw.Write([]byte(`{"jeonse":300000000,`)); err != nil {
		t.Fatal(err)
	}

	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		closed <- s.Close(ctx)
	}()
	<-stopping
	// Wait until the listener is gone (Shutdown has begun); bounded polling,
	// because the server offers no signal for it.
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", host, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if i == 200 {
			t.Fatal("listener still accepting 200 dials after Close began")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := pw.Write([]byte(`"deposit":100000000,"rate":4.5}`)); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	r := <-res
	if r.err != nil || r.code != 200 || !strings.Contains(r.body, `"monthlyRent":750000`) {
		t.Errorf("request in flight during Close: %d %q %v, want 200 with the answer", r.code, r.body, r.err)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestStartCreatesTheSchedulerIndexes(t *testing.T) {
	s := start(t, stack.Config{Tick: -1})
	defer closeStack(t, s)
	ctx := context.Background()
	for _, ix := range mongostore.SchedulerIndexes {
		cur, err := emutest.RawClient(t, s.MongoURI).Database(s.Deps.Store.DatabaseName()).Collection(ix.Collection).Indexes().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var specs []struct {
			Name string `bson:"name"`
			Key  bson.D `bson:"key"`
		}
		if err := cur.All(ctx, &specs); err != nil {
			t.Fatal(err)
		}
		// By name, or by the same keys in the same order: the database
		// keeps an index on _id alone as its own _id_, not under ours.
		found := false
		for _, sp := range specs {
			found = found || sp.Name == ix.Name || keysOf(sp.Key) == keysOf(ix.Keys)
		}
		if !found {
			t.Errorf("index %s.%s missing; have %v", ix.Collection, ix.Name, specs)
		}
	}
}

// keysOf writes an index's keys as "field:direction,...", whatever integer
// type each direction was decoded as.
func keysOf(d bson.D) string {
	var b strings.Builder
	for _, e := range d {
		fmt.Fprintf(&b, "%s:%v,", e.Key, e.Value)
	}
	return b.String()
}

// TestAllowedTargetsBesideLoopback is finding 10 of issue 26: a user who
// sets BATON_ALLOWED_TARGETS for baton local gets schedules calling that
// host accepted, and loopback stays allowed beside it. No tick runs, so
// nothing is ever sent to the listed host.
func TestAllowedTargetsBesideLoopback(t *testing.T) {
	t.Setenv(config.EnvAllowedTargets, "example.com, *.svc.example.net:8443")
	s := start(t, stack.Config{Tick: -1})
	defer closeStack(t, s)

	for _, want := range []string{"127.0.0.1", "localhost", "::1", "example.com", "*.svc.example.net:8443"} {
		if !slices.Contains(s.Deps.AllowedTargets, want) {
			t.Errorf("allowlist %q lacks %q", s.Deps.AllowedTargets, want)
		}
	}
	put := func(id, url string) (int, string) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"id": id, "cron": "@hourly",
			"target": map[string]any{"type": "http", "http": map[string]any{"url": url}}})
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/Schedules/schedules", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+s.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST schedule %s: %v", id, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	for _, c := range []struct {
		id, url string
		want    int
	}{
		{"listed", "https://example.com/", http.StatusCreated},
		{"wildcard", "https://api.svc.example.net:8443/hook", http.StatusCreated},
		{"loopback", "http://127.0.0.1:9/", http.StatusCreated},
		{"localhost", "http://localhost:9/", http.StatusCreated},
		{"unlisted", "https://example.org/", http.StatusBadRequest},
	} {
		if code, body := put(c.id, c.url); code != c.want {
			t.Errorf("schedule %s calling %s: %d %s, want %d", c.id, c.url, code, body, c.want)
		}
	}
}

// TestMalformedAllowedTargetsStopsStart: a typo in the allowlist would
// refuse that target forever, so the local stack, like the deployed
// functions, refuses to start and names the variable.
func TestMalformedAllowedTargetsStopsStart(t *testing.T) {
	t.Setenv(config.EnvAllowedTargets, "https://example.com/")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: -1})
	if err == nil {
		closeStack(t, s)
		t.Fatal("stack.Start with a malformed BATON_ALLOWED_TARGETS: nil error")
	}
	if !strings.Contains(err.Error(), config.EnvAllowedTargets) {
		t.Errorf("error %q does not name %s", err, config.EnvAllowedTargets)
	}
}

// TestKeptTaskReachesRunAfterRestart: a task queued when the stack stopped
// is kept under DataDir/tasks and delivered by the next start, whose bearer
// token is another one: the emulator puts the current token in at each
// delivery, so /Run accepts it.
func TestKeptTaskReachesRunAfterRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String() // fixed across the restart: the task names /Run's URL
	_ = ln.Close()
	s := start(t, stack.Config{DataDir: dir, Addr: addr, Tick: -1, Token: "first"})
	c, err := s.Tasks.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: stack.TasksQueue}); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if err := s.Deps.Tasks.Dispatch(ctx, batonsched.Task{Name: "kept", ScheduleID: "gone", Runs: []string{"gone@20260302T090000Z"}}); err != nil {
		t.Fatal(err)
	}
	closeStack(t, s)

	s = start(t, stack.Config{DataDir: dir, Addr: addr, Tick: -1, Token: "second"})
	defer closeStack(t, s)
	c, err = s.Tasks.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ResumeQueue(ctx, &cloudtaskspb.ResumeQueueRequest{Name: stack.TasksQueue}); err != nil {
		t.Fatalf("resume the kept queue: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	as, err := s.Tasks.WaitAttempts(wctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if as[0].Status != http.StatusOK || !strings.HasSuffix(as[0].Task, "/tasks/kept") {
		t.Errorf("first delivery after the restart: %+v, want the kept task answered 200", as[0])
	}
}
