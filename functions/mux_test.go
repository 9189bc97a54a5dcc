package functions

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestMuxUnknownPathIsJSON404: a path that names no function gets the shared
// JSON error shape, so clients parse one format everywhere.
func TestMuxUnknownPathIsJSON404(t *testing.T) {
	mux, err := Mux(&Deps{})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/nothing", nil))
	var body struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != http.StatusNotFound || body.Error.Code != "not_found" || !strings.Contains(body.Error.Message, "Rent") {
		t.Fatalf("GET /nothing = %d %q, want 404 with the JSON error naming the functions", rec.Code, rec.Body.String())
	}
}

// TestFromEnvRefusesMalformedAllowlist: a typo in BATON_ALLOWED_TARGETS stops
// the function from starting, with the variable named, instead of silently
// refusing that target at every run.
func TestFromEnvRefusesMalformedAllowlist(t *testing.T) {
	t.Setenv("BATON_ALLOWED_TARGETS", "api.example.com,https://bad.example.com/path")
	t.Setenv("BATON_MONGO_URI", "")
	t.Setenv("BATON_BUCKET", "")
	_, err := FromEnv(t.Context())
	if err == nil || !strings.Contains(err.Error(), "BATON_ALLOWED_TARGETS") {
		t.Fatalf("FromEnv = %v, want an error naming BATON_ALLOWED_TARGETS", err)
	}
}

// TestFromEnvRefusesBadJobLeaseStore: BATON_JOB_LEASE_STORE other than
// gcs or firestore stops the function from starting, naming the variable:
// processes that disagree on the store would each take leases the other
// holds but for the switch guard.
func TestFromEnvRefusesBadJobLeaseStore(t *testing.T) {
	t.Setenv("BATON_JOB_LEASE_STORE", "s3")
	t.Setenv("BATON_MONGO_URI", "")
	t.Setenv("BATON_BUCKET", "")
	_, err := FromEnv(t.Context())
	if err == nil || !strings.Contains(err.Error(), "BATON_JOB_LEASE_STORE") || !strings.Contains(err.Error(), `"s3"`) {
		t.Fatalf("FromEnv = %v, want an error naming BATON_JOB_LEASE_STORE and its value", err)
	}
	for _, ok := range []string{"gcs", "firestore", "Firestore"} {
		t.Setenv("BATON_JOB_LEASE_STORE", ok)
		d, err := FromEnv(t.Context())
		if err != nil {
			t.Fatalf("BATON_JOB_LEASE_STORE=%s: FromEnv = %v", ok, err)
		}
		if want := strings.ToLower(ok); d.JobLeaseStore != want {
			t.Errorf("BATON_JOB_LEASE_STORE=%s: Deps.JobLeaseStore (-want,+got): -%s +%s", ok, want, d.JobLeaseStore)
		}
	}
}

// TestOpenAPIServed: the contract is served as JSON, without the token, at
// the root of the mux (baton local) and by the Schedules function, even
// one that has no database to serve the rest of its API with.
func TestOpenAPIServed(t *testing.T) {
	mux, err := Mux(&Deps{Token: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/openapi.json", "/Schedules/openapi.json"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var doc struct {
			OpenAPI string         `json:"openapi"`
			Paths   map[string]any `json:"paths"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || rec.Code != http.StatusOK || doc.OpenAPI != "3.1.0" || doc.Paths["/schedules/{id}:pause"] == nil {
			t.Errorf("GET %s = %d %.200q (%v), want 200 with the OpenAPI 3.1 document", path, rec.Code, rec.Body.String(), err)
		}
	}
	// The rest of the Schedules API still needs the token.
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/Schedules/schedules", nil))
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("GET /Schedules/schedules without the token = %d, want 401", rec.Code)
	}
}
