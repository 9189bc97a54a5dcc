package catalog_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-cron/baton/shared/schedule"
)

const goodSecret = "0123456789abcdef-secret"

func notifyBody(id, notify string) string {
	return `{"id":"` + id + `","cron":"0 * * * *","target":{"type":"builtin","builtin":{"name":"noop"}},"notify":` + notify + `}`
}

// TestNotifyBadInputStoresNothing: a bad notify block gets 400 naming the
// field, on create and on patch, and nothing is written. Mutations that
// fail it: dropping the event check in Notify.validate ("notify.on[1]"
// case: 201), or the secret length check ("short secret": 201).
func TestNotifyBadInputStoresNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if res := b.do(t, http.MethodPost, "/schedules", notifyBody("existing", `{"on":["failed"],"webhook":{"url":"https://hooks.example.com/h","secret":"`+goodSecret+`"}}`)); res.Status != http.StatusCreated {
		t.Fatalf("seed: %d %s", res.Status, res.Body)
	}
	before := b.stored(t, "existing")
	hook := func(on, url, secret string) string {
		return `{"on":` + on + `,"webhook":{"url":"` + url + `","secret":"` + secret + `"}}`
	}
	for _, tc := range []struct {
		name, method, path, body, field string
	}{
		{"unknown event", "POST", "/schedules", notifyBody("new", hook(`["failed","sometimes"]`, "https://hooks.example.com/h", goodSecret)), "notify.on[1]"},
		{"unknown event", "POST", "/schedules", notifyBody("new", hook(`["exploded"]`, "https://hooks.example.com/h", goodSecret)), "notify.on[0]"},
		{"event twice", "POST", "/schedules", notifyBody("new", hook(`["failed","failed"]`, "https://hooks.example.com/h", goodSecret)), "notify.on[1]"},
		{"on not an array", "POST", "/schedules", notifyBody("new", hook(`"failed"`, "https://hooks.example.com/h", goodSecret)), "notify.on"},
		{"event not a string", "POST", "/schedules", notifyBody("new", hook(`["failed",3]`, "https://hooks.example.com/h", goodSecret)), "notify.on[1]"},
		{"not http(s)", "POST", "/schedules", notifyBody("new", hook(`["failed"]`, "ftp://hooks.example.com/h", goodSecret)), "notify.webhook.url"},
		{"not on the allowlist", "POST", "/schedules", notifyBody("new", hook(`["failed"]`, "https://evil.example.org/h", goodSecret)), "notify.webhook.url"},
		{"ssrf: metadata server", "POST", "/schedules", notifyBody("new", hook(`["failed"]`, "http://169.254.169.254/computeMetadata/v1/", goodSecret)), "notify.webhook.url"},
		{"short secret", "POST", "/schedules", notifyBody("new", hook(`["failed"]`, "https://hooks.example.com/h", "short")), "notify.webhook.secret"},
		{"placeholder as a new secret", "POST", "/schedules", notifyBody("new", hook(`["failed"]`, "https://hooks.example.com/h", schedule.SecretPlaceholder)), "notify.webhook.secret"},
		{"events without a webhook", "POST", "/schedules", notifyBody("new", `{"on":["failed"]}`), "notify.webhook"},
		{"unknown notify field", "POST", "/schedules", notifyBody("new", `{"on":[],"email":"ops@example.com"}`), "notify.email"},
		{"patch: unknown event", "PATCH", "/schedules/existing", `{"notify":{"on":["failed","late"]}}`, "notify.on[1]"},
		{"patch: url off the allowlist", "PATCH", "/schedules/existing", `{"notify":{"webhook":{"url":"https://evil.example.org/"}}}`, "notify.webhook.url"},
		{"patch: short secret", "PATCH", "/schedules/existing", `{"notify":{"webhook":{"secret":"tiny"}}}`, "notify.webhook.secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := b.do(t, tc.method, tc.path, tc.body)
			e := res.apiError(t)
			if res.Status != http.StatusBadRequest || e.Field != tc.field {
				t.Fatalf("status, field = %d, %q; want 400, %q (message %q)", res.Status, e.Field, tc.field, e.Message)
			}
			if bytes.Contains(res.Body, []byte(goodSecret)) {
				t.Errorf("the error shows the secret: %s", res.Body)
			}
			if n := b.count(t, schedule.SchedulesCollection); n != 1 {
				t.Errorf("%d schedules stored after bad input, want 1", n)
			}
			if diff := cmp.Diff(before, b.stored(t, "existing")); diff != "" {
				t.Errorf("bad input changed the stored schedule (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestNotifySecretNeverReturned: the API shows a stored webhook secret as
// "[set]" on create, get, list and patch; a patch of another field (which
// merges through that view) keeps the stored secret, and a patch with a new
// secret replaces it. Mutations that fail it: Secret without its
// MarshalJSON ("answer shows the secret"); apply without KeepSecret (the
// description patch: 400 notify.webhook.secret).
func TestNotifySecretNeverReturned(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.do(t, http.MethodPost, "/schedules", notifyBody("job", `{"on":["failed","recovered"],"webhook":{"url":"https://hooks.example.com/h","secret":"`+goodSecret+`"}}`))
	if res.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	answers := map[string]response{"create": res}
	answers["get"] = b.do(t, http.MethodGet, "/schedules/job", "")
	answers["list"] = b.do(t, http.MethodGet, "/schedules", "")
	answers["patch description"] = b.do(t, http.MethodPatch, "/schedules/job", `{"description":"now with a description"}`)
	for name, r := range answers {
		if r.Status >= 300 {
			t.Fatalf("%s: %d %s", name, r.Status, r.Body)
		}
		if bytes.Contains(r.Body, []byte(goodSecret)) {
			t.Errorf("%s: answer shows the secret: %s", name, r.Body)
		}
		if !bytes.Contains(r.Body, []byte(`"secret":"[set]"`)) {
			t.Errorf("%s: answer has no \"secret\":\"[set]\": %s", name, r.Body)
		}
	}
	if got := b.stored(t, "job").Notify.Webhook.Secret.Reveal(); got != goodSecret {
		t.Errorf("stored secret after a patch of the description = %q, want the original", got)
	}
	const next = "fedcba9876543210-rotated"
	if r := b.do(t, http.MethodPatch, "/schedules/job", `{"notify":{"webhook":{"secret":"`+next+`"}}}`); r.Status != http.StatusOK {
		t.Fatalf("rotate secret: %d %s", r.Status, r.Body)
	}
	if got := b.stored(t, "job").Notify.Webhook.Secret.Reveal(); got != next {
		t.Errorf("stored secret after rotation = %q, want %q", got, next)
	}
}
