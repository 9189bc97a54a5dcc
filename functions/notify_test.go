package functions

import (
	"strings"
	"testing"

	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/schedule"
)

// TestNotifyFromEnv: the default channel is read from the environment and
// checked as a schedule's notify block is; a bad setting is an error that
// names the variable and never shows the secret. Mutation that fails it:
// NotifyChannel without its Check (every bad case: nil error).
func TestNotifyFromEnv(t *testing.T) {
	const secret = "0123456789abcdef-default"
	allowed := []string{"hooks.example.com"}
	for _, tc := range []struct {
		name, url, secret, on string
		wantErr               string // the variable named; "" for success
	}{
		{"unset: no channel", "", "", "", ""},
		{"good", "https://hooks.example.com/baton", secret, "failed,misfire", ""},
		{"off the allowlist", "https://evil.example.org/", secret, "", config.EnvNotifyURL},
		{"not http(s)", "ftp://hooks.example.com/", secret, "", config.EnvNotifyURL},
		{"no secret", "https://hooks.example.com/baton", "", "", config.EnvNotifySecret},
		{"short secret", "https://hooks.example.com/baton", "short", "", config.EnvNotifySecret},
		{"unknown event", "https://hooks.example.com/baton", secret, "failed,exploded", config.EnvNotifyOn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(config.EnvNotifyURL, tc.url)
			t.Setenv(config.EnvNotifySecret, tc.secret)
			t.Setenv(config.EnvNotifyOn, tc.on)
			n, err := NotifyFromEnv(allowed)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("NotifyFromEnv = %v, %v; want an error naming %s", n, err, tc.wantErr)
				}
				if tc.secret != "" && strings.Contains(err.Error(), tc.secret) {
					t.Errorf("the error shows the secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("NotifyFromEnv: %v", err)
			}
			if tc.url == "" {
				if n != nil {
					t.Errorf("NotifyFromEnv = %+v with no URL, want nil", n)
				}
				return
			}
			if n.Webhook.URL != tc.url || n.Webhook.Secret.Reveal() != secret || !n.Wants(schedule.EventMisfire) || n.Wants(schedule.EventSkipped) {
				t.Errorf("NotifyFromEnv = %+v (on %v)", n.Webhook, n.On)
			}
		})
	}
	// BATON_NOTIFY_ON's default is failed.
	t.Run("default events", func(t *testing.T) {
		t.Setenv(config.EnvNotifyURL, "https://hooks.example.com/baton")
		t.Setenv(config.EnvNotifySecret, secret)
		t.Setenv(config.EnvNotifyOn, "")
		n, err := NotifyFromEnv(allowed)
		if err != nil || !n.Wants(schedule.EventFailed) || len(n.On) != 1 {
			t.Fatalf("NotifyFromEnv = %+v, %v; want failed only", n, err)
		}
	})
}
