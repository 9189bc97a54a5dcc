package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/schedule"
)

// HandlerOptions configures NewHandler.
type HandlerOptions struct {
	// MaxBodyBytes limits request bodies; 0 means httpapi.MaxBodyBytes.
	// A larger body gets 413 and nothing is written.
	MaxBodyBytes int64
}

type handler struct {
	svc   *Service
	limit int64
}

// NewHandler serves svc as the Schedules REST API:
//
//	POST   /schedules                    create (201, Location)
//	GET    /schedules?pageSize=&pageToken=&labelSelector=  list
//	GET    /schedules/{id}               read (ETag: "version")
//	PATCH  /schedules/{id}               merge-patch update (If-Match: version → 412)
//	DELETE /schedules/{id}               delete (204; If-Match honoured)
//	POST   /schedules/{id}:pause         disable
//	POST   /schedules/{id}:resume        enable, recompute nextRunAt
//	POST   /schedules/{id}:trigger       run now (source manual)
//	POST   /schedules/{id}:backfill      runs of past fire times (source backfill)
//	GET    /schedules/{id}/runs?pageSize=&pageToken=  run history, newest first
//	GET    /schedules/{id}/versions?pageSize=&pageToken=  history of changes, newest first
//	GET    /runs?status=&source=&schedule=&since=&pageSize=&pageToken=  runs across schedules, newest first
//	GET    /runs/{id}                    one run
//	GET    /calendars, PUT|GET|DELETE /calendars/{id}  calendars (calendars.go)
//
// Every error is the shared JSON shape; invalid input is 400 naming the
// field. Authentication is the caller's job (httpapi.RequireToken).
func NewHandler(svc *Service, o HandlerOptions) http.Handler {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = httpapi.MaxBodyBytes
	}
	return &handler{svc: svc, limit: o.MaxBodyBytes}
}

// ServeHTTP routes by hand: ServeMux wildcards cannot express "{id}:pause"
// (a wildcard is a whole segment), so the last segment is split here.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Every write records who made it (the change records).
	r = r.WithContext(WithActor(r.Context(), httpapi.Actor(r)))
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) > 0 && parts[0] == "runs" && len(parts) <= 2 {
		if err := h.allRuns(w, r, parts[1:]); err != nil {
			httpapi.WriteError(w, r, err)
		}
		return
	}
	if len(parts) > 0 && parts[0] == "calendars" && len(parts) <= 2 {
		if err := h.calendarRoutes(w, r, parts[1:]); err != nil {
			httpapi.WriteError(w, r, err)
		}
		return
	}
	if len(parts) == 0 || parts[0] != "schedules" || len(parts) > 3 {
		httpapi.WriteError(w, r, httpapi.NotFound("no route for %s; see /schedules", r.URL.Path))
		return
	}
	var err error
	switch {
	case len(parts) == 1:
		err = h.collection(w, r)
	case len(parts) == 2:
		id, action, hasAction := strings.Cut(parts[1], ":")
		if hasAction {
			err = h.action(w, r, id, action)
		} else {
			err = h.item(w, r, id)
		}
	case parts[2] == "runs":
		err = h.runs(w, r, parts[1])
	case parts[2] == "versions":
		err = h.versions(w, r, parts[1])
	default:
		err = httpapi.NotFound("no route for %s", r.URL.Path)
	}
	if err != nil {
		httpapi.WriteError(w, r, err)
	}
}

func notAllowed(w http.ResponseWriter, r *http.Request, allow ...string) error {
	w.Header().Set("Allow", strings.Join(allow, ", "))
	return httpapi.MethodNotAllowed(r.Method)
}

func (h *handler) collection(w http.ResponseWriter, r *http.Request) error {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		o, err := labelledListOptions(r)
		if err != nil {
			return err
		}
		page, err := h.svc.List(r.Context(), o)
		if err != nil {
			return err
		}
		httpapi.WriteJSON(w, http.StatusOK, page)
	case http.MethodPost:
		body, err := h.body(w, r)
		if err != nil {
			return err
		}
		sc, err := h.svc.CreateJSON(r.Context(), body)
		if err != nil {
			return err
		}
		w.Header().Set("Location", "/schedules/"+sc.ID)
		writeSchedule(w, http.StatusCreated, sc)
	default:
		return notAllowed(w, r, http.MethodGet, http.MethodPost)
	}
	return nil
}

