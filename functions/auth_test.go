package functions

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestAuthWithoutStore: a function that answers 503 because the database is
// not configured still requires the token first (only Rent is public), so
// an anonymous caller learns nothing about the deployment.
func TestAuthWithoutStore(t *testing.T) {
	mux, err := Mux(&Deps{Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, path := range []string{"/GPU/gpu/pool", "/Schedules/schedules", "/Tick"} {
		for _, tc := range []struct {
			token string
			want  int
		}{{"", http.StatusUnauthorized}, {"tok", http.StatusServiceUnavailable}} {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("GET %s with token %q (-want,+got): -%d +%d", path, tc.token, tc.want, resp.StatusCode)
			}
		}
	}
}
