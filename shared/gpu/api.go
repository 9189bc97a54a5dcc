package gpu

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/baton-cron/baton/shared/httpapi"
)

// maxBody bounds request bodies: a payload at its limit, JSON-escaped, fits.
const maxBody = 4 * MaxPayloadBytes

// CodePermissionDenied is the error code of a 403: a worker callback
// without its dispatch's secret (ErrForbidden). It is httpapi's, which
// answers every errcode.PermissionDenied with it; the name stays here for
// the callers that know it from this package.
const CodePermissionDenied = httpapi.CodePermissionDenied

// CodeWrongFunction is the error code of a 421 Misdirected Request: a
// route sent to the GPU function that does not serve it (a worker callback
// to the operators' GPU, an operator call to GPUCallback). The message
// names the function to call. It is not a 404 because a worker reads 404
// on a callback as "this job is no longer mine" and stops the command; a
// worker whose BATON_CONTROL_URL names the wrong function (or an old
// worker revision during an upgrade) must keep its job and report the
// misconfiguration instead (shared/gpu/worker).
const CodeWrongFunction = "wrong_function"

// Names of the two functions serving this API, as deployed (config.FnGPU
// and config.FnGPUCallback), for the 421 answers; shared/config is not
// imported here for two strings.
const (
	operatorFunction = "GPU"
	callbackFunction = "GPUCallback"
)

// Routes selects which of the GPU API's routes a handler serves, so that
// the operators' API and the workers' callbacks can be deployed as two
// functions, each with its own invoker grants: in the cloud every worker
// holds invoker on the callback function, and nobody else does.
type Routes int

const (
	// AllRoutes serves every route on one handler (tests, benchmarks).
	AllRoutes Routes = iota
	// OperatorRoutes serves enqueue, list, read, cancel, logs and the pool view,
	// and refuses the worker callbacks with 421 (CodeWrongFunction): the
	// GPU function.
	OperatorRoutes
	// CallbackRoutes serves only POST /gpu/jobs/{id}:heartbeat and
	// :complete, and refuses everything else with 421 (CodeWrongFunction):
	// the GPUCallback function, the only one workers may invoke.
	CallbackRoutes
)

// NewHandler serves the GPU REST API (the GPU function):
//
//	POST /gpu/jobs                      enqueue (201; 200 when the id existed)
//	GET  /gpu/jobs?status=&tenant=&pageToken=&pageSize=   list, newest first
//	GET  /gpu/jobs/{id}                 read
//	POST /gpu/jobs/{id}:cancel          cancel a queued or running job
//	POST /gpu/jobs/{id}:heartbeat       worker: {slot, epoch}; 409 when stale or cancelled
//	POST /gpu/jobs/{id}:complete        worker: {slot, epoch, exitCode, …}; 409 when stale
//	GET  /gpu/jobs/{id}/logs?stream=stdout|stderr&attempt=N   the worker's output object, text/plain
//	GET  /gpu/pool                      each slot (job, epoch, lease left, type), each tenant, the queue heads
//
// Authentication is the caller's job (httpapi.RequireToken locally, IAM in
// the cloud). Authorisation of the two worker callbacks is this handler's:
// they must carry the dispatch's secret in SecretHeader, or get 403 when
// their fence holds (409 when it is stale either way).
func NewHandler(d *Dispatcher) http.Handler { return NewRoutesHandler(d, AllRoutes) }

// NewRoutesHandler is NewHandler serving only the routes of r; a route of
// the other kind gets a JSON 421 Misdirected Request, code
// CodeWrongFunction, that names the function serving it, so a worker
// pointed at the wrong URL learns why and does not take it for a stale
// fence (404 or 409).
func NewRoutesHandler(d *Dispatcher, r Routes) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if err := allowed(r, req); err != nil {
			httpapi.WriteError(w, req, err)
			return
		}
		if err := route(d, w, req); err != nil {
			httpapi.WriteError(w, req, err)
		}
	})
}

// IsCallback reports whether path is a worker callback route
// (/gpu/jobs/{id}:heartbeat or :complete), whatever the method.
func IsCallback(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) != 3 || parts[0] != "gpu" || parts[1] != "jobs" {
		return false
	}
	_, action, _ := strings.Cut(parts[2], ":")
	return action == "heartbeat" || action == "complete"
}

// allowed refuses the routes r does not serve, before any body is read.
func allowed(r Routes, req *http.Request) error {
	cb := IsCallback(req.URL.Path)
	switch {
	case r == OperatorRoutes && cb:
		return wrongFunction("%s is a worker callback, served by the %s function: set the worker's BATON_CONTROL_URL to its URL; this is the operators' %s function", req.URL.Path, callbackFunction, operatorFunction)
	case r == CallbackRoutes && !cb:
		return wrongFunction("%s is not served here: the %s function serves only the worker callbacks POST /gpu/jobs/{id}:heartbeat and :complete; call the %s function", req.URL.Path, callbackFunction, operatorFunction)
	}
	return nil
}

// wrongFunction is the 421 answer to a route another function serves; the
// message names that function.
func wrongFunction(format string, args ...any) *httpapi.Error {
	return &httpapi.Error{Status: http.StatusMisdirectedRequest, Code: CodeWrongFunction, Message: httpapi.Sprintf(format, args...)}
}

