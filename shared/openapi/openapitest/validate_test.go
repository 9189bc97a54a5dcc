package openapitest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/baton-cron/baton/shared/openapi"
)

// fakeSchedules answers as the Schedules function would, with the drift
// each case names.
func fakeSchedules(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/Schedules/", http.StripPrefix("/Schedules", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

const goodSchedule = `{"id":"a","cron":"* * * * *","timeZone":"UTC","target":{"type":"builtin","builtin":{"name":"noop"}},"overlap":"skip","catchup":"latest","maxCatchup":10,"catchupWindow":"1h0m0s","retry":{"maxAttempts":1,"backoff":"30s"},"leaseTTL":"30s","enabled":true,"nextRunAt":"2026-03-01T00:00:00Z","misfire":false,"version":1,"createdAt":"2026-03-01T00:00:00Z","updatedAt":"2026-03-01T00:00:00Z"}`

// TestValidatorCatchesDrift shows each kind of drift failing the request
// that shows it, and the documented answers passing.
func TestValidatorCatchesDrift(t *testing.T) {
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	base := fakeSchedules(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		switch r.URL.Path {
		case "/schedules/a":
			w.Header().Set("ETag", `"1"`)
			_, _ = w.Write([]byte(goodSchedule))
		case "/schedules/scratch": // an undocumented field
			w.Header().Set("ETag", `"1"`)
			_, _ = w.Write([]byte(strings.Replace(goodSchedule, `"id":"a"`, `"id":"a","scratch":1`, 1)))
		case "/schedules/teapot": // an undocumented status
			w.WriteHeader(http.StatusTeapot)
			_, _ = w.Write([]byte(`{"error":{"code":"internal","message":"tea"}}`))
		case "/scratch": // an undocumented route, served
			_, _ = w.Write([]byte(`{}`))
		case "/nope": // an undocumented route, refused as the handlers do
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no route for /nope"}}`))
		case "/schedules": // a create the contract refuses (no cron), accepted
			w.Header().Set("ETag", `"1"`)
			w.Header().Set("Location", "/schedules/a")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(goodSchedule))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"x","extra":true}}`))
		}
	})
	tr := http.DefaultTransport.(*http.Transport).Clone()
	v.Install(tr)
	client := &http.Client{Transport: tr}
	do := func(method, path, body string) error {
		req, _ := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}
	for _, c := range []struct {
		method, path, body string
		want               string // "" for no violation
	}{
		{"GET", "/Schedules/schedules/a", "", ""},
		{"GET", "/Schedules/nope", "", ""},
		{"GET", "/Schedules/schedules/scratch", "", `scratch`},
		{"GET", "/Schedules/schedules/teapot", "", `status is not supported`},
		{"GET", "/Schedules/scratch", "", `no route /scratch`},
		{"GET", "/Schedules/other/x/y/z", "", `ErrorResponse`},
		{"POST", "/Schedules/schedules", `{"target":{"type":"builtin","builtin":{"name":"noop"}}}`, `accepted a request the contract refuses`},
		{"PUT", "/Schedules/schedules/a", "", `no PUT on /schedules/{id}`},
	} {
		err := do(c.method, c.path, c.body)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %s: %v, want no violation", c.method, c.path, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %s: %v, want a violation with %q", c.method, c.path, err, c.want)
		}
	}
	// Requests to anything but a described function pass untouched.
	if err := do("GET", "/healthz", ""); err != nil {
		t.Errorf("GET /healthz: %v, want it left alone", err)
	}
	got, n := v.Violations()
	if len(got) != 6 || n != 8 {
		t.Errorf("Violations() = %d of %d checked, want 6 of 8:\n%s", len(got), n, strings.Join(got, "\n"))
	}
}

// TestServedJSONIsTheContract: the JSON that /openapi.json serves is the
// YAML document converted (anchors expanded, no YAML 1.1 booleans for keys
// such as "on"), and loads and validates as the same contract.
func TestServedJSONIsTheContract(t *testing.T) {
	b, err := openapi.JSON()
	if err != nil {
		t.Fatal(err)
	}
	fromJSON, err := NewFromYAML(b)
	if err != nil {
		t.Fatalf("the served JSON is not a valid contract: %v", err)
	}
	fromYAML, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(fromJSON.routes), len(fromYAML.routes); got != want || got == 0 {
		t.Errorf("the served JSON has %d paths, the YAML %d", got, want)
	}
	if n := fromJSON.doc.Components.Schemas["Notify"].Value.Properties["on"]; n == nil {
		t.Error(`Notify has no "on" property in the served JSON (read as a YAML 1.1 boolean?)`)
	}
}
