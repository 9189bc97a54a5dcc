package fence_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/baton-cron/baton/shared/fence"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]fence.Token{
		"job-nightly:42": {"job-nightly", 42},
		"a:b:7":          {"a:b", 7},
	} {
		got, err := fence.Parse(in)
		if err != nil || got != want || got.String() != in {
			t.Errorf("Parse(%q) = %+v %v, want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "job", ":3", "job:", "job:0", "job:-1", "job:x"} {
		if _, err := fence.Parse(in); !errors.Is(err, fence.ErrMalformed) {
			t.Errorf("Parse(%q) = %v, want ErrMalformed", in, err)
		}
	}
}

func TestCheckerRefusesALowerEpoch(t *testing.T) {
	t.Parallel()
	var c fence.Checker
	steps := []struct {
		tok   fence.Token
		stale bool
	}{
		{fence.Token{"job-a", 5}, false},
		{fence.Token{"job-a", 5}, false}, // the same holder again
		{fence.Token{"job-a", 6}, false}, // the next run
		{fence.Token{"job-a", 5}, true},  // the zombie wakes up
		{fence.Token{"job-b", 1}, false}, // leases are independent
	}
	for _, s := range steps {
		err := c.Check(s.tok)
		if got := errors.Is(err, fence.ErrStale); got != s.stale {
			t.Errorf("Check(%s) = %v, want stale %v", s.tok, err, s.stale)
		}
	}
}

// Example_zombie is the recipe of docs/lease.md end to end: a target that
// wraps its handler in fence.Middleware refuses the request of a holder
// whose lease a newer holder has taken, even though it arrives last.
func Example_zombie() {
	var c fence.Checker
	effects := 0
	srv := httptest.NewServer(fence.Middleware(&c, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		effects++ // the side effect the fence protects
	})))
	defer srv.Close()
	call := func(token string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
		req.Header.Set(fence.Header, token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	fmt.Println("new holder, epoch 8:", call("job-nightly:8"))
	fmt.Println("paused holder wakes, epoch 7:", call("job-nightly:7"))
	fmt.Println("effects:", effects)
	// Output:
	// new holder, epoch 8: 200
	// paused holder wakes, epoch 7: 409
	// effects: 1
}

// TestMiddlewareAnswersJSON pins the refusals' shape: baton's one JSON
// error, naming the header for a missing or malformed token, and
// "conflict" for a stale one, so that a caller parses every baton answer
// the same way.
func TestMiddlewareAnswersJSON(t *testing.T) {
	var c fence.Checker
	srv := httptest.NewServer(fence.Middleware(&c, false, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	defer srv.Close()
	tests := []struct {
		name, token string
		status      int
		code, field string
	}{
		{"fresh", "job-a:5", http.StatusOK, "", ""},
		{"missing", "", http.StatusBadRequest, "invalid_argument", fence.Header},
		{"malformed", "no-epoch", http.StatusBadRequest, "invalid_argument", fence.Header},
		{"stale", "job-a:4", http.StatusConflict, "conflict", ""},
	}
	for _, tc := range tests {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
		if tc.token != "" {
			req.Header.Set(fence.Header, tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct{ Code, Field, Message string } `json:"error"`
		}
		derr := json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
		if tc.code == "" {
			continue
		}
		if derr != nil || body.Error.Code != tc.code || body.Error.Field != tc.field || body.Error.Message == "" {
			t.Errorf("%s: body %+v (decode: %v), want code %q field %q and a message", tc.name, body.Error, derr, tc.code, tc.field)
		}
	}
}
