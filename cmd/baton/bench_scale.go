package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/emulator/gcs"
	"github.com/baton-cron/baton/shared/clock"
	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/memstore"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

func init() { benchCmd.AddCommand(newBenchScaleCmd()) }

// scaleFlags are `baton bench scale`'s settings.
type scaleFlags struct {
	schedules, shards, partitions int
	latency, taskLatency          time.Duration
	hotRangeCap                   float64
	contention, ramp              bool
}

func newBenchScaleCmd() *cobra.Command {
	var f scaleFlags
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "Deciding --schedules due in one minute with --partitions deciders over --shards virtual shards, against P=1, at a Firestore-like latency per operation",
		Long: `Runs the tick engine against shared/store/memstore, an in-memory store.Backend
that passes the storage conformance suite and sleeps --latency per store
operation (Firestore's latency, not the emulator's: FerretDB on SQLite
cannot hold 100,000 schedules at a realistic speed). It models Firestore's
documented limits: Aborted (112) when two writes to one document overlap
(--contention), a cap of --hot-range-cap writes a second into one range of
a time-ordered index (every index of mongostore.SchedulerIndexes on
schedules and runs that holds a time field, with the keys before that
field as the range's prefix: vshard splits a range by decider shard,
scheduleId by schedule), and, with --ramp, the
500/50/5 ramp of a new database. The tick lease is a real lease on
fake-gcs-server behind baton's GCS front. Cloud Tasks' CreateTask is an
in-memory test double at the edge, taking --task-latency per call and
deduplicating names as Cloud Tasks does.

--schedules schedules, all due at one fire time, are decided twice, each
time on a fresh store: by --partitions partitions at once (partition p
decides the virtual shards v with v mod P == p), then by one (P=1), for
the ratio. For each it reports, in seconds from the due time (the start of
the tick), when the last fire time was DECIDED (its nextRunAt advance
committed) and when it was ENQUEUED (its CreateTask answered), and the
writes per virtual shard, each of which must equal 2 x the shard's due
schedules (one run insert, one fenced advance).

The last line is key=value pairs: schedules= shards= partitions=
decided_s= enqueued_s= p1_decided_s= p1_enqueued_s= ratio= (P=1 decided
over P decided) writes_per_shard_ok= goal_ok= (decided within 60 s and
enqueued within 90 s, the issue's acceptance).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.schedules < 1 || f.shards < 1 || f.partitions < 1 || f.partitions > f.shards || f.latency < 0 || f.taskLatency < 0 || f.hotRangeCap < 0 {
				return usageError("bench scale: want --schedules ≥ 1, 1 ≤ --partitions ≤ --shards, --latency, --task-latency and --hot-range-cap ≥ 0")
			}
			if f.shards > schedule.MaxDeciderShards {
				return usageError("bench scale: --shards is at most %d", schedule.MaxDeciderShards)
			}
			// V is the process's, as BATON_DECIDER_SHARDS sets it in a
			// deployment: Normalize stamps each schedule's vshard with it,
			// and the partitions decide its shards.
			schedule.SetDeciderShards(f.shards)
			return benchScale(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	cmd.Flags().IntVar(&f.schedules, "schedules", 100000, "schedules due at one fire time")
	cmd.Flags().IntVar(&f.shards, "shards", 64, "virtual decider shards V")
	cmd.Flags().IntVar(&f.partitions, "partitions", 16, "partitions P deciding at once (P=1 runs too, for the ratio)")
	cmd.Flags().DurationVar(&f.latency, "latency", 25*time.Millisecond, "latency of every store operation")
	cmd.Flags().DurationVar(&f.taskLatency, "task-latency", 25*time.Millisecond, "latency of one Cloud Tasks CreateTask (the in-memory test double)")
	cmd.Flags().Float64Var(&f.hotRangeCap, "hot-range-cap", 500, "writes a second into one range of a time-ordered index (Firestore: 500); 0 turns the cap off")
	cmd.Flags().BoolVar(&f.contention, "contention", true, "answer Aborted (112) to overlapping writes of one document")
	cmd.Flags().BoolVar(&f.ramp, "ramp", false, "pace all writes to a new database's 500/50/5 ramp")
	return cmd
}

// decidePartition decides partition p of P at scheduleTime: the virtual
// shards v with v mod P == p, each under its own shard's tick lease
// (Engine.TickPartition, what a partition task runs). It is the one place
// the bench calls the deciders; P=1 goes through the same path, so the
// ratio compares partition counts, not two code paths.
func decidePartition(ctx context.Context, eng *scheduler.Engine, scheduleTime time.Time, p, partitions int) (*scheduler.Summary, error) {
	return eng.TickPartition(ctx, scheduleTime, p, partitions)
}

// scaleResult is one measured decision of every due schedule.
type scaleResult struct {
	partitions          int
	decided, enqueued   time.Duration // from the due time to the last advance / CreateTask
	advances, tasks     int           // fire times decided / runs enqueued
	writes              []int64       // per virtual shard
	due                 []int64       // due schedules per virtual shard
	aborts, paced       int64
	docsWritten, errors int
}

// shardsOK reports whether every shard's writes are 2 × its due schedules.
func (r *scaleResult) shardsOK() bool {
	for v := range r.writes {
		if r.writes[v] != 2*r.due[v] {
			return false
		}
	}
	return true
}

func benchScale(ctx context.Context, out io.Writer, f scaleFlags) error {
	g, err := gcs.Start(ctx, gcs.Options{})
	if err != nil {
		return err
	}
	defer g.Close() //nolint:contextcheck // Close shuts the emulator down on its own bounded context
	sc, err := g.Client(ctx)
	if err != nil {
		return err
	}
	defer sc.Close()
	fmt.Fprintf(out, "scale: %d schedules due at one fire time, V=%d virtual shards, %s per store operation, %s per CreateTask, contention %v, hot-range cap %.0f/s, ramp %v\n",
		f.schedules, f.shards, f.latency, f.taskLatency, f.contention, f.hotRangeCap, f.ramp)
	runs := []int{f.partitions}
	if f.partitions != 1 {
		runs = append(runs, 1)
	}
	results := map[int]*scaleResult{}
	for i, p := range runs {
		bucket := fmt.Sprintf("bench-scale-%d", i)
		if err := g.CreateBucket(ctx, bucket); err != nil {
			return err
		}
		leases := lease.NewManager(sc.Bucket(bucket), "leases/", lease.Options{Holder: fmt.Sprintf("bench-scale-p%d", p)})
		r, err := scaleOnce(ctx, f, p, leases)
		if err != nil {
			return err
		}
		results[p] = r
		fmt.Fprintf(out, "scale: P=%d: decided %d of %d fire times, last at %.2f s; enqueued %d runs, last at %.2f s; %d documents written; %d aborts (112) retried, %d writes paced by a hot range; %d errors\n",
			p, r.advances, f.schedules, r.decided.Seconds(), r.tasks, r.enqueued.Seconds(), r.docsWritten, r.aborts, r.paced, r.errors)
		lo, hi := minMax(r.writes)
		fmt.Fprintf(out, "scale: P=%d: writes per virtual shard %d..%d, each = 2 × its due schedules: %v\n", p, lo, hi, r.shardsOK())
		fmt.Fprintf(out, "scale: P=%d: writes/due by virtual shard:%s\n", p, shardList(r))
	}
	rp, r1 := results[f.partitions], results[1]
	ratio := 0.0
	if rp.decided > 0 {
		ratio = r1.decided.Seconds() / rp.decided.Seconds()
	}
	ok := rp.shardsOK() && r1.shardsOK()
	goal := rp.advances == f.schedules && rp.tasks == f.schedules && rp.decided <= time.Minute && rp.enqueued <= 90*time.Second
	if f.partitions != 1 {
		fmt.Fprintf(out, "scale: P=%d decided %.1f× faster than P=1\n", f.partitions, ratio)
	}
	fmt.Fprintf(out, "scale: goal with P=%d (all decided within 60 s, enqueued within 90 s): %s\n", f.partitions, passFail(goal))
	fmt.Fprintf(out, "schedules=%d shards=%d partitions=%d decided_s=%.2f enqueued_s=%.2f p1_decided_s=%.2f p1_enqueued_s=%.2f ratio=%.2f writes_per_shard_ok=%v goal_ok=%v\n",
		f.schedules, f.shards, f.partitions, rp.decided.Seconds(), rp.enqueued.Seconds(), r1.decided.Seconds(), r1.enqueued.Seconds(), ratio, ok, goal)
	return nil
}

// shardList is " v=writes/due" for every virtual shard.
func shardList(r *scaleResult) string {
	var b strings.Builder
	for v := range r.writes {
		fmt.Fprintf(&b, " %d=%d/%d", v, r.writes[v], r.due[v])
	}
	return b.String()
}

func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func minMax(xs []int64) (lo, hi int64) {
	for i, x := range xs {
		if i == 0 || x < lo {
			lo = x
		}
		if x > hi {
			hi = x
		}
	}
	return lo, hi
}

// scaleOnce loads a fresh store with f.schedules due schedules and decides
// them with partitions deciders at once.
func scaleOnce(ctx context.Context, f scaleFlags, partitions int, leases *lease.Manager) (*scaleResult, error) {
	r := &scaleResult{partitions: partitions, writes: make([]int64, f.shards), due: make([]int64, f.shards)}
	var mu sync.Mutex
	var start, lastAdvance time.Time
	var ranges []memstore.HotRange
	if f.hotRangeCap > 0 {
		ranges = scaleHotRanges(f.hotRangeCap)
	}
	st := memstore.New(memstore.Options{
		DefaultLatency: f.latency, Contention: f.contention, HotRanges: ranges, Ramp: f.ramp,
		OnWrite: func(w memstore.Write) {
			mu.Lock()
			defer mu.Unlock()
			if w.ScheduleID != "" {
				r.writes[schedule.DeciderShardOf(w.ScheduleID, f.shards)]++
			}
			r.docsWritten++
			if w.Collection == schedule.SchedulesCollection && w.Op == "fencedUpdate" {
				r.advances++
				lastAdvance = w.At
			}
		},
	})
	defer func() { _ = st.Close(context.WithoutCancel(ctx)) }()
	due := time.Now().UTC().Truncate(time.Minute)
	const batch = 10000
	docs := make([]any, 0, batch)
	for i := range f.schedules {
		id := fmt.Sprintf("s%07d", i)
		r.due[schedule.DeciderShardOf(id, f.shards)]++
		docs = append(docs, benchSchedule(id, "", noopTarget(), due, due.Add(-time.Hour)))
		if len(docs) == batch || i == f.schedules-1 {
			if err := st.Load(schedule.SchedulesCollection, docs...); err != nil {
				return nil, fmt.Errorf("bench scale: %w", err)
			}
			docs = docs[:0]
		}
	}
	tasks := &memTasks{latency: f.taskLatency, names: map[string]bool{}}
	eng, err := scheduler.New(scheduler.Config{Store: st, Leases: leases, Logger: slog.New(slog.DiscardHandler),
		Clock: clock.Func(func() time.Time { return due }), Tasks: tasks})
	if err != nil {
		return nil, err
	}
	start = time.Now()
	var wg sync.WaitGroup
	errs := make([]error, partitions)
	sums := make([]*scheduler.Summary, partitions)
	for p := range partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[p], errs[p] = decidePartition(ctx, eng, due, p, partitions)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, s := range sums {
		if s.Status != "ok" {
			return nil, fmt.Errorf("bench scale: a partition was skipped: %s", s.Reason)
		}
		r.errors += s.Errors
	}
	mu.Lock()
	defer mu.Unlock()
	runsEnqueued, lastEnqueue := tasks.done()
	r.tasks = runsEnqueued
	if !lastAdvance.IsZero() {
		r.decided = lastAdvance.Sub(start)
	}
	if !lastEnqueue.IsZero() {
		r.enqueued = lastEnqueue.Sub(start)
	}
	stats := st.Stats()
	r.aborts, r.paced = stats.Aborts, stats.Paced
	return r, nil
}

// scaleHotRanges is memstore's hot-range model of the real indexes: for
// every index of mongostore.SchedulerIndexes on schedules or runs whose
// keys hold a time field (a time.Time of schedule.Schedule or
// store.RunRecord), a range on the first such field with the keys before
// it as its prefix, exactly as the index orders its entries. So the bench
// models what a decision writes (the run insert's fireTime in history,
// all, by_status, by_source, history_status and waiting; its sweepAt;
// its createdAt in siblings; the advance's nextRunAt in due_vshard), each
// with the prefix its index really has, and an index added or changed
// later is modelled as it is declared. A prefix field the document lacks
// is null, as in Firestore's DENSE indexes; a time field it lacks (a
// run's groupAt, notifyAt, expireAt at insert) puts its entry outside any
// time range.
func scaleHotRanges(perSecond float64) []memstore.HotRange {
	times := map[string]map[string]bool{
		schedule.SchedulesCollection: timeFields(reflect.TypeFor[schedule.Schedule]()),
		schedule.RunsCollection:      timeFields(reflect.TypeFor[store.RunRecord]()),
	}
	var out []memstore.HotRange
	for _, ix := range mongostore.SchedulerIndexes {
		tf := times[ix.Collection]
		if tf == nil {
			continue
		}
		var prefix []string
		for _, k := range ix.Keys {
			if tf[k.Key] {
				out = append(out, memstore.HotRange{Collection: ix.Collection, Field: k.Key, Prefix: prefix, PerSecond: perSecond})
				break
			}
			prefix = append(prefix, k.Key)
		}
	}
	return out
}

// timeFields is the bson names of t's time.Time fields, inline structs
// included.
func timeFields(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("bson"), ",")
		switch {
		case strings.Contains(opts, "inline") && f.Type.Kind() == reflect.Struct:
			maps.Copy(out, timeFields(f.Type))
		case f.Type == reflect.TypeFor[time.Time]() && name != "" && name != "-":
			out[name] = true
		}
	}
	return out
}

// memTasks is an in-memory test double of Cloud Tasks' CreateTask, at the
// edge of the bench: each call takes latency, and a name that exists is
// success (Cloud Tasks answers ALREADY_EXISTS, which the real Dispatcher
// takes for success), so a duplicated decision enqueues nothing twice.
// Nothing is delivered: the bench measures deciding and enqueueing.
type memTasks struct {
	latency time.Duration
	mu      sync.Mutex
	names   map[string]bool
	runs    int
	last    time.Time
}

// Dispatch implements scheduler.Dispatcher.
func (m *memTasks) Dispatch(ctx context.Context, t scheduler.Task) error {
	if err := clock.Sleep(ctx, m.latency); err != nil {
		return fmt.Errorf("bench scale: create task %s: %w", t.Name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.names[t.Name] {
		m.names[t.Name] = true
		m.runs += len(t.RunIDs())
	}
	m.last = time.Now()
	return nil
}

// done is the runs enqueued and when the last CreateTask answered.
func (m *memTasks) done() (int, time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runs, m.last
}
