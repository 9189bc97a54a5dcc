package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/gpu/gpumodel"
	"github.com/baton-cron/baton/shared/schedule"
)

// Sizes of what the pages show.
const (
	listPageSize    = 20  // schedules, runs, jobs, leases per page
	sparkRuns       = 20  // recent outcomes in a schedule's sparkline
	listFireTimes   = 3   // next fire times in the schedules list
	detailFireTimes = 10  // next fire times on a schedule's page
	queueCountLimit = 500 // queued jobs counted for the queue depth
	logLimit        = 256 << 10
)

// fireTime is one upcoming fire time; DST is set when its UTC offset
// differs from the previous one's.
type fireTime struct {
	T   time.Time
	DST string
	// Skip, when set, says why the schedule's calendars skip this time.
	Skip string
}

// upcoming computes n fire times of sc after now, as `schedules describe`
// does: the schedule's own spec (H fields, DST policy, jitter, start and
// end), not the bare expression. A cron or zone the API accepted but this
// binary cannot read gives an error shown in place of the times.
func upcoming(sc *schedule.Schedule, now time.Time, n int) ([]fireTime, error) {
	spec, err := sc.Spec()
	if err != nil {
		return nil, fmt.Errorf("cron %q: %w", sc.Cron, err)
	}
	loc, err := schedule.LoadLocation(sc.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: %w", sc.TimeZone, err)
	}
	times := schedule.Upcoming(spec, loc, now, n)
	out := make([]fireTime, len(times))
	for i, t := range times {
		out[i].T = t
		if i > 0 && schedule.OffsetChanged(times[i-1], t) {
			out[i].DST = fmt.Sprintf("DST: UTC offset %s → %s", times[i-1].Format("-07:00"), t.Format("-07:00"))
		}
	}
	return out, nil
}

// scheduleRow is one line of the schedules page.
type scheduleRow struct {
	S     schedule.Schedule
	Next  []fireTime
	Last  *schedule.Run
	Spark spark
	Err   error
}

func (s *server) schedules(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := url.Values{"pageSize": {strconv.Itoa(listPageSize)}}
	if tok := r.URL.Query().Get("pageToken"); tok != "" {
		q.Set("pageToken", tok)
	}
	// The label filter is passed to the API as it is: the API checks it
	// and names labelSelector when it refuses it.
	sel := strings.TrimSpace(r.URL.Query().Get("labelSelector"))
	if sel != "" {
		q.Set("labelSelector", sel)
	}
	var page catalog.SchedulePage
	data := struct {
		Rows     []scheduleRow
		Next     string
		Err      error
		Selector string
	}{Selector: sel}
	if err := s.sched.do(ctx, http.MethodGet, "/schedules", q, nil, &page); err != nil {
		data.Err = err
		s.render(w, r, statusOf(err), "schedules", "Schedules", "schedules", data)
		return
	}
	now := s.cfg.Clock()
	data.Rows = make([]scheduleRow, len(page.Schedules))
	var wg sync.WaitGroup
	for i := range page.Schedules {
		row := &data.Rows[i]
		row.S = page.Schedules[i]
		row.Next, row.Err = upcoming(&row.S, now, listFireTimes)
		wg.Go(func() {
			runs, err := s.recentRuns(ctx, row.S.ID, sparkRuns, "")
			if err != nil {
				row.Err = err
				return
			}
			if len(runs.Runs) > 0 {
				row.Last = &runs.Runs[0]
			}
			row.Spark = sparkline(runs.Runs)
		})
	}
	wg.Wait()
	if page.NextPageToken != "" {
		next := url.Values{"pageToken": {page.NextPageToken}}
		if sel != "" {
			next.Set("labelSelector", sel)
		}
		data.Next = s.link("/", next)
	}
	s.render(w, r, http.StatusOK, "schedules", "Schedules", "schedules", data)
}

// historyPageSize is how many change records the schedule page shows.
const historyPageSize = 10

