package catalog

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/baton-cron/baton/shared/clock"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// Triggerer starts a manual run of a schedule now. The scheduler's Engine
// implements it; the interface keeps this package free of the tick
// machinery.
type Triggerer interface {
	Trigger(ctx context.Context, scheduleID string) (*schedule.Run, error)
}

// Backfiller records and starts the runs of a schedule's past fire times.
// The scheduler's Engine implements it.
type Backfiller interface {
	Backfill(ctx context.Context, scheduleID string, req schedule.BackfillRequest, from time.Time) (*schedule.BackfillResult, error)
}

// Options configures a Service.
type Options struct {
	// Validate is passed to (*schedule.Schedule).Normalize on every write:
	// the http target host allowlist and the builtin names.
	Validate schedule.ValidateOptions
	// Clock is the clock; nil means the wall clock.
	Clock clock.Clock
	// Triggerer runs a schedule now; nil makes Trigger return ErrNoTrigger.
	Triggerer Triggerer
	// Backfiller runs past fire times; nil makes Backfill return
	// ErrNoTrigger.
	Backfiller Backfiller
	// NewID makes the id of a schedule created without one; nil means a
	// random "s-" + 16 hex digits. Ids must match schedule.IDPattern.
	NewID func() string
	// HistoryKeep is how long change records are kept for a schedule
	// without history.keep (BATON_HISTORY_KEEP); 0 means
	// schedule.DefaultKeep.
	HistoryKeep time.Duration
	// VersionsKept bounds the change records kept per schedule; 0 means
	// DefaultVersionsKept.
	VersionsKept int
	// EnsureTopic, when set, is called with a pubsub target's topic before
	// the schedule is written; an error refuses the write. baton local
	// creates the topic in its Pub/Sub fake, so that a subscriber can
	// attach before the first run. In the cloud topics are Terraform's,
	// and it is nil.
	EnsureTopic func(ctx context.Context, topic string) error
}

// Service is the schedule catalog over a store. It is safe for concurrent
// use.
type Service struct {
	store store.Catalog
	cals  store.Calendars
	opts  Options
}

// New returns a Service on st's catalog view.
func New(st store.Backend, o Options) *Service {
	o.Clock = clock.Or(o.Clock)
	if o.NewID == nil {
		o.NewID = randomID
	}
	if o.HistoryKeep <= 0 {
		o.HistoryKeep = schedule.DefaultKeep
	}
	if o.VersionsKept <= 0 {
		o.VersionsKept = DefaultVersionsKept
	}
	return &Service{store: st.Catalog(), cals: st.Calendars(), opts: o}
}

// Page sizes for List and ListRuns.
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
)

// MaxListBytes bounds the schedules of one List page as JSON: every
// schedule the API accepts encodes to at most schedule.MaxScheduleJSON
// bytes, so a full page is at most 32 MiB, however the schedules were
// filled. The page's envelope and token add a few hundred bytes.
const MaxListBytes = MaxPageSize * schedule.MaxScheduleJSON

// ListOptions selects one page of a list.
type ListOptions struct {
	// PageSize is 1..MaxPageSize; 0 means DefaultPageSize.
	PageSize int
	// PageToken is the NextPageToken of the previous page, or empty.
	PageToken string
	// Selector, on the schedule and calendar lists, keeps the ones whose
	// labels match every term (labelSelector); empty keeps all.
	Selector schedule.LabelSelector
}

// SchedulePage is one page of schedules, in id order.
type SchedulePage struct {
	Schedules []schedule.Schedule `json:"schedules"`
	// NextPageToken continues the list; empty on the last page.
	NextPageToken string `json:"nextPageToken,omitempty"`
}

// RunPage is one page of a schedule's runs, newest fire time first.
type RunPage struct {
	Runs []schedule.Run `json:"runs"`
	// NextPageToken continues the list; empty on the last page.
	NextPageToken string `json:"nextPageToken,omitempty"`
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "s-" + hex.EncodeToString(b[:])
}

// now is the clock truncated to what BSON stores (milliseconds), so a
// returned schedule equals the stored one.
func (s *Service) now() time.Time { return s.opts.Clock.Now().UTC().Truncate(time.Millisecond) }

