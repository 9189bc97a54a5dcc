package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/emulator/gcs"
	"github.com/baton-cron/baton/emulator/mongo"
	"github.com/baton-cron/baton/emulator/stack"
	"github.com/baton-cron/baton/shared/clock"
	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/cost"
	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/logging"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

func init() { benchCmd.AddCommand(newBenchCostCmd()) }

// costOptions shape `baton bench cost`.
type costOptions struct {
	// Schedules is the number of http schedules of the headline phase;
	// Fires how often each fires.
	Schedules, Fires int
	// Every is their period (a seconds-level cron), Tick the tick's.
	Every, Tick time.Duration
	// Mix runs the second phase (every kind of schedule).
	Mix bool
	// PerTick is how many runs one production tick decides, to share the
	// tick's own cost among them.
	PerTick int
	// Partitions is P, the partitions of a tick (Terraform's
	// decider_partitions, 8 by default): the tick is a coordinator that
	// creates P partition tasks, each deciding its decider shards under
	// their leases. 0 decides in the tick under one lease.
	Partitions int
	// InlineShards is BATON_INLINE_SHARDS on the partitioned stacks: a
	// coordinating tick with at most this many busy decider shards
	// decides them itself; 0 always creates the partition tasks.
	InlineShards int
	// LapseShardLeases is BATON_LAPSE_SHARD_LEASES on the partitioned
	// stacks: the functions' default, true (baton local's is false).
	LapseShardLeases bool
	// Compute is the Run function's shape; Concurrencies the concurrency
	// levels the compute part is priced at besides Compute's own.
	Compute       cost.Compute
	Concurrencies []int
	// Retention is history.keep's default (Terraform's history_keep).
	Retention time.Duration
	// Cheap are the cheapest documented settings, priced on the allow
	// phase: Run concurrency, the shortest history.keep, log_level=warn.
	CheapConcurrency int
	CheapRetention   time.Duration
	// CheapPartitions is decider_partitions at the cheapest settings: 0,
	// one tick lease and no partition tasks, which is what a deployment
	// that one decider keeps up with (docs/deploy.md, "Sizing") needs.
	// The allow phase runs on a stack of its own with it.
	CheapPartitions int
	// LeaseStore is where the job leases live (Terraform's
	// job_lease_store); CompareLeaseStore runs the http phase again on a
	// second stack with the other store, so both are priced in one run.
	LeaseStore        string
	CompareLeaseStore bool
	// IDLength pads the http and allow phases' schedule ids to this many
	// characters (0 leaves them as short as they are). A run's _id is
	// its schedule's id and fire time, and it is in the run document and
	// in every one of its index entries, so the id's length moves a
	// write across a 1 KiB write unit: the bill depends on it.
	IDLength int
}

// maxScheduleID is the longest schedule id schedule.IDPattern takes.
const maxScheduleID = 63

// benchID is the id of the i-th schedule of a phase, padded with 'x' to
// o.IDLength characters.
func benchID(o costOptions, prefix string, i int) string {
	id := fmt.Sprintf("%s-%d", prefix, i)
	if n := o.IDLength - len(id); n > 0 {
		id = fmt.Sprintf("%s-%s%d", prefix, strings.Repeat("x", n), i)
	}
	return id
}

// otherLeaseStore is the job-lease store that is not s.
func otherLeaseStore(s string) string {
	if s == config.JobLeaseStoreGCS {
		return config.JobLeaseStoreFirestore
	}
	return config.JobLeaseStoreGCS
}

func defaultCostOptions() costOptions {
	return costOptions{Schedules: 10, Fires: 10, Every: 2 * time.Second, Tick: time.Second, Mix: true, PerTick: 100, Partitions: 8, InlineShards: 16, LapseShardLeases: true,
		Compute: cost.DefaultCompute, Concurrencies: []int{80}, Retention: cost.DefaultRetention,
		CheapConcurrency: 80, CheapRetention: time.Hour,
		LeaseStore: config.JobLeaseStoreFirestore, CompareLeaseStore: true}
}

