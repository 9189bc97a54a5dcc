package schedule

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const goodJSON = `{
  "id": "nightly",
  "description": "report",
  "cron": "30 2 * * *",
  "timeZone": "Europe/Berlin",
  "target": {"type": "http", "http": {"method": "POST", "url": "https://api.example.com/run",
             "headers": {"X-Token": "abc"}, "body": "{}", "timeout": "10s"}},
  "overlap": "skip",
  "catchup": "all",
  "maxCatchup": 5,
  "catchupWindow": "2h",
  "retry": {"maxAttempts": 3, "backoff": "1m"},
  "leaseTTL": "45s"
}`

func TestDecodeSchedule(t *testing.T) {
	t.Parallel()
	got, err := DecodeSchedule(strings.NewReader(goodJSON))
	if err != nil {
		t.Fatalf("DecodeSchedule: %v", err)
	}
	want := &Schedule{
		ID: "nightly", Description: "report", Cron: "30 2 * * *", TimeZone: "Europe/Berlin",
		Target: Target{Type: TargetHTTP, HTTP: &HTTPTarget{Method: "POST", URL: "https://api.example.com/run",
			Headers: map[string]string{"X-Token": "abc"}, Body: "{}", Timeout: Duration(10 * time.Second)}},
		Overlap: OverlapSkip, Catchup: CatchupAll, MaxCatchup: 5, CatchupWindow: Duration(2 * time.Hour),
		Retry: Retry{MaxAttempts: 3, Backoff: Duration(time.Minute)}, LeaseTTL: Duration(45 * time.Second),
		Enabled: true, // absent → true
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DecodeSchedule (-want,+got):\n%s", diff)
	}
	if err := got.Normalize(testOpts); err != nil {
		t.Errorf("Normalize of a decoded good schedule: %v", err)
	}

	off, err := DecodeSchedule(strings.NewReader(`{"id":"x","enabled":false,"target":{"type":"gpu","gpu":null}}`))
	if err != nil {
		t.Fatal(err)
	}
	if off.Enabled || off.Target.GPU != nil {
		t.Errorf("explicit enabled:false / gpu:null: got enabled=%v gpu=%v", off.Enabled, off.Target.GPU)
	}
}

// TestDecodeScheduleErrors: each bad body is refused with a *FieldError that
// names the dotted path of the field at fault.
func TestDecodeScheduleErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, field, reason string
	}{
		{"empty", ``, "", "body is empty"},
		{"not an object", `[1,2]`, "", "must be a JSON object, not an array"},
		{"string", `"x"`, "", "must be a JSON object, not a string"},
		{"null", `null`, "", "must be a JSON object, not null"},
		{"truncated", `{"id": "x"`, "", "middle of the JSON"},
		{"malformed", `{"id": x}`, "", "malformed JSON"},
		{"trailing", `{"id": "x"} {}`, "", "nothing after it"},
		{"unknown top-level", `{"id": "x", "color": "red"}`, "color", "unknown field"},
		{"unknown nested", `{"target": {"type": "http", "http": {"url": "https://a", "verb": "GET"}}}`, "target.http.verb", "unknown field"},
		{"wrong case", `{"Cron": "* * * * *"}`, "Cron", `did you mean "cron"`},
		{"wrong case nested", `{"retry": {"MaxAttempts": 2}}`, "retry.MaxAttempts", `did you mean "maxAttempts"`},
		{"json-hidden field", `{"fence": 7}`, "fence", "unknown field"},
		{"duplicate", `{"cron": "* * * * *", "cron": "@daily"}`, "cron", "more than once"},
		{"duplicate header", `{"target": {"http": {"headers": {"A": "1", "A": "2"}}}}`, "target.http.headers.A", "more than once"},
		{"number for string", `{"cron": 5}`, "cron", "must be a string, not a number"},
		{"string for int", `{"maxCatchup": "5"}`, "maxCatchup", "must be an integer, not a string"},
		{"float for int", `{"maxCatchup": 1.5}`, "maxCatchup", "must be an integer"},
		{"huge int", `{"maxCatchup": 1e400}`, "maxCatchup", "must be an integer"},
		{"string for bool", `{"enabled": "yes"}`, "enabled", "true or false"},
		{"array for object", `{"target": []}`, "target", "must be an object, not an array"},
		{"bad duration", `{"leaseTTL": "30 seconds"}`, "leaseTTL", "invalid duration"},
		{"number for duration", `{"catchupWindow": 60}`, "catchupWindow", "duration string"},
		{"nested duration", `{"target": {"gpu": {"timeout": "soon"}}}`, "target.gpu.timeout", "invalid duration"},
		{"header not string", `{"target": {"http": {"headers": {"X": 1}}}}`, "target.http.headers.X", "must be a string"},
		{"bad time", `{"nextRunAt": "tomorrow"}`, "nextRunAt", "RFC 3339"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := DecodeSchedule(strings.NewReader(tc.body))
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("DecodeSchedule(%s): got %v, want a *FieldError", tc.body, err)
			}
			if fe.Field != tc.field || !strings.Contains(fe.Reason, tc.reason) {
				t.Errorf("DecodeSchedule(%s) (-want,+got):\n-%s: …%s…\n+%s: %s", tc.body, tc.field, tc.reason, fe.Field, fe.Reason)
			}
		})
	}
}

func TestDecodeScheduleTooLarge(t *testing.T) {
	t.Parallel()
	big := `{"description": "` + strings.Repeat("x", MaxScheduleBytes) + `"}`
	_, err := DecodeSchedule(strings.NewReader(big))
	var mbe *http.MaxBytesError
	if !errors.As(err, &mbe) || mbe.Limit != MaxScheduleBytes {
		t.Errorf("DecodeSchedule of %d bytes: got %v, want *http.MaxBytesError{Limit: %d}", len(big), err, MaxScheduleBytes)
	}
	// An http.MaxBytesReader that trips first is passed through with %w.
	rec := httptest.NewRecorder()
	r := http.MaxBytesReader(rec, io.NopCloser(strings.NewReader(goodJSON)), 10)
	_, err = DecodeSchedule(r)
	if !errors.As(err, &mbe) || mbe.Limit != 10 {
		t.Errorf("DecodeSchedule through MaxBytesReader(10): got %v, want *http.MaxBytesError{Limit: 10}", err)
	}
}
