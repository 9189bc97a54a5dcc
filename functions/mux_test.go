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
