package functions_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/functions"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// TestHealthzDegradedWhileTicksFail: /healthz said ok while every tick
// failed (a lease reset left "stale fencing token" on every advance). It
// now answers 503 degraded, with the last error, until a tick succeeds.
func TestHealthzDegradedWhileTicksFail(t *testing.T) {
	st := emutest.Store(t)
	gcs, bucket := emutest.GCS(t)
	ctx := context.Background()
	if err := st.EnsureIndexes(ctx, mongostore.SchedulerIndexes...); err != nil {
		t.Fatal(err)
	}
	mux, err := functions.Mux(&functions.Deps{Store: st, Storage: gcs, Bucket: bucket, Token: "k",
		Logger: slog.New(slog.DiscardHandler), TickLeaseTTL: 10 * time.Second, ClockSkew: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	tick := func() int { code, _ := getOrPost(t, http.MethodPost, srv.URL+"/Tick"); return code }
	health := func() (int, map[string]any) { return getOrPost(t, http.MethodGet, srv.URL+"/healthz") }
	if code := tick(); code != http.StatusOK {
		t.Fatalf("first tick: %d", code)
	}
	if code, body := health(); code != http.StatusOK || body["status"] != "ok" {
		t.Fatalf("healthz after a good tick: %d %v", code, body)
	}
	// The database refuses the tick's reads: every tick fails. (A stale
	// fence no longer does: see below.)
	emutest.FailCommand(t, st, schedule.SchedulesCollection, "alwaysOn", "find", "aggregate")
	// 500, not a 4xx: the engine's failure is not an answer to Cloud
	// Scheduler, which would log a 4xx as its own.
	if code := tick(); code != http.StatusInternalServerError {
		t.Fatalf("tick while the database refuses its reads answered %d, want 500", code)
	}
	code, body := health()
	if code != http.StatusServiceUnavailable || body["status"] != "degraded" || body["lastError"] == "" || body["failingTicks"] != float64(1) {
		t.Errorf("healthz while ticks fail: %d %v, want 503 degraded with the error", code, body)
	}
	emutest.FailCommandOff(t, st)
	if code := tick(); code != http.StatusOK {
		t.Fatalf("tick after the database answers again: %d", code)
	}
	if code, body := health(); code != http.StatusOK || body["status"] != "ok" {
		t.Errorf("healthz after a good tick again: %d %v, want 200 ok", code, body)
	}
	// A due schedule whose stored fence is far above the tick lease's
	// epoch (a lease reset, or the other tick leases' fences after
	// BATON_PARTITIONS changed) used to refuse every advance as stale:
	// each Acquire of a tick lease now starts above the highest tick
	// fence (lease.Options.FloorEachAcquire), and the tick decides it.
	sc := schedule.Schedule{ID: "h", Cron: "* * * * *", Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}}
	if err := sc.Normalize(schedule.ValidateOptions{Builtins: scheduler.Builtins()}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	sc.NextRunAt, sc.Enabled, sc.Version, sc.CreatedAt, sc.UpdatedAt, sc.Fence = now.Add(-time.Second), true, 1, now, now, 1000
	if _, err := st.Collection(schedule.SchedulesCollection).InsertIdempotent(ctx, sc); err != nil {
		t.Fatal(err)
	}
	if code := tick(); code != http.StatusOK {
		t.Fatalf("tick against a schedule fenced above the tick lease: %d, want 200", code)
	}
	var got schedule.Schedule
	if err := st.Collection(schedule.SchedulesCollection).Get(ctx, "h", &got); err != nil {
		t.Fatal(err)
	}
	if !got.NextRunAt.After(now) || got.Fence <= 1000 {
		t.Errorf("schedule after the tick: nextRunAt %s fence %d; want advanced past %s under an epoch above 1000", got.NextRunAt, got.Fence, now)
	}
}

// noPartitions is a PartitionDispatcher that keeps nothing: a test double
// at the edge, for a coordinator whose minute is decided inline.
type noPartitions struct{}

func (noPartitions) DispatchPartition(context.Context, scheduler.PartitionTask) error { return nil }

// TestHealthzSeesInlineDecideErrors: a coordinating tick that decides its
// quiet minute itself (BATON_INLINE_SHARDS) reports the errors of that
// decide to /healthz as a partition task's request would: with the runs'
// reads refused, its sweeps fail and /healthz is 503 degraded, not ok.
func TestHealthzSeesInlineDecideErrors(t *testing.T) {
	st := emutest.Store(t)
	gcs, bucket := emutest.GCS(t)
	if err := st.EnsureIndexes(context.Background(), mongostore.SchedulerIndexes...); err != nil {
		t.Fatal(err)
	}
	mux, err := functions.Mux(&functions.Deps{Store: st, Storage: gcs, Bucket: bucket, Token: "k",
		Logger: slog.New(slog.DiscardHandler), TickLeaseTTL: 10 * time.Second, ClockSkew: time.Second,
		Partitions: 4, InlineShards: 16,
		PartitionQueue: func(string) (scheduler.PartitionDispatcher, error) { return noPartitions{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	tick := func() map[string]any {
		code, out := getOrPost(t, http.MethodPost, srv.URL+"/Tick")
		if code != http.StatusOK {
			t.Fatalf("coordinating tick: %d %v", code, out)
		}
		return out
	}
	health := func() int { code, _ := getOrPost(t, http.MethodGet, srv.URL+"/healthz"); return code }
	if out := tick(); out["inline"] == nil {
		t.Fatalf("a quiet minute was not decided inline: %v", out)
	}
	if code := health(); code != http.StatusOK {
		t.Fatalf("healthz after a good inline tick: %d", code)
	}
	emutest.FailCommand(t, st, schedule.RunsCollection, "alwaysOn", "find", "aggregate")
	if out := tick(); out["inline"] == nil {
		t.Fatalf("with the runs' reads refused, the minute was not decided inline: %v", out)
	}
	if code := health(); code != http.StatusServiceUnavailable {
		t.Errorf("healthz after an inline tick whose sweeps failed: %d, want 503", code)
	}
	emutest.FailCommandOff(t, st)
	tick()
	if code := health(); code != http.StatusOK {
		t.Errorf("healthz after a good inline tick again: %d, want 200", code)
	}
}

// getOrPost sends method to url with the tests' bearer token, and decodes
// the JSON answer.
func getOrPost(t *testing.T, method, url string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}
