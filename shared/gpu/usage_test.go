package gpu_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/gpu"
)

// usageOf is tenant t's usage in the pool view.
func usageOf(t *testing.T, b *bundle, tenant string) float64 {
	t.Helper()
	v, err := b.d.View(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tv := range v.Tenants {
		if tv.Tenant == tenant {
			return tv.Usage
		}
	}
	return 0
}

// TestUsageIsSlotTime: three 0.3 s jobs run one after the other on one
// slot. The tenant's usage in the pool view is the time its jobs held the
// slot: at least their 0.9 s of commands, at most the wall time of the
// run (each second is counted once, hand-offs included, never twice).
// An hour later (the default half-life) it is half that.
func TestUsageIsSlotTime(t *testing.T) {
	b := setup(t, setupOpts{workers: 1, lease: 30 * time.Second})
	q := queueOnly(t, b)
	for i := range 3 {
		if _, _, err := q.Enqueue(b.ctx, gpu.EnqueueRequest{ID: fmt.Sprintf("u-%d", i), Tenant: "u", Payload: "sleep 0.3"}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if _, err := b.d.Dispatch(b.ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		b.waitStatus(fmt.Sprintf("u-%d", i), gpu.StatusSucceeded)
	}
	wall := time.Since(start).Seconds()
	got := usageOf(t, b, "u")
	t.Logf("usage %.3f slot-seconds over %.3f s of wall time", got, wall)
	if got < 0.9 || got > wall {
		t.Errorf("usage %.3f slot-seconds; want between the commands' 0.9 and the run's wall time %.3f", got, wall)
	}
	b.clock.Advance(gpu.DefaultFairHalfLife)
	if later := usageOf(t, b, "u"); math.Abs(later-got/2) > 0.01*got {
		t.Errorf("usage a half-life later is %.3f; want half of %.3f", later, got)
	}
}
