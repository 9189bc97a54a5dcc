package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// ErrCalendarNotFound means no calendar has the id. It is a
// store.ErrNotFound: NotFound, HTTP 404.
var ErrCalendarNotFound = errcode.Wrap(errcode.NotFound, store.ErrNotFound, "catalog: calendar not found").WithAnswer("no such calendar")

// CalendarPage is one page of calendars, in id order.
type CalendarPage struct {
	Calendars []schedule.Calendar `json:"calendars"`
	// NextPageToken continues the list; empty on the last page.
	NextPageToken string `json:"nextPageToken,omitempty"`
}

// PutCalendarJSON decodes a calendar strictly and stores it under id:
// created (version 1) when there is none, replaced (version+1) when there
// is. ifMatch, when non-zero, must be the stored version (a create needs
// none: If-Match on a missing calendar is ErrVersionMismatch). created
// says which happened. Invalid input is a *schedule.FieldError; nothing is
// written then.
func (s *Service) PutCalendarJSON(ctx context.Context, id string, body []byte, ifMatch int64) (c *schedule.Calendar, created bool, err error) {
	in, err := schedule.DecodeCalendar(bytes.NewReader(body))
	if err != nil {
		return nil, false, inputError("", err)
	}
	if in.ID != "" && in.ID != id {
		return nil, false, &schedule.FieldError{Field: "id", Reason: fmt.Sprintf("%q differs from the id in the path, %q", in.ID, id)}
	}
	in.ID = id
	if err := in.Validate(); err != nil {
		return nil, false, inputError("", err)
	}
	for attempt := 0; attempt < maxUpdateAttempts; attempt++ {
		now := s.now()
		cur, err := s.cals.GetCalendar(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			if ifMatch != 0 {
				return nil, false, fmt.Errorf("catalog: put calendar %s: none stored, If-Match %d: %w", id, ifMatch, ErrVersionMismatch)
			}
			out := *in
			out.Version, out.CreatedAt, out.UpdatedAt = 1, now, now
			err := s.cals.CreateCalendar(ctx, &out)
			if errors.Is(err, store.ErrConflict) {
				continue // created meanwhile: replace it
			}
			if err != nil {
				return nil, false, fmt.Errorf("catalog: create calendar %s: %w", id, err)
			}
			return &out, true, nil
		case err != nil:
			return nil, false, fmt.Errorf("catalog: put calendar %s: %w", id, err)
		}
		if ifMatch != 0 && cur.Version != ifMatch {
			return nil, false, fmt.Errorf("catalog: put calendar %s: stored version %d, If-Match %d: %w", id, cur.Version, ifMatch, ErrVersionMismatch)
		}
		out := *in
		out.Version, out.CreatedAt, out.UpdatedAt = cur.Version+1, cur.CreatedAt, now
		err = s.cals.ReplaceCalendar(ctx, &out, cur.Version)
		switch {
		case err == nil:
			return &out, false, nil
		case !errors.Is(err, store.ErrConflict), ifMatch != 0 && errors.Is(err, store.ErrContended):
			// (Contention refused nothing: "retry", not a version mismatch.)
			return nil, false, fmt.Errorf("catalog: replace calendar %s: %w", id, err)
		case ifMatch != 0:
			return nil, false, fmt.Errorf("catalog: put calendar %s: %w", id, ErrVersionMismatch)
		}
	}
	return nil, false, fmt.Errorf("catalog: put calendar %s: %d attempts: %w", id, maxUpdateAttempts, ErrBusy)
}

// GetCalendar reads one calendar, or returns ErrCalendarNotFound.
func (s *Service) GetCalendar(ctx context.Context, id string) (*schedule.Calendar, error) {
	c, err := s.cals.GetCalendar(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("catalog: get calendar %s: %w", id, ErrCalendarNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("catalog: get calendar %s: %w", id, err)
	}
	return &c, nil
}

// ListCalendars reads one page of calendars in id order (keyset cursor).
func (s *Service) ListCalendars(ctx context.Context, o ListOptions) (*CalendarPage, error) {
	n, err := pageSize(o)
	if err != nil {
		return nil, err
	}
	page, next, err := s.cals.ListCalendars(ctx, n, o.PageToken, o.Selector...)
	if err != nil {
		return nil, pageError("list calendars", err)
	}
	return &CalendarPage{Calendars: page, NextPageToken: next}, nil
}

// DeleteCalendar removes a calendar. ifMatch, when non-zero, must equal
// the stored version. A calendar that schedules still name may be deleted:
// finding them would scan every schedule, and a delete racing a schedule
// write could not be refused anyway. The tick treats a calendar it cannot
// find as one with no days (schedule.CalendarVerdict): an excluded one
// excludes nothing, and the skipped records of an onlyCalendars schedule
// name it as not found. A schedule write that newly names it is refused.
func (s *Service) DeleteCalendar(ctx context.Context, id string, ifMatch int64) error {
	err := s.cals.DeleteCalendar(ctx, id, ifMatch)
	if err == nil {
		return nil
	}
	if !errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrContended) {
		// (Contention refused nothing: "retry", not a version mismatch.)
		return fmt.Errorf("catalog: delete calendar %s: %w", id, err)
	}
	if _, gerr := s.GetCalendar(ctx, id); gerr != nil {
		return gerr
	}
	return fmt.Errorf("catalog: delete calendar %s: %w", id, ErrVersionMismatch)
}

