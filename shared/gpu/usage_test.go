package gpu_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/gpu/worker"
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

// TestFairCreditCapped: b uses both slots alone for ten minutes (the
// clock is advanced while its gated jobs run), then a and b queue six
// jobs each. a comes back from idle: it starts level with b, not 1200
// slot-seconds behind, so of the first six dispatches after b's jobs end
// it gets about half, not all of them (its credit is capped, as a stride
// scheduler resets a rejoining client's pass).
func TestFairCreditCapped(t *testing.T) {
	log := newStartLog()
	b := setup(t, setupOpts{workers: 2, lease: time.Hour, worker: func(c *worker.Config) { c.Observer = log.observe }})
	q := queueOnly(t, b)
	for i := range 2 {
		if _, _, err := q.Enqueue(b.ctx, gpu.EnqueueRequest{ID: fmt.Sprintf("b-hog%d", i), Tenant: "b", Payload: b.gate("hog")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.d.Dispatch(b.ctx); err != nil {
		t.Fatal(err)
	}
	b.waitStatus("b-hog0", gpu.StatusRunning)
	b.waitStatus("b-hog1", gpu.StatusRunning)
	b.clock.Advance(10 * time.Minute)
	for i := range 6 {
		for _, ten := range []string{"a", "b"} {
			if _, _, err := q.Enqueue(b.ctx, gpu.EnqueueRequest{ID: fmt.Sprintf("%s-%d", ten, i), Tenant: ten, Payload: "sleep 0.2"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	b.release("hog")
	for i := range 6 {
		b.waitStatus(fmt.Sprintf("a-%d", i), gpu.StatusSucceeded)
		b.waitStatus(fmt.Sprintf("b-%d", i), gpu.StatusSucceeded)
	}
	started, _ := log.snapshot()
	var first []string
	for _, id := range started {
		if !strings.Contains(id, "hog") && len(first) < 6 {
			first = append(first, id)
		}
	}
	a := 0
	for _, id := range first {
		if tenantOf(id) == "a" {
			a++
		}
	}
	t.Logf("first six after b's ten minutes alone: %v", first)
	if a > 4 {
		t.Errorf("a got %d of the first 6 slots after b ran alone; want about half: an idle tenant's credit is capped", a)
	}
}