func (s *server) recentRuns(ctx context.Context, id string, n int, token string) (catalog.RunPage, error) {
	var page catalog.RunPage
	q := url.Values{"pageSize": {strconv.Itoa(n)}}
	if token != "" {
		q.Set("pageToken", token)
	}
	err := s.sched.do(ctx, http.MethodGet, "/schedules/"+url.PathEscape(id)+"/runs", q, nil, &page)
	return page, err
}

func (s *server) scheduleDetail(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	data := struct {
		S       schedule.Schedule
		Next    []fireTime
		NextErr error
		Runs    []schedule.Run
		RunsErr error
		More    string
		Zone    string
		// The history of changes (GET /schedules/{id}/versions).
		Versions    []schedule.VersionRecord
		VersionsErr error
		OlderVers   string
		// Fires is, for a sharded schedule, the aggregate of each fire
		// among Runs: succeeded only when all its shards are.
		Fires    []schedule.Run
		FiresErr error
	}{}
	if err := s.sched.do(ctx, http.MethodGet, "/schedules/"+url.PathEscape(id), nil, nil, &data.S); err != nil {
		s.render(w, r, statusOf(err), "error", "Schedule "+id, "schedules", errorData{Err: err, Back: s.link("/", nil), BackText: "all schedules"})
		return
	}
	data.Zone = zoneName(data.S.TimeZone)
	data.Next, data.NextErr = upcoming(&data.S, s.cfg.Clock(), detailFireTimes)
	s.markCalendars(ctx, &data.S, data.Next)
	runs, err := s.recentRuns(ctx, id, listPageSize, r.URL.Query().Get("runsPageToken"))
	data.Runs, data.RunsErr = runs.Runs, err
	if data.S.Shards > 0 {
		data.Fires, data.FiresErr = s.fires(ctx, runs.Runs)
	}
	if runs.NextPageToken != "" {
		data.More = s.link("/schedules/"+url.PathEscape(id), url.Values{"runsPageToken": {runs.NextPageToken}})
	}
	var vers catalog.VersionPage
	vq := url.Values{"pageSize": {strconv.Itoa(historyPageSize)}}
	if tok := r.URL.Query().Get("versionsPageToken"); tok != "" {
		vq.Set("pageToken", tok)
	}
	data.VersionsErr = s.sched.do(ctx, http.MethodGet, "/schedules/"+url.PathEscape(id)+"/versions", vq, nil, &vers)
	data.Versions = vers.Versions
	if vers.NextPageToken != "" {
		data.OlderVers = s.link("/schedules/"+url.PathEscape(id), url.Values{"versionsPageToken": {vers.NextPageToken}})
	}
	s.render(w, r, http.StatusOK, "schedule", "Schedule "+id, "schedules", data)
}

func (s *server) deleteConfirm(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.render(w, r, http.StatusOK, "delete", "Delete schedule "+id, "schedules", struct{ ID, Error string }{ID: id})
}