// route dispatches by hand: ServeMux wildcards cannot express "{id}:cancel".
func route(d *Dispatcher, w http.ResponseWriter, r *http.Request) error {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	// Four segments only for /gpu/jobs/{id}/logs; IsCallback never
	// matches them, so OperatorRoutes serve it and CallbackRoutes refuse
	// it with 421.
	logs := len(parts) == 4 && parts[1] == "jobs" && parts[3] == "logs"
	if len(parts) < 2 || parts[0] != "gpu" || (len(parts) > 3 && !logs) || (parts[1] != "jobs" && parts[1] != "pool") {
		return httpapi.NotFound("no route for %s; see /gpu/jobs and /gpu/pool", r.URL.Path)
	}
	ctx := r.Context()
	switch {
	case parts[1] == "pool" && len(parts) == 2:
		if err := only(w, r, http.MethodGet); err != nil {
			return err
		}
		view, err := d.View(ctx)
		if err != nil {
			return err
		}
		httpapi.WriteJSON(w, http.StatusOK, view)
	case parts[1] == "jobs" && len(parts) == 2 && r.Method == http.MethodPost:
		var req EnqueueRequest
		if err := httpapi.DecodeJSON(w, r, maxBody, &req); err != nil {
			// encoding/json does not name the field when a type's own
			// UnmarshalJSON fails; timeout is the only such field here.
			var he *httpapi.Error
			if errors.As(err, &he) && he.Field == "" && strings.Contains(he.Message, "duration") {
				return httpapi.BadRequest("timeout", "must be a duration such as \"90s\" or \"30m\": %s", he.Message)
			}
			return err
		}
		job, created, err := d.Enqueue(ctx, req)
		if err != nil {
			return err
		}
		status := http.StatusOK
		if created {
			status = http.StatusCreated
			w.Header().Set("Location", "/gpu/jobs/"+url.PathEscape(job.ID))
		}
		httpapi.WriteJSON(w, status, job)
	case parts[1] == "jobs" && len(parts) == 2:
		if err := only(w, r, http.MethodGet, http.MethodPost); err != nil {
			return err
		}
		q := r.URL.Query()
		if r.Method == http.MethodGet {
			if err := httpapi.KnownParams(q, []string{"status", "tenant", "pageSize", "pageToken"}); err != nil {
				return err
			}
		}
		lq := ListQuery{Status: JobStatus(q.Get("status")), Tenant: q.Get("tenant"), PageToken: q.Get("pageToken")}
		if s := q.Get("pageSize"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				return httpapi.BadRequest("pageSize", "must be a positive integer, not %q", s)
			}
			lq.PageSize = n
		}
		jobs, next, err := d.List(ctx, lq)
		if err != nil {
			return err
		}
		httpapi.WriteJSON(w, http.StatusOK, JobPage{Jobs: jobs, NextPageToken: next})
	case parts[1] == "jobs" && len(parts) == 3:
		return jobRoute(d, w, r, parts[2])
	case logs:
		return logsRoute(d, w, r, parts[2])
	default:
		return httpapi.NotFound("no route for %s", r.URL.Path)
	}
	return nil
}

func jobRoute(d *Dispatcher, w http.ResponseWriter, r *http.Request, seg string) error {
	ctx := r.Context()
	id, action, _ := strings.Cut(seg, ":")
	var (
		job Job
		err error
	)
	switch action {
	case "":
		if err := only(w, r, http.MethodGet); err != nil {
			return err
		}
		job, err = d.Get(ctx, id)
	case "cancel":
		if err := only(w, r, http.MethodPost); err != nil {
			return err
		}
		job, err = d.Cancel(ctx, id)
	case "heartbeat", "complete":
		if err := only(w, r, http.MethodPost); err != nil {
			return err
		}
		var c CompleteRequest
		if action == "heartbeat" {
			var h HeartbeatRequest
			err = httpapi.DecodeJSON(w, r, maxBody, &h)
			c.Fence = h.Fence
		} else {
			err = httpapi.DecodeJSON(w, r, maxBody, &c)
		}
		if err == nil {
			err = checkFence(c.Fence)
		}
		// A missing header is not rejected here: it is a wrong secret like
		// any other (403 if the fence holds, 409 if it is stale), so an
		// older worker learns its fence is stale the way it always did.
		c.Secret = r.Header.Get(SecretHeader)
		if err != nil {
			return err
		}
		if action == "heartbeat" {
			job, err = d.Heartbeat(ctx, id, c.Fence)
		} else {
			job, err = d.Complete(ctx, id, c)
		}
	default:
		return httpapi.NotFound("unknown action %q; want cancel, heartbeat or complete", action)
	}
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, job)
	return nil
}

func checkFence(f Fence) error {
	if f.Slot == "" {
		return httpapi.BadRequest("slot", "is required: the slot id from POST /run")
	}
	if f.Epoch < 1 {
		return httpapi.BadRequest("epoch", "must be the positive fence epoch from POST /run, not %d", f.Epoch)
	}
	return nil
}

func only(w http.ResponseWriter, r *http.Request, methods ...string) error {
	for _, m := range methods {
		if r.Method == m {
			return nil
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	return httpapi.MethodNotAllowed(r.Method)
}
