package schedule_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/baton-cron/baton/shared/schedule"
)

// TestSecretNeverPrinted: a webhook secret shows as "[set]" however a
// schedule is printed (JSON, slog's JSON handler, %v and %+v), so neither
// an API answer nor a log line carries it; Reveal alone returns it.
// Mutation that fails it: Secret without String/LogValue ("%+v shows the
// secret").
func TestSecretNeverPrinted(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-0123456789abcdef"
	s := schedule.Schedule{ID: "x", Notify: &schedule.Notify{On: []schedule.Event{schedule.EventFailed},
		Webhook: &schedule.Webhook{URL: "https://hooks.example.com/", Secret: secret}}}
	j, err := json.Marshal(&s)
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("schedule", "schedule", s, "webhook", s.Notify.Webhook, "secret", s.Notify.Webhook.Secret)
	for how, out := range map[string]string{
		"json": string(j), "slog": logged.String(),
		"%v": fmt.Sprintf("%v", *s.Notify.Webhook), "%+v": fmt.Sprintf("%+v", *s.Notify.Webhook), "%v of the secret": fmt.Sprint(s.Notify.Webhook.Secret),
	} {
		if strings.Contains(out, secret) {
			t.Errorf("%s shows the secret: %s", how, out)
		}
		if !strings.Contains(out, schedule.SecretPlaceholder) {
			t.Errorf("%s does not show %s: %s", how, schedule.SecretPlaceholder, out)
		}
	}
	if got := s.Notify.Webhook.Secret.Reveal(); got != secret {
		t.Errorf("Reveal = %q, want the secret", got)
	}
}
