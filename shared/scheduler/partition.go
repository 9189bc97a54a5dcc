package scheduler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// Partitioned deciding (issue 28). Schedules are hashed onto V fixed
// virtual decider shards (schedule.DeciderShardOf; "decider shard", field
// vshard, because "shard" already names the job sharding of one schedule's
// runs). Each decider shard v has its own tick lease, leases/tick-<v>.json,
// and a schedule's fence is compared only with the epochs of its shard's
// lease. The Cloud Scheduler tick coordinates: it creates P partition tasks
// per schedule time, and partition p decides the shards v with v mod P == p,
// each under that shard's lease, skipping a shard someone else holds.
// Exclusion is per shard and run ids are deterministic, so P may change
// between ticks, or two partition tasks may run at once, without a fire time
// firing twice.

// tickShardPrefix starts the lease name of every decider shard.
const tickShardPrefix = "tick-"

// TickShardLease is the tick lease of decider shard v (object
// leases/tick-<v>.json). Its epoch fences the advances of the schedules of
// shard v only.
func TickShardLease(v int) string { return tickShardPrefix + strconv.Itoa(v) }

// IsTickShardLease reports whether lease name is a decider shard's
// (TickShardLease). Those live where the job leases do
// (lease.Options.AlsoInJobLeases): a partitioned tick takes one for each
// shard with something due, every minute, and in Firestore each is a
// write unit where in the bucket it is a Class A write (docs/cost.md).
// The single tick lease (TickLease) stays in the bucket.
func IsTickShardLease(name string) bool { return strings.HasPrefix(name, tickShardPrefix) }

// DefaultShardConcurrency is Config.ShardConcurrency's default: the
// decider shards one partition decides at once. With V=64 and P=16 a
// partition has 4; with P=1 the 64 shards are decided 4 at a time, each
// with DecideConcurrency decisions in flight.
const DefaultShardConcurrency = 4

// MaxPartitions bounds P: a partition with no shard would only cost a task.
func MaxPartitions() int { return schedule.DeciderShards() }

// PartitionShards is the decider shards partition p of n decides: every v
// in [0, V) with v mod n == p.
func PartitionShards(p, n int) []int {
	var out []int
	for v := p; v < schedule.DeciderShards(); v += n {
		out = append(out, v)
	}
	return out
}

// PartitionTask is one partition's share of one coordinating tick: the body
// of the task that calls Tick back with it.
type PartitionTask struct {
	// Name is the task id (PartitionTaskName).
	Name string `json:"-"`
	// ScheduleTime is the coordinating tick's X-CloudScheduler-ScheduleTime.
	ScheduleTime time.Time `json:"scheduleTime"`
	// Partition is p, in [0, Partitions).
	Partition int `json:"partition"`
	// Partitions is P.
	Partitions int `json:"partitions"`
}

// PartitionTaskName derives a partition task's id from (scheduleTime, p,
// P): a duplicated Cloud Scheduler tick (same schedule time) creates no
// partition task twice, while a change of P makes new names. It starts with
// a hash, as Cloud Tasks advises, so that names do not cluster.
func PartitionTaskName(scheduleTime time.Time, p, n int) string {
	h := sha256.Sum256([]byte(scheduleTime.UTC().Format(time.RFC3339Nano) + "\n" + strconv.Itoa(p) + "\n" + strconv.Itoa(n)))
	return "tick-" + hex.EncodeToString(h[:20])
}

// PartitionDispatcher creates partition tasks on Cloud Tasks (a queue whose
// target is the Tick function). A name that already exists is success.
type PartitionDispatcher interface {
	DispatchPartition(ctx context.Context, t PartitionTask) error
}

// CheckPartition validates (p, n) against this deployment's V.
func CheckPartition(p, n int) error {
	if n < 1 || n > MaxPartitions() {
		return fmt.Errorf("partitions %d: want 1 to %d (the decider shards, BATON_DECIDER_SHARDS)", n, MaxPartitions())
	}
	if p < 0 || p >= n {
		return fmt.Errorf("partition %d: want 0 to %d", p, n-1)
	}
	return nil
}