// prepare validates sc completely and recomputes its next fire time after
// now. It is the one gate every write passes.
func (s *Service) prepare(ctx context.Context, sc *schedule.Schedule, now time.Time) error {
	if err := sc.Normalize(s.opts.Validate); err != nil {
		return inputError("", err)
	}
	if p := sc.Target.PubSub; p != nil && s.opts.EnsureTopic != nil {
		if err := s.opts.EnsureTopic(ctx, p.Topic); err != nil {
			return fmt.Errorf("catalog: create topic %s: %w", p.Topic, err)
		}
	}
	next, err := sc.NextFireOf(now)
	if err != nil {
		return inputError("cron", err)
	}
	sc.NextRunAt = next.UTC()
	return nil
}

// inputError returns err as a *schedule.FieldError, naming field when err
// does not name one itself.
func inputError(field string, err error) error {
	var (
		fe     *schedule.FieldError
		maxErr *http.MaxBytesError
	)
	if errors.As(err, &fe) {
		return fe
	}
	if errors.As(err, &maxErr) {
		return maxErr // too large, not malformed: the API answers 413
	}
	return &schedule.FieldError{Field: field, Reason: err.Error()}
}

// CreateJSON decodes a schedule strictly (schedule.DecodeSchedule: unknown
// fields are refused, "enabled" defaults to true) and creates it.
func (s *Service) CreateJSON(ctx context.Context, body []byte) (*schedule.Schedule, error) {
	sc, err := schedule.DecodeSchedule(bytes.NewReader(body))
	if err != nil {
		return nil, inputError("", err)
	}
	return s.Create(ctx, sc)
}

// Create validates sc, fills its defaults, id (when empty), version (1),
// timestamps and next fire time, and inserts it. An id already taken is
// ErrExists; invalid input is a *schedule.FieldError. Nothing is written
// unless it succeeds. Fields the server owns (version, timestamps,
// nextRunAt, misfire) are overwritten.
func (s *Service) Create(ctx context.Context, sc *schedule.Schedule) (*schedule.Schedule, error) {
	out := *sc
	if out.ID == "" {
		out.ID = s.opts.NewID()
	}
	now := s.now()
	if err := s.prepare(ctx, &out, now); err != nil {
		return nil, err
	}
	if err := s.checkCalendars(ctx, nil, &out); err != nil {
		return nil, err
	}
	out.Version, out.CreatedAt, out.UpdatedAt, out.Misfire, out.Fence = 1, now, now, false, 0
	// The create's change travels in the document it creates: the two
	// cannot diverge.
	ch, err := s.change(ctx, schedule.ChangeCreate, nil, &out, 1, now)
	if err != nil {
		return nil, fmt.Errorf("catalog: create %s: %w", out.ID, err)
	}
	out.LastChange = ch
	// The store tells a lost answer to this very insert from a taken id
	// by reading the stored schedule back (store.Catalog.Create).
	err = s.store.Create(ctx, &out)
	switch {
	case errors.Is(err, store.ErrConflict):
		return nil, fmt.Errorf("catalog: create %s: %w", out.ID, ErrExists)
	case err != nil:
		return nil, fmt.Errorf("catalog: create %s: %w", out.ID, err)
	}
	s.recorded(ctx, &out)
	return &out, nil
}

// Get reads one schedule, or returns ErrNotFound.
func (s *Service) Get(ctx context.Context, id string) (*schedule.Schedule, error) {
	sc, err := s.store.Get(ctx, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("catalog: get %s: %w", id, ErrNotFound)
		}
		return nil, fmt.Errorf("catalog: get %s: %w", id, err)
	}
	return &sc, nil
}

// pageSize checks o's page size and fills the default.
func pageSize(o ListOptions) (int, error) {
	switch {
	case o.PageSize == 0:
		return DefaultPageSize, nil
	case o.PageSize < 0 || o.PageSize > MaxPageSize:
		return 0, &schedule.FieldError{Field: "pageSize", Reason: fmt.Sprintf("must be between 1 and %d, not %d", MaxPageSize, o.PageSize)}
	}
	return o.PageSize, nil
}

