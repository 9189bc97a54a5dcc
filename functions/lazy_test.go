package functions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/baton-cron/baton/shared/store"
)

// TestLazyRetriesAFailedInit: a cold start whose first build fails (the
// database unreachable for a moment) must not leave the instance answering
// 500 forever: the next request builds again.
func TestLazyRetriesAFailedInit(t *testing.T) {
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	calls := 0
	env := func(context.Context) (*Deps, error) {
		calls++
		if calls == 1 {
			return nil, errors.New("store: open: ping: connection refused")
		}
		return &Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, nil
	}
	ok := func(*Deps) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }), nil
	}
	h := lazy("Test", ok, env)
	var got []int
	for range 3 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		got = append(got, rec.Code)
	}
	want := []int{http.StatusInternalServerError, http.StatusNoContent, http.StatusNoContent}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("statuses (-want,+got): -%v +%v", want, got)
		}
	}
	if calls != 2 {
		t.Errorf("env built %d times, want 2 (once failing, once for good)", calls)
	}
}

// TestLazyInitFailureIs500: a failed build is the deployment's fault, a 500
// whatever the error's code: a URI refused as InvalidArgument
// (store.ErrRetryableWrites) must not answer the caller 400.
func TestLazyInitFailureIs500(t *testing.T) {
	env := func(context.Context) (*Deps, error) {
		return nil, fmt.Errorf("store: open: %w", store.ErrRetryableWrites)
	}
	h := lazy("Test", nil, env)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), `"code":"internal"`) {
		t.Errorf("failed init answered %d %s, want 500 internal", rec.Code, rec.Body)
	}
}