// CoordinateSummary is what a coordinating tick did.
type CoordinateSummary struct {
	// Status is "ok".
	Status string `json:"status"`
	// ScheduleTime names the tick's partition tasks.
	ScheduleTime time.Time `json:"scheduleTime"`
	// Partitions is P.
	Partitions int `json:"partitions"`
	// Created counts the partition tasks handed to the queue (an existing
	// name counts: a duplicated tick's).
	Created int `json:"created"`
	// Inline holds the partitions' summaries when there is no
	// PartitionDispatcher and the coordinator decided them itself, or the
	// one summary of its inline decide (Config.InlineShards).
	Inline []*Summary `json:"inline,omitempty"`
	// BusyShards is how many decider shards had something due when the
	// coordinator looked (Config.InlineShards); nil when it did not look.
	// Past InlineShards it stops counting, at InlineShards+1 or a little
	// more.
	BusyShards *int `json:"busyShards,omitempty"`
	// InlineError is why an inline decide failed, after which the
	// coordinator created the partition tasks after all.
	InlineError string `json:"inlineError,omitempty"`
	// Took is the wall time.
	Took string `json:"took"`
}

// Coordinate is the Cloud Scheduler tick of a partitioned deployment: it
// creates the n partition tasks of scheduleTime (a zero one is now,
// truncated to the minute, so that repeated manual calls in one minute
// dedupe too), whose deliveries call TickPartition. Without a
// PartitionDispatcher it runs them itself, one after another. It holds no
// lease, so a duplicated or slow coordinator costs n task creations, never
// a decision twice.
//
// With Config.InlineShards it first looks at every decider shard for one
// due schedule (a read unit each, as a partition would), and when at most
// InlineShards have something due it decides them itself, as the one
// partition of one (TickPartition(0, 1): each busy shard under its own
// lease, the sweeps of every shard), and creates no partition task: the
// runs of the whole minute then share Run tasks. Exclusion stays per shard,
// so an inline decide may overlap a partition task of an earlier tick, or a
// duplicated coordinator's, as two partitions of different P may. If the
// inline decide fails, the coordinator creates the partition tasks after
// all: they decide what is still due, with Cloud Tasks' redelivery.
func (e *Engine) Coordinate(ctx context.Context, scheduleTime time.Time, n int) (*CoordinateSummary, error) {
	return e.CoordinateVia(ctx, e.cfg.Partitions, scheduleTime, n)
}

// CoordinateVia is Coordinate creating the tasks through d instead of
// Config.Partitions (the Tick function opens its queue on the first
// request, which names its own URL); a nil d decides them here.
func (e *Engine) CoordinateVia(ctx context.Context, d PartitionDispatcher, scheduleTime time.Time, n int) (*CoordinateSummary, error) {
	start := time.Now()
	if err := CheckPartition(0, n); err != nil {
		return nil, fmt.Errorf("scheduler: coordinate: %w", err)
	}
	if scheduleTime.IsZero() {
		scheduleTime = e.now().UTC().Truncate(time.Minute)
	}
	sum := &CoordinateSummary{Status: "ok", ScheduleTime: scheduleTime.UTC(), Partitions: n}
	e.backfillOnce(ctx)
	if d != nil && e.cfg.InlineShards > 0 {
		now := e.now().UTC()
		quiet, busy := e.lookShards(ctx, now, e.cfg.InlineShards)
		sum.BusyShards = &busy
		if busy <= e.cfg.InlineShards {
			s, err := e.tickPartition(ctx, scheduleTime, 0, 1, now, quiet)
			if err == nil {
				sum.Took = time.Since(start).String()
				// The inline summary has its own line ("tick
				// partition"): logged once, not again inside this one.
				e.log.Info("coordinate", "summary", sum)
				sum.Inline = []*Summary{s}
				return sum, nil
			}
			sum.InlineError = err.Error()
			e.log.Warn("inline decide failed; creating the partition tasks", "err", err)
		}
	}
	if d == nil {
		for p := range n {
			s, err := e.TickPartition(ctx, scheduleTime, p, n)
			if err != nil {
				return nil, fmt.Errorf("scheduler: coordinate: %w", err)
			}
			sum.Inline = append(sum.Inline, s)
		}
		sum.Took = time.Since(start).String()
		return sum, nil
	}
	var (
		wg      sync.WaitGroup
		created atomic.Int64
		errMu   sync.Mutex
		errs    []error
	)
	for p := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := PartitionTask{Name: PartitionTaskName(scheduleTime, p, n), ScheduleTime: scheduleTime.UTC(), Partition: p, Partitions: n}
			if err := d.DispatchPartition(ctx, t); err != nil {
				errMu.Lock()
				errs = append(errs, fmt.Errorf("partition %d of %d: %w", p, n, err))
				errMu.Unlock()
				return
			}
			created.Add(1)
		}()
	}
	wg.Wait()
	sum.Created = int(created.Load())
	sum.Took = time.Since(start).String()
	if len(errs) > 0 {
		// Cloud Scheduler retries the tick with the same schedule time:
		// the partitions already created dedupe by name.
		return nil, fmt.Errorf("scheduler: coordinate: %w", errors.Join(errs...))
	}
	e.log.Info("coordinate", "summary", sum)
	return sum, nil
}