// checkCalendars refuses a schedule write that names a calendar that does
// not exist, with a 400 naming the entry ("excludeCalendars[1]"). Only
// the ids cur (the stored schedule; nil on create) does not name already
// are checked, so a schedule whose calendar was deleted can still be
// paused or edited otherwise. It costs one read of at most
// MaxScheduleCalendars*2 documents, and none when no new id is named.
func (s *Service) checkCalendars(ctx context.Context, cur, next *schedule.Schedule) error {
	var known []string
	if cur != nil {
		known = cur.CalendarIDs()
	}
	var fresh []string
	for _, id := range next.CalendarIDs() {
		if !slices.Contains(known, id) {
			fresh = append(fresh, id)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	found, err := s.cals.GetCalendars(ctx, fresh)
	if err != nil {
		return fmt.Errorf("catalog: schedule %s: read its calendars: %w", next.ID, err)
	}
	for _, l := range []struct {
		field string
		ids   []string
	}{{"excludeCalendars", next.ExcludeCalendars}, {"onlyCalendars", next.OnlyCalendars}} {
		for i, id := range l.ids {
			if slices.Contains(fresh, id) && found[id] == nil {
				return &schedule.FieldError{Field: fmt.Sprintf("%s[%d]", l.field, i), Reason: fmt.Sprintf("unknown calendar id %q; create it first (PUT /calendars/%s)", id, id)}
			}
		}
	}
	return nil
}

// calendarRoutes serves /calendars and /calendars/{id}:
//
//	GET    /calendars?pageSize=&pageToken=&labelSelector=  list, in id order
//	PUT    /calendars/{id}                  create (201) or replace (200); If-Match honoured
//	GET    /calendars/{id}                  read (ETag: "version")
//	DELETE /calendars/{id}                  delete (204); If-Match honoured
func (h *handler) calendarRoutes(w http.ResponseWriter, r *http.Request, rest []string) error {
	if len(rest) == 0 {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			return notAllowed(w, r, http.MethodGet)
		}
		o, err := labelledListOptions(r)
		if err != nil {
			return err
		}
		page, err := h.svc.ListCalendars(r.Context(), o)
		if err != nil {
			return err
		}
		httpapi.WriteJSON(w, http.StatusOK, page)
		return nil
	}
	id := rest[0]
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		c, err := h.svc.GetCalendar(r.Context(), id)
		if err != nil {
			return err
		}
		w.Header().Set("ETag", ETag(c.Version))
		httpapi.WriteJSON(w, http.StatusOK, c)
	case http.MethodPut:
		ifMatch, err := parseIfMatch(r)
		if err != nil {
			return err
		}
		body, err := h.body(w, r)
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(body)) == 0 {
			return httpapi.BadRequest("", "body is empty; want a calendar {\"timeZone\", \"dates\", \"ranges\", \"rules\", \"weekdays\"}")
		}
		c, created, err := h.svc.PutCalendarJSON(r.Context(), id, body, ifMatch)
		if err != nil {
			return err
		}
		status := http.StatusOK
		if created {
			status = http.StatusCreated
			w.Header().Set("Location", "/calendars/"+id)
		}
		w.Header().Set("ETag", ETag(c.Version))
		httpapi.WriteJSON(w, status, c)
	case http.MethodDelete:
		ifMatch, err := parseIfMatch(r)
		if err != nil {
			return err
		}
		if err := h.svc.DeleteCalendar(r.Context(), id, ifMatch); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		return notAllowed(w, r, http.MethodGet, http.MethodPut, http.MethodDelete)
	}
	return nil
}
