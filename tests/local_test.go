package tests

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-cron/baton/emulator/scheduler"
	"github.com/baton-cron/baton/emulator/stack"
)

// TestLocalStack starts the same stack `baton local` runs (on free ports)
// and drives it over HTTP as a user with curl would.
func TestLocalStack(t *testing.T) {
	clock := scheduler.NewManualClock(time.Now().Truncate(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Clock: clock, Tick: time.Minute})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	defer func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()

	call := func(method, path, token, body string) (int, string, string) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequestWithContext(ctx, method, s.URL+path, rd)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var e struct {
			Error struct{ Field string } `json:"error"`
		}
		_ = json.Unmarshal(raw, &e)
		return resp.StatusCode, e.Error.Field, string(raw)
	}

	t.Run("Rent", func(t *testing.T) {
		code, _, body := call("GET", "/Rent?jeonse=300000000&deposit=100000000&rate=4.5", "", "")
		if code != 200 || !strings.Contains(body, `"monthlyRent":750000`) {
			t.Errorf("GET /Rent = %d %s, want 200 with \"monthlyRent\":750000", code, body)
		}
		code, _, body = call("POST", "/Rent", "", `{"deposit":100000000,"monthlyRent":750000,"rate":"4.5","baseRate":2.5}`)
		if code != 200 || !strings.Contains(body, `"jeonse":300000000`) || !strings.Contains(body, `"exceedsLegalMax":false`) {
			t.Errorf("POST /Rent = %d %s, want 200 with jeonse 300000000 within the legal max", code, body)
		}
	})

	t.Run("bad input names the field", func(t *testing.T) {
		type answer struct {
			Status int
			Field  string
		}
		for path, want := range map[string]answer{
			"/Rent?jeonse=-1&rate=4":              {400, "jeonse"},
			"/Rent?jeonse=100&deposit=200&rate=4": {400, "deposit"},
			"/Rent?jeonse=100":                    {400, "rate"},
			"/Rent?jeonse=1&rate=4&colour=red":    {400, "colour"},
		} {
			code, field, body := call("GET", path, "", "")
			if diff := cmp.Diff(want, answer{code, field}); diff != "" {
				t.Errorf("GET %s (-want,+got):\n%s\nbody: %s", path, diff, body)
			}
		}
	})

	t.Run("the API needs the token; Rent, healthz and the contract do not", func(t *testing.T) {
		type row struct {
			Method, Path, Token string
			Status              int
		}
		var got, want []row
		for _, r := range []row{
			{"GET", "/Schedules/schedules", "", 401},
			{"GET", "/Schedules/schedules", "wrong", 401},
			{"GET", "/Schedules/schedules", s.Token, 200},
			{"POST", "/Tick", "", 401},
			{"GET", "/healthz", "", 200},
			// The API's contract is public, at the root and on Schedules.
			{"GET", "/openapi.json", "", 200},
			{"GET", "/Schedules/openapi.json", "", 200},
		} {
			code, _, _ := call(r.Method, r.Path, r.Token, "")
			want = append(want, r)
			r.Status = code
			got = append(got, r)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("status by path and token (-want,+got):\n%s", diff)
		}
	})

	t.Run("the scheduler emulator ticks /Tick with the token", func(t *testing.T) {
		done := make(chan struct{})
		defer close(done)
		if !clock.WaitPending(done, 1) {
			t.Fatal("tick job never parked")
		}
		if d, _ := clock.AdvanceToNext(); d != time.Minute {
			t.Errorf("first tick after %s, want the 1m period", d)
		}
		as, err := s.Scheduler.WaitAttempts(ctx, stack.TickJob, 1)
		if err != nil {
			t.Fatal(err)
		}
		if as[0].Status != http.StatusOK {
			t.Errorf("tick attempt %+v, want 200 from the Tick function", as[0])
		}
	})
}