// backfillPage is the page of the decider-shard backfill.
const backfillPage = 500

// backfillOnce starts the decider-shard backfill
// (store.DeciderShardBackfiller) in the background on the first
// coordinating tick of this process, and again on a later tick after a
// failed pass. Schedules stored before decider shards have no vshard, and
// no partition's read sees them until it has run; waiting for it here
// would delay every schedule's tick by a pass over all of them (the first
// one after an upgrade writes each schedule once), so only those wait.
// Wait waits for it.
func (e *Engine) backfillOnce(ctx context.Context) {
	b, ok := e.cfg.Store.(store.DeciderShardBackfiller)
	if !ok || !e.backfilled.CompareAndSwap(false, true) {
		return
	}
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		n, err := b.BackfillDeciderShards(context.WithoutCancel(ctx), schedule.DeciderShards(), backfillPage)
		if err != nil {
			e.backfilled.Store(false)
			e.log.Error("decider shard backfill failed; the next coordinating tick resumes it", "written", n, "err", err)
			return
		}
		if n > 0 {
			e.log.Info("decider shard backfill", "written", n, "shards", schedule.DeciderShards())
		}
	}()
}

// TickPartition decides partition p of n: every decider shard v with
// v mod n == p, each under its own tick lease (TickShardLease), reading only
// that shard's due schedules (DueInShard). A shard whose lease another
// holder has is skipped, not waited on: that holder decides it. Deciding and
// enqueuing overlap: each page's committed runs are handed off while the
// next page is decided. Each partition then sweeps its shards' runs
// (sweep); the sweeps across shards and the notification deliveries run
// in partition 0 only. scheduleTime is the coordinating tick's; decisions use
// the engine's clock, as in Tick.
//
// An error means some shard could not be decided (other than held); the
// caller answers 500 so that Cloud Tasks redelivers the partition, whose
// second delivery decides what is still due.
func (e *Engine) TickPartition(ctx context.Context, scheduleTime time.Time, p, n int) (*Summary, error) {
	if err := CheckPartition(p, n); err != nil {
		return nil, fmt.Errorf("scheduler: tick partition: %w", err)
	}
	return e.tickPartition(ctx, scheduleTime, p, n, e.now().UTC(), nil)
}

// lookConcurrency bounds the coordinator's looks at the decider shards.
const lookConcurrency = 16