// scheduleAction serves the forms: pause, resume, trigger, delete. Each
// calls the API once and redirects (303) to a page that shows the outcome
// in a flash message, so reloading the page repeats nothing.
func (s *server) scheduleAction(w http.ResponseWriter, r *http.Request) {
	id, action := r.PathValue("id"), r.PathValue("action")
	back := s.link("/schedules/"+url.PathEscape(id), nil)
	path := "/schedules/" + url.PathEscape(id)
	method := http.MethodPost
	var done string
	switch action {
	case "pause", "resume", "trigger", "backfill":
		path += ":" + action
		done = map[string]string{"pause": "Paused %s.", "resume": "Resumed %s.", "trigger": "Triggered a manual run of %s.", "backfill": "Backfill of %s:"}[action]
	case "delete":
		if r.PostFormValue("confirm") != id {
			w.Header().Set("Cache-Control", "no-store")
			s.render(w, r, http.StatusBadRequest, "delete", "Delete schedule "+id, "schedules",
				struct{ ID, Error string }{ID: id, Error: fmt.Sprintf("Type the schedule id %q to confirm; nothing was deleted.", id)})
			return
		}
		method, done = http.MethodDelete, "Deleted %s."
	default:
		s.render(w, r, http.StatusNotFound, "notfound", "Not found", "", nil)
		return
	}
	var body any
	switch action {
	case "pause":
		b := map[string]string{}
		if reason := strings.TrimSpace(r.PostFormValue("reason")); reason != "" {
			b["reason"] = reason
		}
		if until := strings.TrimSpace(r.PostFormValue("until")); until != "" {
			t, ok := timeOrAgo(until, time.Now(), +1)
			if !ok {
				setFlash(w, s.cfg.Prefix, flash{Kind: "error", Text: fmt.Sprintf("Could not pause %s: until %q is neither a duration (2h) nor an RFC 3339 time; nothing changed.", id, until)})
				http.Redirect(w, r, back, http.StatusSeeOther)
				return
			}
			b["until"] = t.UTC().Format(time.RFC3339)
		}
		if len(b) > 0 {
			body = b
		}
	case "backfill":
		now := time.Now()
		from, okFrom := timeOrAgo(strings.TrimSpace(r.PostFormValue("from")), now, -1)
		to, okTo := now, true
		if v := strings.TrimSpace(r.PostFormValue("to")); v != "" {
			to, okTo = timeOrAgo(v, now, -1)
		}
		if !okFrom || !okTo {
			setFlash(w, s.cfg.Prefix, flash{Kind: "error", Text: fmt.Sprintf("Could not backfill %s: from and to are durations before now (24h) or RFC 3339 times; nothing was written.", id)})
			http.Redirect(w, r, back, http.StatusSeeOther)
			return
		}
		body = map[string]any{"start": from.UTC().Format(time.RFC3339), "end": to.UTC().Format(time.RFC3339), "dryRun": r.PostFormValue("dryRun") == "true"}
	}
	var out map[string]any
	if err := s.sched.do(r.Context(), method, path, nil, body, &out); err != nil {
		s.cfg.Logger.Warn("console: action failed", "action", action, "schedule", id, "err", err)
		setFlash(w, s.cfg.Prefix, flash{Kind: "error", Text: fmt.Sprintf("Could not %s %s: %s", action, id, describe(err))})
	} else {
		msg := fmt.Sprintf(done, id)
		if action == "trigger" {
			if rid, _ := out["id"].(string); rid != "" {
				msg += " Run " + rid + "."
			}
		}
		if action == "backfill" {
			fires, _ := out["fires"].([]any)
			created, _ := out["created"].(float64)
			existing, _ := out["existing"].(float64)
			if dry, _ := out["dryRun"].(bool); dry {
				msg += fmt.Sprintf(" dry run, %d fire times, %d already have a run; nothing written.", len(fires), int(existing))
			} else {
				msg += fmt.Sprintf(" %d fire times, %d runs created, %d already there.", len(fires), int(created), int(existing))
			}
			if next, _ := out["nextPageToken"].(string); next != "" {
				msg += " The window holds more fire times than one call covers: run it again from " + next + "."
			}
		}
		if action == "delete" {
			back = s.link("/", nil)
		}
		setFlash(w, s.cfg.Prefix, flash{Kind: "ok", Text: msg})
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// timeOrAgo reads a form's time: an RFC 3339 time, or a positive duration
// from now, before it (sign -1: backfill's from and to) or after it (+1:
// a pause's until).
func timeOrAgo(v string, now time.Time, sign int) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return time.Time{}, false
	}
	return now.Add(time.Duration(sign) * d), true
}

// sinceRanges are the time ranges the runs filter offers.
var sinceRanges = []struct{ Value, Label string }{
	{"", "any time"}, {"15m", "last 15 minutes"}, {"1h", "last hour"}, {"24h", "last 24 hours"}, {"168h", "last 7 days"},
}

