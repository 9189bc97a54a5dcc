package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"cloud.google.com/go/storage"
	"github.com/spf13/cobra"
	"google.golang.org/api/option"

	"github.com/baton-cron/baton/emulator/gcs"
	"github.com/baton-cron/baton/shared/lease"
)

// countingTransport counts GCS requests (reads: GET/HEAD; writes: the
// rest) and, once killed, refuses every request as a dead host would.
type countingTransport struct {
	base          http.RoundTripper
	reads, writes atomic.Int64
	dead          atomic.Bool
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.dead.Load() {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, fmt.Errorf("bench: host is dead: %w", syscall.ECONNREFUSED)
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		c.reads.Add(1)
	} else {
		c.writes.Add(1)
	}
	return c.base.RoundTrip(r)
}

type opCount struct{ reads, writes int64 }

func (c *countingTransport) snap() opCount { return opCount{c.reads.Load(), c.writes.Load()} }

func (a opCount) minus(b opCount) opCount { return opCount{a.reads - b.reads, a.writes - b.writes} }

func init() { benchCmd.AddCommand(newBenchLeaseCmd()) }

func newBenchLeaseCmd() *cobra.Command {
	var (
		rounds, contenders, takeovers int
		ttl, skew                     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "lease",
		Short: "Count GCS operations per lease acquire, renew and release, and time takeovers",
		Long: `Runs against an in-process GCS emulator (emulator/gcs) and counts the HTTP
requests the storage client sends (a counting http.RoundTripper). The
baseline, measured in the same run, is one bare conditional write: the floor
for any state change. It also kills a holder (its transport refuses every
request) and times how long a waiting contender takes to get the lease, as a
multiple of the ttl; the goal is at most ttl + skew + one retry period.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rounds < 1 || contenders < 2 || takeovers < 0 {
				return usageError("bench lease: want --rounds ≥ 1, --contenders ≥ 2, --takeovers ≥ 0")
			}
			return benchLease(cmd.Context(), cmd.OutOrStdout(), rounds, contenders, takeovers, ttl, skew)
		},
	}
	cmd.Flags().IntVar(&rounds, "rounds", 20, "acquire/release rounds per row")
	cmd.Flags().IntVar(&contenders, "contenders", 10, "concurrent acquirers in the contended row")
	cmd.Flags().IntVar(&takeovers, "takeovers", 2, "holder deaths to time")
	cmd.Flags().DurationVar(&ttl, "ttl", 3*time.Second, "lease ttl (heartbeat every ttl/3, at least 1s)")
	cmd.Flags().DurationVar(&skew, "skew", time.Second, "clock-skew allowance")
	return cmd
}

func benchLease(ctx context.Context, out io.Writer, rounds, contenders, takeovers int, ttl, skew time.Duration) error {
	srv, err := gcs.Start(ctx, gcs.Options{})
	if err != nil {
		return err
	}
	defer srv.Close() //nolint:contextcheck // Close shuts the emulator down on its own bounded context, so cleanup runs even after ctx is cancelled
	if err := srv.CreateBucket(ctx, "bench"); err != nil {
		return err
	}
	newClient := func() (*storage.Client, *countingTransport, error) {
		base := http.DefaultTransport.(*http.Transport).Clone()
		base.MaxIdleConnsPerHost = 64
		ct := &countingTransport{base: base}
		c, err := storage.NewClient(ctx, append(srv.ClientOptions(), option.WithHTTPClient(&http.Client{Transport: ct}))...)
		return c, ct, err
	}
	client, ct, err := newClient()
	if err != nil {
		return err
	}
	defer client.Close()
	bucket := client.Bucket("bench")
	opts := func(h string) lease.Options { return lease.Options{Holder: h, Skew: skew} }

	type row struct {
		name   string
		n      int
		ops    opCount
		perWin bool
	}
	var rows []row

	// Baseline: one bare conditional write (create, then overwrite).
	before := ct.snap()
	for i := range rounds {
		w := bucket.Object(fmt.Sprintf("baseline/%d", i)).If(storage.Conditions{DoesNotExist: true}).NewWriter(ctx)
		w.ChunkSize = 256 << 10
		_, _ = io.WriteString(w, `{"holder":"x"}`)
		if err := w.Close(); err != nil {
			return fmt.Errorf("bench lease: baseline write: %w", err)
		}
	}
	rows = append(rows, row{"baseline: one conditional write", rounds, ct.snap().minus(before), false})

	// Uncontended acquire by a fresh manager (read, then write), and release.
	var acq, rel opCount
	for i := range rounds {
		m := lease.NewManager(bucket, "leases/", opts(fmt.Sprintf("fresh-%d", i)))
		b := ct.snap()
		l, err := m.Acquire(ctx, "fresh", ttl)
		if err != nil {
			return fmt.Errorf("bench lease: acquire: %w", err)
		}
		a := ct.snap()
		if err := l.Release(ctx); err != nil {
			return fmt.Errorf("bench lease: release: %w", err)
		}
		acq, rel = add(acq, a.minus(b)), add(rel, ct.snap().minus(a))
	}
	// The first acquire of a never-seen lease is a read (404) plus a create.
	rows = append(rows, row{"acquire free lease (new manager)", rounds, acq, false})
	rows = append(rows, row{"release", rounds, rel, false})

	// Uncontended acquire by the manager that released it last: one write.
	m := lease.NewManager(bucket, "leases/", opts("same"))
	acq = opCount{}
	for range rounds {
		b := ct.snap()
		l, err := m.Acquire(ctx, "same", ttl)
		if err != nil {
			return fmt.Errorf("bench lease: acquire: %w", err)
		}
		acq = add(acq, ct.snap().minus(b))
		if err := l.Release(ctx); err != nil {
			return fmt.Errorf("bench lease: release: %w", err)
		}
	}
	rows = append(rows, row{"acquire free lease (same manager)", rounds, acq, false})

	// Renew: hold one lease for three heartbeats.
	l, err := m.Acquire(ctx, "renew", ttl)
	if err != nil {
		return fmt.Errorf("bench lease: acquire: %w", err)
	}
	b := ct.snap()
	for l.Renews() < 3 && l.Err() == nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	renewOps := ct.snap().minus(b)
	if err := l.Release(ctx); err != nil {
		return fmt.Errorf("bench lease: release: %w", err)
	}
	rows = append(rows, row{"renew (heartbeat)", int(l.Renews()), renewOps, false})

	// Contention: N acquirers race on a free lease each round.
	ms := make([]*lease.Manager, contenders)
	for i := range ms {
		ms[i] = lease.NewManager(bucket, "leases/", opts(fmt.Sprintf("c%d", i)))
	}
	b = ct.snap()
	for round := range rounds {
		var wg sync.WaitGroup
		var winners atomic.Int32
		var win *lease.Lease
		var mu sync.Mutex
		for _, cm := range ms {
			wg.Go(func() {
				l, err := cm.Acquire(ctx, "contended", ttl)
				if err == nil {
					winners.Add(1)
					mu.Lock()
					win = l
					mu.Unlock()
				} else if !errors.Is(err, lease.ErrHeld) {
					fmt.Fprintf(out, "contender error: %v\n", err)
				}
			})
		}
		wg.Wait()
		if winners.Load() != 1 {
			return fmt.Errorf("bench lease: round %d: %d winners", round, winners.Load())
		}
		if err := win.Release(ctx); err != nil {
			return err
		}
	}
	cont := ct.snap().minus(b)
	// Count the releases out: each round had one (one write).
	cont.writes -= int64(rounds)
	rows = append(rows, row{fmt.Sprintf("acquire under contention (%d racing)", contenders), rounds, cont, true})

	// Takeover after the holder dies.
	var takes []time.Duration
	for i := range takeovers {
		hc, hct, err := newClient()
		if err != nil {
			return err
		}
		hm := lease.NewManager(hc.Bucket("bench"), "leases/", opts("doomed"))
		name := fmt.Sprintf("takeover-%d", i)
		hl, err := hm.Acquire(ctx, name, ttl)
		if err != nil {
			return err
		}
		// Die at a random point of the heartbeat cycle: after one renew.
		for hl.Renews() < 1 {
			time.Sleep(20 * time.Millisecond)
		}
		hct.dead.Store(true)
		died := time.Now()
		cm := lease.NewManager(bucket, "leases/", opts("heir"))
		wctx, cancel := context.WithTimeout(ctx, 3*(ttl+skew))
		nl, err := cm.AcquireWait(wctx, name, ttl)
		cancel()
		if err != nil {
			return fmt.Errorf("bench lease: takeover: %w", err)
		}
		takes = append(takes, time.Since(died))
		_ = nl.Release(ctx)
		<-hl.Done()
		_ = hc.Close()
	}

	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "operation\tn\treads/op\twrites/op\tops/op\tvs baseline\t")
	base := float64(rows[0].ops.reads+rows[0].ops.writes) / float64(rows[0].n)
	for _, r := range rows {
		n := float64(max(r.n, 1))
		rd, wr := float64(r.ops.reads)/n, float64(r.ops.writes)/n
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%.2fx\t\n", r.name, r.n, rd, wr, rd+wr, (rd+wr)/base)
	}
	_ = tw.Flush()
	var worst, sum time.Duration
	for _, d := range takes {
		sum += d
		worst = max(worst, d)
	}
	bound := ttl + skew + lease.HeartbeatInterval(ttl)
	if len(takes) > 0 {
		mean := sum / time.Duration(len(takes))
		fmt.Fprintf(out, "takeover after holder death: mean %s (%.2f×ttl), worst %s (%.2f×ttl); goal ttl+skew+retry = %s (%.2f×ttl); ttl %s, skew %s, n %d\n",
			mean.Round(time.Millisecond), mean.Seconds()/ttl.Seconds(), worst.Round(time.Millisecond), worst.Seconds()/ttl.Seconds(),
			bound, bound.Seconds()/ttl.Seconds(), ttl, skew, len(takes))
	}
	fresh, same := rows[1], rows[3]
	fmt.Fprintf(out, "ops_per_acquire=%.2f writes_per_acquire=%.2f ops_per_acquire_same_manager=%.2f writes_per_renew=%.2f writes_per_release=%.2f takeover_worst_ttl_multiple=%.2f\n",
		float64(fresh.ops.reads+fresh.ops.writes)/float64(fresh.n), float64(fresh.ops.writes)/float64(fresh.n),
		float64(same.ops.reads+same.ops.writes)/float64(same.n),
		float64(renewOps.writes)/float64(max(l.Renews(), 1)), float64(rows[2].ops.writes)/float64(rows[2].n),
		worst.Seconds()/ttl.Seconds())
	return nil
}

func add(a, b opCount) opCount { return opCount{a.reads + b.reads, a.writes + b.writes} }
