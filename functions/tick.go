package functions

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/scheduler"
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
		// A partition task (issue 28): decide the partition it names.
		pt, isPartition, perr := partitionBody(r)
		if perr != nil {
			httpapi.WriteError(w, r, perr)
			return
		}
		if isPartition {
			sum, err := eng.TickPartition(context.WithoutCancel(r.Context()), pt.ScheduleTime, pt.Partition, pt.Partitions)
			if err != nil {
				d.health.record(err, 0)
				// 500: Cloud Tasks redelivers the partition, which
				// decides what is still due.
				httpapi.WriteError(w, r, errcode.Wrap(errcode.Internal, err, ""))
				return
			}
			d.health.record(nil, sum.Errors)
			httpapi.WriteJSON(w, http.StatusOK, sum)
			return
		}
		if d.Partitions > 0 {
			// The coordinator: P partition tasks per schedule time,
			// named so that a duplicated tick creates none twice.
			var pd scheduler.PartitionDispatcher
			if d.PartitionQueue != nil {
				var err error
				if pd, err = d.PartitionQueue(selfURL(r)); err != nil {
					d.health.record(err, 0)
					httpapi.WriteError(w, r, errcode.Wrap(errcode.Internal, err, ""))
					return
				}
			}
			cs, err := eng.CoordinateVia(context.WithoutCancel(r.Context()), pd, st, d.Partitions)
			if err != nil {
				d.health.record(err, 0)
				httpapi.WriteError(w, r, errcode.Wrap(errcode.Internal, err, ""))
				return
			}
			// A minute decided inline reports its errors as a
			// partition's request does, and a failed inline decide
			// counts as one, though the partitions took over.
			errs := 0
			for _, s := range cs.Inline {
				errs += s.Errors
			}
			var ierr error
			if cs.InlineError != "" {
				ierr = fmt.Errorf("the inline decide failed, and the partitions took over: %s", cs.InlineError)
			}
			d.health.record(ierr, errs)
			httpapi.WriteJSON(w, http.StatusOK, cs)
			return
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

// maxPartitionBody bounds a partition task's body, a few dozen bytes.
const maxPartitionBody = 4 << 10

// partitionBody reads a partition task's JSON body
// (scheduler.PartitionTask). A body without "partitions" (Cloud
// Scheduler's tick sends none) is not a partition task. A partition task
// whose numbers do not fit this deployment is a 400 naming the field.
func partitionBody(r *http.Request) (scheduler.PartitionTask, bool, error) {
	var pt scheduler.PartitionTask
	if r.Method != http.MethodPost || r.Body == nil {
		return pt, false, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxPartitionBody+1))
	if err != nil {
		return pt, false, httpapi.BadRequest("body", "read: %v", err)
	}
	if len(b) > maxPartitionBody {
		return pt, false, httpapi.BadRequest("body", "a partition task's body is at most %d bytes", maxPartitionBody)
	}
	var probe map[string]json.RawMessage
	if len(bytes.TrimSpace(b)) == 0 || json.Unmarshal(b, &probe) != nil || probe["partitions"] == nil {
		return pt, false, nil
	}
	if err := json.Unmarshal(b, &pt); err != nil {
		return pt, false, httpapi.BadRequest("partitions", "a partition task: %v", err)
	}
	if err := scheduler.CheckPartition(pt.Partition, pt.Partitions); err != nil {
		field := "partition"
		if pt.Partitions < 1 || pt.Partitions > scheduler.MaxPartitions() {
			field = "partitions"
		}
		return pt, false, httpapi.BadRequest(field, "%v", err)
	}
	return pt, true, nil
}

// selfURL is the URL this request reached: the partition tasks' target,
// and the audience of their OIDC token. Behind Google's front end the
// scheme is in X-Forwarded-Proto. The root path is left off: Cloud
// Scheduler calls Tick at its service URL, and Cloud Run wants a token's
// audience to match the service's run.app URL
// (https://cloud.google.com/run/docs/configuring/custom-audiences), the
// very audience the Scheduler job's own token carries (scheduler.tf); a
// trailing "/" would be a different string. Locally Tick is mounted under
// /Tick, which stays.
func selfURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	path := r.URL.Path
	if path == "/" {
		path = ""
	}
	return scheme + "://" + r.Host + path
}
