package metrics

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Names of the instruments, as Prometheus and Cloud Monitoring show them.
// Terraform's alert policies and dashboard refer to these (tests check it).
const (
	RunsTotal           = "baton_runs_total"
	RunsMissedTotal     = "baton_runs_missed_total"
	RunLateness         = "baton_run_start_lateness_seconds"
	RunDuration         = "baton_run_duration_seconds"
	TickDuration        = "baton_tick_duration_seconds"
	TickDocsRead        = "baton_tick_docs_read"
	TicksTotal          = "baton_ticks_total"
	LeaseConflictsTotal = "baton_lease_conflicts_total"
	LeaseLostTotal      = "baton_lease_lost_total"
	GPUQueueDepth       = "baton_gpu_queue_depth"
	GPUWait             = "baton_gpu_wait_seconds"
	GPUSlots            = "baton_gpu_slots"
)

// Names lists every instrument name, for docs and the Terraform test.
func Names() []string {
	return []string{RunsTotal, RunsMissedTotal, RunLateness, RunDuration, TickDuration, TickDocsRead, TicksTotal,
		LeaseConflictsTotal, LeaseLostTotal, GPUQueueDepth, GPUWait, GPUSlots}
}

// scope is the instrumentation scope every instrument belongs to.
const scope = "github.com/baton-cron/baton"

// secondsBuckets spans a fast target (100 ms) to a long GPU wait (1 h):
// the default OpenTelemetry buckets are milliseconds-shaped.
var secondsBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// docsBuckets are for documents read per tick: a tick's reads grow with
// the work that is due, so most ticks read a handful.
var docsBuckets = []float64{0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000}

// Options configures a Set.
type Options struct {
	// NoScheduleLabel drops the schedule label from the run metrics, for
	// deployments whose schedule count would make too many series.
	NoScheduleLabel bool
}

// Set is baton's instruments. A nil *Set records nothing, so a package
// whose caller passed none needs no checks.
type Set struct {
	noSchedule bool

	runs           metric.Int64Counter
	missed         metric.Int64Counter
	lateness       metric.Float64Histogram
	duration       metric.Float64Histogram
	tickDuration   metric.Float64Histogram
	tickDocs       metric.Int64Histogram
	ticks          metric.Int64Counter
	leaseConflicts metric.Int64Counter
	leaseLost      metric.Int64Counter
	gpuQueue       metric.Int64ObservableGauge
	gpuWait        metric.Float64Histogram
	gpuSlots       metric.Int64ObservableGauge
	meter          metric.Meter

	mu        sync.Mutex
	gpuSource GPUSource
	gpuReg    metric.Registration
}

