package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-cron/baton/client"
	"github.com/baton-cron/baton/shared/httpapi"
)

// faultyHop is a hop in front of the real Schedules handler: fault decides,
// for the n-th request (from 1), what goes wrong with it.
type faultyHop struct {
	n     atomic.Int64
	fault func(n int64, r *http.Request) string
}

const (
	passThrough = ""
	dropBefore  = "drop before"     // the connection drops; the server never sees the request
	dropAfter   = "drop after"      // the server applies it, then the connection drops
	busy        = "503 unavailable" // baton's "nothing applied, retry"
)

func (h *faultyHop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch h.fault(h.n.Add(1), r) {
	case dropBefore:
		hijackClose(w)
	case dropAfter:
		handler.ServeHTTP(httptest.NewRecorder(), r)
		hijackClose(w)
	case busy:
		httpapi.WriteError(w, r, &httpapi.Error{Status: http.StatusServiceUnavailable, Code: httpapi.CodeUnavailable, Message: "busy; retry"})
	default:
		handler.ServeHTTP(w, r)
	}
}

func hijackClose(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

func hopClient(t *testing.T, h *faultyHop) *client.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, client.WithToken(token), client.WithRetries(3, time.Millisecond),
		// A fresh connection per request, so a dropped one is not reused.
		client.WithHTTPClient(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRetriesOnlyWhereSafe: a GET whose connection drops is retried; a
// create whose answer is lost after it landed is not (its retry would
// be a 409, or a second schedule under a generated id), and says so
// with a transport error; any write the server answers 503 (nothing
// applied) is retried.
func TestRetriesOnlyWhereSafe(t *testing.T) {
	ctx := context.Background()
	seed, _ := client.New(baseURL, client.WithToken(token))
	if _, err := seed.CreateScheduleJSON(ctx, []byte(`{"id":"retry-get","cron":"@daily","target":{"type":"builtin","builtin":{"name":"noop"}}}`)); err != nil {
		t.Fatal(err)
	}

	h := &faultyHop{fault: func(n int64, _ *http.Request) string {
		if n == 1 {
			return dropBefore
		}
		return passThrough
	}}
	if _, err := hopClient(t, h).GetSchedule(ctx, "retry-get"); err != nil || h.n.Load() != 2 {
		t.Errorf("GET after a dropped connection: %v after %d requests; want success after 2", err, h.n.Load())
	}

	h = &faultyHop{fault: func(int64, *http.Request) string { return dropAfter }}
	_, err := hopClient(t, h).CreateScheduleJSON(ctx, []byte(`{"id":"retry-post","cron":"@daily","target":{"type":"builtin","builtin":{"name":"noop"}}}`))
	var e *client.Error
	if !errors.As(err, &e) || e.Status != 0 || h.n.Load() != 1 {
		t.Errorf("create with a lost answer: %v after %d requests; want a transport *Error after 1", err, h.n.Load())
	}
	if _, err := seed.GetSchedule(ctx, "retry-post"); err != nil {
		t.Errorf("the create landed, yet: %v", err)
	}

	h = &faultyHop{fault: func(n int64, _ *http.Request) string {
		if n <= 2 {
			return busy
		}
		return passThrough
	}}
	sc, err := hopClient(t, h).PatchSchedule(ctx, "retry-get", map[string]any{"description": "x"}, client.IfMatch(1))
	if err != nil || sc.Version != 2 || h.n.Load() != 3 {
		t.Errorf("PATCH after two 503s: %v (version %v) after %d requests; want version 2 after 3", err, sc, h.n.Load())
	}
}
