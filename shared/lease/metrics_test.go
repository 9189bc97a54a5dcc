package lease_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/metrics"
)

// TestLeaseMetrics: an acquisition that finds the lease held counts a
// conflict, and a holder whose lease is broken under it counts one loss,
// once, however often its heartbeat then fails.
func TestLeaseMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	local, err := metrics.NewLocal(metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := b.manager("a", lease.Options{Metrics: local.Set})
	c := b.manager("c", lease.Options{Metrics: local.Set})
	la, err := a.Acquire(ctx, "job-nightly", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, "job-nightly", 3*time.Second); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("second acquirer: want ErrHeld, got %v", err)
	}
	if err := c.Break(ctx, "job-nightly"); err != nil {
		t.Fatal(err)
	}
	waitDone(t, la, 10*time.Second)
	if !errors.Is(la.Err(), lease.ErrLost) {
		t.Fatalf("broken lease: want ErrLost, got %v", la.Err())
	}
	rec := httptest.NewRecorder()
	local.Handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	text, _ := io.ReadAll(rec.Body)
	for _, want := range []string{`baton_lease_conflicts_total{lease="job"} 1`, `baton_lease_lost_total{lease="job"} 1`} {
		if !strings.Contains(string(text), want) {
			t.Errorf("metrics lack %q:\n%s", want, text)
		}
	}
}