// New builds the instruments on mp.
func New(mp metric.MeterProvider, o Options) (*Set, error) {
	m := mp.Meter(scope)
	s := &Set{noSchedule: o.NoScheduleLabel, meter: m}
	var err error
	mk := func(name string, f func() error) {
		if err == nil {
			if e := f(); e != nil {
				err = fmt.Errorf("metrics: instrument %s: %w", name, e)
			}
		}
	}
	mk(RunsTotal, func() (e error) {
		s.runs, e = m.Int64Counter(RunsTotal, metric.WithDescription("Runs that reached a final status (succeeded, failed, skipped), by schedule, status and source."))
		return
	})
	mk(RunsMissedTotal, func() (e error) {
		s.missed, e = m.Int64Counter(RunsMissedTotal, metric.WithDescription("Fire times that came with nothing deciding them (ticks stopped) and that the catch-up policy does not run, by schedule."))
		return
	})
	mk(RunLateness, func() (e error) {
		s.lateness, e = m.Float64Histogram(RunLateness, metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(secondsBuckets...),
			metric.WithDescription("From a run's fire time to the start of its execution."))
		return
	})
	mk(RunDuration, func() (e error) {
		s.duration, e = m.Float64Histogram(RunDuration, metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(secondsBuckets...),
			metric.WithDescription("From a run's start to its final status."))
		return
	})
	mk(TickDuration, func() (e error) {
		s.tickDuration, e = m.Float64Histogram(TickDuration, metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(secondsBuckets...),
			metric.WithDescription("How long one tick took, deciding and sweeping (not executing)."))
		return
	})
	mk(TickDocsRead, func() (e error) {
		s.tickDocs, e = m.Int64Histogram(TickDocsRead, metric.WithExplicitBucketBoundaries(docsBuckets...),
			metric.WithDescription("Documents one tick read from the database; it grows with the work due, not with the data."))
		return
	})
	mk(TicksTotal, func() (e error) {
		s.ticks, e = m.Int64Counter(TicksTotal, metric.WithDescription("Ticks, by result: ok (decided, maybe with errors left for later), skipped (another tick held the lease) or failed."))
		return
	})
	mk(LeaseConflictsTotal, func() (e error) {
		s.leaseConflicts, e = m.Int64Counter(LeaseConflictsTotal, metric.WithDescription("Lease acquisitions that found the lease held or lost a compare-and-set race, by lease kind."))
		return
	})
	mk(LeaseLostTotal, func() (e error) {
		s.leaseLost, e = m.Int64Counter(LeaseLostTotal, metric.WithDescription("Leases lost by their holder (a renew refused or a trust window closed), by lease kind."))
		return
	})
	mk(GPUWait, func() (e error) {
		s.gpuWait, e = m.Float64Histogram(GPUWait, metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(secondsBuckets...),
			metric.WithDescription("From a GPU job's enqueue to its dispatch to a slot."))
		return
	})
	mk(GPUQueueDepth, func() (e error) {
		s.gpuQueue, e = m.Int64ObservableGauge(GPUQueueDepth, metric.WithDescription("GPU jobs queued, read once per collection by the process that serves the GPU API."))
		return
	})
	mk(GPUSlots, func() (e error) {
		s.gpuSlots, e = m.Int64ObservableGauge(GPUSlots, metric.WithDescription("GPU slots by state (free, busy), read once per collection."))
		return
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

var (
	defaultOnce sync.Once
	defaultSet  *Set
)

// Default is the Set on OpenTelemetry's global MeterProvider: a no-op until
// the binary installs one (Open does). Packages use it when their caller
// passed no Set.
func Default() *Set {
	defaultOnce.Do(func() {
		s, err := New(otel.GetMeterProvider(), Options{})
		if err == nil {
			defaultSet = s
		}
	})
	return defaultSet
}

// Or returns s, or Default when s is nil.
func Or(s *Set) *Set {
	if s != nil {
		return s
	}
	return Default()
}

// schedule is the schedule label's value, or "" when it is turned off.
func (s *Set) schedule(id string) attribute.KeyValue {
	if s.noSchedule {
		return attribute.String("schedule", "")
	}
	return attribute.String("schedule", id)
}

// RunStarted records when a run's execution began, against its fire time.
func (s *Set) RunStarted(ctx context.Context, scheduleID, source string, fire, started time.Time) {
	if s == nil || fire.IsZero() || started.IsZero() {
		return
	}
	s.lateness.Record(ctx, max(started.Sub(fire).Seconds(), 0),
		metric.WithAttributes(s.schedule(scheduleID), attribute.String("source", source)))
}

// RunFinished records a run that reached a final status. started is zero
// for a run that never ran (skipped): it counts, without a duration.
func (s *Set) RunFinished(ctx context.Context, scheduleID, source, status string, started, finished time.Time) {
	if s == nil {
		return
	}
	attrs := metric.WithAttributes(s.schedule(scheduleID), attribute.String("status", status), attribute.String("source", source))
	s.runs.Add(ctx, 1, attrs)
	if !started.IsZero() && !finished.IsZero() {
		s.duration.Record(ctx, max(finished.Sub(started).Seconds(), 0), attrs)
	}
}

// RunsMissed records n fire times of a schedule that were missed and not
// caught up.
func (s *Set) RunsMissed(ctx context.Context, scheduleID string, n int) {
	if s == nil || n <= 0 {
		return
	}
	s.missed.Add(ctx, int64(n), metric.WithAttributes(s.schedule(scheduleID)))
}

// Tick records one tick: result is "ok", "skipped" or "failed".
func (s *Set) Tick(ctx context.Context, result string, took time.Duration, docsRead int64) {
	if s == nil {
		return
	}
	s.ticks.Add(ctx, 1, metric.WithAttributes(attribute.String("result", result)))
	if result == "skipped" {
		return // it read the lease and nothing else
	}
	s.tickDuration.Record(ctx, took.Seconds())
	s.tickDocs.Record(ctx, docsRead)
}

// LeaseKind is a lease name reduced to a bounded label: tick, job, gpu or
// other. Lease names carry schedule and job ids, which would be unbounded.
func LeaseKind(name string) string {
	switch {
	case name == "tick" || strings.HasPrefix(name, "tick"):
		return "tick"
	case strings.HasPrefix(name, "job-"):
		return "job"
	case strings.HasPrefix(name, "gpu"):
		return "gpu"
	}
	return "other"
}

// LeaseConflict records an acquisition that found the lease held, or lost
// a compare-and-set race.
func (s *Set) LeaseConflict(ctx context.Context, name string) {
	if s == nil {
		return
	}
	s.leaseConflicts.Add(ctx, 1, metric.WithAttributes(attribute.String("lease", LeaseKind(name))))
}

// LeaseLost records a holder that lost its lease.
func (s *Set) LeaseLost(ctx context.Context, name string) {
	if s == nil {
		return
	}
	s.leaseLost.Add(ctx, 1, metric.WithAttributes(attribute.String("lease", LeaseKind(name))))
}

// GPUDispatched records a job's wait from enqueue to dispatch.
func (s *Set) GPUDispatched(ctx context.Context, enqueued, dispatched time.Time) {
	if s == nil || enqueued.IsZero() {
		return
	}
	s.gpuWait.Record(ctx, max(dispatched.Sub(enqueued).Seconds(), 0))
}

// GPUState is what the GPU gauges show at one collection.
type GPUState struct {
	// Queued is the number of queued jobs.
	Queued int64
	// Slots counts slots by state ("free", "busy").
	Slots map[string]int64
}

// GPUSource reads the GPU state for one collection. It should cost a
// bounded few reads (a count and the slot list), whatever the queue holds.
type GPUSource func(ctx context.Context) (GPUState, error)

// ObserveGPU makes the GPU gauges read src at each collection. One process
// per deployment part should register (the one serving the GPU API); a
// second call replaces the first.
func (s *Set) ObserveGPU(src GPUSource) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gpuReg != nil {
		if err := s.gpuReg.Unregister(); err != nil {
			return fmt.Errorf("metrics: observe gpu: unregister: %w", err)
		}
		s.gpuReg = nil
	}
	s.gpuSource = src
	reg, err := s.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		st, err := src(ctx)
		if err != nil {
			// No point at all rather than a wrong zero: the gauge goes
			// missing for this period, which an alert on absence sees.
			return fmt.Errorf("metrics: read gpu state: %w", err)
		}
		o.ObserveInt64(s.gpuQueue, st.Queued)
		for state, n := range st.Slots {
			o.ObserveInt64(s.gpuSlots, n, metric.WithAttributes(attribute.String("state", state)))
		}
		return nil
	}, s.gpuQueue, s.gpuSlots)
	if err != nil {
		return fmt.Errorf("metrics: observe gpu: %w", err)
	}
	s.gpuReg = reg
	return nil
}
