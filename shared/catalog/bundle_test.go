package catalog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

const testToken = "test-token"

// clock is a settable clock, so nextRunAt and timestamps are exact.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// recordingTriggerer stands in for the scheduler's Engine, which lives in
// another package and is exercised end to end in tests/. It records the
// call and inserts a manual run into the real runs collection, as the
// Engine does.
type recordingTriggerer struct {
	mu    sync.Mutex
	calls []string
	runs  *mongostore.Collection
	now   func() time.Time
}

func (r *recordingTriggerer) Trigger(ctx context.Context, id string) (*schedule.Run, error) {
	r.mu.Lock()
	r.calls = append(r.calls, id)
	r.mu.Unlock()
	now := r.now()
	run := &schedule.Run{ID: schedule.RunID(id, now, schedule.SourceManual, 1), ScheduleID: id, FireTime: now, Source: schedule.SourceManual, Status: schedule.RunPending, Attempt: 1, CreatedAt: now}
	if _, err := r.runs.InsertIdempotent(ctx, run); err != nil {
		return nil, err
	}
	return run, nil
}

type testBundle struct {
	st    *mongostore.Store
	svc   *catalog.Service
	srv   *httptest.Server
	clock *clock
	trig  *recordingTriggerer
}

var t0 = time.Date(2026, 3, 1, 10, 0, 30, 0, time.UTC)

func setup(t *testing.T) *testBundle {
	t.Helper()
	return setupWith(t, nil)
}

// setupWith is setup with the service's options changed by edit.
func setupWith(t *testing.T, edit func(*catalog.Options)) *testBundle {
	t.Helper()
	st := emutest.Store(t)
	b := &testBundle{st: st, clock: &clock{t: t0}}
	b.trig = &recordingTriggerer{runs: st.Collection(schedule.RunsCollection), now: b.clock.Now}
	o := catalog.Options{
		Validate:  schedule.ValidateOptions{AllowedHosts: []string{"hooks.example.com"}, Builtins: []string{"noop", "sleep", "fail"}},
		Clock:     b.clock,
		Triggerer: b.trig,
	}
	if edit != nil {
		edit(&o)
	}
	b.svc = catalog.New(st, o)
	b.srv = httptest.NewServer(httpapi.RequireToken(testToken, catalog.NewHandler(b.svc, catalog.HandlerOptions{MaxBodyBytes: 64 << 10})))
	t.Cleanup(b.srv.Close)
	return b
}

// response is one API answer, decoded.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// apiError decodes the shared error shape.
func (r response) apiError(t *testing.T) httpapi.Error {
	t.Helper()
	var e struct {
		Error httpapi.Error `json:"error"`
	}
	r.json(t, &e)
	return e.Error
}

func (b *testBundle) do(t *testing.T, method, path, body string, header ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, b.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{Status: res.StatusCode, Header: res.Header, Body: data}
}

func (b *testBundle) count(t *testing.T, coll string) int64 {
	t.Helper()
	n, err := emutest.Raw(t, b.st).Collection(coll).CountDocuments(context.Background(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// stored reads a schedule straight from the database, bypassing the API.
func (b *testBundle) stored(t *testing.T, id string) *schedule.Schedule {
	t.Helper()
	var sc schedule.Schedule
	if err := emutest.Raw(t, b.st).Collection(schedule.SchedulesCollection).FindOne(context.Background(), bson.D{{Key: "_id", Value: id}}).Decode(&sc); err != nil {
		t.Fatalf("read %s from the database: %v", id, err)
	}
	// The change that produced the version, and the decider shard, are
	// not part of the schedule the API answers (json:"-");
	// versions_test.go checks the change, and mongostore's vshard_test.go the shard.
	sc.LastChange, sc.DeciderShard = nil, 0
	return &sc
}

func noopBody(id, cron string) string {
	m := map[string]any{"cron": cron, "target": map[string]any{"type": "builtin", "builtin": map[string]any{"name": "noop"}}}
	if id != "" {
		m["id"] = id
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func mustJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return buf.String()
}