func (s *server) runs(w http.ResponseWriter, r *http.Request) {
	in := r.URL.Query()
	data := struct {
		Status, Source, Schedule, Range, Since string
		Statuses                               []schedule.RunStatus
		Sources                                []schedule.Source
		Ranges                                 []struct{ Value, Label string }
		Runs                                   []schedule.Run
		Next                                   string
		Err                                    error
	}{
		Status: in.Get("status"), Source: in.Get("source"), Schedule: strings.TrimSpace(in.Get("schedule")),
		Range: in.Get("range"), Since: in.Get("since"),
		Statuses: schedule.AllRunStatuses(), Sources: schedule.AllSources(), Ranges: sinceRanges,
	}
	// A range ("1h") becomes an absolute since when the form is sent, and
	// the next-page link carries that instant, so paging does not slide
	// the window under the cursor.
	if data.Since == "" && data.Range != "" {
		d, err := time.ParseDuration(data.Range)
		if err != nil || d <= 0 {
			data.Err = &APIError{Field: "range", Message: fmt.Sprintf("must be a duration such as 1h, not %q", data.Range)}
			s.render(w, r, http.StatusBadRequest, "runs", "Runs", "runs", data)
			return
		}
		data.Since = s.cfg.Clock().Add(-d).UTC().Format(time.RFC3339)
	}
	q := url.Values{"pageSize": {strconv.Itoa(listPageSize)}}
	for k, v := range map[string]string{"status": data.Status, "source": data.Source, "schedule": data.Schedule, "since": data.Since, "pageToken": in.Get("pageToken")} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var page catalog.RunPage
	if err := s.sched.do(r.Context(), http.MethodGet, "/runs", q, nil, &page); err != nil {
		data.Err = err
		s.render(w, r, statusOf(err), "runs", "Runs", "runs", data)
		return
	}
	data.Runs = page.Runs
	if page.NextPageToken != "" {
		nq := url.Values{}
		for k, v := range q {
			if k != "pageSize" {
				nq[k] = v
			}
		}
		nq.Set("pageToken", page.NextPageToken)
		data.Next = s.link("/runs", nq)
	}
	s.render(w, r, http.StatusOK, "runs", "Runs", "runs", data)
}

// timelineEntry is one event in a run's life.
type timelineEntry struct {
	What string
	At   time.Time
}

func (s *server) runDetail(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	data := struct {
		Run         schedule.Run
		Timeline    []timelineEntry
		Siblings    []schedule.Run
		SiblingsErr error
	}{}
	if err := s.sched.do(ctx, http.MethodGet, "/runs/"+url.PathEscape(id), nil, nil, &data.Run); err != nil {
		s.render(w, r, statusOf(err), "error", "Run "+id, "runs", errorData{Err: err, Back: s.link("/runs", nil), BackText: "all runs"})
		return
	}
	run := &data.Run
	for _, e := range []timelineEntry{{"decided", run.CreatedAt}, {"started", run.StartedAt}, {"last heartbeat", run.HeartbeatAt}, {"finished", run.FinishedAt}} {
		if !e.At.IsZero() {
			data.Timeline = append(data.Timeline, e)
		}
	}
	// The attempt chain: the runs of the same schedule and fire time (the
	// first attempt, its retries, a misfire or manual rerun). GET /runs
	// filters by fire time from since on, newest first, so the page that
	// starts at this fire time holds them.
	var page catalog.RunPage
	q := url.Values{"schedule": {run.ScheduleID}, "since": {run.FireTime.UTC().Format(time.RFC3339Nano)}, "pageSize": {strconv.Itoa(catalog.MaxPageSize)}}
	if err := s.sched.do(ctx, http.MethodGet, "/runs", q, nil, &page); err != nil {
		data.SiblingsErr = err
	}
	for _, o := range page.Runs {
		if o.FireTime.Equal(run.FireTime) {
			data.Siblings = append(data.Siblings, o)
		}
	}
	s.render(w, r, http.StatusOK, "run", "Run "+id, "runs", data)
}

// slotView is a slot as GET /gpu/pool shows it.
type slotView struct {
	gpumodel.Slot
	State     string  `json:"state"`
	LeaseLeft float64 `json:"leaseLeftSeconds"`
	GPUType   string  `json:"gpuType"`
}

