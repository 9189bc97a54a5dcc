package functions

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
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
