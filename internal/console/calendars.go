package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/baton-cron/baton/shared/schedule"
)

// calendarRow is one line of the calendars page.
type calendarRow struct {
	schedule.Calendar
	Days string
}

// calendars lists one page of calendars (GET /calendars, keyset cursor):
// one API call per page, as the leases page.
func (s *server) calendars(w http.ResponseWriter, r *http.Request) {
	var data struct {
		Calendars []calendarRow
		Next      string
		Err       error
	}
	q := url.Values{"pageSize": {strconv.Itoa(listPageSize)}}
	if tok := r.URL.Query().Get("pageToken"); tok != "" {
		q.Set("pageToken", tok)
	}
	var page struct {
		Calendars     []schedule.Calendar `json:"calendars"`
		NextPageToken string              `json:"nextPageToken"`
	}
	if err := s.sched.do(r.Context(), http.MethodGet, "/calendars", q, nil, &page); err != nil {
		data.Err = err
		s.render(w, r, statusOf(err), "calendars", "Calendars", "calendars", data)
		return
	}
	for _, c := range page.Calendars {
		data.Calendars = append(data.Calendars, calendarRow{Calendar: c, Days: calendarDays(&c)})
	}
	if page.NextPageToken != "" {
		data.Next = s.link("/calendars", url.Values{"pageToken": {page.NextPageToken}})
	}
	s.render(w, r, http.StatusOK, "calendars", "Calendars", "calendars", data)
}

// calendarDays spells a calendar's days on one line, as `baton calendars
// list` does.
func calendarDays(c *schedule.Calendar) string {
	parts := append([]string(nil), c.Dates...)
	for _, r := range c.Ranges {
		parts = append(parts, r.From+" – "+r.To)
	}
	for _, r := range c.Rules {
		if r.Weekday == "" {
			parts = append(parts, "every "+strconv.Itoa(r.Month)+"/"+strconv.Itoa(r.Day))
		} else {
			nth := strconv.Itoa(r.Nth)
			if r.Nth == -1 {
				nth = "last"
			}
			parts = append(parts, "every "+nth+" "+r.Weekday+" of month "+strconv.Itoa(r.Month))
		}
	}
	if len(c.Weekdays) > 0 {
		parts = append(parts, "every "+strings.Join(c.Weekdays, ", "))
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, "; ")
}

// markCalendars marks the upcoming fire times that sc's calendars skip,
// reading each calendar it names once (at most 2*MaxScheduleCalendars
// calls, none for a schedule that names none). A calendar that is gone has
// no days, as in the tick; one that cannot be read leaves the times
// unmarked, with the failure logged.
func (s *server) markCalendars(ctx context.Context, sc *schedule.Schedule, times []fireTime) {
	ids := sc.CalendarIDs()
	if len(ids) == 0 || len(times) == 0 {
		return
	}
	cals := map[string]*schedule.Calendar{}
	for _, id := range ids {
		var c schedule.Calendar
		err := s.sched.do(ctx, http.MethodGet, "/calendars/"+url.PathEscape(id), nil, nil, &c)
		var ae *APIError
		switch {
		case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		case err != nil:
			s.cfg.Logger.Warn("console: read calendar failed; upcoming times shown unmarked", "calendar", id, "schedule", sc.ID, "err", err)
			return
		default:
			cals[id] = &c
		}
	}
	for i := range times {
		if skip, reason := sc.CalendarVerdict(times[i].T, cals); skip {
			times[i].Skip = reason
		}
	}
}