// tenantView is a tenant as GET /gpu/pool shows it (gpu.TenantView).
type tenantView struct {
	Tenant  string  `json:"tenant"`
	Queued  int64   `json:"queued"`
	Running int     `json:"running"`
	Weight  int     `json:"weight"`
	Quota   int     `json:"quota"`
	Share   float64 `json:"share"`
	// Usage, TargetShare and Deficit are fair share's numbers: decayed
	// slot-seconds, the weight's fraction, and the slot-seconds owed.
	Usage       float64 `json:"usage"`
	TargetShare float64 `json:"targetShare"`
	Deficit     float64 `json:"deficit"`
}

// queuedView is a tenant's head job in dispatch order (gpu.QueuedView).
type queuedView struct {
	Position int    `json:"position"`
	JobID    string `json:"jobId"`
	Tenant   string `json:"tenant"`
	Priority int    `json:"priority"`
	GPUType  string `json:"gpuType"`
}

// jobPage is one page of GET /gpu/jobs.
type jobPage struct {
	Jobs          []gpumodel.Job `json:"jobs"`
	NextPageToken string         `json:"nextPageToken"`
}

func (s *server) gpuPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	in := r.URL.Query()
	data := struct {
		Slots      []slotView
		Tenants    []tenantView
		Heads      []queuedView
		SlotsErr   error
		Tenant     string
		Queued     int
		QueuedMore bool
		QueueErr   error
		Status     string
		Statuses   []gpumodel.JobStatus
		Jobs       []gpumodel.Job
		JobsErr    error
		Next       string
		QueueLimit int
	}{Status: in.Get("status"), Tenant: in.Get("tenant"), Statuses: gpumodel.AllJobStatuses(), QueueLimit: queueCountLimit}
	var pool struct {
		Slots   []slotView   `json:"slots"`
		Tenants []tenantView `json:"tenants"`
		Next    []queuedView `json:"next"`
	}
	data.SlotsErr = s.gpu.do(ctx, http.MethodGet, "/gpu/pool", nil, nil, &pool)
	data.Slots, data.Tenants, data.Heads = pool.Slots, pool.Tenants, pool.Next
	var queued jobPage
	data.QueueErr = s.gpu.do(ctx, http.MethodGet, "/gpu/jobs", url.Values{"status": {string(gpumodel.StatusQueued)}, "pageSize": {strconv.Itoa(queueCountLimit)}}, nil, &queued)
	data.Queued, data.QueuedMore = len(queued.Jobs), queued.NextPageToken != ""
	q := url.Values{"pageSize": {strconv.Itoa(listPageSize)}}
	if data.Status != "" {
		q.Set("status", data.Status)
	}
	if data.Tenant != "" {
		// The API validates it: a bad name is its 400, shown as the
		// listing's error.
		q.Set("tenant", data.Tenant)
	}
	if tok := in.Get("pageToken"); tok != "" {
		q.Set("pageToken", tok)
	}
	var jobs jobPage
	data.JobsErr = s.gpu.do(ctx, http.MethodGet, "/gpu/jobs", q, nil, &jobs)
	data.Jobs = jobs.Jobs
	if jobs.NextPageToken != "" {
		nq := url.Values{"pageToken": {jobs.NextPageToken}}
		if data.Status != "" {
			nq.Set("status", data.Status)
		}
		if data.Tenant != "" {
			nq.Set("tenant", data.Tenant)
		}
		data.Next = s.link("/gpu", nq)
	}
	status := http.StatusOK
	if data.SlotsErr != nil && data.JobsErr != nil {
		status = statusOf(data.JobsErr)
	}
	s.render(w, r, status, "gpu", "GPU pool", "gpu", data)
}

// logView is one stream of a job's output.
type logView struct {
	Stream    string
	Text      string
	Truncated bool
	Err       error
}