// lookShards looks at every decider shard for one schedule due at now
// (shardQuiet), and reports which are quiet and how many are busy. Once
// more than limit are busy the rest are not looked at (the partitions
// will look), so busy stops a little past limit and quiet is partial.
func (e *Engine) lookShards(ctx context.Context, now time.Time, limit int) (quiet []bool, busy int) {
	quiet = make([]bool, schedule.DeciderShards())
	var (
		wg    sync.WaitGroup
		nBusy atomic.Int64
		sem   = make(chan struct{}, lookConcurrency)
	)
	for v := range quiet {
		if nBusy.Load() > int64(limit) {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if e.shardQuiet(ctx, v, now) {
				quiet[v] = true
			} else {
				nBusy.Add(1)
			}
		}()
	}
	wg.Wait()
	return quiet, int(nBusy.Load())
}

// tickPartition is TickPartition deciding at now; quiet, when not nil,
// is the coordinator's look (lookShards) at now, which it does not repeat.
func (e *Engine) tickPartition(ctx context.Context, scheduleTime time.Time, p, n int, now time.Time, quiet []bool) (*Summary, error) {
	start := time.Now()
	read0, sched0 := e.readMeter()
	part := p
	sum := &Summary{Status: "ok", Now: now, Holder: e.cfg.Leases.Holder(), Partition: &part, Partitions: n}
	if !scheduleTime.IsZero() {
		st := scheduleTime.UTC()
		sum.ScheduleTime = &st
	}
	var (
		c                counters
		handing          sync.WaitGroup
		decided, skipped atomic.Int64
		nQuiet           atomic.Int64
		errMu            sync.Mutex
		errs             []error
		sem              = make(chan struct{}, e.cfg.ShardConcurrency)
		shards           sync.WaitGroup
		emit             func([]*scheduleWork)
		execWork         []*scheduleWork
		execMu           sync.Mutex
	)
	var (
		packMu     sync.Mutex
		packed     []*scheduleWork
		packedRuns int
	)
	hand := func(work []*scheduleWork) {
		handing.Add(1)
		go func() { defer handing.Done(); e.handOff(ctx, work, &c) }()
	}
	if e.cfg.Tasks != nil {
		// Hand off, never execute inline, and overlap with deciding: as
		// soon as the shards have decided a page of runs (TaskRuns), so
		// that they share tasks across shards (pageTasks); what is left
		// goes when the last shard is done.
		emit = func(work []*scheduleWork) {
			packMu.Lock()
			packed = append(packed, work...)
			for _, w := range work {
				packedRuns += len(w.runs)
			}
			var full []*scheduleWork
			if packedRuns >= e.cfg.TaskRuns {
				full, packed, packedRuns = packed, nil, 0
			}
			packMu.Unlock()
			if full != nil {
				hand(full)
			}
		}
	} else {
		emit = func(work []*scheduleWork) {
			execMu.Lock()
			execWork = append(execWork, work...)
			execMu.Unlock()
		}
	}
	retainBy := e.retainBy(scheduleTime, now)
	for _, v := range PartitionShards(p, n) {
		sem <- struct{}{}
		shards.Add(1)
		go func() {
			defer func() { <-sem; shards.Done() }()
			if (quiet != nil && quiet[v]) || (quiet == nil && e.shardQuiet(ctx, v, sum.Now)) {
				nQuiet.Add(1)
				return
			}
			held, err := e.decideShard(ctx, v, sum.Now, retainBy, &c, emit)
			switch {
			case held:
				skipped.Add(1)
			case err != nil:
				errMu.Lock()
				errs = append(errs, fmt.Errorf("decider shard %d: %w", v, err))
				errMu.Unlock()
			default:
				decided.Add(1)
			}
		}()
	}
	shards.Wait()
	if len(packed) > 0 {
		hand(packed)
	}
	handing.Wait()
	if len(execWork) > 0 {
		e.execute(ctx, execWork, &c)
	}
	sum.ShardsDecided, sum.ShardsSkipped, sum.ShardsQuiet = int(decided.Load()), int(skipped.Load()), int(nQuiet.Load())
	if len(errs) > 0 {
		read1, _ := e.readMeter()
		e.metrics.Tick(ctx, "failed", time.Since(start), read1-read0)
		return nil, fmt.Errorf("scheduler: tick partition %d of %d: %w", p, n, errors.Join(errs...))
	}
	// Each partition sweeps the runs of its own shards (and partition 0
	// the runs stored without one); partition 0 also runs the sweeps that
	// read across shards, and the notification deliveries.
	e.handOffOrExecute(ctx, e.sweep(ctx, &c, sum, sweepShards(p, n), p == 0), &c)
	if p == 0 {
		e.deliverPendingBackground(ctx)
	}
	e.finishTick(ctx, "tick partition", sum, &c, start, read0, sched0)
	return sum, nil
}

