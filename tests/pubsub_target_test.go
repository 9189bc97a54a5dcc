package tests

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/shared/schedule"
)

// publishFault is a pstest reactor that answers Publish with code while
// failing is on (a test double at the edge: pstest is Google's fake, and
// this is its documented fault hook). Calls counts what it answered.
type publishFault struct {
	code    codes.Code
	failing atomic.Bool
	left    atomic.Int64 // when > 0, fail this many more calls, then pass
	calls   atomic.Int64
}

func (f *publishFault) React(any) (bool, any, error) {
	if f.left.Load() > 0 && f.left.Add(-1) >= 0 || f.failing.Load() {
		f.calls.Add(1)
		return true, (*pubsubpb.PublishResponse)(nil), status.Error(f.code, "injected by the test")
	}
	return false, nil, nil
}

// pubsubStack starts a stack (no tick: runs are triggered) whose Pub/Sub
// fake answers Publish through f first.
func pubsubStack(t *testing.T, f *publishFault) *stack.Stack {
	t.Helper()
	cfg := stack.Config{Addr: "127.0.0.1:0", Tick: -1}
	if f != nil {
		cfg.PubSubReactors = []pstest.ServerReactorOption{{FuncName: "Publish", Reactor: f}}
	}
	s, err := stack.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func pubsubSchedule(id, topic string, timeout string) map[string]any {
	ps := map[string]any{"topic": topic, "data": "export nightly", "attributes": map[string]any{"team": "data"}, "orderingKey": "nightly"}
	if timeout != "" {
		ps["timeout"] = timeout
	}
	return map[string]any{"id": id, "cron": "@daily", "target": map[string]any{"type": "pubsub", "pubsub": ps}}
}

// triggeredRun triggers id and waits for its run to finish.
func triggeredRun(t *testing.T, s *stack.Stack, id string) schedule.Run {
	t.Helper()
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules/"+id+":trigger", nil, nil); code >= 300 {
		t.Fatalf("trigger %s: %d", id, code)
	}
	runs := waitRuns(t, s, id, "a run of "+id+" finished", func(rs []schedule.Run) bool { return slices.ContainsFunc(rs, finished) })
	return runs[slices.IndexFunc(runs, finished)]
}

// TestPubSubTarget: a pubsub target's topic is created by the Schedules
// API on baton local, so a subscriber using Google's client (as gcloud's
// would, through PUBSUB_EMULATOR_HOST) attaches before the first run; the
// run publishes one message with the schedule's data, attributes and
// ordering key, plus the run id, fire time and fence, and succeeds with
// the server's message id.
func TestPubSubTarget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pubsubStack(t, nil)
	const topic = "projects/local/topics/nightly-export"
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", pubsubSchedule("ps-export", topic, ""), nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	// The console's schedule page shows the topic and the ordering key.
	res, err := http.Get(s.URL + "/console/schedules/ps-export")
	if err != nil {
		t.Fatalf("console: %v", err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if want := "pubsub: <code>" + topic + "</code> (ordering key <code>nightly</code>) team=data"; res.StatusCode != http.StatusOK || !strings.Contains(string(page), want) {
		t.Errorf("console schedule page: HTTP %d, lacks %q", res.StatusCode, want)
	}
	c, err := pubsub.NewClient(ctx, "local", option.WithEndpoint(s.PubSubHost), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	const subName = "projects/local/subscriptions/exporter"
	if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: subName, Topic: topic, EnableMessageOrdering: true}); err != nil {
		t.Fatalf("subscribe before the first run (the API should have created %s): %v", topic, err)
	}
	r := triggeredRun(t, s, "ps-export")
	if r.Status != schedule.RunSucceeded || !strings.HasPrefix(r.Output, "published message ") {
		t.Fatalf("run %+v; want succeeded with the message id in its output", r)
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var got *pubsub.Message
	err = c.Subscriber(subName).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		got = m
		cancel()
	})
	if err != nil && rctx.Err() == nil {
		t.Fatalf("receive: %v", err)
	}
	if got == nil {
		t.Fatal("the subscriber received nothing within 20 s")
	}
	a := got.Attributes
	if string(got.Data) != "export nightly" || got.OrderingKey != "nightly" || a["team"] != "data" ||
		a[schedule.AttrRunID] != r.ID || a[schedule.AttrSchedule] != "ps-export" ||
		a[schedule.AttrFireTime] != r.FireTime.UTC().Format(time.RFC3339) ||
		!strings.HasPrefix(a[schedule.AttrFence], "job-ps-export:") {
		t.Fatalf("message data %q key %q attributes %v; want the schedule's data, key and attributes, and run %s's id, fire time and fence", got.Data, got.OrderingKey, a, r.ID)
	}
	if "published message "+got.ID != r.Output {
		t.Errorf("run output %q, message id %s: the output should carry the server's id", r.Output, got.ID)
	}
}

