package functions_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-cron/baton/functions"
)

// rentServer serves every function through functions.Mux on a real HTTP
// server, as baton local does. Rent needs no store or bucket.
func rentServer(t *testing.T) string {
	t.Helper()
	mux, err := functions.Mux(&functions.Deps{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("functions.Mux: %v", err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

type apiError struct {
	Error struct {
		Code, Message, Field string
	} `json:"error"`
}

func do(t *testing.T, method, url, body string) (int, map[string]any, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s %s: answer is not JSON: %q", method, url, raw)
	}
	return resp.StatusCode, m, string(raw)
}

func TestRentOK(t *testing.T) {
	t.Parallel()
	base := rentServer(t)
	tests := []struct {
		name, method, path, body string
		want                     map[string]any
	}{
		{
			name: "GET forward", method: "GET", path: "/Rent?jeonse=300000000&deposit=100000000&rate=4.5",
			want: map[string]any{"direction": "toMonthly", "jeonse": 300000000.0, "deposit": 100000000.0, "monthlyRent": 750000.0, "rate": 4.5},
		},
		{
			name: "GET trailing slash, reverse", method: "GET", path: "/Rent/?deposit=100000000&monthlyRent=750000&rate=4.5",
			want: map[string]any{"direction": "toJeonse", "jeonse": 300000000.0, "deposit": 100000000.0, "monthlyRent": 750000.0, "rate": 4.5},
		},
		{
			name: "GET with base rate", method: "GET", path: "/Rent?jeonse=300000000&deposit=100000000&rate=6&baseRate=3.5",
			want: map[string]any{"direction": "toMonthly", "jeonse": 300000000.0, "deposit": 100000000.0, "monthlyRent": 1000000.0, "rate": 6.0,
				"baseRate": 3.5, "legalMaxRate": 5.5, "exceedsLegalMax": true},
		},
		{
			name: "POST numbers and strings", method: "POST", path: "/Rent", body: `{"jeonse":300000000,"deposit":"100000000","rate":"4.5","baseRate":9}`,
			want: map[string]any{"direction": "toMonthly", "jeonse": 300000000.0, "deposit": 100000000.0, "monthlyRent": 750000.0, "rate": 4.5,
				"baseRate": 9.0, "legalMaxRate": 10.0, "exceedsLegalMax": false},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			status, got, raw := do(t, tt.method, base+tt.path, tt.body)
			if status != http.StatusOK {
				t.Fatalf("status %d, want 200: %s", status, raw)
			}
			delete(got, "rounding")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s %s (-want,+got):\n%s", tt.method, tt.path, diff)
			}
		})
	}
	// The acceptance line greps for the exact bytes.
	_, _, raw := do(t, "GET", base+"/Rent?jeonse=300000000&deposit=100000000&rate=4.5", "")
	if !strings.Contains(raw, `"monthlyRent":750000`) {
		t.Errorf("body %s lacks \"monthlyRent\":750000", raw)
	}
}

func TestRentBadInput(t *testing.T) {
	t.Parallel()
	base := rentServer(t)
	tests := []struct {
		name, method, path, body string
		status                   int
		field                    string
	}{
		{"negative jeonse", "GET", "/Rent?jeonse=-1&rate=4", "", 400, "jeonse"},
		{"negative deposit", "POST", "/Rent", `{"jeonse":10,"deposit":-1,"rate":4}`, 400, "deposit"},
		{"deposit above jeonse", "GET", "/Rent?jeonse=100&deposit=200&rate=4", "", 400, "deposit"},
		{"missing rate", "GET", "/Rent?jeonse=100", "", 400, "rate"},
		{"missing rate POST", "POST", "/Rent", `{"jeonse":100}`, 400, "rate"},
		{"overflow", "GET", "/Rent?jeonse=9223372036854775808&rate=4", "", 400, "jeonse"},
		{"overflow POST", "POST", "/Rent", `{"jeonse":99999999999999999999,"rate":4}`, 400, "jeonse"},
		{"result overflow", "GET", "/Rent?monthlyRent=9223372036854775807&rate=0.01", "", 400, "monthlyRent"},
		{"unknown param", "GET", "/Rent?jeonse=1&rate=4&months=12", "", 400, "months"},
		{"unknown field", "POST", "/Rent", `{"jeonse":1,"rate":4,"months":12}`, 400, "months"},
		{"wrong type", "POST", "/Rent", `{"jeonse":true,"rate":4}`, 400, "jeonse"},
		{"rate out of range", "GET", "/Rent?jeonse=1&rate=250", "", 400, "rate"},
		{"rate as float exponent", "POST", "/Rent", `{"jeonse":1,"rate":4.5e0}`, 400, "rate"},
		{"bad query", "GET", "/Rent?jeonse=%zz&rate=4", "", 400, "query"},
		{"empty body", "POST", "/Rent", "", 400, ""},
		{"duplicate field", "POST", "/Rent", `{"jeonse":100,"rate":4,"rate":0.001}`, 400, "rate"},
		{"wrong-case field", "POST", "/Rent", `{"Jeonse":100,"rate":4}`, 400, "Jeonse"},
		{"oversize body", "POST", "/Rent", `{"jeonse":"` + strings.Repeat("1", 5000) + `"}`, 413, ""},
		{"method", "DELETE", "/Rent", "", 405, ""},
		{"sub-path", "GET", "/Rent/x?jeonse=1&rate=4", "", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			status, _, raw := do(t, tt.method, base+tt.path, tt.body)
			var e apiError
			if err := json.Unmarshal([]byte(raw), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("body %s is not the shared error shape", raw)
			}
			got := struct {
				Status int
				Field  string
			}{status, e.Error.Field}
			want := struct {
				Status int
				Field  string
			}{tt.status, tt.field}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s %s (-want,+got):\n%s\nbody: %s", tt.method, tt.path, diff, raw)
			}
		})
	}
}