func pageError(op string, err error) error {
	if errors.Is(err, store.ErrBadPageToken) {
		return &schedule.FieldError{Field: "pageToken", Reason: "invalid page token: pass back the nextPageToken of the same list, unmodified"}
	}
	return fmt.Errorf("catalog: %s: %w", op, err)
}

// List returns one page of schedules in id order, with a keyset cursor: a
// page of n costs n reads, however deep it is.
func (s *Service) List(ctx context.Context, o ListOptions) (*SchedulePage, error) {
	n, err := pageSize(o)
	if err != nil {
		return nil, err
	}
	page, next, err := s.store.ListSchedules(ctx, n, o.PageToken, o.Selector...)
	if err != nil {
		return nil, pageError("list", err)
	}
	if page == nil {
		page = []schedule.Schedule{}
	}
	return &SchedulePage{Schedules: page, NextPageToken: next}, nil
}

// ListRuns returns one page of a schedule's runs, newest fire time first
// (ties broken by _id), with a keyset cursor. Runs outlive their schedule,
// so the history of a deleted schedule is still listed; an id with neither
// a schedule nor runs is ErrNotFound.
func (s *Service) ListRuns(ctx context.Context, scheduleID string, o ListOptions) (*RunPage, error) {
	n, err := pageSize(o)
	if err != nil {
		return nil, err
	}
	runs, next, err := s.store.ListRuns(ctx, scheduleID, n, o.PageToken)
	if err != nil {
		return nil, pageError("list runs of "+scheduleID, err)
	}
	if runs == nil {
		runs = []schedule.Run{}
	}
	out := &RunPage{Runs: runs}
	if len(out.Runs) == 0 && o.PageToken == "" {
		// One extra read, only for an empty first page: tell a typo from a
		// schedule that has not run yet.
		if _, err := s.Get(ctx, scheduleID); err != nil {
			return nil, err
		}
	}
	out.NextPageToken = next
	return out, nil
}

// RunFilter selects the runs of ListAllRuns; a zero field matches every
// run. Source cannot be combined with Status or ScheduleID: no index
// serves those (store.RunFilter.Indexed), and the list refuses to scan.
type RunFilter struct {
	// Status keeps the runs in that status.
	Status schedule.RunStatus
	// Source keeps the runs of that source.
	Source schedule.Source
	// ScheduleID keeps the runs of that schedule (deleted or not).
	ScheduleID string
	// Since keeps the runs whose fire time is at or after it.
	Since time.Time
}

// check validates f, naming the query parameter at fault.
func (f RunFilter) check() error {
	if f.Status != "" && !f.Status.Valid() {
		return &schedule.FieldError{Field: "status", Reason: fmt.Sprintf("unknown run status %q; use one of %v", f.Status, schedule.AllRunStatuses())}
	}
	if f.Source != "" && !f.Source.Valid() {
		return &schedule.FieldError{Field: "source", Reason: fmt.Sprintf("unknown run source %q; use one of %v", f.Source, schedule.AllSources())}
	}
	if f.ScheduleID != "" && !schedule.IDPattern.MatchString(f.ScheduleID) {
		return &schedule.FieldError{Field: "schedule", Reason: fmt.Sprintf("%q is not a schedule id", f.ScheduleID)}
	}
	if !f.store().Indexed() {
		return &schedule.FieldError{Field: "source", Reason: "source cannot be combined with status or schedule (no index serves it); filter by source alone, or by status and schedule"}
	}
	return nil
}

func (f RunFilter) store() store.RunFilter {
	return store.RunFilter{Status: f.Status, Source: f.Source, ScheduleID: f.ScheduleID, Since: f.Since}
}

