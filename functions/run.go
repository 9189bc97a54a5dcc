package functions

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// Cloud Tasks' request headers (tasks/docs/creating-http-target-tasks).
const (
	HeaderTaskQueue          = "X-CloudTasks-QueueName"
	HeaderTaskName           = "X-CloudTasks-TaskName"
	HeaderTaskRetryCount     = "X-CloudTasks-TaskRetryCount"
	HeaderTaskExecutionCount = "X-CloudTasks-TaskExecutionCount"
)

func init() { register(config.FnRun, newRun) }

// newRun builds the Run function (flow 1, step 6): Cloud Tasks calls it
// with one task's runs, and it executes them under the job lease. It answers
// 503 only when a run is still pending, so that Cloud Tasks delivers the
// task again; everything else is 200, because a redelivery of a finished
// run changes nothing. The algorithm lives in shared/scheduler.
func newRun(d *Deps) (http.Handler, error) {
	eng, err := newEngine(d)
	if err != nil {
		return nil, err
	}
	return httpapi.RequireToken(d.Token, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			httpapi.WriteError(w, r, httpapi.MethodNotAllowed(r.Method))
			return
		}
		if eng == nil {
			httpapi.WriteError(w, r, errcode.New(errcode.Unavailable, "Run needs "+config.EnvMongoURI+" and "+config.EnvBucket))
			return
		}
		var t scheduler.Task
		if err := httpapi.DecodeJSON(w, r, scheduler.MaxTaskBody, &t); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		if err := checkTask(t); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		dl := deliveryOf(r)
		// The queue's dispatch deadline may pass while a target runs: the
		// run goes on under its job lease, and the redelivery finds it
		// claimed and does nothing.
		out, err := eng.Execute(context.WithoutCancel(r.Context()), t, dl)
		d.Logger.Info("run task", "task", dl.Task, "retryCount", dl.RetryCount, "executionCount", dl.ExecutionCount, "outcome", out, "err", errString(err))
		switch {
		case errors.Is(err, scheduler.ErrRetryTask) && out != nil:
			httpapi.WriteJSON(w, http.StatusServiceUnavailable, out)
		case errors.Is(err, scheduler.ErrRetryTask):
			httpapi.WriteError(w, r, err) // Unavailable: 503
		case err != nil:
			// The engine's failures are not answers to the caller (a
			// NotFound deep in a run is not a 404 of this URL): 500.
			httpapi.WriteError(w, r, errcode.Wrap(errcode.Internal, err, ""))
		default:
			httpapi.WriteJSON(w, http.StatusOK, out)
		}
	})), nil
}

// checkTask refuses a body that no scheduler would have sent: one
// schedule's runs, or a page of such entries (never nested), with at most
// MaxTaskRuns runs in all.
func checkTask(t scheduler.Task) error {
	if len(t.Page) == 0 {
		return checkEntry("", t)
	}
	if t.ScheduleID != "" || len(t.Runs) > 0 {
		return httpapi.BadRequest("page", "a page carries its runs in its entries, not in scheduleId and runs")
	}
	n := 0
	for i, p := range t.Page {
		f := "page[" + strconv.Itoa(i) + "]"
		if len(p.Page) > 0 {
			return httpapi.BadRequest(f+".page", "a page entry cannot be a page")
		}
		if err := checkEntry(f+".", p); err != nil {
			return err
		}
		n += len(p.Runs)
	}
	if n > scheduler.MaxTaskRuns {
		return httpapi.BadRequest("page", "has %d run ids in all; at most %d", n, scheduler.MaxTaskRuns)
	}
	return nil
}

// checkEntry checks one schedule's runs; prefix names the entry's fields.
func checkEntry(prefix string, t scheduler.Task) error {
	if t.ScheduleID == "" {
		return httpapi.BadRequest(prefix+"scheduleId", "is required")
	}
	if len(t.Runs) == 0 {
		return httpapi.BadRequest(prefix+"runs", "is required: a list of run ids")
	}
	if len(t.Runs) > scheduler.MaxTaskRuns {
		return httpapi.BadRequest(prefix+"runs", "has %d run ids; at most %d", len(t.Runs), scheduler.MaxTaskRuns)
	}
	for i, id := range t.Runs {
		if id == "" || len(id) > 256 {
			return httpapi.BadRequest(prefix+"runs["+strconv.Itoa(i)+"]", "must be a run id of 1 to 256 bytes")
		}
	}
	return nil
}

// deliveryOf reads Cloud Tasks' headers. A request without them (a test, an
// operator's curl) is recorded as such: an empty task name.
func deliveryOf(r *http.Request) *schedule.Delivery {
	n := func(h string) int {
		v, _ := strconv.Atoi(r.Header.Get(h))
		return max(v, 0)
	}
	return &schedule.Delivery{
		Queue: r.Header.Get(HeaderTaskQueue), Task: r.Header.Get(HeaderTaskName),
		RetryCount: n(HeaderTaskRetryCount), ExecutionCount: n(HeaderTaskExecutionCount),
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
