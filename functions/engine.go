package functions

import (
	"fmt"

	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/lease"
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
	// new bucket) restarts above the fences already stored, not at 1.
	m := lease.NewManager(d.Storage.Bucket(d.Bucket), LeasePrefix, lease.Options{Skew: d.ClockSkew, Logger: d.Logger, EpochFloor: scheduler.EpochFloor(d.Store), Metrics: d.Metrics})
	cfg := scheduler.Config{
		Store: d.Store, Leases: m, Clock: d.Clock, TickLeaseTTL: d.TickLeaseTTL,
		AllowedTargets: d.AllowedTargets, HTTPClient: d.HTTPClient, Logger: d.Logger,
		IDToken: config.Get(config.EnvTargetIDToken) == "true",
		Tasks:   d.Tasks,
		Metrics: d.Metrics,
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
