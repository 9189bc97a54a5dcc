package scheduler_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/notify"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

const hookSecret = "0123456789abcdef-hook"

// hook is a webhook receiver that counts the signed deliveries per
// idempotency key (a bad signature fails the test).
type hook struct {
	srv  *httptest.Server
	down atomic.Bool // answer 503, as a receiver that is down
	mu   sync.Mutex
	keys map[string]int
	got  chan string
}

func newHook(t *testing.T) *hook {
	h := &hook{keys: map[string]int{}, got: make(chan string, 100)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		body, _ := io.ReadAll(r.Body)
		if err := notify.Verify(hookSecret, r.Header.Get(notify.HeaderTimestamp), body, r.Header.Get(notify.HeaderSignature), time.Now(), time.Minute); err != nil {
			t.Errorf("hook: %v", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		k := r.Header.Get(notify.HeaderIdempotencyKey)
		h.mu.Lock()
		h.keys[k]++
		h.mu.Unlock()
		h.got <- k
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hook) count(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.keys[key]
}

// wait waits for a delivery of key.
func (h *hook) wait(t *testing.T, key string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for h.count(key) == 0 {
		select {
		case <-h.got:
		case <-deadline:
			t.Fatalf("no delivery of %s within 20 s (got %v)", key, h.keys)
		}
	}
}

func notifyOn(url string, on ...schedule.Event) *schedule.Notify {
	return &schedule.Notify{On: on, Webhook: &schedule.Webhook{URL: url, Secret: hookSecret}}
}

func allowLoopback(c *scheduler.Config) { c.AllowedTargets = []string{"127.0.0.1"} }

// notice reads the outbox fields of run id.
func notice(t *testing.T, st *mongostore.Store, id string) store.RunRecord {
	t.Helper()
	rd, err := st.Runs().Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return *rd
}

// TestNotifyOutcomeWriteFault: the write that records a failed outcome,
// and with it the failed event, meets a fault: refused, dropped, or landed
// with its answer lost (both shapes). The event is delivered once or
// twice, never zero times, and the notice is cleared afterwards. The
// receiver is down for the delivery right after the run, so the event
// reaches it only through the notice the outcome write left on the run.
// Mutations that fail it: Finish's write without the notice
// (outcomeUpdate without withNotice), or Tick without deliverPending ("no
// delivery of o@…:failed").
func TestNotifyOutcomeWriteFault(t *testing.T) {
	for _, tc := range []struct {
		name string
		arm  func(t *testing.T, st *mongostore.Store)
	}{
		{"refused", func(t *testing.T, st *mongostore.Store) {
			emutest.FailCommand(t, st, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, "update")
		}},
		{"dropped connection", func(t *testing.T, st *mongostore.Store) {
			emutest.FailCommandDrop(t, st, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, "update")
		}},
		{"landed, answered a write concern error", func(t *testing.T, st *mongostore.Store) {
			emutest.FailCommandAfterWrite(t, st, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, "update")
		}},
		{"landed, answered DeadlineExceeded", func(t *testing.T, st *mongostore.Store) {
			emutest.FailCommandCodeAfterRun(t, st, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, 262, "update")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHook(t)
			b := setup(t, allowLoopback)
			key, g := newGate(t, 1)
			target := gateTarget(key)
			target.Builtin.Args["fail"] = "yes"
			b.addSchedule(t, schedule.Schedule{ID: "o", Cron: "* * * * *", Target: target, Notify: notifyOn(h.srv.URL, schedule.EventFailed)})
			done := startBlockedTick(t, b, g, 1)
			tc.arm(t, b.store) // the next runs update is the outcome's
			h.down.Store(true)
			g.open()
			<-done
			emutest.FailCommandOff(t, b.store)
			b.eng.Wait() // the delivery right after the run, which fails
			h.down.Store(false)
			const run = "o@20260302T090100Z"
			if rd := notice(t, b.store, run); rd.Status != schedule.RunFailed {
				t.Fatalf("run %s is %s, want failed", run, rd.Status)
			}
			// A later tick's sweep delivers whatever is still pending,
			// after the failed delivery's backoff.
			b.clock.Set(t0.Add(5 * time.Minute))
			b.tick(t)
			h.wait(t, run+":failed")
			b.eng.Wait()
			if n := h.count(run + ":failed"); n > 2 {
				t.Errorf("delivered %d times, want once or twice", n)
			}
			if rd := notice(t, b.store, run); !rd.NotifyAt.IsZero() {
				t.Errorf("notice still pending after delivery: notifyAt %s", rd.NotifyAt)
			}
		})
	}
}

// TestNotifyFailOverLostAnswer: the sweep fails over a run whose executor
// died, and the failover's write lands but answers an error, so the sweep
// believes it did not happen and delivers nothing at once. The failed
// event is in that same write (the outbox), and the next sweep delivers
// it. Mutation that fails it: FailOver without the notice in its $set,
// queued only by a later write after a success ("no delivery of
// dead@…:failed").
func TestNotifyFailOverLostAnswer(t *testing.T) {
	h := newHook(t)
	b := setup(t, allowLoopback)
	s := b.addSchedule(t, schedule.Schedule{ID: "dead", Cron: "0 0 1 1 *", Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}},
		Notify: notifyOn(h.srv.URL, schedule.EventFailed)})
	// A run whose executor died mid-run: running, its heartbeat long
	// stopped, under a job lease epoch nobody holds.
	fire := t0.Add(-time.Hour)
	id := schedule.RunID(s.ID, fire, schedule.SourceScheduled, 1)
	rd := &store.RunRecord{Run: schedule.Run{ID: id, ScheduleID: s.ID, FireTime: fire, Source: schedule.SourceScheduled, Status: schedule.RunRunning,
		Attempt: 1, Holder: "gone", Epoch: 7, CreatedAt: fire, StartedAt: fire, HeartbeatAt: fire}, SweepAt: fire.Add(time.Minute)}
	if _, err := b.store.Runs().Insert(context.Background(), rd); err != nil {
		t.Fatal(err)
	}
	emutest.FailCommandAfterWrite(t, b.store, schedule.RunsCollection, bson.D{{Key: "times", Value: 1}}, "update")
	if sum := b.tick(t); sum.Failed != 0 || sum.Errors == 0 {
		t.Fatalf("tick with the failover's answer lost: %+v, want an error and nothing counted failed", sum)
	}
	emutest.FailCommandOff(t, b.store)
	b.eng.Wait()
	if got := notice(t, b.store, id); got.Status != schedule.RunFailed || got.NotifyAt.IsZero() {
		t.Fatalf("after the lost answer: status %s notifyAt %v, want failed with its notice queued", got.Status, got.NotifyAt)
	}
	if n := h.count(id + ":failed"); n != 0 {
		t.Fatalf("delivered %d times before the sweep: the failover believed it failed", n)
	}
	b.clock.Set(t0.Add(time.Minute))
	b.tick(t)
	h.wait(t, id+":failed")
	b.eng.Wait()
	if got := notice(t, b.store, id); !got.NotifyAt.IsZero() {
		t.Errorf("notice still pending after delivery: notifyAt %s", got.NotifyAt)
	}
}

// TestNotifyGivesUpAfterAttempts: a receiver that never answers 2xx gets
// NotifyAttempts deliveries, each after the backoff (the sweep does not
// send it before), and then the event is given up: the notice is cleared
// and the run keeps the last error. The run itself was recorded failed
// before any delivery. Mutations that fail it: deliver without the attempts
// check (the notice is never given up: "notice still pending"), or
// NoticeRetry without moving notifyAt (sent on every tick: "delivered …
// before its backoff").
func TestNotifyGivesUpAfterAttempts(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusBadGateway)
	}))
	t.Cleanup(srv.Close)
	b := setup(t, allowLoopback, func(c *scheduler.Config) { c.NotifyAttempts = 3; c.NotifyBackoff = time.Minute })
	b.addSchedule(t, schedule.Schedule{ID: "g", Cron: "1 9 * * *", Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "fail"}},
		Notify: notifyOn(srv.URL, schedule.EventFailed)})
	b.clock.Set(t0.Add(61 * time.Second))
	b.tick(t) // runs it inline: failed, first delivery fails
	b.eng.Wait()
	const run = "g@20260302T090100Z"
	if got := notice(t, b.store, run); got.Status != schedule.RunFailed || got.NotifyAttempts != 1 {
		t.Fatalf("after the run: status %s attempts %d, want failed and 1 failed delivery", got.Status, got.NotifyAttempts)
	}
	// Before the backoff (1 min) the sweep leaves it alone.
	b.clock.Set(t0.Add(90 * time.Second))
	b.tick(t)
	b.eng.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("delivered %d times before its backoff, want 1", n)
	}
	// Second attempt after 1 min, third (the last) after 2 more.
	for _, at := range []time.Duration{150 * time.Second, 5 * time.Minute} {
		b.clock.Set(t0.Add(at))
		b.tick(t)
		b.eng.Wait()
	}
	got := notice(t, b.store, run)
	if n := calls.Load(); n != 3 {
		t.Errorf("%d deliveries, want 3 (NotifyAttempts)", n)
	}
	if !got.NotifyAt.IsZero() || got.NotifyAttempts != 3 || !strings.Contains(got.NotifyError, "502") {
		t.Errorf("notice still pending, or its end not recorded: notifyAt %v attempts %d error %q; want cleared, 3, the 502", got.NotifyAt, got.NotifyAttempts, got.NotifyError)
	}
	b.clock.Set(t0.Add(time.Hour))
	b.tick(t)
	b.eng.Wait()
	if n := calls.Load(); n != 3 {
		t.Errorf("%d deliveries after giving up, want still 3", n)
	}
}

