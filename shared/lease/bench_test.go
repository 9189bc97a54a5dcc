package lease_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/lease"
)

// BenchmarkAcquireRelease counts GCS requests per acquire+release pair
// (reads/op, writes/op), uncontended and under contention. The floor is one
// conditional write per state change: 2 writes per pair.
func BenchmarkAcquireRelease(b *testing.B) {
	ctx := context.Background()
	report := func(b *testing.B, bd *bundle, start [2]int64) {
		n := float64(b.N)
		b.ReportMetric(float64(bd.ft.reads.Load()-start[0])/n, "reads/op")
		b.ReportMetric(float64(bd.ft.writes.Load()-start[1])/n, "writes/op")
	}
	b.Run("new-manager", func(b *testing.B) {
		bd := setup(b)
		start := [2]int64{bd.ft.reads.Load(), bd.ft.writes.Load()}
		for i := 0; b.Loop(); i++ {
			l, err := bd.manager(fmt.Sprint(i), lease.Options{}).Acquire(ctx, "x", 10*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
		report(b, bd, start)
	})
	b.Run("same-manager", func(b *testing.B) {
		bd := setup(b)
		m := bd.manager("m", lease.Options{})
		start := [2]int64{bd.ft.reads.Load(), bd.ft.writes.Load()}
		for b.Loop() {
			l, err := m.Acquire(ctx, "x", 10*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
		report(b, bd, start)
	})
	b.Run("contended-10", func(b *testing.B) {
		bd := setup(b)
		ms := make([]*lease.Manager, 10)
		for i := range ms {
			ms[i] = bd.manager(fmt.Sprint(i), lease.Options{})
		}
		start := [2]int64{bd.ft.reads.Load(), bd.ft.writes.Load()}
		for b.Loop() {
			var wg sync.WaitGroup
			var mu sync.Mutex
			var wins []*lease.Lease
			for _, m := range ms {
				wg.Go(func() {
					l, err := m.Acquire(ctx, "x", 10*time.Second)
					if err != nil && !errors.Is(err, lease.ErrHeld) {
						b.Error(err)
					}
					if err == nil {
						mu.Lock()
						wins = append(wins, l)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if len(wins) != 1 {
				b.Fatalf("%d winners", len(wins))
			}
			if err := wins[0].Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
		report(b, bd, start)
	})
}

// BenchmarkRenew counts GCS requests per heartbeat of a held lease. One op
// is one renew, so it runs at the heartbeat rate (once a second): use a
// small -benchtime such as 3x.
func BenchmarkRenew(b *testing.B) {
	ctx := context.Background()
	bd := setup(b)
	l, err := bd.manager("m", lease.Options{}).Acquire(ctx, "x", 3*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	reads, writes := bd.ft.reads.Load(), bd.ft.writes.Load()
	b.ResetTimer()
	for l.Renews() < int64(b.N) {
		if l.Err() != nil {
			b.Fatal(l.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.StopTimer()
	n := float64(l.Renews())
	b.ReportMetric(float64(bd.ft.reads.Load()-reads)/n, "reads/op")
	b.ReportMetric(float64(bd.ft.writes.Load()-writes)/n, "writes/op")
	if err := l.Release(ctx); err != nil {
		b.Fatal(err)
	}
}