// shardQuiet reports whether decider shard v has nothing due at now: one
// query of at most one schedule, without the shard's lease. A quiet shard
// is left alone, and its lease is not taken: the lease's acquire is a
// Cloud Storage write (Class A, $5 per million) and its release a
// Firestore write, against a read unit ($0.05 per million) for the look,
// and most shards of a small deployment have nothing due most minutes
// (docs/cost.md). Only reading, it can decide nothing twice: a schedule
// that falls due just after the look is seen by the next tick, as one
// that falls due just after the due query would be. An error is not
// quiet: the shard is decided as before, under its lease.
func (e *Engine) shardQuiet(ctx context.Context, v int, now time.Time) bool {
	page, _, err := e.schedules.DueInShard(ctx, v, now, 1, "")
	return err == nil && len(page) == 0
}

// retainMargin is what a lapsing shard lease keeps between its expiry and
// the next tick: Cloud Scheduler's delivery and the clocks of two
// instances.
const retainMargin = 5 * time.Second

// retainBy is the time before which a shard decided by the tick of
// scheduleTime (the minute of now when zero: a manual tick) may be left to
// lapse (Config.LapseShardLeases): its lease, last written no later than
// the retain, expires a TTL and the skew after that, and must be gone
// before the next minute's tick (with retainMargin to spare), or that
// tick, on another instance, would find the shard held and skip it. A
// late decide (a partition task redelivered 35 s into the minute, a
// retried tick) releases. Zero when shard leases do not lapse.
func (e *Engine) retainBy(scheduleTime, now time.Time) time.Time {
	if !e.cfg.LapseShardLeases {
		return time.Time{}
	}
	st := scheduleTime
	if st.IsZero() {
		st = now.Truncate(time.Minute)
	}
	return st.Add(time.Minute - e.cfg.TickLeaseTTL - e.cfg.Leases.Skew() - retainMargin)
}

// decideShard decides decider shard v under its tick lease: take the lease
// (held: report it and do nothing), decide its due schedules page by page,
// emitting each page's committed work, and release the lease as soon as
// the decisions are committed, or, when it would lapse before the next
// minute's tick (retainBy), leave it to lapse (Config.LapseShardLeases).
func (e *Engine) decideShard(ctx context.Context, v int, now, retainBy time.Time, c *counters, emit func([]*scheduleWork)) (held bool, err error) {
	l, err := e.cfg.Leases.Acquire(ctx, TickShardLease(v), e.cfg.TickLeaseTTL)
	if err != nil {
		var h *lease.HeldError
		if errors.As(err, &h) {
			return true, nil
		}
		return false, fmt.Errorf("take its tick lease: %w", err)
	}
	due := func(ctx context.Context, token string) ([]schedule.Schedule, string, error) {
		return e.schedules.DueInShard(ctx, v, now, e.cfg.PageSize, token)
	}
	_, derr := e.decidePages(l.Context(), l, now, c, due, emit) //nolint:contextcheck // bounded by the shard's lease, as Tick's decide
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.TickLeaseTTL)
	if derr == nil && e.now().Before(retainBy) {
		if rerr := l.Retain(rctx); rerr != nil {
			e.log.Warn("decider shard lease retain failed", "shard", v, "err", rerr)
		}
	} else if rerr := l.Release(rctx); rerr != nil {
		e.log.Warn("decider shard lease release failed", "shard", v, "err", rerr)
	}
	cancel()
	if derr != nil {
		return false, derr
	}
	return false, nil
}