// ListAllRuns returns one page of the runs f selects, across schedules,
// newest fire time first (ties broken by id), with a keyset cursor bound
// to f: a page of n costs n reads. A schedule id without runs gives an
// empty page, not ErrNotFound. Invalid input is a *schedule.FieldError
// naming the query parameter.
func (s *Service) ListAllRuns(ctx context.Context, f RunFilter, o ListOptions) (*RunPage, error) {
	n, err := pageSize(o)
	if err != nil {
		return nil, err
	}
	if err := f.check(); err != nil {
		return nil, err
	}
	runs, next, err := s.store.ListAllRuns(ctx, f.store(), n, o.PageToken)
	if err != nil {
		return nil, pageError("list runs", err)
	}
	if runs == nil {
		runs = []schedule.Run{}
	}
	return &RunPage{Runs: runs, NextPageToken: next}, nil
}

// GetRun reads one run by id, or returns ErrRunNotFound.
func (s *Service) GetRun(ctx context.Context, id string) (*schedule.Run, error) {
	r, err := s.store.GetRun(ctx, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			if agg, aerr := s.fireAggregate(ctx, id); aerr != nil || agg != nil {
				return agg, aerr
			}
			return nil, fmt.Errorf("catalog: get run %s: %w", id, ErrRunNotFound)
		}
		return nil, fmt.Errorf("catalog: get run %s: %w", id, err)
	}
	return &r, nil
}

// serverOwned are the fields a caller cannot set: the server computes them
// on every write. They are ignored in a patch, so that a schedule read with
// GET can be edited and sent back whole.
var serverOwned = []string{"version", "nextRunAt", "createdAt", "updatedAt", "misfire"}

// maxUpdateAttempts bounds the re-read loop of an unconditional Update.
const maxUpdateAttempts = 8

// Update applies patch (a JSON merge patch, RFC 7396: the fields given
// replace the stored ones, objects merge, null resets a field to its
// default) to the stored schedule, validates the result completely,
// recomputes nextRunAt from now, bumps the version and writes it, on the
// condition that the stored version is still the one read.
//
// ifMatch, when non-zero, is the version the caller last saw: a different
// stored version is ErrVersionMismatch. When zero, a concurrent change makes
// Update re-read and re-apply the patch. An id in the patch must equal id.
func (s *Service) Update(ctx context.Context, id string, patch map[string]any, ifMatch int64) (*schedule.Schedule, error) {
	return s.update(ctx, id, patch, ifMatch, schedule.ChangeUpdate)
}

// update is Update, recording the change as op. Before its conditional
// write it copies the stored version's change into the history
// (copyForward), and its own change goes in the document it writes.
func (s *Service) update(ctx context.Context, id string, patch map[string]any, ifMatch int64, op string) (*schedule.Schedule, error) {
	if v, ok := patch["id"]; ok && v != id {
		return nil, &schedule.FieldError{Field: "id", Reason: "the id of a schedule cannot change; create a new schedule and delete this one"}
	}
	for attempt := 0; attempt < maxUpdateAttempts; attempt++ {
		cur, err := s.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if ifMatch != 0 && cur.Version != ifMatch {
			return nil, fmt.Errorf("catalog: update %s: stored version %d, If-Match %d: %w", id, cur.Version, ifMatch, ErrVersionMismatch)
		}
		next, err := s.apply(ctx, cur, patch)
		if err != nil {
			return nil, err
		}
		if err := s.checkCalendars(ctx, cur, next); err != nil {
			return nil, err
		}
		if next.LastChange, err = s.change(ctx, op, cur, next, next.Version, next.UpdatedAt); err != nil {
			return nil, fmt.Errorf("catalog: update %s: %w", id, err)
		}
		if err := s.copyForward(ctx, cur); err != nil {
			return nil, err
		}
		err = s.store.Update(ctx, cur, next)
		switch {
		case err == nil:
			s.recorded(ctx, next)
			return next, nil
		case !errors.Is(err, store.ErrConflict):
			return nil, fmt.Errorf("catalog: update %s: %w", id, err)
		case ifMatch != 0 && errors.Is(err, store.ErrContended):
			// Not applied, yet the caller's version may be current:
			// "retry" (Aborted), not a version mismatch.
			return nil, fmt.Errorf("catalog: update %s: %w", id, err)
		case ifMatch != 0:
			// Someone else wrote between our read and our write; the
			// caller's version is stale either way. Tell deletion apart.
			if _, gerr := s.Get(ctx, id); gerr != nil {
				return nil, gerr
			}
			return nil, fmt.Errorf("catalog: update %s: %w", id, ErrVersionMismatch)
		}
	}
	return nil, fmt.Errorf("catalog: update %s: %d attempts: %w", id, maxUpdateAttempts, ErrBusy)
}