func (s *server) gpuJob(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	data := struct {
		Job  gpumodel.Job
		Logs []logView
	}{}
	if err := s.gpu.do(ctx, http.MethodGet, "/gpu/jobs/"+url.PathEscape(id), nil, nil, &data.Job); err != nil {
		s.render(w, r, statusOf(err), "error", "GPU job "+id, "gpu", errorData{Err: err, Back: s.link("/gpu", nil), BackText: "the GPU pool"})
		return
	}
	for _, stream := range []string{"stdout", "stderr"} {
		lv := logView{Stream: stream}
		b, _, err := s.gpu.raw(ctx, http.MethodGet, "/gpu/jobs/"+url.PathEscape(id)+"/logs", url.Values{"stream": {stream}}, nil, "text/plain")
		if err != nil {
			lv.Err = err
		} else {
			if len(b) > logLimit {
				b, lv.Truncated = b[len(b)-logLimit:], true
			}
			lv.Text = string(b)
		}
		data.Logs = append(data.Logs, lv)
	}
	s.render(w, r, http.StatusOK, "gpujob", "GPU job "+id, "gpu", data)
}

// leaseView is one lease as GET /leases shows it.
type leaseView struct {
	Name       string    `json:"name"`
	Object     string    `json:"object"`
	Holder     string    `json:"holder"`
	Epoch      int64     `json:"epoch"`
	TTL        string    `json:"ttl"`
	AcquiredAt time.Time `json:"acquiredAt"`
	RenewedAt  time.Time `json:"renewedAt"`
	Updated    time.Time `json:"updated"`
	ExpiresAt  time.Time `json:"expiresAt"`
	Generation int64     `json:"generation"`
	Free       bool      `json:"free"`
	Live       bool      `json:"live"`
}

func (s *server) leases(w http.ResponseWriter, r *http.Request) {
	data := struct {
		Leases []leaseView
		Next   string
		Err    error
		Now    time.Time
	}{Now: s.cfg.Clock()}
	q := url.Values{"pageSize": {strconv.Itoa(listPageSize)}}
	if tok := r.URL.Query().Get("pageToken"); tok != "" {
		q.Set("pageToken", tok)
	}
	var page struct {
		Leases        []leaseView `json:"leases"`
		NextPageToken string      `json:"nextPageToken"`
	}
	if err := s.sched.do(r.Context(), http.MethodGet, "/leases", q, nil, &page); err != nil {
		data.Err = err
		s.render(w, r, statusOf(err), "leases", "Leases", "leases", data)
		return
	}
	data.Leases = page.Leases
	if page.NextPageToken != "" {
		data.Next = s.link("/leases", url.Values{"pageToken": {page.NextPageToken}})
	}
	s.render(w, r, http.StatusOK, "leases", "Leases", "leases", data)
}

// errorData is the error page's.
type errorData struct {
	Err            error
	Back, BackText string
}

// statusOf is the status a page answers when its API call failed: the
// API's own 4xx (a 404 stays a 404), else 502.
func statusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 {
		return ae.Status
	}
	return http.StatusBadGateway
}

// describe is err for a person: the API's message with its field.
func describe(err error) string {
	var ae *APIError
	if errors.As(err, &ae) {
		if ae.Field != "" {
			return ae.Field + ": " + ae.Message
		}
		return ae.Message
	}
	return err.Error()
}

// zoneName is a schedule's zone as shown: UTC when empty.
func zoneName(tz string) string {
	if tz == "" {
		return "UTC"
	}
	return tz
}

// fires reads the aggregate of each fire among runs (GET /runs/{fireId}),
// newest first as runs are: one read per fire shown.
func (s *server) fires(ctx context.Context, runs []schedule.Run) ([]schedule.Run, error) {
	var out []schedule.Run
	seen := map[string]bool{}
	for _, r := range runs {
		fire := schedule.FireID(r.ID)
		if r.Shard == nil || seen[fire] {
			continue
		}
		seen[fire] = true
		var agg schedule.Run
		if err := s.sched.do(ctx, http.MethodGet, "/runs/"+url.PathEscape(fire), nil, nil, &agg); err != nil {
			return out, err
		}
		out = append(out, agg)
	}
	return out, nil
}
