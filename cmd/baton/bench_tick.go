package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/gcs"
	"github.com/baton-cron/baton/emulator/mongo"
	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store"
)

func init() { benchCmd.AddCommand(newBenchTickCmd()) }

func newBenchTickCmd() *cobra.Command {
	var (
		total, due, scanPage, timed, swaps int
	)
	cmd := &cobra.Command{
		Use:   "tick",
		Short: "Reads per tick against a skip-paginated scan, time per tick, daemon hot-swap latency",
		Long: `Runs against in-process emulators (FerretDB on SQLite behind baton's front,
and fake-gcs-server), in three parts:

  reads     --schedules N schedules, --due of them due. One tick; the meter
            counts the schedule documents it reads. Baseline in the same run:
            a skip-paginated scan of all schedules (--scan-page per page),
            whose skipped documents Firestore bills as read.
  time      one tick over --timed due noop schedules, end to end (decide,
            job leases, execution, sweep). Baseline in the same run: only the
            database writes a tick must make (one run insert and one
            conditional nextRunAt update per schedule), done directly.
  hot-swap  a daemon (polling, as with the emulator) and --swaps edits of a
            schedule through the catalog service (the Schedules API's
            logic): pickup = edit returned → the daemon saw it; lateness =
            first fire of the new expression decided − its fire time.

FerretDB on SQLite filters in Go, so wall times of the reads part grow with
the total; document counts are the measure there. The last line is
reads_ratio_skip_over_cursor=<skip-scan reads / tick schedule reads>.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if total < 1 || due < 1 || due > total || scanPage < 1 || scanPage > 1000 || timed < 1 || swaps < 0 {
				return usageError("bench tick: want 1 ≤ --due ≤ --schedules, 1 ≤ --scan-page ≤ 1000, --timed ≥ 1, --swaps ≥ 0")
			}
			return benchTick(cmd.Context(), cmd.OutOrStdout(), total, due, scanPage, timed, swaps)
		},
	}
	cmd.Flags().IntVar(&total, "schedules", 100000, "schedules in the reads part")
	cmd.Flags().IntVar(&due, "due", 100, "due schedules in the reads part")
	cmd.Flags().IntVar(&scanPage, "scan-page", 1000, "page size of the skip-paginated baseline scan (max 1000)")
	cmd.Flags().IntVar(&timed, "timed", 1000, "due noop schedules in the time part")
	cmd.Flags().IntVar(&swaps, "swaps", 20, "edits in the hot-swap part (0 skips it)")
	return cmd
}

type tickBench struct {
	mongo *mongo.Server
	gcs   *gcs.Server
	n     int
}

func (b *tickBench) open(ctx context.Context) (*store.Store, *lease.Manager, error) {
	b.n++
	st, err := store.Open(ctx, b.mongo.URI(), store.Options{Database: fmt.Sprintf("bench_tick_%d", b.n)})
	if err != nil {
		return nil, nil, err
	}
	if err := st.EnsureIndexes(ctx, scheduler.Indexes...); err != nil {
		return nil, nil, err
	}
	bucket := fmt.Sprintf("bench-tick-%d", b.n)
	if err := b.gcs.CreateBucket(ctx, bucket); err != nil {
		return nil, nil, err
	}
	c, err := b.gcs.Client(ctx)
	if err != nil {
		return nil, nil, err
	}
	return st, lease.NewManager(c.Bucket(bucket), "leases/", lease.Options{Holder: "bench"}), nil
}

func noopSchedule(id, overlap string, next time.Time, now time.Time) schedule.Schedule {
	s := schedule.Schedule{ID: id, Cron: "* * * * *", Overlap: overlap, Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}}
	if err := s.Normalize(schedule.ValidateOptions{}); err != nil {
		panic(err)
	}
	s.NextRunAt, s.Enabled, s.Version, s.CreatedAt, s.UpdatedAt = next, true, 1, now, now
	return s
}

// insertSchedules writes n schedules with raw InsertMany batches (setup
// only: FerretDB on SQLite is slow for one-by-one inserts); due of them are
// due at now.
func insertSchedules(ctx context.Context, st *store.Store, n, due int, overlap string, now time.Time) error {
	coll := st.Database().Collection(schedule.SchedulesCollection)
	const batch = 1000
	docs := make([]any, 0, batch)
	// Spread the due ones through the id space, so neither the _id order nor
	// the insertion order happens to put them first.
	every := max(n/due, 1)
	made := 0
	for i := range n {
		next := now.Add(time.Duration(1+i%10000) * time.Minute)
		if i%every == 0 && made < due {
			next = now.Truncate(time.Minute) // a fire time of "* * * * *"
			made++
		}
		docs = append(docs, noopSchedule(fmt.Sprintf("s%07d", i), overlap, next.Truncate(time.Second), now))
		if len(docs) == batch || i == n-1 {
			if _, err := coll.InsertMany(ctx, docs); err != nil {
				return fmt.Errorf("insert schedules: %w", err)
			}
			docs = docs[:0]
		}
	}
	return nil
}

func benchTick(ctx context.Context, out io.Writer, total, due, scanPage, timed, swaps int) error {
	var b tickBench
	var err error
	if b.mongo, err = mongo.Start(ctx, mongo.Options{}); err != nil {
		return err
	}
	defer b.mongo.Close()
	if b.gcs, err = gcs.Start(ctx, gcs.Options{}); err != nil {
		return err
	}
	defer b.gcs.Close()
	// Ten seconds past a minute: the due schedules' fire time (the minute)
	// is on time.
	now := time.Now().UTC().Truncate(time.Minute).Add(10 * time.Second)

	// Part 1: reads per tick.
	st, leases, err := b.open(ctx)
	if err != nil {
		return err
	}
	t := time.Now()
	// allow: the reads part measures deciding; allow runs execute without
	// job leases or misfire checks, whose conditional point writes
	// FerretDB on SQLite (which pushes down only a lone _id filter)
	// evaluates by scanning the whole collection.
	if err := insertSchedules(ctx, st, total, due, schedule.OverlapAllow, now); err != nil {
		return err
	}
	fmt.Fprintf(out, "setup: %d schedules (%d due) inserted in %s\n", total, due, time.Since(t).Round(time.Millisecond))
	eng, err := scheduler.New(scheduler.Config{Store: st, Leases: leases, Now: func() time.Time { return now }})
	if err != nil {
		return err
	}
	sum, err := eng.Tick(ctx, time.Time{})
	if err != nil {
		return err
	}
	if sum.Due != due {
		return fmt.Errorf("bench tick: the tick found %d due schedules, want %d", sum.Due, due)
	}
	m := st.Meter()
	m.Reset()
	t = time.Now()
	q := store.PageQuery{SortField: "nextRunAt", Limit: scanPage}
	seen := 0
	for page := 0; ; page++ {
		var docs []bson.Raw
		if err := st.Collection(schedule.SchedulesCollection).PageSkip(ctx, q, page, &docs); err != nil {
			return err
		}
		seen += len(docs)
		if len(docs) < scanPage {
			break
		}
	}
	skipTook := time.Since(t)
	skipReads := m.Op(schedule.SchedulesCollection + ".pageSkip")
	if seen != total {
		return fmt.Errorf("bench tick: the skip scan saw %d schedules, want %d", seen, total)
	}
	fmt.Fprintf(out, "reads: tick over %d schedules, %d due: %d schedule documents read (%d documents in all), %s\n",
		total, due, sum.SchedulesRead, sum.DocsRead, sum.Took)
	fmt.Fprintf(out, "reads: baseline skip-paginated scan of all %d schedules (page %d): %d documents read, %s\n",
		total, scanPage, skipReads, skipTook.Round(time.Millisecond))
	tickReads := sum.SchedulesRead
	verdict := "PASS"
	if sum.SchedulesRead > int64(due+due/10) {
		verdict = "FAIL"
	}
	fmt.Fprintf(out, "reads: goal ≤ %d schedule documents per tick: %s\n", due+due/10, verdict)
	_ = st.Close(ctx)

	// Part 2: time per tick.
	st, leases, err = b.open(ctx)
	if err != nil {
		return err
	}
	if err := insertSchedules(ctx, st, timed, timed, "", now); err != nil {
		return err
	}
	eng, err = scheduler.New(scheduler.Config{Store: st, Leases: leases, Now: func() time.Time { return now }})
	if err != nil {
		return err
	}
	t = time.Now()
	sum, err = eng.Tick(ctx, time.Time{})
	if err != nil {
		return err
	}
	tickTook := time.Since(t)
	if sum.Succeeded != timed {
		return fmt.Errorf("bench tick: %d of %d noop runs succeeded: %+v", sum.Succeeded, timed, sum)
	}
	// Baseline: the writes alone, on a fresh database.
	st2, _, err := b.open(ctx)
	if err != nil {
		return err
	}
	if err := insertSchedules(ctx, st2, timed, timed, "", now); err != nil {
		return err
	}
	runs, scheds := st2.Collection(schedule.RunsCollection), st2.Collection(schedule.SchedulesCollection)
	t = time.Now()
	for i := range timed {
		id := fmt.Sprintf("s%07d", i)
		if _, err := runs.InsertIdempotent(ctx, bson.D{{Key: "_id", Value: id + "@x"}, {Key: "scheduleId", Value: id}, {Key: "status", Value: "pending"}}); err != nil {
			return err
		}
		if err := scheds.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: bson.D{{Key: "nextRunAt", Value: now.Add(time.Hour)}}}}); err != nil {
			return err
		}
	}
	baseTook := time.Since(t)
	fmt.Fprintf(out, "time: tick over %d due noop schedules, end to end: %s (%.2f ms per schedule)\n", timed, tickTook.Round(time.Millisecond), float64(tickTook.Microseconds())/1000/float64(timed))
	fmt.Fprintf(out, "time: baseline, the %d run inserts and %d nextRunAt updates alone: %s; tick/baseline = %.2f\n", timed, timed, baseTook.Round(time.Millisecond), tickTook.Seconds()/baseTook.Seconds())
	_ = st.Close(ctx)
	_ = st2.Close(ctx)

	// Part 3: daemon hot-swap latency.
	if swaps > 0 {
		if err := benchHotSwap(ctx, out, &b, swaps); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "reads_ratio_skip_over_cursor=%.1f\n", float64(skipReads)/float64(max(tickReads, 1)))
	return nil
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(i, 0)]
}

func benchHotSwap(ctx context.Context, out io.Writer, b *tickBench, swaps int) error {
	st, leases, err := b.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close(ctx)
	cat := catalog.New(st, catalog.Options{Validate: schedule.ValidateOptions{Builtins: scheduler.Builtins()}})
	if _, err := cat.Create(ctx, &schedule.Schedule{ID: "swap", Enabled: true, Cron: "0 0 1 1 *", Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}}); err != nil {
		return fmt.Errorf("hot swap: create: %w", err)
	}
	eng, err := scheduler.New(scheduler.Config{Store: st, Leases: leases, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	edits := make(chan time.Time, 100)
	decided := make(chan time.Time, 100)
	d, err := scheduler.NewDaemon(scheduler.DaemonConfig{Engine: eng,
		OnEdit: func(id string, seen time.Time) {
			if id == "swap" {
				edits <- seen
			}
		},
		OnTick: func(s *scheduler.Summary) {
			if s.Decided > 0 {
				decided <- time.Now()
			}
		},
	})
	if err != nil {
		return err
	}
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(dctx) }()
	defer func() { cancel(); <-done }()
	for !d.Leading() {
		time.Sleep(10 * time.Millisecond)
	}
	var pickup, late []time.Duration
	wait := func(ch chan time.Time, what string) (time.Time, error) {
		select {
		case t := <-ch:
			return t, nil
		case <-time.After(30 * time.Second):
			return time.Time{}, fmt.Errorf("hot swap: no %s within 30s", what)
		}
	}
	for i := range swaps {
		// Fire once, two seconds from now, then never again this minute.
		sec := time.Now().Add(2 * time.Second).Second()
		sc, err := cat.Update(ctx, "swap", map[string]any{"cron": fmt.Sprintf("%d * * * * *", sec)}, 0)
		if err != nil {
			return fmt.Errorf("hot swap: edit %d: %w", i, err)
		}
		edited := time.Now()
		seen, err := wait(edits, "pickup")
		if err != nil {
			return err
		}
		fired, err := wait(decided, "fire")
		if err != nil {
			return err
		}
		pickup = append(pickup, max(seen.Sub(edited), 0))
		late = append(late, fired.Sub(sc.NextRunAt))
		// Drain stale notifications before the next edit.
		for len(edits) > 0 {
			<-edits
		}
	}
	fmt.Fprintf(out, "hot-swap: %d edits through the catalog service, daemon polling every %s: pickup p50 %s p99 %s; first fire decided after its time p50 %s p99 %s (goal ≤ 1s)\n",
		swaps, scheduler.DefaultPoll, percentile(pickup, 50).Round(time.Millisecond), percentile(pickup, 99).Round(time.Millisecond),
		percentile(late, 50).Round(time.Millisecond), percentile(late, 99).Round(time.Millisecond))
	return nil
}