// apply merges patch onto cur through JSON, so a patch is decoded exactly
// like a create body (strictly), then validates the result.
func (s *Service) apply(ctx context.Context, cur *schedule.Schedule, patch map[string]any) (*schedule.Schedule, error) {
	doc, err := toMap(cur)
	if err != nil {
		return nil, fmt.Errorf("catalog: update %s: %w", cur.ID, err)
	}
	p := make(map[string]any, len(patch))
	for k, v := range patch {
		p[k] = v
	}
	for _, k := range serverOwned {
		delete(p, k)
	}
	delete(p, "id")
	merged, err := json.Marshal(MergePatch(doc, p))
	if err != nil {
		return nil, fmt.Errorf("catalog: update %s: %w", cur.ID, err)
	}
	next, err := schedule.DecodeSchedule(bytes.NewReader(merged))
	if err != nil {
		return nil, inputError("", err)
	}
	now := s.now()
	next.ID = cur.ID
	// The merge went through cur's JSON, which shows a stored webhook
	// secret as its placeholder: keep the secret itself.
	schedule.KeepSecret(next, cur)
	if err := s.prepare(ctx, next, now); err != nil {
		return nil, err
	}
	next.Version, next.CreatedAt, next.UpdatedAt = cur.Version+1, cur.CreatedAt, now
	next.Misfire, next.Fence = cur.Misfire, cur.Fence
	return next, nil
}

func toMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

// Delete removes a schedule. ifMatch, when non-zero, must equal the stored
// version (else ErrVersionMismatch). Its runs and its history of changes
// stay.
//
// The delete is conditional on the version read. The document goes, so
// its change cannot travel in it: the stored version's change is copied
// into the history first (copyForward), then the delete's own record is
// written, not final (it never overwrites a record known to have landed),
// then the schedule is deleted. A delete record whose delete did not land
// is not listed while the schedule is there, and the next write's copy
// replaces it.
func (s *Service) Delete(ctx context.Context, id string, ifMatch int64) error {
	for attempt := 0; attempt < maxUpdateAttempts; attempt++ {
		cur, err := s.Get(ctx, id)
		if err != nil {
			return err
		}
		if ifMatch != 0 && cur.Version != ifMatch {
			return fmt.Errorf("catalog: delete %s: stored version %d, If-Match %d: %w", id, cur.Version, ifMatch, ErrVersionMismatch)
		}
		if err := s.copyForward(ctx, cur); err != nil {
			return err
		}
		now := s.now()
		ch, err := s.change(ctx, schedule.ChangeDelete, cur, nil, cur.Version+1, now)
		if err != nil {
			return fmt.Errorf("catalog: delete %s: %w", id, err)
		}
		rec := ch.Record(id, cur.CreatedAt, s.keep(cur), false)
		err = s.store.PutVersion(ctx, rec)
		if err == nil {
			err = s.store.Delete(ctx, id, cur.Version)
		}
		switch {
		case err == nil:
			rec.Final = true
			if ferr := s.store.PutVersion(ctx, rec); ferr != nil {
				slog.WarnContext(ctx, "marking a delete's record final failed; it is listed all the same", "schedule", id, "err", ferr)
			}
			return nil
		case !errors.Is(err, store.ErrConflict), ifMatch != 0 && errors.Is(err, store.ErrContended):
			// (Contention refused nothing: "retry", not a version mismatch.)
			return fmt.Errorf("catalog: delete %s: %w", id, err)
		case ifMatch != 0:
			if _, gerr := s.Get(ctx, id); gerr != nil {
				return gerr
			}
			return fmt.Errorf("catalog: delete %s: %w", id, ErrVersionMismatch)
		}
		// Someone wrote (or deleted) between our read and our delete:
		// read again.
	}
	return fmt.Errorf("catalog: delete %s: %d attempts: %w", id, maxUpdateAttempts, ErrBusy)
}