// payloads records the signed payloads a receiver got, by idempotency key.
type payloads struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string]notify.Payload
}

func newPayloads(t *testing.T) *payloads {
	p := &payloads{got: map[string]notify.Payload{}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := notify.Verify(hookSecret, r.Header.Get(notify.HeaderTimestamp), body, r.Header.Get(notify.HeaderSignature), time.Now(), time.Minute); err != nil {
			t.Errorf("hook: %v", err)
		}
		var pl notify.Payload
		if err := json.Unmarshal(body, &pl); err != nil {
			t.Errorf("hook: %s: %v", body, err)
		}
		if r.Header.Get(notify.HeaderEvent) != pl.Event {
			t.Errorf("hook: %s %q, body event %q", notify.HeaderEvent, r.Header.Get(notify.HeaderEvent), pl.Event)
		}
		p.mu.Lock()
		p.got[r.Header.Get(notify.HeaderIdempotencyKey)] = pl
		p.mu.Unlock()
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *payloads) keys() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for k := range p.got {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestNotifyEvents: each event is sent when, and only when, the schedule
// asks for it: skipped for an overlap skip (with its reason), misfire for
// each fire buffer_one collapsed, recovered for a retry that succeeded;
// and nothing for events it did not ask for. Mutations that fail it: the
// overlap skip's Skip without its notice; buffer_one's Skip queuing
// skipped instead of misfire; outcomeEvent without recovered.
func TestNotifyEvents(t *testing.T) {
	t.Parallel()
	t.Run("skipped", func(t *testing.T) {
		t.Parallel()
		p := newPayloads(t)
		b := setup(t, allowLoopback)
		key, g := newGate(t, 1)
		b.addSchedule(t, schedule.Schedule{ID: "sk", Cron: "* * * * *", Overlap: schedule.OverlapSkip, Target: gateTarget(key),
			Notify: notifyOn(p.srv.URL, schedule.EventSkipped, schedule.EventFailed)})
		done := startBlockedTick(t, b, g, 1)
		b.clock.Set(t0.Add(2*time.Minute + time.Second))
		b.tick(t)
		g.open()
		<-done
		b.eng.Wait()
		if diff := cmp.Diff([]string{"sk@20260302T090200Z:skipped"}, p.keys()); diff != "" {
			t.Fatalf("deliveries (-want,+got):\n%s", diff)
		}
		pl := p.got["sk@20260302T090200Z:skipped"]
		if pl.Status != "skipped" || !strings.Contains(pl.Reason, "overlap skip") || pl.Schedule != "sk" || !pl.FireTime.Equal(t0.Add(2*time.Minute)) {
			t.Errorf("skipped payload %+v", pl)
		}
	})
	t.Run("misfire", func(t *testing.T) {
		t.Parallel()
		p := newPayloads(t)
		b := setup(t, allowLoopback)
		key, g := newGate(t, 1)
		b.addSchedule(t, schedule.Schedule{ID: "mf", Cron: "* * * * *", Target: gateTarget(key),
			Notify: notifyOn(p.srv.URL, schedule.EventMisfire)})
		done := startBlockedTick(t, b, g, 1)
		for m := 2; m <= 3; m++ {
			b.clock.Set(t0.Add(time.Duration(m)*time.Minute + time.Second))
			b.tick(t)
		}
		g.open()
		<-done
		b.eng.Wait()
		want := []string{"mf@20260302T090200Z:misfire", "mf@20260302T090300Z:misfire"}
		if diff := cmp.Diff(want, p.keys()); diff != "" {
			t.Fatalf("deliveries (-want,+got):\n%s", diff)
		}
		if pl := p.got[want[0]]; !strings.Contains(pl.Reason, scheduler.ReasonBuffered) || pl.Status != "skipped" {
			t.Errorf("misfire payload %+v", pl)
		}
	})
	t.Run("recovered", func(t *testing.T) {
		t.Parallel()
		p := newPayloads(t)
		b := setup(t, allowLoopback)
		key, _ := newGate(t, 0)
		target := gateTarget(key)
		target.Builtin.Args["fail"] = "first"
		b.addSchedule(t, schedule.Schedule{ID: "rc", Cron: "1 9 * * *", Target: target, Retry: schedule.Retry{MaxAttempts: 2, Backoff: schedule.Duration(time.Second)},
			Notify: notifyOn(p.srv.URL, schedule.EventRecovered)})
		b.clock.Set(t0.Add(61 * time.Second))
		b.tick(t) // attempt 1 fails: no event asked for
		b.eng.Wait()
		b.clock.Set(t0.Add(5 * time.Minute))
		b.tick(t) // the sweep runs the retry, which succeeds
		b.eng.Wait()
		if diff := cmp.Diff([]string{"rc@20260302T090100Z-a2:recovered"}, p.keys()); diff != "" {
			t.Fatalf("deliveries (-want,+got):\n%s", diff)
		}
		if pl := p.got["rc@20260302T090100Z-a2:recovered"]; pl.Status != "succeeded" || pl.Attempt != 2 || pl.Source != "retry" {
			t.Errorf("recovered payload %+v", pl)
		}
	})
}

// TestNotifyErrorHidesTheURL: a delivery that cannot connect records (and
// logs) the host, not the URL, whose path may be the webhook's own token.
// Mutation that fails it: post returning the *url.Error as it is.
func TestNotifyErrorHidesTheURL(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/services/T0/B0/tok3n-in-the-path"
	srv.Close() // nothing listens: the dial fails
	b := setup(t, allowLoopback)
	b.addSchedule(t, schedule.Schedule{ID: "u", Cron: "1 9 * * *", Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "fail"}},
		Notify: notifyOn(url, schedule.EventFailed)})
	b.clock.Set(t0.Add(61 * time.Second))
	b.tick(t)
	b.eng.Wait()
	got := notice(t, b.store, "u@20260302T090100Z")
	if got.NotifyAttempts != 1 || got.NotifyError == "" {
		t.Fatalf("after a failed delivery: attempts %d error %q, want 1 and the error", got.NotifyAttempts, got.NotifyError)
	}
	if strings.Contains(got.NotifyError, "tok3n") {
		t.Errorf("the recorded error shows the webhook URL's path: %s", got.NotifyError)
	}
}