// TestPubSubTargetRetriesUnavailable: Publish answered UNAVAILABLE twice
// is retried within the run, and the run succeeds with one message.
func TestPubSubTargetRetriesUnavailable(t *testing.T) {
	t.Parallel()
	f := &publishFault{code: codes.Unavailable}
	s := pubsubStack(t, f)
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", pubsubSchedule("ps-retry", "projects/local/topics/t-retry", "20s"), nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	f.left.Store(2)
	r := triggeredRun(t, s, "ps-retry")
	if r.Status != schedule.RunSucceeded {
		t.Fatalf("run %+v; want succeeded after two UNAVAILABLE answers", r)
	}
	if n := f.calls.Load(); n != 2 {
		t.Errorf("publishes refused: %d, want 2", n)
	}
	if n := len(s.PubSub.Messages()); n != 1 {
		t.Errorf("messages on the fake: %d, want 1", n)
	}
}

// TestPubSubTargetNotAcknowledged: a publish the server never acknowledges
// within the target's timeout, or refuses for good, fails the run; it is
// never counted as a success, and the error names Pub/Sub.
func TestPubSubTargetNotAcknowledged(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		code codes.Code
	}{{"unavailable until the timeout", codes.Unavailable}, {"permission denied", codes.PermissionDenied}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &publishFault{code: tc.code}
			f.failing.Store(true)
			s := pubsubStack(t, f)
			if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", pubsubSchedule("ps-fail", "projects/local/topics/t-fail", "2s"), nil); code != http.StatusCreated {
				t.Fatalf("create: %d", code)
			}
			r := triggeredRun(t, s, "ps-fail")
			if r.Status != schedule.RunFailed || !strings.Contains(r.Error, "pubsub") {
				t.Fatalf("run %+v; want failed with a pubsub error", r)
			}
			if n := len(s.PubSub.Messages()); n != 0 {
				t.Errorf("messages on the fake: %d, want 0", n)
			}
		})
	}
}

// TestPubSubTargetRefused: what Pub/Sub or the allowlist would refuse is a
// 400 naming the field, and nothing is written.
func TestPubSubTargetRefused(t *testing.T) {
	t.Parallel()
	s := pubsubStack(t, nil)
	long := strings.Repeat("v", schedule.MaxPubSubAttrValueLen+1)
	for _, tc := range []struct {
		name  string
		edit  func(ps map[string]any)
		field string
	}{
		{"not a topic name", func(ps map[string]any) { ps["topic"] = "nightly" }, "target.pubsub.topic"},
		{"topic of another project", func(ps map[string]any) { ps["topic"] = "projects/other-proj/topics/t-one" }, "target.pubsub.topic"},
		{"goog topic", func(ps map[string]any) { ps["topic"] = "projects/local/topics/google-x" }, "target.pubsub.topic"},
		{"reserved attribute", func(ps map[string]any) { ps["attributes"] = map[string]any{"baton-run-id": "x"} }, `target.pubsub.attributes.baton-run-id`},
		{"goog attribute", func(ps map[string]any) { ps["attributes"] = map[string]any{"googKey": "x"} }, `target.pubsub.attributes.googKey`},
		{"long attribute value", func(ps map[string]any) { ps["attributes"] = map[string]any{"k": long} }, `target.pubsub.attributes.k`},
		{"timeout too short", func(ps map[string]any) { ps["timeout"] = "10ms" }, "target.pubsub.timeout"},
	} {
		sc := pubsubSchedule("ps-bad", "projects/local/topics/ok-topic", "")
		tc.edit(sc["target"].(map[string]any)["pubsub"].(map[string]any))
		var e struct {
			Error struct{ Field, Message string }
		}
		if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", sc, &e); code != http.StatusBadRequest || e.Error.Field != tc.field {
			t.Errorf("%s: %d field %q (%s); want 400 naming %s", tc.name, code, e.Error.Field, e.Error.Message, tc.field)
		}
	}
	if code := api(t, s.URL, s.Token, "GET", "/Schedules/schedules/ps-bad", nil, nil); code != http.StatusNotFound {
		t.Errorf("GET after refused creates: %d, want 404 (nothing written)", code)
	}
}