// PauseRequest is the body of :pause, with the caller it came from.
type PauseRequest struct {
	// Reason, when set, is kept as the schedule's pauseReason.
	Reason string
	// Until, when set, is when the tick resumes the schedule by itself;
	// it must be in the future, at most MaxPauseFor ahead.
	Until time.Time
	// By is who asked (httpapi.Actor), kept as pausedBy.
	By string
}

// MaxPauseFor bounds a timed pause: a longer one is a plain pause.
const MaxPauseFor = 366 * 24 * time.Hour

// Pause disables a schedule: the tick stops firing it. The reason, the
// caller and the time are kept while it is paused; with Until, the tick
// resumes it at that time (nextRunAt from then on: the times it missed
// while paused are not owed). It is an Update, so it validates, bumps the
// version and honours ifMatch. Pausing a schedule that is already paused
// changes nothing, its reason and end included: it returns the stored
// schedule without writing, at the same version.
func (s *Service) Pause(ctx context.Context, id string, p PauseRequest, ifMatch int64) (*schedule.Schedule, error) {
	if !p.Until.IsZero() {
		now := s.now()
		switch {
		case !p.Until.After(now):
			return nil, &schedule.FieldError{Field: "until", Reason: fmt.Sprintf("%s is not in the future (now is %s)", p.Until.Format(time.RFC3339), now.Format(time.RFC3339))}
		case p.Until.Sub(now) > MaxPauseFor:
			return nil, &schedule.FieldError{Field: "until", Reason: fmt.Sprintf("is more than %s ahead; pause without until instead", MaxPauseFor)}
		}
	}
	return s.setEnabled(ctx, id, false, p, ifMatch)
}

// Resume enables a schedule and recomputes nextRunAt from now, so the times
// missed while paused are not fired as catch-up. Resuming a schedule that
// is already enabled changes nothing: it returns the stored schedule
// without writing, at the same version (and keeps its nextRunAt).
func (s *Service) Resume(ctx context.Context, id string, ifMatch int64) (*schedule.Schedule, error) {
	return s.setEnabled(ctx, id, true, PauseRequest{}, ifMatch)
}

// setEnabled is Pause and Resume: an Update of "enabled" that is skipped
// when the stored schedule already has that state. ifMatch is checked
// either way, so a stale version is still ErrVersionMismatch.
func (s *Service) setEnabled(ctx context.Context, id string, enabled bool, p PauseRequest, ifMatch int64) (*schedule.Schedule, error) {
	cur, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if ifMatch != 0 && cur.Version != ifMatch {
		return nil, fmt.Errorf("catalog: update %s: stored version %d, If-Match %d: %w", id, cur.Version, ifMatch, ErrVersionMismatch)
	}
	if cur.Enabled == enabled {
		return cur, nil
	}
	patch := map[string]any{"enabled": enabled}
	if !enabled {
		patch["pausedAt"] = s.now().Format(time.RFC3339Nano)
		if p.By != "" {
			patch["pausedBy"] = p.By
		}
		if p.Reason != "" {
			patch["pauseReason"] = p.Reason
		}
		if !p.Until.IsZero() {
			patch["pausedUntil"] = p.Until.UTC().Format(time.RFC3339Nano)
		}
	}
	op := schedule.ChangeResume
	if !enabled {
		op = schedule.ChangePause
	}
	return s.update(ctx, id, patch, ifMatch, op)
}