func newBenchCostCmd() *cobra.Command {
	o := defaultCostOptions()
	short := false
	cmd := &cobra.Command{
		Use:   "cost",
		Short: "What a run costs in Google's list prices, measured on the local stack, beside Cloud Scheduler, EventBridge Scheduler and Temporal Cloud",
		Long: `Starts the local stack (as baton local does: the strict Mongo, GCS and
Cloud Tasks emulators, the functions on a real HTTP server, the tick every
--tick) and reads every meter while schedules run:

  Firestore   read units (4 KiB) and write units (1 KiB, index entries
              included), measured on the Mongo emulator's wire
  Storage     Cloud Storage Class A and Class B operations (deletes free)
  Cloud Tasks CreateTask calls and deliveries
  functions   requests, and the instance time Cloud Run bills for them
              (each request rounded up to 100 ms at concurrency 1; the
              time any request was in flight above it)
  logging     bytes the stack logged at INFO, as the functions do

Phases: the tick alone (its fixed cost, shared among --per-tick runs),
partitioned as Terraform's decider_partitions (--partitions, 8); then
--schedules http schedules with Terraform's defaults (buffer_one, no
retries, no notifications; the target answers 200 at once), each firing
--fires times every --every; then, with --mix, a mix: http runs that fail
and are retried, builtin sleeps under skip, buffer_one and allow, a
notifying schedule and a GPU job; then, on a stack of its own at
--cheap-partitions (0) with its own tick phase, the http runs with
overlap allow, priced at the cheapest documented settings. Prices (shared/cost/prices.go, each with
its page and the date read) turn the counts into USD per million runs by
part, at the Run function's Terraform shape and at --concurrency. The
managed schedulers are priced the same way, for a schedule firing every
minute and for a daily one. The last line is key=value pairs:
usd_per_million_runs (headline http, Terraform defaults), one usd_<part>
per part, usd_per_million_runs_c<N> per --concurrency, and
usd_per_million_runs_mix with --mix.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if short {
				o.Schedules, o.Fires, o.Mix = 4, 3, false
			}
			if o.Schedules < 1 || o.Fires < 1 || o.Every < time.Second || o.Tick < 100*time.Millisecond || o.PerTick < 1 || o.Partitions < 0 || o.Partitions > schedule.DeciderShards() || o.InlineShards < 0 || o.InlineShards > schedule.DeciderShards() {
				return usageError("bench cost: want --schedules ≥ 1, --fires ≥ 1, --every ≥ 1s, --tick ≥ 100ms, --per-tick ≥ 1, --partitions and --inline-shards 0 to %d", schedule.DeciderShards())
			}
			if o.LeaseStore != config.JobLeaseStoreGCS && o.LeaseStore != config.JobLeaseStoreFirestore {
				return usageError("bench cost: --job-lease-store must be %s or %s, not %q", config.JobLeaseStoreFirestore, config.JobLeaseStoreGCS, o.LeaseStore)
			}
			if o.IDLength < 0 || o.IDLength > maxScheduleID {
				return usageError("bench cost: --id-length must be between 0 and %d (a schedule id's limit), not %d", maxScheduleID, o.IDLength)
			}
			if o.Every%time.Second != 0 || 60%int(o.Every/time.Second) != 0 {
				return usageError("bench cost: --every must be a whole number of seconds that divides a minute, not %s", o.Every)
			}
			rep, err := measureCost(cmd.Context(), o)
			if err != nil {
				return err
			}
			rep.print(cmd.OutOrStdout(), o)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Schedules, "schedules", o.Schedules, "http schedules in the headline phase")
	f.IntVar(&o.Fires, "fires", o.Fires, "fires of each schedule")
	f.DurationVar(&o.Every, "every", o.Every, "period of the schedules (whole seconds dividing a minute)")
	f.DurationVar(&o.Tick, "tick", o.Tick, "tick period of the local stack")
	f.BoolVar(&o.Mix, "mix", o.Mix, "also run the mix of every kind of schedule")
	f.IntVar(&o.PerTick, "per-tick", o.PerTick, "runs one production tick decides, sharing the tick's own cost")
	f.IntVar(&o.Partitions, "partitions", o.Partitions, "P, the partitions of a tick (Terraform's decider_partitions, 8 by default); 0 decides in the tick itself")
	f.BoolVar(&o.LapseShardLeases, "lapse-shard-leases", o.LapseShardLeases, "BATON_LAPSE_SHARD_LEASES of the partitioned stacks (true, the functions' default): a decided shard's lease lapses instead of being released")
	f.IntVar(&o.InlineShards, "inline-shards", o.InlineShards, "BATON_INLINE_SHARDS of the partitioned stacks (16, the default): a coordinating tick with at most this many busy decider shards decides them itself; 0 always creates the partition tasks")
	f.Float64Var(&o.Compute.VCPU, "vcpu", o.Compute.VCPU, "vCPU of a Run instance (Terraform: 512Mi gets 0.333)")
	f.Float64Var(&o.Compute.MemoryGiB, "memory-gib", o.Compute.MemoryGiB, "memory of a Run instance, GiB")
	f.IntVar(&o.Compute.Concurrency, "run-concurrency", o.Compute.Concurrency, "requests one Run instance serves at once (the headline)")
	f.IntSliceVar(&o.Concurrencies, "concurrency", o.Concurrencies, "other Run concurrencies to price the compute at")
	f.DurationVar(&o.Retention, "retention", o.Retention, "how long finished runs are kept (history_keep)")
	f.IntVar(&o.CheapConcurrency, "cheap-concurrency", o.CheapConcurrency, "Run concurrency of the cheapest settings")
	f.DurationVar(&o.CheapRetention, "cheap-retention", o.CheapRetention, "history_keep of the cheapest settings (1h is the least Terraform takes)")
	f.IntVar(&o.CheapPartitions, "cheap-partitions", o.CheapPartitions, "decider_partitions of the cheapest settings (0: one tick lease, no partition tasks); the allow phase runs on a stack of its own with it")
	f.StringVar(&o.LeaseStore, "job-lease-store", o.LeaseStore, "where the job leases live, firestore or gcs (Terraform's job_lease_store)")
	f.BoolVar(&o.CompareLeaseStore, "compare-lease-store", o.CompareLeaseStore, "run the http phase again on a second stack with the other job-lease store")
	f.IntVar(&o.IDLength, "id-length", o.IDLength, "pad the http and allow schedules' ids to this many characters (0: as short as they are, 11 or 12); a run's id, in its document and every index entry, is its schedule's id and fire time")
	f.BoolVar(&short, "short", false, "a few seconds: 4 schedules, 3 fires, no mix (make test)")
	flagUsage(cmd)
	return cmd
}

// meters is one reading of every meter.
type meters struct {
	fs       mongo.Billing
	gcs      gcs.Ops
	creates  int64
	attempts int64
	logBytes int64
	logInfo  int64
	cpu      time.Duration
	at       time.Time
}

// phaseCounts is what one phase used: deltas of meters, and its runs.
type phaseCounts struct {
	name                  string
	runs                  int64            // runs that reached a terminal state
	byStatus              map[string]int64 // those by status
	ticks                 int64
	readUnits, writeUnits int64
	coll                  map[string]mongo.CollectionBilling
	classA, classB, free  int64
	creates, deliveries   int64
	logBytes, logInfo     int64
	runReqs, tickReqs     []cost.Interval
	// partReqs are the deliveries of partition tasks (to Tick), and
	// partCreates the partition tasks created: the tick's, with P > 0.
	partReqs    []cost.Interval
	partCreates int64
	cpu, wall   time.Duration
	storedBytes float64 // per run: its run document and index entries
	deleteUnits float64 // per run: the TTL delete of its document
}

// settings are the operator's choices a bill is priced at.
type settings struct {
	compute   cost.Compute
	retention time.Duration
	// warnLogs drops INFO and DEBUG lines (log_level=warn).
	warnLogs bool
}

func (p phaseCounts) perRun(set settings, tick *phaseCounts, perTick int) cost.PerRun {
	c := set.compute
	n := float64(max(p.runs, 1))
	logBytes, tickLog := p.logBytes, int64(0)
	if tick != nil {
		tickLog = tick.logBytes
	}
	if set.warnLogs {
		logBytes -= p.logInfo
		if tick != nil {
			tickLog -= tick.logInfo
		}
	}
	pr := cost.PerRun{
		ReadUnits: float64(p.readUnits) / n, WriteUnits: float64(p.writeUnits) / n,
		ClassA: float64(p.classA) / n, ClassB: float64(p.classB) / n,
		TaskOps:  float64(p.creates+p.deliveries) / n,
		Requests: float64(len(p.runReqs)) / n, InstanceSeconds: cost.Billed(p.runReqs, c.Concurrency).Seconds() / n,
		LogBytes: float64(logBytes) / n, StoredBytes: p.storedBytes, DeleteUnits: p.deleteUnits,
		Retention: set.retention,
	}
	if tick != nil && tick.ticks > 0 {
		// The phase's own ticks are taken out at the tick's fixed cost,
		// and a production tick's cost is shared among perTick runs.
		share := float64(p.ticks)/n - 1/float64(perTick)
		t := float64(tick.ticks)
		pr.ReadUnits -= share * float64(tick.readUnits) / t
		pr.WriteUnits -= share * float64(tick.writeUnits) / t
		pr.ClassA -= share * float64(tick.classA) / t
		pr.ClassB -= share * float64(tick.classB) / t
		pr.LogBytes -= share * float64(tickLog) / t
		pr.Requests += 1 / float64(perTick)
		pr.InstanceSeconds += cost.Billed(tick.tickReqs, 1).Seconds() / t / float64(perTick)
		// A partitioned tick's partition tasks: created, delivered and
		// served by Tick, one set per tick, shared likewise.
		pr.TaskOps += float64(tick.partCreates+int64(len(tick.partReqs))) / t / float64(perTick)
		pr.Requests += float64(len(tick.partReqs)) / t / float64(perTick)
		pr.InstanceSeconds += cost.Billed(tick.partReqs, 1).Seconds() / t / float64(perTick)
		pr.ReadUnits, pr.WriteUnits = max(pr.ReadUnits, 0), max(pr.WriteUnits, 0)
		pr.ClassA, pr.ClassB, pr.LogBytes = max(pr.ClassA, 0), max(pr.ClassB, 0), max(pr.LogBytes, 0)
	}
	return pr
}

type costReport struct {
	tick, http, allow, mix *phaseCounts
	// cheapTick is the tick of the allow phase's stack, at the cheapest
	// settings' partitions.
	cheapTick *phaseCounts
	// otherStore is the http phase with the other job-lease store
	// (costOptions.CompareLeaseStore), on a stack of its own.
	otherStore *phaseCounts
}

// countingWriter counts the bytes logged, and apart those of INFO and
// DEBUG lines, which a deployment at log_level=warn does not write.
type countingWriter struct{ n, info atomic.Int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	if bytes.Contains(p, []byte(`"severity":"INFO"`)) || bytes.Contains(p, []byte(`"severity":"DEBUG"`)) {
		w.info.Add(int64(len(p)))
	}
	return len(p), nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// costStack starts the local stack a bench phase runs on, logging into
// logs, with the job leases in leaseStore; stop closes it. poll is a store
// on the stack's database for the bench's own reads (has a phase ended,
// has every schedule run once): its handshake names mongo.UnbilledApp, so
// those reads are not billed to the runs they wait for. Through the
// stack's store, a check of a phase's end made before the meters' last
// reading (a status list merged over every decider shard) would be
// billed as the runs' reads.
func costStack(ctx context.Context, o costOptions, logs *countingWriter, leaseStore string, partitions int) (st *stack.Stack, poll *mongostore.Store, stop func(), err error) {
	st, err = stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: o.Tick, Logger: logging.New(logs, "info"),
		GPUWorkers: 1, NotifyBackoff: 100 * time.Millisecond, JobLeaseStore: leaseStore, Partitions: partitions, InlineShards: &o.InlineShards, LapseShardLeases: &o.LapseShardLeases})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("bench cost: %w", err)
	}
	stop = func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if poll != nil {
			_ = poll.Close(cctx)
		}
		_ = st.Close(cctx)
	}
	u, err := url.Parse(st.MongoURI)
	if err == nil {
		q := u.Query()
		q.Set("appName", mongo.UnbilledApp)
		u.RawQuery = q.Encode()
		poll, err = mongostore.Open(ctx, u.String(), mongostore.Options{Database: stack.DefaultDatabase})
	}
	if err != nil {
		poll = nil
		stop()
		return nil, nil, nil, fmt.Errorf("bench cost: the bench's own store: %w", err)
	}
	return st, poll, stop, nil
}

func measureCost(ctx context.Context, o costOptions) (*costReport, error) {
	logs := &countingWriter{}
	target, err := startCostTargets(ctx)
	if err != nil {
		return nil, err
	}
	defer target.close(ctx)
	st, poll, stop, err := costStack(ctx, o, logs, o.LeaseStore, o.Partitions)
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	b := &costBench{fires: o.Fires, every: o.Every, st: st, poll: poll, logs: logs, db: stack.DefaultDatabase, client: &http.Client{Timeout: 30 * time.Second}}
	rep := &costReport{}

	// The tick alone: its fixed cost.
	if rep.tick, err = b.phase(ctx, "tick", nil, 5*o.Tick, false); err != nil {
		return nil, err
	}
	var scheds []schedBody
	for i := range o.Schedules {
		scheds = append(scheds, httpSchedule(benchID(o, "cost-http", i), o, target.ok, nil))
	}
	if rep.http, err = b.phase(ctx, "http", scheds, 0, true); err != nil {
		return nil, err
	}
	if o.Mix {
		if rep.mix, err = b.phase(ctx, "mix", mixSchedules(o, target), 0, false); err != nil {
			return nil, err
		}
	}
	// The same runs with overlap allow, which holds no job lease, on a
	// stack with the cheapest settings' partitions (its own tick
	// measured first): priced at the cheapest documented settings. One
	// stack at a time, as below.
	stop()
	stopped = true
	clogs := &countingWriter{}
	cst, cpoll, cstop, err := costStack(ctx, o, clogs, o.LeaseStore, o.CheapPartitions)
	if err != nil {
		return nil, err
	}
	cb := &costBench{fires: o.Fires, every: o.Every, st: cst, poll: cpoll, logs: clogs, db: stack.DefaultDatabase, client: b.client}
	rep.cheapTick, err = cb.phase(ctx, "tick", nil, 5*o.Tick, false)
	if err == nil {
		scheds = scheds[:0]
		for i := range o.Schedules {
			scheds = append(scheds, httpSchedule(benchID(o, "cost-allow", i), o, target.ok, map[string]any{"overlap": "allow"}))
		}
		rep.allow, err = cb.phase(ctx, "allow", scheds, 0, true)
	}
	cstop()
	if err != nil {
		return nil, err
	}
	if o.CompareLeaseStore {
		// The same http runs with the job leases in the other store, on
		// a fresh stack: a store is fixed for a deployment's lifetime
		// but for a switch, so it is not switched under a running one.
		other := otherLeaseStore(o.LeaseStore)
		ologs := &countingWriter{}
		ost, opoll, ostop, err := costStack(ctx, o, ologs, other, o.Partitions)
		if err != nil {
			return nil, err
		}
		defer ostop()
		ob := &costBench{fires: o.Fires, every: o.Every, st: ost, poll: opoll, logs: ologs, db: stack.DefaultDatabase, client: b.client}
		scheds = scheds[:0]
		for i := range o.Schedules {
			scheds = append(scheds, httpSchedule(benchID(o, "cost-http", i), o, target.ok, nil))
		}
		if rep.otherStore, err = ob.phase(ctx, "http, job leases in "+other, scheds, 0, true); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

type costBench struct {
	st     *stack.Stack
	poll   *mongostore.Store // the bench's own reads, unbilled (costStack)
	logs   *countingWriter
	db     string
	client *http.Client
	fires  int
	every  time.Duration
	seen   int // tasks attempts read so far
	ticks  int // scheduler attempts read so far
}

func (b *costBench) read() meters {
	return meters{fs: b.st.MongoServer().Billing(b.db), gcs: b.st.GCSServer().Ops(), creates: b.st.Tasks.CreateTasks(),
		attempts: int64(len(b.st.Tasks.Attempts())), logBytes: b.logs.n.Load(), logInfo: b.logs.info.Load(), cpu: cpuTime(), at: time.Now()}
}

// schedBody is a schedule as the API takes it.
type schedBody = map[string]any

func httpSchedule(id string, o costOptions, url string, extra map[string]any) schedBody {
	s := schedBody{
		"id": id, "cron": fmt.Sprintf("*/%d * * * * *", int(o.Every/time.Second)),
		"target": map[string]any{"type": "http", "http": map[string]any{"method": "POST", "url": url, "timeout": "10s"}},
	}
	for k, v := range extra {
		s[k] = v
	}
	return s
}

func mixSchedules(o costOptions, t *costTargets) []schedBody {
	every := int(o.Every / time.Second)
	cron := fmt.Sprintf("*/%d * * * * *", every)
	builtin := func(id, overlap, sleep string) schedBody {
		return schedBody{"id": id, "cron": cron, "overlap": overlap,
			"target": map[string]any{"type": "builtin", "builtin": map[string]any{"name": "sleep", "args": map[string]string{"duration": sleep}}}}
	}
	// Sleeps longer than the period make skip skip, buffer_one fold and
	// allow overlap.
	long := (o.Every * 3 / 2).String()
	return []schedBody{
		httpSchedule("cost-mix-http-retry", o, t.fail, map[string]any{"retry": map[string]any{"maxAttempts": 3, "backoff": "1s"}}),
		httpSchedule("cost-mix-http-notify", o, t.fail, map[string]any{"notify": map[string]any{
			"on": []string{"failed"}, "webhook": map[string]any{"url": t.hook, "secret": "bench-cost-secret"}}}), //nolint:gosec // G101: the bench's own local webhook, not a credential
		httpSchedule("cost-mix-http-skip", o, t.ok, map[string]any{"overlap": "skip"}),
		builtin("cost-mix-skip", "skip", long),
		builtin("cost-mix-buffer", "buffer_one", long),
		builtin("cost-mix-allow", "allow", long),
		{"id": "cost-mix-gpu", "cron": cron, "overlap": "allow",
			"target": map[string]any{"type": "gpu", "gpu": map[string]any{"payload": "true", "maxAttempts": 1, "timeout": "1m"}}},
	}
}

// phase creates the schedules, waits until each has fired its last time
// and every run has ended (or, with none, waits idle), and returns the
// meters' deltas. The meters are read before the reads that find the
// stack idle, so those reads are not counted.
func (b *costBench) phase(ctx context.Context, name string, scheds []schedBody, idle time.Duration, warm bool) (*phaseCounts, error) {
	before := b.read()
	for _, s := range scheds {
		if err := b.api(ctx, http.MethodPost, "/Schedules/schedules", s, nil); err != nil {
			return nil, fmt.Errorf("bench cost: %s: create %v: %w", name, s["id"], err)
		}
	}
	// What the bench itself writes (the creates, the edits that stop
	// the schedules) is not the runs' cost: excluded collects it.
	excluded := diffBilling(b.st.MongoServer().Billing(b.db), before.fs)
	// The steady state: a schedule's first run does what it does once
	// in the schedule's life (its job lease created, the other store's
	// retired: shared/lease/switch.go and spread.go), so the meters are
	// read again once every schedule has run once, and only the runs
	// created after that are counted.
	// The mix is not warmed up: some of its schedules never succeed.
	var from time.Time
	if warm && len(scheds) > 0 {
		if err := b.warmUp(ctx, scheds); err != nil {
			return nil, fmt.Errorf("bench cost: %s: %w", name, err)
		}
		before = b.read()
		from = before.at
		excluded = mongo.Billing{}
		b.seen = int(before.attempts)
		ticks := b.st.Scheduler.Attempts(stack.TickJob)
		for b.ticks < len(ticks) && !ticks[b.ticks].Start.After(before.at) {
			b.ticks++
		}
	}
	var after meters
	if len(scheds) == 0 {
		if err := clock.Sleep(ctx, idle); err != nil {
			return nil, err
		}
		after = b.read()
	} else {
		// Let each schedule fire --fires times, then move its cron to
		// once a year. (remainingRuns would disable the schedule with its
		// last fire, and Run skips a decided run of a disabled schedule
		// as paused.) The edits' own cost is taken out of the meters.
		if err := clock.Sleep(ctx, time.Duration(b.fires)*b.every); err != nil {
			return nil, err
		}
		edit0 := b.st.MongoServer().Billing(b.db)
		for _, s := range scheds {
			if err := b.api(ctx, http.MethodPatch, "/Schedules/schedules/"+s["id"].(string), schedBody{"cron": "0 0 0 1 1 *"}, nil); err != nil {
				return nil, fmt.Errorf("bench cost: %s: stop %v: %w", name, s["id"], err)
			}
		}
		edit1 := b.st.MongoServer().Billing(b.db)
		excluded = addBilling(excluded, diffBilling(edit1, edit0))
		deadline := time.Now().Add(10 * time.Minute)
		for {
			after = b.read()
			done, err := b.quiet(ctx)
			if err != nil {
				return nil, err
			}
			if done {
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("bench cost: %s: runs still going after the deadline: %s", name, b.going(ctx))
			}
			if err := clock.Sleep(ctx, 500*time.Millisecond); err != nil {
				return nil, err
			}
		}
	}
	p := &phaseCounts{name: name, byStatus: map[string]int64{}, coll: map[string]mongo.CollectionBilling{}}
	if len(scheds) == 0 {
		excluded = mongo.Billing{}
	}
	used := diffBilling(diffBilling(after.fs, before.fs), excluded)
	p.readUnits, p.writeUnits, p.coll = used.ReadUnits, used.WriteUnits, used.Collections
	p.classA, p.classB, p.free = after.gcs.ClassA-before.gcs.ClassA, after.gcs.ClassB-before.gcs.ClassB, after.gcs.Free-before.gcs.Free
	p.creates = after.creates - before.creates
	atts := b.st.Tasks.Attempts()
	for _, a := range atts[b.seen:min(int(after.attempts), len(atts))] {
		iv := cost.Interval{Start: a.Start, End: a.End}
		if a.Queue == stack.TickQueue {
			// A partition task: the tick's cost, not the runs'. Its
			// first delivery counts its create.
			p.partReqs = append(p.partReqs, iv)
			if a.Number == 1 {
				p.partCreates++
			}
			continue
		}
		p.runReqs = append(p.runReqs, iv)
	}
	p.creates = max(p.creates-p.partCreates, 0)
	p.deliveries = int64(len(p.runReqs))
	b.seen = int(after.attempts)
	ticks := b.st.Scheduler.Attempts(stack.TickJob)
	for _, a := range ticks[min(b.ticks, len(ticks)):] {
		if a.End.After(after.at) {
			break
		}
		p.tickReqs = append(p.tickReqs, cost.Interval{Start: a.Start, End: a.End})
		b.ticks++
	}
	p.ticks = int64(len(p.tickReqs))
	p.logBytes, p.logInfo = after.logBytes-before.logBytes, after.logInfo-before.logInfo
	p.cpu, p.wall = after.cpu-before.cpu, after.at.Sub(before.at)
	if len(scheds) == 0 {
		p.runs = p.ticks
		return p, nil
	}
	// The runs, by status, and what each leaves stored.
	runsColl := p.coll[schedule.RunsCollection]
	for _, s := range scheds {
		id, _ := s["id"].(string)
		token := ""
		for {
			// Through the stack's own store, not b.poll: the biller
			// learns each finished run's size from this read (below).
			page, next, err := b.st.Deps.Store.Catalog().ListAllRuns(ctx, store.RunFilter{ScheduleID: id}, 500, token)
			if err != nil {
				return nil, fmt.Errorf("bench cost: %s: list runs: %w", name, err)
			}
			for _, r := range page {
				if r.CreatedAt.Before(from) {
					continue // a warm-up run
				}
				key := string(r.Status)
				if r.Reason != "" {
					// The reason's kind, not its holder and times.
					why, _, _ := strings.Cut(r.Reason, ":")
					key += " (" + why + ")"
				}
				p.byStatus[key]++
				p.runs++
			}
			if next == "" {
				break
			}
			token = next
		}
	}
	if runsColl.Writes > 0 {
		// A run document and its index entries; deleting it at the end of
		// its retention is a write of the same (Firestore bills deletes
		// in write units). The document's size is its latest as the wire
		// saw it whole (mongo.CollectionBilling.AvgDocBytes), read after
		// the listing above, which reads each finished run whole: a
		// delivery no longer reads its run back after finishing it.
		finished := b.st.MongoServer().Billing(b.db).Collections[schedule.RunsCollection]
		stored := finished.AvgDocBytes + runsColl.AvgIndexBytes
		p.storedBytes = float64(stored)
		p.deleteUnits = float64((stored + 1023) / 1024)
	}
	return p, nil
}

// diffBilling is a − b, by collection.
func diffBilling(a, b mongo.Billing) mongo.Billing {
	neg := mongo.Billing{ReadUnits: -b.ReadUnits, WriteUnits: -b.WriteUnits, Collections: map[string]mongo.CollectionBilling{}}
	for k, c := range b.Collections {
		neg.Collections[k] = mongo.CollectionBilling{ReadUnits: -c.ReadUnits, WriteUnits: -c.WriteUnits, Queries: -c.Queries,
			DocsRead: -c.DocsRead, Writes: -c.Writes, IndexEntries: -c.IndexEntries}
	}
	return addBilling(a, neg)
}

// addBilling is a + b, by collection; the sizes and index counts are a's
// (or b's where a has none).
func addBilling(a, b mongo.Billing) mongo.Billing {
	out := mongo.Billing{ReadUnits: a.ReadUnits + b.ReadUnits, WriteUnits: a.WriteUnits + b.WriteUnits, Collections: map[string]mongo.CollectionBilling{}}
	for k, c := range a.Collections {
		out.Collections[k] = c
	}
	for k, c := range b.Collections {
		o, ok := out.Collections[k]
		if !ok {
			o.Indexes, o.AvgDocBytes = c.Indexes, c.AvgDocBytes
		}
		o.ReadUnits += c.ReadUnits
		o.WriteUnits += c.WriteUnits
		o.Queries += c.Queries
		o.DocsRead += c.DocsRead
		o.Writes += c.Writes
		o.IndexEntries += c.IndexEntries
		out.Collections[k] = o
	}
	return out
}

// quiet reports whether no run is pending or running.
// warmUp waits until every schedule of scheds has a run that succeeded.
// Runs may be in flight then (with overlap allow there always are): what
// they do after the reading is counted and they are not, which errs
// towards a higher price per run.
func (b *costBench) warmUp(ctx context.Context, scheds []schedBody) error {
	deadline := time.Now().Add(5 * time.Minute)
	// The schedules are asked in turn, each until it has run, so a wait
	// costs one query: every ask is a query of the local stack's store,
	// and at --schedules 100 asking all of them every 100 ms was a
	// thousand queries a second beside the runs, enough to starve them.
	for ran, s := range scheds {
		id, _ := s["id"].(string)
		for {
			page, _, err := b.poll.Catalog().ListAllRuns(ctx, store.RunFilter{ScheduleID: id, Status: schedule.RunSucceeded}, 1, "")
			if err != nil {
				return fmt.Errorf("warm up: list runs: %w", err)
			}
			if len(page) > 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("warm up: %s has not run after 5 minutes (the %d schedules before it of %d have)", id, ran, len(scheds))
			}
			if err := clock.Sleep(ctx, 100*time.Millisecond); err != nil {
				return err
			}
		}
	}
	return nil
}

// going lists up to ten runs still pending or running, for the error of a
// phase that does not end.
func (b *costBench) going(ctx context.Context) string {
	var out []string
	for _, stt := range []schedule.RunStatus{schedule.RunPending, schedule.RunRunning} {
		page, _, err := b.poll.Catalog().ListAllRuns(ctx, store.RunFilter{Status: stt}, 5, "")
		if err != nil {
			return err.Error()
		}
		for _, r := range page {
			out = append(out, fmt.Sprintf("%s %s (created %s, attempt %d)", r.ID, r.Status, r.CreatedAt.Format(time.TimeOnly), r.Attempt))
		}
	}
	return strings.Join(out, "; ")
}

func (b *costBench) quiet(ctx context.Context) (bool, error) {
	for _, stt := range []schedule.RunStatus{schedule.RunPending, schedule.RunRunning} {
		page, _, err := b.poll.Catalog().ListAllRuns(ctx, store.RunFilter{Status: stt}, 1, "")
		if err != nil {
			return false, fmt.Errorf("bench cost: list runs: %w", err)
		}
		if len(page) > 0 {
			return false, nil
		}
	}
	return true, nil
}

func (b *costBench) api(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.st.URL+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+b.st.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(raw))
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// costTargets are the schedules' targets: one that answers 200, one 500,
// and a webhook receiver.
type costTargets struct {
	ok, fail, hook string
	srv            *http.Server
}

func startCostTargets(ctx context.Context) (*costTargets, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench cost: targets: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bench: fails", http.StatusInternalServerError)
	})
	mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
	srv := httpapi.NewServer(mux, httpapi.DefaultTimeouts)
	go func() { _ = srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	return &costTargets{ok: base + "/ok", fail: base + "/fail", hook: base + "/hook", srv: srv}, nil
}

func (t *costTargets) close(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := t.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		_ = t.srv.Close()
	}
}

func (r *costReport) print(w io.Writer, o costOptions) {
	t := r.tick
	def := settings{compute: o.Compute, retention: o.Retention}
	cheap := settings{compute: o.Compute, retention: o.CheapRetention, warnLogs: true}
	cheap.compute.Concurrency = o.CheapConcurrency
	fmt.Fprintf(w, "prices: %s (shared/cost/prices.go); Run: %.3f vCPU, %.2f GiB, concurrency %d; runs kept %s; tick cost shared by %d runs\n",
		cost.PricesRead, o.Compute.VCPU, o.Compute.MemoryGiB, o.Compute.Concurrency, o.Retention, o.PerTick)
	if t.ticks > 0 {
		n := float64(t.ticks)
		fmt.Fprintf(w, "tick (fixed, per tick, %d ticks, %d partitions, inline up to %d busy shards, shard leases lapse: %v): %.2f read units, %.2f write units, %.2f Class A, %.2f Class B, %.2f partition task ops, %.2f partition requests, %.0f log bytes\n",
			t.ticks, o.Partitions, o.InlineShards, o.LapseShardLeases, float64(t.readUnits)/n, float64(t.writeUnits)/n, float64(t.classA)/n, float64(t.classB)/n,
			float64(t.partCreates+int64(len(t.partReqs)))/n, float64(len(t.partReqs))/n, float64(t.logBytes)/n)
	}
	head := r.http.perRun(def, t, o.PerTick)
	r.printPhase(w, r.http, head, def, "Terraform defaults, job leases in "+o.LeaseStore)
	parts := cost.Bill(head, o.Compute)
	total := cost.Total(parts)
	kv := []string{fmt.Sprintf("usd_per_million_runs=%.2f", total)}
	for _, p := range parts {
		kv = append(kv, fmt.Sprintf("usd_%s=%.2f", p.Name, p.USDPerMillion))
	}
	kv = append(kv, "job_lease_store="+o.LeaseStore)
	if r.otherStore != nil {
		other := otherLeaseStore(o.LeaseStore)
		op := r.otherStore.perRun(def, t, o.PerTick)
		r.printPhase(w, r.otherStore, op, def, "Terraform defaults but job_lease_store="+other)
		oparts := cost.Bill(op, o.Compute)
		kv = append(kv, fmt.Sprintf("classA_per_run_lease_%s=%.2f", other, op.ClassA))
		kv = append(kv, fmt.Sprintf("usd_per_million_runs_lease_%s=%.2f usd_gcs_ops_lease_%s=%.2f usd_firestore_writes_lease_%s=%.2f", other, cost.Total(oparts), other, partOf(oparts, "gcs_ops"), other, partOf(oparts, "firestore_writes")))
	}
	for _, c := range o.Concurrencies {
		s := def
		s.compute.Concurrency = c
		pc := r.http.perRun(s, t, o.PerTick)
		bill := cost.Bill(pc, s.compute)
		fmt.Fprintf(w, "http at Run concurrency %d: compute %.2f, total $%.2f per million runs\n", c, partOf(bill, "compute"), cost.Total(bill))
		kv = append(kv, fmt.Sprintf("usd_per_million_runs_c%d=%.2f", c, cost.Total(bill)))
	}
	cp := r.allow.perRun(cheap, r.cheapTick, o.PerTick)
	r.printPhase(w, r.allow, cp, cheap, fmt.Sprintf("overlap allow (no job lease), Run concurrency %d, runs kept %s, log_level=warn, decider_partitions %d: the cheapest documented settings", o.CheapConcurrency, o.CheapRetention, o.CheapPartitions))
	cheapest := cost.Total(cost.Bill(cp, cheap.compute))
	kv = append(kv, fmt.Sprintf("usd_per_million_runs_cheapest=%.2f", cheapest))
	if r.mix != nil {
		mp := r.mix.perRun(def, t, o.PerTick)
		r.printPhase(w, r.mix, mp, def, "Terraform defaults; every run, whatever its outcome")
		kv = append(kv, fmt.Sprintf("usd_per_million_runs_mix=%.2f", cost.Total(cost.Bill(mp, o.Compute))))
	}
	fmt.Fprintf(w, "\ncompared, USD per million runs       every minute        daily\n")
	fmt.Fprintf(w, "  %-34s %12.2f %12.2f   (measured: an http run, Terraform defaults)\n", "baton", total, total)
	fmt.Fprintf(w, "  %-34s %12.2f %12.2f   (measured: the cheapest documented settings)\n", "baton, cheapest", cheapest, cheapest)
	for _, a := range cost.Alternatives() {
		fmt.Fprintf(w, "  %-34s %12.2f %12.2f   (%s)\n", a.Name, a.EveryMinute, a.Daily, a.Note)
	}
	kv = append(kv, fmt.Sprintf("reads_per_run=%.2f writes_per_run=%.2f classA_per_run=%.2f classB_per_run=%.2f task_ops_per_run=%.2f log_bytes_per_run=%.0f",
		head.ReadUnits, head.WriteUnits, head.ClassA, head.ClassB, head.TaskOps, head.LogBytes))
	fmt.Fprintln(w, strings.Join(kv, " "))
}

func partOf(parts []cost.Part, name string) float64 {
	for _, p := range parts {
		if p.Name == name {
			return p.USDPerMillion
		}
	}
	return 0
}

func (r *costReport) printPhase(w io.Writer, p *phaseCounts, pr cost.PerRun, set settings, priced string) {
	statuses := make([]string, 0, len(p.byStatus))
	for k, v := range p.byStatus {
		statuses = append(statuses, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(statuses)
	fmt.Fprintf(w, "\n%s: %d runs (%s), %d ticks, %d run tasks (%.1f runs a task), %s wall, process CPU %s per run (every emulator included)\n",
		p.name, p.runs, strings.Join(statuses, ", "), p.ticks, p.creates, float64(p.runs)/float64(max(p.creates, 1)),
		p.wall.Round(time.Millisecond), (p.cpu / time.Duration(max(p.runs, 1))).Round(time.Microsecond))
	fmt.Fprintf(w, "%s per run: %.2f read units, %.2f write units, %.2f Class A, %.2f Class B (%.2f free deletes), %.2f task ops, %.2f requests billed %.3f s, %.0f log bytes, %.0f bytes stored\n",
		p.name, pr.ReadUnits, pr.WriteUnits, pr.ClassA, pr.ClassB, float64(p.free)/float64(max(p.runs, 1)), pr.TaskOps, pr.Requests, pr.InstanceSeconds, pr.LogBytes, pr.StoredBytes)
	colls := make([]string, 0, len(p.coll))
	for k := range p.coll {
		colls = append(colls, k)
	}
	sort.Strings(colls)
	for _, k := range colls {
		c := p.coll[k]
		if c.ReadUnits == 0 && c.WriteUnits == 0 {
			continue
		}
		n := float64(max(p.runs, 1))
		fmt.Fprintf(w, "  %-17s per run (ticks included): %.2f read units (%.2f queries), %.2f write units (%.2f writes, %.2f index entries); %d indexes, %d B a document\n",
			k, float64(c.ReadUnits)/n, float64(c.Queries)/n, float64(c.WriteUnits)/n, float64(c.Writes)/n, float64(c.IndexEntries)/n, c.Indexes, c.AvgDocBytes)
	}
	fmt.Fprintf(w, "  %-22s %10s   (%s)\n", "part", "USD/1M runs", priced)
	parts := cost.Bill(pr, set.compute)
	for _, pp := range parts {
		fmt.Fprintf(w, "  %-22s %10.2f\n", pp.Name, pp.USDPerMillion)
	}
	fmt.Fprintf(w, "  %-22s %10.2f\n", "total", cost.Total(parts))
}
