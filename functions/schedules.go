package functions

import (
	"fmt"
	"net/http"

	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/openapi"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

func init() { register(config.FnSchedules, newSchedules) }

// newSchedules builds the Schedules function: the REST API for schedules and
// run history (flow 4), GET /leases (leases.go) and the API's contract, GET
// /openapi.json (shared/openapi). The service and its
// routes live in shared/catalog.
func newSchedules(d *Deps) (http.Handler, error) {
	if err := d.NeedStore(); err != nil {
		// GET /leases needs only the bucket, so it still serves.
		return openapi.WithDocument(httpapi.RequireToken(d.Token, withLeases(d, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			httpapi.WriteError(w, r, err)
		})))), nil
	}
	if err := d.NeedPageSecret(); err != nil {
		return nil, err
	}
	opts := catalog.Options{
		Validate: schedule.ValidateOptions{AllowedHosts: d.AllowedTargets, AllowedTopics: d.AllowedTopics, AllowedJobs: d.AllowedJobs, Builtins: scheduler.Builtins(), RefuseSubMinute: !d.SubMinute},
		Clock:    d.Clock,
		// The retention of change records (history.keep's default).
		HistoryKeep: d.HistoryKeep,
		EnsureTopic: d.EnsureTopic,
	}
	// Knowing the pool, a schedule's gpuType is refused at write time (a
	// 400 naming target.gpu.gpuType) rather than at its first run. Without
	// BATON_GPU_POOL the check is skipped: the Run function's dispatcher
	// still refuses an unknown type, and the run fails.
	if d.GPUPool != "" {
		pool, err := gpu.ParsePool(d.GPUPool)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", config.EnvGPUPool, err)
		}
		opts.Validate.GPUTypes = append([]string{}, pool.Types()...)
	}
	// Trigger-now runs the schedule through the scheduler's Engine, which
	// needs the lease bucket; without one, :trigger answers 503 and the
	// other routes still work.
	eng, err := newEngine(d)
	if err != nil {
		return nil, err
	}
	if eng != nil {
		opts.Triggerer, opts.Backfiller = eng, eng
	}
	h := catalog.NewHandler(catalog.New(d.Store, opts), catalog.HandlerOptions{})
	// The contract (GET /openapi.json) is public, outside the token check.
	return openapi.WithDocument(httpapi.RequireToken(d.Token, withLeases(d, h))), nil
}
