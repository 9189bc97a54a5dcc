package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/baton-cron/baton/internal/skipscan"
	"github.com/baton-cron/baton/shared/clock"
	"github.com/baton-cron/baton/shared/store"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/storage"
	"github.com/spf13/cobra"
	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/baton-cron/baton/emulator/gcs"
	"github.com/baton-cron/baton/emulator/mongo"
	"github.com/baton-cron/baton/emulator/tasks"
	"github.com/baton-cron/baton/functions"
	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store/mongostore"
	"github.com/baton-cron/baton/shared/taskqueue"
)

func init() { benchCmd.AddCommand(newBenchTickCmd()) }

func newBenchTickCmd() *cobra.Command {
	var (
		total, due, scanPage, timed, swaps int
		slow                               time.Duration
	)
	cmd := &cobra.Command{
		Use:   "tick",
		Short: "Reads per tick against a skip-paginated scan, tick time with the hand-off against the inline path, daemon hot-swap latency",
		Long: `Runs against in-process emulators (FerretDB on SQLite behind baton's front,
fake-gcs-server, and emulator/tasks for Cloud Tasks), in three parts:

  reads     --schedules N schedules, --due of them due. One tick; the meter
            counts the schedule documents it reads. Baseline in the same run:
            a skip-paginated scan of all schedules (--scan-page per page),
            whose skipped documents Firestore bills as read.
  time      one tick over --timed due schedules, on a fresh database each:
              inline    noop targets, no Dispatcher: the tick decides, takes
                        the job leases, executes and sweeps (the old path;
                        the baseline);
              floor     only the writes a decision must make (one run insert
                        and one nextRunAt update per schedule), done directly;
              hand-off  noop targets, the tick hands each run to a Cloud
                        Tasks queue on the emulator, whose tasks call the
                        Run function (functions.Mux, /Run) on a real HTTP
                        server, so runs execute while the tick is measured;
              slow      the same hand-off with sleep targets of --slow.
            For each: the tick's wall time, per due schedule, the database
            documents it wrote per due schedule, and its enqueues; for the
            hand-offs also when the last run finished (the execution plane's
            throughput, not a goal). Goal: hand-off ≥ 5× faster per schedule
            than inline, and its time independent of the targets' duration.
  hot-swap  a daemon (polling, as with the emulator) and --swaps edits of a
            schedule through the catalog service (the Schedules API's
            logic): pickup = edit returned → the daemon saw it; lateness =
            first fire of the new expression decided − its fire time.

FerretDB on SQLite filters in Go, so wall times of the reads part grow with
the total; document counts are the measure there. The last line is
key=value pairs: reads_ratio_skip_over_cursor=<skip-scan reads / tick
schedule reads> tick_ratio_inline_over_handoff=<inline / hand-off tick time
per schedule> tick_ratio_slow_over_noop_handoff=<slow / noop hand-off tick
time>.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if total < 1 || due < 1 || due > total || scanPage < 1 || scanPage > 1000 || timed < 1 || swaps < 0 || slow <= 0 || slow > maxSlow {
				return usageError("bench tick: want 1 ≤ --due ≤ --schedules, 1 ≤ --scan-page ≤ 1000, --timed ≥ 1, --swaps ≥ 0, 0 < --slow ≤ %s", maxSlow)
			}
			return benchTick(cmd.Context(), cmd.OutOrStdout(), total, due, scanPage, timed, swaps, slow)
		},
	}
	cmd.Flags().IntVar(&total, "schedules", 100000, "schedules in the reads part")
	cmd.Flags().IntVar(&due, "due", 100, "due schedules in the reads part")
	cmd.Flags().IntVar(&scanPage, "scan-page", 1000, "page size of the skip-paginated baseline scan (max 1000)")
	cmd.Flags().IntVar(&timed, "timed", 1000, "due schedules in each case of the time part")
	cmd.Flags().DurationVar(&slow, "slow", 2*time.Second, "duration of the sleep targets in the time part's slow hand-off")
	cmd.Flags().IntVar(&swaps, "swaps", 20, "edits in the hot-swap part (0 skips it)")
	return cmd
}

// maxSlow keeps a slow run well inside the task's dispatch deadline, so that
// no delivery is cut off and redelivered, which would measure the queue's
// retries instead of the runs.
const maxSlow = 10 * time.Minute

type tickBench struct {
	mongo *mongo.Server
	gcs   *gcs.Server
	raw   *driver.Client // unmetered, beside the store: bulk setup and the skip baseline
	n     int
}

// rawDB is a plain driver handle on database name of the bench's
// emulator; the store has none, so that production code cannot step
// around its meter.
func (b *tickBench) rawDB(name string) (*driver.Database, error) {
	if b.raw == nil {
		norm, err := mongostore.NormalizeURI(b.mongo.URI())
		if err != nil {
			return nil, err
		}
		if b.raw, err = driver.Connect(options.Client().ApplyURI(norm)); err != nil {
			return nil, fmt.Errorf("bench tick: connect: %w", err)
		}
	}
	return b.raw.Database(name), nil
}

// benchDB is one fresh database and bucket.
type benchDB struct {
	name    string // database
	st      *mongostore.Store
	raw     *driver.Database // the same database, unmetered: setup and the skip baseline
	storage *storage.Client
	bucket  string
	leases  *lease.Manager
}

func (b *tickBench) open(ctx context.Context) (*benchDB, error) {
	b.n++
	db := &benchDB{name: fmt.Sprintf("bench_tick_%d", b.n), bucket: fmt.Sprintf("bench-tick-%d", b.n)}
	var err error
	if db.st, err = mongostore.Open(ctx, b.mongo.URI(), mongostore.Options{Database: db.name}); err != nil {
		return nil, err
	}
	if err := db.st.EnsureIndexes(ctx, mongostore.SchedulerIndexes...); err != nil {
		_ = db.st.Close(ctx)
		return nil, err
	}
	if db.raw, err = b.rawDB(db.name); err != nil {
		_ = db.st.Close(ctx)
		return nil, err
	}
	if err := b.gcs.CreateBucket(ctx, db.bucket); err != nil {
		_ = db.st.Close(ctx)
		return nil, err
	}
	if db.storage, err = b.gcs.Client(ctx); err != nil {
		_ = db.st.Close(ctx)
		return nil, err
	}
	db.leases = lease.NewManager(db.storage.Bucket(db.bucket), "leases/", lease.Options{Holder: "bench"})
	return db, nil
}

func (db *benchDB) close(ctx context.Context) {
	_ = db.st.Close(ctx)
	_ = db.storage.Close()
}

func noopTarget() schedule.Target {
	return schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}
}

func sleepTarget(d time.Duration) schedule.Target {
	return schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "sleep", Args: map[string]string{"duration": d.String()}}}
}

func benchSchedule(id string, overlap schedule.Overlap, target schedule.Target, next time.Time, now time.Time) schedule.Schedule {
	s := schedule.Schedule{ID: id, Cron: "* * * * *", Overlap: overlap, Target: target}
	if err := s.Normalize(schedule.ValidateOptions{}); err != nil {
		panic(err)
	}
	s.NextRunAt, s.Enabled, s.Version, s.CreatedAt, s.UpdatedAt = next, true, 1, now, now
	return s
}

// insertSchedules writes n schedules with raw InsertMany batches (setup
// only: FerretDB on SQLite is slow for one-by-one inserts, and raw writes
// stay off the meter); due of them are due at now.
func insertSchedules(ctx context.Context, db *driver.Database, n, due int, overlap schedule.Overlap, target schedule.Target, now time.Time) error {
	coll := db.Collection(schedule.SchedulesCollection)
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
		docs = append(docs, benchSchedule(fmt.Sprintf("s%07d", i), overlap, target, next.Truncate(time.Second), now))
		if len(docs) == batch || i == n-1 {
			if _, err := coll.InsertMany(ctx, docs); err != nil {
				return fmt.Errorf("insert schedules: %w", err)
			}
			docs = docs[:0]
		}
	}
	return nil
}

func benchTick(ctx context.Context, out io.Writer, total, due, scanPage, timed, swaps int, slow time.Duration) error {
	var b tickBench
	var err error
	if b.mongo, err = mongo.Start(ctx, mongo.Options{}); err != nil {
		return err
	}
	defer b.mongo.Close()
	defer func() {
		if b.raw != nil {
			_ = b.raw.Disconnect(context.WithoutCancel(ctx))
		}
	}()
	if b.gcs, err = gcs.Start(ctx, gcs.Options{}); err != nil {
		return err
	}
	defer b.gcs.Close() //nolint:contextcheck // Close shuts the emulator down on its own bounded context, so cleanup runs even after ctx is cancelled
	// Ten seconds past a minute: the due schedules' fire time (the minute)
	// is on time.
	now := time.Now().UTC().Truncate(time.Minute).Add(10 * time.Second)

	// Part 1: reads per tick.
	db, err := b.open(ctx)
	if err != nil {
		return err
	}
	t := time.Now()
	// allow: the reads part measures deciding; allow runs execute without
	// job leases or misfire checks, whose conditional point writes
	// FerretDB on SQLite (which pushes down only a lone _id filter)
	// evaluates by scanning the whole collection.
	if err := insertSchedules(ctx, db.raw, total, due, schedule.OverlapAllow, noopTarget(), now); err != nil {
		return err
	}
	fmt.Fprintf(out, "setup: %d schedules (%d due) inserted in %s\n", total, due, time.Since(t).Round(time.Millisecond))
	eng, err := scheduler.New(scheduler.Config{Store: db.st, Leases: db.leases, Clock: clock.Func(func() time.Time { return now })})
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
	t = time.Now()
	seen, skipReads, err := skipscan.Scan(ctx, db.raw.Collection(schedule.SchedulesCollection), "nextRunAt", scanPage)
	if err != nil {
		return err
	}
	skipTook := time.Since(t)
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
	db.close(ctx)

	// Part 2: time per tick, the hand-off against the inline path.
	inline, err := b.timeInline(ctx, timed, now)
	if err != nil {
		return err
	}
	inline.print(out, fmt.Sprintf("inline (no Dispatcher: decide, job leases, execution, sweep), %d due noop schedules", timed), timed)
	floor, byID, err := b.timeWritesAlone(ctx, timed, now)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "time: floor, a decision's two writes alone, one schedule after another: %s (%.2f ms per schedule); with the nextRunAt advance filtered by _id alone: %s (%.2f ms per schedule)\n",
		floor.Round(time.Millisecond), perMS(floor, timed), byID.Round(time.Millisecond), perMS(byID, timed))
	noop, err := b.timeHandOff(ctx, timed, now, noopTarget(), false)
	if err != nil {
		return err
	}
	noop.print(out, fmt.Sprintf("hand-off (Cloud Tasks emulator → /Run), %d due noop schedules", timed), timed)
	slowT, err := b.timeHandOff(ctx, timed, now, sleepTarget(slow), false)
	if err != nil {
		return err
	}
	slowT.print(out, fmt.Sprintf("hand-off (Cloud Tasks emulator → /Run), %d due sleep %s schedules", timed, slow), timed)
	alone, err := b.timeHandOff(ctx, timed, now, noopTarget(), true)
	if err != nil {
		return err
	}
	alone.print(out, fmt.Sprintf("diagnostic: hand-off with the queue paused, %d due noop schedules", timed), timed)
	inlineOverHandOff := inline.took.Seconds() / noop.took.Seconds()
	slowOverNoop := slowT.took.Seconds() / noop.took.Seconds()
	verdict = "PASS"
	if inlineOverHandOff < 5 {
		verdict = "FAIL"
	}
	fmt.Fprintf(out, "time: per due schedule, inline/hand-off = %.2f (goal ≥ 5: %s); hand-off slow/noop = %.2f (targets %s vs noop); hand-off/floor = %.2f; hand-off/paused hand-off = %.2f\n",
		inlineOverHandOff, verdict, slowOverNoop, slow, noop.took.Seconds()/floor.Seconds(), noop.took.Seconds()/alone.took.Seconds())

	// Part 3: daemon hot-swap latency.
	if swaps > 0 {
		if err := benchHotSwap(ctx, out, &b, swaps); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "reads_ratio_skip_over_cursor=%.1f tick_ratio_inline_over_handoff=%.2f tick_ratio_slow_over_noop_handoff=%.2f\n",
		float64(skipReads)/float64(max(tickReads, 1)), inlineOverHandOff, slowOverNoop)
	return nil
}

func perMS(d time.Duration, n int) float64 { return float64(d.Microseconds()) / 1000 / float64(n) }

// tickTiming is one measured tick of the time part.
type tickTiming struct {
	took   time.Duration // the tick's wall time
	writes int64         // database documents the tick wrote
	sum    *scheduler.Summary
	// Hand-off only. The tick's phases, seen from its Dispatcher: deciding
	// until the first enqueue, enqueueing until the last one returned,
	// sweeping after; perEnqueue is one CreateTask's mean latency.
	handOff, paused        bool
	decide, enqueue, sweep time.Duration
	perEnqueue             time.Duration
	finished               time.Duration // tick start → the last task done
	runWrites              int64         // documents the Run function wrote
	attempts               int           // deliveries, retries included
	runs                   string        // the runs by status, afterwards
}

func (r *tickTiming) print(out io.Writer, what string, n int) {
	fmt.Fprintf(out, "time: %s: tick %s (%.2f ms per schedule), %.2f documents written and %.2f read per schedule, %d enqueued, %d errors\n",
		what, r.took.Round(time.Millisecond), perMS(r.took, n), float64(r.writes)/float64(n), float64(r.sum.DocsRead)/float64(n), r.sum.Enqueued, r.sum.Errors)
	if !r.handOff {
		return
	}
	fmt.Fprintf(out, "time:   the tick: deciding %s, enqueueing %s (CreateTask %.1f ms each, %d at a time), sweeping %s\n",
		r.decide.Round(time.Millisecond), r.enqueue.Round(time.Millisecond), float64(r.perEnqueue.Microseconds())/1000, handOffConcurrency, r.sweep.Round(time.Millisecond))
	if r.paused {
		fmt.Fprintf(out, "time:   its runs: left queued (the queue was paused: nothing executed during the tick)\n")
		return
	}
	fmt.Fprintf(out, "time:   its runs: every task done %s after the tick started; %d deliveries; Run's acknowledged writes %.2f documents per run; runs: %s\n",
		r.finished.Round(time.Millisecond), r.attempts, float64(r.runWrites)/float64(n), r.runs)
}

// handOffConcurrency is shared/scheduler's bound on one tick's enqueues in
// flight (unexported there), for the report.
const handOffConcurrency = 16

// timedDispatcher sees the tick's phases from outside the engine: before
// its first Dispatch the tick was deciding, after its last one it sweeps.
type timedDispatcher struct {
	scheduler.Dispatcher
	mu          sync.Mutex
	first, last time.Time
	busy        time.Duration
	n           int
	// created counts the tasks the queue took (a page carries the runs
	// of up to 100 schedules).
	created int
}

// Dispatch passes t on and records when it started and ended.
func (d *timedDispatcher) Dispatch(ctx context.Context, t scheduler.Task) error {
	start := time.Now()
	err := d.Dispatcher.Dispatch(ctx, t)
	end := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.first.IsZero() || start.Before(d.first) {
		d.first = start
	}
	if end.After(d.last) {
		d.last = end
	}
	d.busy += end.Sub(start)
	d.n++
	if err == nil {
		d.created++
	}
	return err
}

// pauseQueue pauses the bench queue through the official client, as an
// operator would with gcloud tasks queues pause.
func pauseQueue(ctx context.Context, ts *tasks.Server) error {
	c, err := ts.Client(ctx)
	if err != nil {
		return fmt.Errorf("bench tick: %w", err)
	}
	defer c.Close()
	if _, err := c.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: benchQueueName}); err != nil {
		return fmt.Errorf("bench tick: pause queue: %w", err)
	}
	return nil
}

// timeInline is the old path and the baseline: with no Dispatcher, Tick
// executes every run itself and returns when the last one is done.
func (b *tickBench) timeInline(ctx context.Context, n int, now time.Time) (*tickTiming, error) {
	db, err := b.open(ctx)
	if err != nil {
		return nil, err
	}
	defer db.close(ctx)
	if err := insertSchedules(ctx, db.raw, n, n, "", noopTarget(), now); err != nil {
		return nil, err
	}
	eng, err := scheduler.New(scheduler.Config{Store: db.st, Leases: db.leases, Clock: clock.Func(func() time.Time { return now })})
	if err != nil {
		return nil, err
	}
	w0 := db.st.Meter().Writes()
	t := time.Now()
	sum, err := eng.Tick(ctx, time.Time{})
	if err != nil {
		return nil, err
	}
	r := &tickTiming{took: time.Since(t), writes: db.st.Meter().Writes() - w0, sum: sum}
	if sum.Succeeded != n {
		return nil, fmt.Errorf("bench tick: inline: %d of %d noop runs succeeded: %+v", sum.Succeeded, n, sum)
	}
	return r, nil
}

// timeWritesAlone makes the two writes every decision needs, and nothing
// else, one schedule after another, in two passes over the same due
// schedules: first as decideOne makes them (the run insert, and the
// nextRunAt advance conditional on the values read and fenced by the tick
// lease's epoch), then with the advance filtered by _id alone. FerretDB on
// SQLite pushes down only a lone _id filter, so the two passes tell what
// the conditions cost on this emulator, which Firestore's indexes do not.
func (b *tickBench) timeWritesAlone(ctx context.Context, n int, now time.Time) (fenced, byID time.Duration, err error) {
	db, err := b.open(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer db.close(ctx)
	if err := insertSchedules(ctx, db.raw, n, n, "", noopTarget(), now); err != nil {
		return 0, 0, err
	}
	runs, scheds := db.st.Collection(schedule.RunsCollection), db.st.Collection(schedule.SchedulesCollection)
	due := now.Truncate(time.Minute)
	pass := func(run string, advance func(id string) error) (time.Duration, error) {
		t := time.Now()
		for i := range n {
			id := fmt.Sprintf("s%07d", i)
			if _, err := runs.InsertIdempotent(ctx, bson.D{{Key: "_id", Value: id + run}, {Key: "scheduleId", Value: id}, {Key: "status", Value: "pending"}}); err != nil {
				return 0, err
			}
			if err := advance(id); err != nil {
				return 0, err
			}
		}
		return time.Since(t), nil
	}
	if fenced, err = pass("@fenced", func(id string) error {
		return scheds.FencedUpdate(ctx, bson.D{{Key: "_id", Value: id}, {Key: "nextRunAt", Value: due}, {Key: "version", Value: 1}},
			store.Fence{Epoch: 1}, bson.D{{Key: "$set", Value: bson.D{{Key: "nextRunAt", Value: due.Add(time.Minute)}}}})
	}); err != nil {
		return 0, 0, err
	}
	if byID, err = pass("@id", func(id string) error {
		return scheds.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: bson.D{{Key: "nextRunAt", Value: due.Add(2 * time.Minute)}}}})
	}); err != nil {
		return 0, 0, err
	}
	return fenced, byID, nil
}

// benchMaxAttempts is the bench queue's max_attempts: a task whose
// attempt number reaches it and fails is dropped.
const benchMaxAttempts = 5

// benchQueueName is the hand-off's queue on the Cloud Tasks emulator.
const benchQueueName = "projects/bench/locations/local/queues/baton-runs"

// benchQueue is the local stack's queue (emulator/stack): the rate limits
// a developer's runs are delivered under, so the execution plane's time is
// the one `baton local` would show.
func benchQueue() *cloudtaskspb.Queue {
	return &cloudtaskspb.Queue{
		Name: benchQueueName,
		RetryConfig: &cloudtaskspb.RetryConfig{
			MaxAttempts: benchMaxAttempts, MinBackoff: durationpb.New(time.Second), MaxBackoff: durationpb.New(30 * time.Second), MaxDoublings: 4,
		},
		RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 500, MaxConcurrentDispatches: 200},
	}
}

// timeHandOff measures a tick that hands its runs to a Cloud Tasks queue
// (emulator/tasks) whose tasks call the real Run function over HTTP, wired
// as emulator/stack wires it, then waits until every run has finished.
// With paused, the queue delivers nothing while the tick runs, and the runs
// are left queued: a diagnostic that separates the tick's own cost from the
// execution plane's, which on this emulator shares one process, two cores
// and one write lock with the tick.
func (b *tickBench) timeHandOff(ctx context.Context, n int, now time.Time, target schedule.Target, paused bool) (*tickTiming, error) {
	db, err := b.open(ctx)
	if err != nil {
		return nil, err
	}
	defer db.close(ctx)
	if err := insertSchedules(ctx, db.raw, n, n, "", target, now); err != nil {
		return nil, err
	}
	frozen := clock.Func(func() time.Time { return now })
	// Run is another function instance in the cloud, with its own
	// connection; here its own store on the same database, whose meter
	// keeps the runs' writes out of the tick's count.
	runSt, err := mongostore.Open(ctx, b.mongo.URI(), mongostore.Options{Database: db.name})
	if err != nil {
		return nil, err
	}
	defer runSt.Close(ctx)
	ts, err := tasks.Start(ctx, tasks.Options{})
	if err != nil {
		return nil, fmt.Errorf("bench tick: %w", err)
	}
	defer ts.Close()
	if _, err := ts.CreateQueue(ctx, benchQueue()); err != nil {
		return nil, fmt.Errorf("bench tick: create queue: %w", err)
	}
	if paused {
		if err := pauseQueue(ctx, ts); err != nil {
			return nil, err
		}
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench tick: listen: %w", err)
	}
	q, err := taskqueue.Open(ctx, taskqueue.Config{Queue: benchQueueName, URL: "http://" + ln.Addr().String() + "/Run"}, ts.Addr())
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("bench tick: %w", err)
	}
	defer q.Close()
	mux, err := functions.Mux(&functions.Deps{
		Store: runSt, Storage: db.storage, Bucket: db.bucket, Logger: slog.New(slog.DiscardHandler), Clock: frozen, Tasks: q,
	})
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("bench tick: %w", err)
	}
	// No Write timeout: the mux serves Run, which holds its request while
	// the run executes.
	hs := httpapi.NewServer(mux, httpapi.DefaultTimeouts)
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()

	td := &timedDispatcher{Dispatcher: q}
	eng, err := scheduler.New(scheduler.Config{Store: db.st, Leases: db.leases, Clock: frozen, Tasks: td})
	if err != nil {
		return nil, err
	}
	w0 := db.st.Meter().Writes()
	t := time.Now()
	sum, err := eng.Tick(ctx, time.Time{})
	if err != nil {
		return nil, err
	}
	end := time.Now()
	r := &tickTiming{took: end.Sub(t), writes: db.st.Meter().Writes() - w0, sum: sum, handOff: true, paused: paused}
	if sum.Decided != n {
		return nil, fmt.Errorf("bench tick: hand-off: %d of %d runs decided: %+v", sum.Decided, n, sum)
	}
	r.decide, r.enqueue, r.sweep = td.first.Sub(t), td.last.Sub(td.first), end.Sub(td.last)
	r.perEnqueue = td.busy / time.Duration(td.n)
	if paused {
		return r, nil
	}

	// The tasks the queue took (pages of the schedules' runs); an enqueue
	// that failed is reported, not waited for (the sweep would recover its
	// runs after the reservation). A task is done when a delivery answered
	// 2xx, or when its last attempt failed and the queue dropped it.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	var last time.Time
	for done := map[string]bool{}; len(done) < td.created; {
		as, err := ts.WaitAttempts(wctx, r.attempts+1)
		if err != nil {
			return nil, fmt.Errorf("bench tick: hand-off: %d of %d tasks done: %w", len(done), sum.Enqueued, err)
		}
		for _, a := range as[r.attempts:] {
			if a.OK() || a.Number >= benchMaxAttempts {
				done[a.Task] = true
				if a.End.After(last) {
					last = a.End
				}
			}
		}
		r.attempts = len(as)
	}
	r.finished = last.Sub(t)
	r.runWrites = runSt.Meter().Writes()
	if r.runs, err = runStatuses(ctx, db.raw); err != nil {
		return nil, fmt.Errorf("bench tick: hand-off: %w", err)
	}
	return r, nil
}

// runStatuses says what became of the runs: how many have each status,
// and, when some did not succeed, the first such run's error.
func runStatuses(ctx context.Context, db *driver.Database) (string, error) {
	cur, err := db.Collection(schedule.RunsCollection).Find(ctx, bson.D{})
	if err != nil {
		return "", fmt.Errorf("read runs: %w", err)
	}
	var runs []schedule.Run
	if err := cur.All(ctx, &runs); err != nil {
		return "", fmt.Errorf("read runs: %w", err)
	}
	byStatus := map[schedule.RunStatus]int{}
	example := ""
	for _, r := range runs {
		byStatus[r.Status]++
		if r.Status != schedule.RunSucceeded && example == "" {
			example = fmt.Sprintf("; run %s is %s: %q", r.ID, r.Status, r.Error+r.Reason)
		}
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(byStatus)) {
		parts = append(parts, fmt.Sprintf("%d %s", byStatus[k], k))
	}
	return strings.Join(parts, ", ") + example, nil
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

func benchHotSwap(ctx context.Context, out io.Writer, b *tickBench, swaps int) (retErr error) {
	db, err := b.open(ctx)
	if err != nil {
		return err
	}
	defer db.close(ctx)
	st, leases := db.st, db.leases
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
	defer func() {
		cancel()
		// Run returns nil when cancelled; anything else is the daemon
		// failing under the bench, which its numbers must not hide.
		if err := <-done; err != nil && retErr == nil {
			retErr = fmt.Errorf("hot swap: daemon: %w", err)
		}
	}()
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
