package functions

import (
	"errors"
	"fmt"
	"strings"

	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// LeasePrefix is where leases live in the bucket (leases/tick.json, …).
const LeasePrefix = "leases/"

// newEngine builds the scheduler Engine that Tick (every tick) and Schedules
// (trigger-now) share, so a manual run and a scheduled run execute the same
// way: under the same job lease, with the same targets, and with gpu targets
// going to the same pool. It returns nil when the store or the bucket is not
// configured; the caller answers 503 naming the variable.
//
// The lease manager is built once per function instance: a manager that
// released a lease itself takes it back with one write and no read.
func newEngine(d *Deps) (*scheduler.Engine, error) {
	if d.Store == nil || d.Storage == nil || d.Bucket == "" {
		return nil, nil
	}
	// The lease manager judges expiry on the storage server's clock, so it
	// gets no injected clock; decisions use d.Clock.
	// EpochFloor: a lease object that is gone (a break, a lifecycle rule, a
	// new bucket) restarts above the fences already stored, not at 1;
	// FloorEachAcquire: the tick leases (single and per decider shard)
	// fence one field, so each Acquire of one starts above them all.
	// Markers: release markers are Firestore documents, a write unit
	// each, not Cloud Storage objects, a Class A write each
	// (docs/cost.md); the lease objects stay in the bucket.
	// JobLeases: the job leases in Firestore documents or in the bucket
	// (BATON_JOB_LEASE_STORE); the other store is guarded during a
	// switch (shared/lease/switch.go), and the decider shards' leases with
	// them (AlsoInJobLeases). The single tick lease stays in the bucket.
	// ReleaseUnread: a release writes its marker without reading the
	// lease first, a read unit and a round trip less on every run; the
	// engine only logs what a release answers.
	bucket := d.Storage.Bucket(d.Bucket)
	jobs, other, err := lease.JobLeaseStores(d.JobLeaseStore, bucket, d.Store.LeaseObjects())
	if err != nil {
		return nil, fmt.Errorf("functions: %s: %w", config.EnvJobLeaseStore, err)
	}
	m := lease.NewManager(bucket, LeasePrefix, lease.Options{Skew: d.ClockSkew, Logger: d.Logger, EpochFloor: scheduler.EpochFloor(d.Store), Metrics: d.Metrics,
		Markers: d.Store.LeaseMarkers(), FloorEachAcquire: scheduler.SharedFenceLease, JobLeases: jobs, OtherJobLeases: other,
		AlsoInJobLeases: scheduler.IsTickShardLease, ReleaseUnread: true})
	cfg := scheduler.Config{
		Store: d.Store, Leases: m, Clock: d.Clock, TickLeaseTTL: d.TickLeaseTTL,
		AllowedTargets: d.AllowedTargets, AllowedTopics: d.AllowedTopics, AllowedJobs: d.AllowedJobs, RunJobs: d.RunJobs, RunJobPoll: d.RunJobPoll, HTTPClient: d.HTTPClient, Logger: d.Logger,
		IDToken: config.Get(config.EnvTargetIDToken) == "true",
		Tasks:   d.Tasks,
		// Partitioned deciding (BATON_DECIDE_CONCURRENCY,
		// BATON_SHARD_CONCURRENCY); 0 is the engine's default.
		DecideConcurrency: d.DecideConcurrency, ShardConcurrency: d.ShardConcurrency,
		// Few busy shards are decided by the coordinating tick itself
		// (BATON_INLINE_SHARDS).
		InlineShards: d.InlineShards,
		// A decided shard's lease lapses (BATON_LAPSE_SHARD_LEASES).
		LapseShardLeases: d.LapseShardLeases,
		// Runs of several schedules share a task up to BATON_TASK_RUNS.
		TaskRuns: d.TaskRuns,
		Metrics:  d.Metrics,
		// The retention of finished runs (history.keep's default).
		HistoryKeep: d.HistoryKeep,
		Notify:      d.Notify, ConsoleURL: d.ConsoleURL, NotifyBackoff: d.NotifyBackoff, Publisher: d.Publisher,
	}
	if d.GPUPool != "" {
		dis, err := NewGPUDispatcher(d)
		if err != nil {
			return nil, fmt.Errorf("functions: gpu dispatcher: %w", err)
		}
		cfg.GPU = dis
	}
	eng, err := scheduler.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("functions: scheduler engine: %w", err)
	}
	return eng, nil
}

// NotifyFromEnv returns the default notification channel that
// BATON_NOTIFY_WEBHOOK_URL, BATON_NOTIFY_WEBHOOK_SECRET and BATON_NOTIFY_ON
// describe, checked as a schedule's notify block is (allowed is
// BATON_ALLOWED_TARGETS), or nil when the URL is unset. A bad setting is an
// error naming the variable, so that a typo stops the function from
// starting instead of dropping every notification. The secret is never in
// the error.
func NotifyFromEnv(allowed []string) (*schedule.Notify, error) {
	n, err := NotifyChannel(config.Get(config.EnvNotifyURL), config.Get(config.EnvNotifySecret), config.List(config.EnvNotifyOn), allowed)
	if err != nil {
		return nil, err
	}
	return WithTopic(n, config.Get(config.EnvNotifyTopic), config.List(config.EnvNotifyOn))
}

// WithTopic adds the default Pub/Sub channel (BATON_NOTIFY_TOPIC) to n,
// the default webhook channel or nil: an empty topic changes nothing.
func WithTopic(n *schedule.Notify, topic string, on []string) (*schedule.Notify, error) {
	if topic == "" {
		return n, nil
	}
	if err := schedule.CheckTopic("topic", topic); err != nil {
		var fe *schedule.FieldError
		if errors.As(err, &fe) {
			return nil, fmt.Errorf("functions: %s: %s", config.EnvNotifyTopic, fe.Reason)
		}
		return nil, fmt.Errorf("functions: %s: %w", config.EnvNotifyTopic, err)
	}
	if n == nil {
		n = &schedule.Notify{}
		for _, ev := range on {
			if !schedule.Event(ev).Valid() {
				return nil, fmt.Errorf("functions: %s: unknown event %q", config.EnvNotifyOn, ev)
			}
			n.On = append(n.On, schedule.Event(ev))
		}
	}
	n.PubSub = &schedule.PubSubTopic{Topic: topic}
	return n, nil
}

// NotifyChannel is NotifyFromEnv with the three settings given: the
// webhook URL (empty: no channel), its secret and its events.
func NotifyChannel(u, secret string, on, allowed []string) (*schedule.Notify, error) {
	if u == "" {
		return nil, nil
	}
	n := &schedule.Notify{Webhook: &schedule.Webhook{URL: u, Secret: schedule.Secret(secret)}}
	for _, ev := range on {
		n.On = append(n.On, schedule.Event(ev))
	}
	if err := n.Check(allowed); err != nil {
		var fe *schedule.FieldError
		name := config.EnvNotifyURL
		if errors.As(err, &fe) {
			switch {
			case strings.HasPrefix(fe.Field, "notify.on"):
				name = config.EnvNotifyOn
			case fe.Field == "notify.webhook.secret":
				name = config.EnvNotifySecret
			}
			return nil, fmt.Errorf("functions: %s: %s", name, fe.Reason)
		}
		return nil, fmt.Errorf("functions: %s: %w", name, err)
	}
	return n, nil
}