func (h *handler) item(w http.ResponseWriter, r *http.Request, id string) error {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		sc, err := h.svc.Get(r.Context(), id)
		if err != nil {
			return err
		}
		writeSchedule(w, http.StatusOK, sc)
	case http.MethodPatch:
		ifMatch, err := parseIfMatch(r)
		if err != nil {
			return err
		}
		body, err := h.body(w, r)
		if err != nil {
			return err
		}
		patch, err := decodePatch(body)
		if err != nil {
			return err
		}
		sc, err := h.svc.Update(r.Context(), id, patch, ifMatch)
		if err != nil {
			return err
		}
		writeSchedule(w, http.StatusOK, sc)
	case http.MethodDelete:
		ifMatch, err := parseIfMatch(r)
		if err != nil {
			return err
		}
		if err := h.svc.Delete(r.Context(), id, ifMatch); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		return notAllowed(w, r, http.MethodGet, http.MethodPatch, http.MethodDelete)
	}
	return nil
}

func (h *handler) action(w http.ResponseWriter, r *http.Request, id, action string) error {
	if action != "pause" && action != "resume" && action != "trigger" && action != "backfill" {
		return httpapi.NotFound("unknown action %q; use :pause, :resume, :trigger or :backfill", action)
	}
	if r.Method != http.MethodPost {
		return notAllowed(w, r, http.MethodPost)
	}
	if action == "backfill" {
		return h.backfill(w, r, id)
	}
	// :pause takes an optional {"reason"}; the other actions take no
	// body. Anything else is refused rather than ignored.
	body, err := h.body(w, r)
	if err != nil {
		return err
	}
	pause, err := actionBody(action, bytes.TrimSpace(body))
	if err != nil {
		return err
	}
	pause.By = httpapi.Actor(r)
	ifMatch, err := parseIfMatch(r)
	if err != nil {
		return err
	}
	switch action {
	case "trigger":
		run, err := h.svc.Trigger(r.Context(), id)
		if err != nil {
			return err
		}
		httpapi.WriteJSON(w, http.StatusOK, run)
		return nil
	case "pause":
		sc, err := h.svc.Pause(r.Context(), id, pause, ifMatch)
		if err != nil {
			return err
		}
		writeSchedule(w, http.StatusOK, sc)
	default:
		sc, err := h.svc.Resume(r.Context(), id, ifMatch)
		if err != nil {
			return err
		}
		writeSchedule(w, http.StatusOK, sc)
	}
	return nil
}

// actionBody reads an action's body: empty or {} for every action, and
// {"reason": "…", "until": "<RFC 3339>"} for pause (400 naming the field
// otherwise).
func actionBody(action string, body []byte) (p PauseRequest, err error) {
	if len(body) == 0 || string(body) == "{}" {
		return p, nil
	}
	if action != "pause" {
		return p, httpapi.BadRequest("", "%s takes no request body", action)
	}
	var in map[string]json.RawMessage
	if err := json.Unmarshal(body, &in); err != nil {
		return p, httpapi.BadRequest("", "pause takes an optional JSON object {\"reason\": \"why\", \"until\": \"2026-03-01T09:00:00Z\"}: %v", err)
	}
	for k := range in {
		if k != "reason" && k != "until" {
			return p, httpapi.BadRequest(k, "unknown field; pause takes only \"reason\" and \"until\"")
		}
	}
	if raw, ok := in["reason"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &p.Reason); err != nil {
			return p, httpapi.BadRequest("reason", "must be a string")
		}
		if len(p.Reason) > schedule.MaxDescription {
			return p, httpapi.BadRequest("reason", "is %d bytes; at most %d", len(p.Reason), schedule.MaxDescription)
		}
	}
	if raw, ok := in["until"]; ok && string(raw) != "null" {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return p, httpapi.BadRequest("until", "must be an RFC 3339 time string, such as 2026-03-01T09:00:00Z")
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return p, httpapi.BadRequest("until", "%q is not an RFC 3339 time, such as 2026-03-01T09:00:00Z", s)
		}
		p.Until = t.UTC()
	}
	return p, nil
}

func (h *handler) runs(w http.ResponseWriter, r *http.Request, id string) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return notAllowed(w, r, http.MethodGet)
	}
	o, err := listOptions(r)
	if err != nil {
		return err
	}
	page, err := h.svc.ListRuns(r.Context(), id, o)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, page)
	return nil
}

// versions serves GET /schedules/{id}/versions.
func (h *handler) versions(w http.ResponseWriter, r *http.Request, id string) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return notAllowed(w, r, http.MethodGet)
	}
	o, err := listOptions(r)
	if err != nil {
		return err
	}
	page, err := h.svc.ListVersions(r.Context(), id, o)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, page)
	return nil
}

// allRuns serves /runs (rest empty) and /runs/{id}.
func (h *handler) allRuns(w http.ResponseWriter, r *http.Request, rest []string) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return notAllowed(w, r, http.MethodGet)
	}
	if len(rest) == 1 {
		run, err := h.svc.GetRun(r.Context(), rest[0])
		if errors.Is(err, ErrRunNotFound) {
			return httpapi.NotFound("no run has id %q", rest[0])
		}
		if err != nil {
			return err
		}
		httpapi.WriteJSON(w, http.StatusOK, run)
		return nil
	}
	o, err := listOptions(r, runFilterParams...)
	if err != nil {
		return err
	}
	f, err := runFilter(r)
	if err != nil {
		return err
	}
	page, err := h.svc.ListAllRuns(r.Context(), f, o)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, page)
	return nil
}