// Backfill validates req and records the runs of the schedule's fire
// times in [start, end) through the Backfiller. end may not be in the
// future (the tick decides those), start must be before end, and a
// pageToken must be a fire time inside the window (a previous answer's).
// Bad input is a *schedule.FieldError naming the field; nothing is written.
func (s *Service) Backfill(ctx context.Context, id string, req schedule.BackfillRequest) (*schedule.BackfillResult, error) {
	if s.opts.Backfiller == nil {
		return nil, fmt.Errorf("catalog: backfill %s: %w", id, ErrNoTrigger)
	}
	// Not s.now(): truncated to the millisecond, it would take an end
	// earlier in the same millisecond (a client's own now) for the future.
	now := s.opts.Clock.Now().UTC()
	switch {
	case req.Start.IsZero():
		return nil, &schedule.FieldError{Field: "start", Reason: "is required (RFC 3339, e.g. 2026-03-01T00:00:00Z)"}
	case req.End.IsZero():
		return nil, &schedule.FieldError{Field: "end", Reason: "is required (RFC 3339, e.g. 2026-03-02T00:00:00Z)"}
	case !req.Start.Before(req.End):
		return nil, &schedule.FieldError{Field: "end", Reason: fmt.Sprintf("%s is not after start %s", req.End.UTC().Format(time.RFC3339), req.Start.UTC().Format(time.RFC3339))}
	case req.End.After(now):
		return nil, &schedule.FieldError{Field: "end", Reason: fmt.Sprintf("%s is in the future (now is %s): a backfill covers past fire times; the tick decides the rest", req.End.UTC().Format(time.RFC3339), now.Format(time.RFC3339))}
	}
	from := req.Start
	if req.PageToken != "" {
		t, err := time.Parse(time.RFC3339, req.PageToken)
		if err != nil || t.Before(req.Start) || !t.Before(req.End) {
			return nil, &schedule.FieldError{Field: "pageToken", Reason: "is not a continuation of this window: pass the previous answer's nextPageToken with the same start and end"}
		}
		from = t
	}
	if _, err := s.Get(ctx, id); err != nil {
		return nil, err
	}
	res, err := s.opts.Backfiller.Backfill(ctx, id, req, from)
	if err != nil {
		return nil, fmt.Errorf("catalog: backfill %s: %w", id, err)
	}
	return res, nil
}

// Trigger starts a manual run of an existing schedule through the
// Triggerer, whether or not the schedule is enabled.
func (s *Service) Trigger(ctx context.Context, id string) (*schedule.Run, error) {
	if s.opts.Triggerer == nil {
		return nil, fmt.Errorf("catalog: trigger %s: %w", id, ErrNoTrigger)
	}
	if _, err := s.Get(ctx, id); err != nil {
		return nil, err
	}
	run, err := s.opts.Triggerer.Trigger(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("catalog: trigger %s: %w", id, err)
	}
	return run, nil
}

// fireAggregate answers GET /runs/{id} for the id of a fire of a sharded
// schedule, which no run has (its runs are <id>#<i>): the fire's aggregate
// (schedule.AggregateFire), nil when id is no such fire. It reads each
// shard's first attempt, then its retries while they are failed: one read
// per shard and attempt, at most schedule.MaxShards shards.
func (s *Service) fireAggregate(ctx context.Context, id string) (*schedule.Run, error) {
	scheduleID, _, ok := strings.Cut(id, "@")
	if !ok || strings.Contains(id, schedule.ShardSep) {
		return nil, nil
	}
	sc, err := s.store.Get(ctx, scheduleID)
	if err != nil || sc.Shards <= 0 {
		return nil, nil //nolint:nilerr // not a sharded schedule's fire: the caller answers "no such run"
	}
	// The fire's own shard count, which its runs carry, once one is read:
	// shards may have been edited since the fire.
	n := sc.Shards
	latest := make([]*schedule.Run, 0, n)
	found := false
	for i := 0; i < n && i < schedule.MaxShards; i++ {
		latest = append(latest, nil)
		base := schedule.ShardRunID(id, i)
		rid := base
		for attempt := 1; attempt <= schedule.MaxRetryAttempts; attempt++ {
			r, err := s.store.GetRun(ctx, rid)
			if errors.Is(err, store.ErrNotFound) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("catalog: get fire %s: shard %d: %w", id, i, err)
			}
			if !found && r.Shards > 0 {
				n = r.Shards
			}
			latest[i], found = &r, true
			if r.Status != schedule.RunFailed {
				break
			}
			rid = fmt.Sprintf("%s-a%d", base, attempt+1)
		}
	}
	if !found {
		return nil, nil
	}
	agg := schedule.AggregateFire(id, len(latest), latest)
	return &agg, nil
}