// TestPubSubTargetEveryTwoSeconds: a `*/2 * * * * *` schedule with a
// pubsub target on the ticking local stack; a subscriber that attached
// before the first fire receives one message per fire time, each with the
// run id of that fire time's run, and no fire time twice.
func TestPubSubTargetEveryTwoSeconds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: time.Second})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	const topic = "projects/local/topics/every-two"
	sc := pubsubSchedule("ps-two", topic, "")
	sc["cron"] = "*/2 * * * * *"
	sc["enabled"] = false // the subscriber attaches first
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", sc, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	c, err := pubsub.NewClient(ctx, "local", option.WithEndpoint(s.PubSubHost), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	const subName = "projects/local/subscriptions/every-two"
	if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: subName, Topic: topic}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if code := api(t, s.URL, s.Token, "PATCH", "/Schedules/schedules/ps-two", map[string]any{"enabled": true}, nil); code != http.StatusOK {
		t.Fatalf("enable: %d", code)
	}
	// Receive for a while, then stop the schedule and drain what is left.
	byFire := map[string][]string{} // fire time → run ids received
	var mu sync.Mutex
	rctx, cancel := context.WithTimeout(ctx, 9*time.Second)
	defer cancel()
	receive := func(rctx context.Context) {
		err := c.Subscriber(subName).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
			m.Ack()
			mu.Lock()
			defer mu.Unlock()
			byFire[m.Attributes[schedule.AttrFireTime]] = append(byFire[m.Attributes[schedule.AttrFireTime]], m.Attributes[schedule.AttrRunID])
		})
		if err != nil && rctx.Err() == nil {
			t.Errorf("receive: %v", err)
		}
	}
	receive(rctx)
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules/ps-two:pause", nil, nil); code != http.StatusOK {
		t.Fatalf("pause: %d", code)
	}
	dctx, dcancel := context.WithTimeout(ctx, 4*time.Second)
	defer dcancel()
	receive(dctx)

	var page struct{ Runs []schedule.Run }
	api(t, s.URL, s.Token, "GET", "/Schedules/schedules/ps-two/runs?pageSize=100", nil, &page)
	succeeded := map[string]string{} // fire time → run id
	for _, r := range page.Runs {
		if r.Status == schedule.RunSucceeded {
			succeeded[r.FireTime.UTC().Format(time.RFC3339)] = r.ID
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(succeeded) < 2 {
		t.Fatalf("%d succeeded runs in 9 s of a */2 schedule; want at least 2: %+v", len(succeeded), page.Runs)
	}
	for fire, id := range succeeded {
		if got := byFire[fire]; len(got) != 1 || got[0] != id {
			t.Errorf("fire time %s (run %s): messages with run ids %v; want exactly one, with that run id", fire, id, got)
		}
	}
	for fire, ids := range byFire {
		if _, ok := succeeded[fire]; !ok {
			t.Errorf("message for fire time %s (run ids %v) without a succeeded run", fire, ids)
		}
	}
}
