package fence_test

import (
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
