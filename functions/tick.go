package functions

import (
	"context"
	"net/http"
	"time"

	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/httpapi"
)

// HeaderScheduleTime is the header Cloud Scheduler sets to the scheduled
// time; it stays the same across the retries of one scheduled time.
const HeaderScheduleTime = "X-CloudScheduler-ScheduleTime"

func init() { register(config.FnTick, newTick) }

// newTick builds the Tick function (flow 1): Cloud Scheduler calls it every
// minute; it answers with the scheduler's JSON summary. The algorithm lives
// in shared/scheduler.
func newTick(d *Deps) (http.Handler, error) {
	eng, err := newEngine(d)
	if err != nil {
		return nil, err
	}
	return httpapi.RequireToken(d.Token, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost && r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET, POST")
			httpapi.WriteError(w, r, httpapi.MethodNotAllowed(r.Method))
			return
		}
		if eng == nil {
			httpapi.WriteError(w, r, errcode.New(errcode.Unavailable, "Tick needs "+config.EnvMongoURI+" and "+config.EnvBucket))
			return
		}
		var st time.Time
		if v := r.Header.Get(HeaderScheduleTime); v != "" {
			var err error
			if st, err = time.Parse(time.RFC3339Nano, v); err != nil {
				httpapi.WriteError(w, r, httpapi.BadRequest(HeaderScheduleTime, "must be an RFC 3339 time, got %q", v))
				return
			}
		}
		// A caller that hangs up (Cloud Scheduler's attempt deadline) must not
		// cancel runs in flight: they finish under their own job leases.
		sum, err := eng.Tick(context.WithoutCancel(r.Context()), st)
		if err != nil {
			d.health.record(err, 0)
			// The engine's failures are not answers to the caller (a
			// held lease is not a 409 of this URL): 500, as always.
			httpapi.WriteError(w, r, errcode.Wrap(errcode.Internal, err, ""))
			return
		}
		d.health.record(nil, sum.Errors)
		httpapi.WriteJSON(w, http.StatusOK, sum)
	})), nil
}