// runFilterParams are the filters of GET /runs.
var runFilterParams = []string{"status", "source", "schedule", "since"}

// runFilter reads GET /runs' filters; the service validates their values.
func runFilter(r *http.Request) (RunFilter, error) {
	q := r.URL.Query()
	f := RunFilter{
		Status:     schedule.RunStatus(q.Get("status")),
		Source:     schedule.Source(q.Get("source")),
		ScheduleID: q.Get("schedule"),
	}
	if s := q.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return f, httpapi.BadRequest("since", "must be an RFC 3339 time such as 2026-03-01T09:00:00Z, not %q", s)
		}
		f.Since = t.UTC()
	}
	return f, nil
}

// backfill serves POST /schedules/{id}:backfill {start, end, dryRun?,
// pageToken?}.
func (h *handler) backfill(w http.ResponseWriter, r *http.Request, id string) error {
	body, err := h.body(w, r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return httpapi.BadRequest("", "body is empty; want {\"start\": RFC 3339, \"end\": RFC 3339, \"dryRun\": bool}")
	}
	var req schedule.BackfillRequest
	if err := httpapi.Unmarshal(body, &req); err != nil {
		return err
	}
	res, err := h.svc.Backfill(r.Context(), id, req)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, res)
	return nil
}

// body reads the whole request body under the limit, so an oversized body
// is refused (413) before anything is decoded or written.
func (h *handler) body(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.limit))
	var maxErr *http.MaxBytesError
	switch {
	case errors.As(err, &maxErr):
		return nil, maxErr
	case err != nil:
		return nil, httpapi.BadRequest("", "reading the body: %v", err)
	}
	return b, nil
}

// decodePatch reads a merge patch: one JSON object. Unknown fields are
// caught after merging, by the same strict decoder as create.
func decodePatch(body []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, httpapi.BadRequest("", "body is empty; a JSON object with the fields to change is required")
	}
	// Strictly: a key given twice would be lost by the merge, so the
	// schedule decoder could not refuse it as it does on create.
	var patch map[string]any
	if err := httpapi.Unmarshal(body, &patch); err != nil {
		return nil, err
	}
	if patch == nil {
		return nil, httpapi.BadRequest("", "body must be a JSON object (a merge patch, RFC 7396)")
	}
	return patch, nil
}

// listOptions reads a list's pageSize and pageToken, and refuses a query
// parameter that is neither those nor one of the list's filters (extra).
func listOptions(r *http.Request, extra ...string) (ListOptions, error) {
	q := r.URL.Query()
	o := ListOptions{PageToken: q.Get("pageToken")}
	if err := httpapi.KnownParams(q, append([]string{"pageSize", "pageToken"}, extra...)); err != nil {
		return o, err
	}
	if s := q.Get("pageSize"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return o, httpapi.BadRequest("pageSize", "must be an integer between 1 and %d, not %q", MaxPageSize, s)
		}
		if n == 0 {
			return o, httpapi.BadRequest("pageSize", "must be between 1 and %d, not 0", MaxPageSize)
		}
		o.PageSize = n
	}
	return o, nil
}

// labelledListOptions reads the list options of a list that filters by
// labels: labelSelector is comma-separated key=value terms, ANDed.
func labelledListOptions(r *http.Request) (ListOptions, error) {
	o, err := listOptions(r, "labelSelector")
	if err != nil {
		return o, err
	}
	sel, err := schedule.ParseLabelSelector("labelSelector", r.URL.Query().Get("labelSelector"))
	if err != nil {
		return o, err
	}
	o.Selector = sel
	return o, nil
}

// parseIfMatch reads If-Match as a schedule version. It accepts the ETag
// form ("3", W/"3") and the bare number; "*" or no header means no
// precondition (0).
func parseIfMatch(r *http.Request) (int64, error) {
	s := strings.TrimSpace(r.Header.Get("If-Match"))
	if s == "" || s == "*" {
		return 0, nil
	}
	v := strings.Trim(strings.TrimPrefix(s, "W/"), `"`)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, httpapi.BadRequest("If-Match", "must be a schedule version (the ETag of GET), such as \"3\", not %q", s)
	}
	return n, nil
}

// writeSchedule answers with the schedule and its version as the ETag, for
// the next If-Match.
func writeSchedule(w http.ResponseWriter, status int, sc *schedule.Schedule) {
	w.Header().Set("ETag", ETag(sc.Version))
	httpapi.WriteJSON(w, status, sc)
}

// ETag formats a schedule version as an HTTP entity tag.
func ETag(version int64) string { return `"` + strconv.FormatInt(version, 10) + `"` }
