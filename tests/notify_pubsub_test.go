package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/shared/notify"
)

// TestPubSubChannel: a schedule whose notify block names a Pub/Sub topic
// gets a message per failed run on the local stack's fake (Google's
// pstest): the payload's JSON as data, the event and the idempotency key as
// attributes. A topic that is not a topic name is a 400 naming the field.
func TestPubSubChannel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: time.Second})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	sched := map[string]any{"id": "ps", "cron": "*/2 * * * * *", "target": map[string]any{"type": "builtin", "builtin": map[string]any{"name": "fail"}},
		"notify": map[string]any{"on": []string{"failed"}, "pubsub": map[string]any{"topic": stack.NotifyTopic}}}
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", sched, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, m := range s.PubSub.Messages() {
			var p notify.Payload
			if err := json.Unmarshal(m.Data, &p); err != nil {
				t.Fatalf("message data %q: %v", m.Data, err)
			}
			if m.Attributes["event"] != "failed" || p.Event != "failed" || p.Schedule != "ps" || p.Status != "failed" ||
				m.Attributes["idempotencyKey"] != notify.IdempotencyKey(p.Run, "failed") || !strings.HasPrefix(p.Run, "ps@") ||
				!strings.HasPrefix(p.ConsoleURL, s.URL+"/console/runs/ps@") {
				t.Fatalf("message %+v with payload %+v; want a failed event of ps, keyed by run and event", m.Attributes, p)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no Pub/Sub message for a failed run within 30 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestPubSubChannelBadTopic(t *testing.T) {
	t.Parallel()
	s, err := stack.Start(context.Background(), stack.Config{Addr: "127.0.0.1:0", Tick: -1})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	sched := map[string]any{"id": "bad", "cron": "@hourly", "target": map[string]any{"type": "builtin", "builtin": map[string]any{"name": "noop"}},
		"notify": map[string]any{"on": []string{"failed"}, "pubsub": map[string]any{"topic": "baton-events"}}}
	var e struct{ Error struct{ Field string } }
	if code := api(t, s.URL, s.Token, "POST", "/Schedules/schedules", sched, &e); code != http.StatusBadRequest || e.Error.Field != "notify.pubsub.topic" {
		t.Errorf("create with a bad topic: %d field %q; want 400 naming notify.pubsub.topic", code, e.Error.Field)
	}
}
