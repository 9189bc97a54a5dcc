package schedule

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// CalendarsCollection holds the calendars.
const CalendarsCollection = "calendars"

// Calendar limits: a calendar is read whole by every tick that needs it,
// so it stays small.
const (
	// MaxCalendarDates bounds a calendar's dates.
	MaxCalendarDates = 1000
	// MaxCalendarRanges bounds a calendar's date ranges.
	MaxCalendarRanges = 200
	// MaxCalendarRules bounds a calendar's yearly rules.
	MaxCalendarRules = 100
	// MaxScheduleCalendars bounds excludeCalendars and onlyCalendars each:
	// the tick reads every one of them.
	MaxScheduleCalendars = 10
	// MaxCalendarBytes bounds a calendar document read by DecodeCalendar.
	MaxCalendarBytes = 256 << 10
)

// DateLayout is how a calendar spells a day: "2026-12-25".
const DateLayout = "2006-01-02"

// Calendar is a set of days, shared by the schedules that name it in
// excludeCalendars (they do not fire on its days) or onlyCalendars (they
// fire on its days only). A day is a civil date in the calendar's own
// TimeZone: a fire time is in the calendar when its date, read in that
// zone, is one of the calendar's days, whatever the schedule's zone is.
type Calendar struct {
	ID          string `bson:"_id" json:"id"`
	Description string `bson:"description,omitempty" json:"description,omitempty"`
	// Labels, when set, are key/value labels (labels.go), as a schedule's.
	Labels Labels `bson:"labels,omitempty" json:"labels,omitempty"`
	// TimeZone is the IANA zone the days are read in; empty means UTC.
	TimeZone string `bson:"timeZone" json:"timeZone"`
	// Dates are single days, "2026-12-25".
	Dates []string `bson:"dates,omitempty" json:"dates,omitempty"`
	// Ranges are runs of days, both ends included.
	Ranges []DateRange `bson:"ranges,omitempty" json:"ranges,omitempty"`
	// Rules are days that come back every year.
	Rules []YearlyRule `bson:"rules,omitempty" json:"rules,omitempty"`
	// Weekdays are days of every week: "sat", "sun".
	Weekdays  []string  `bson:"weekdays,omitempty" json:"weekdays,omitempty"`
	Version   int64     `bson:"version" json:"version"`
	CreatedAt time.Time `bson:"createdAt" json:"createdAt"`
	UpdatedAt time.Time `bson:"updatedAt" json:"updatedAt"`
}

// DateRange is the days from From to To, both included ("2026-12-24" to
// "2026-12-31").
type DateRange struct {
	From string `bson:"from" json:"from"`
	To   string `bson:"to" json:"to"`
}

// YearlyRule is a day that comes back every year: either a fixed day of a
// month ({month: 12, day: 25}), or the nth weekday of a month ({month: 11,
// weekday: "thu", nth: 4}; nth -1 is the last one).
type YearlyRule struct {
	Month   int    `bson:"month" json:"month"`
	Day     int    `bson:"day,omitempty" json:"day,omitempty"`
	Weekday string `bson:"weekday,omitempty" json:"weekday,omitempty"`
	Nth     int    `bson:"nth,omitempty" json:"nth,omitempty"`
}

// weekdayNames are the weekday spellings a calendar accepts, in
// time.Weekday order.
var weekdayNames = [7]string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

func parseWeekday(s string) (time.Weekday, bool) {
	for i, n := range weekdayNames {
		if strings.EqualFold(s, n) {
			return time.Weekday(i), true
		}
	}
	return 0, false
}

// Contains reports whether t falls on one of the calendar's days, its
// date read in the calendar's zone. The calendar must be valid (Validate);
// an entry that does not parse matches nothing.
func (c *Calendar) Contains(t time.Time) bool {
	loc, err := LoadLocation(c.TimeZone)
	if err != nil {
		loc = time.UTC
	}
	t = t.In(loc)
	day := t.Format(DateLayout)
	for _, d := range c.Dates {
		if d == day {
			return true
		}
	}
	// The layout is fixed-width with the biggest unit first, so the
	// strings compare as the dates do.
	for _, r := range c.Ranges {
		if r.From <= day && day <= r.To {
			return true
		}
	}
	for _, w := range c.Weekdays {
		if wd, ok := parseWeekday(w); ok && wd == t.Weekday() {
			return true
		}
	}
	for _, r := range c.Rules {
		if r.matches(t) {
			return true
		}
	}
	return false
}

// matches reports whether t's date (in its own location) is the rule's day
// of t's year.
func (r YearlyRule) matches(t time.Time) bool {
	if int(t.Month()) != r.Month {
		return false
	}
	if r.Weekday == "" {
		return t.Day() == r.Day
	}
	wd, ok := parseWeekday(r.Weekday)
	if !ok || t.Weekday() != wd {
		return false
	}
	if r.Nth > 0 {
		return (t.Day()-1)/7+1 == r.Nth
	}
	// Last: a week later is another month.
	return t.AddDate(0, 0, 7).Month() != t.Month()
}

// daysIn is the number of days of month m in a leap year, so that 29
// February is a valid yearly day (it matches in leap years only).
func daysIn(m int) int {
	return time.Date(2024, time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// Validate checks the calendar completely; the first problem is a
// *FieldError naming the field ("dates[3]", "rules[0].nth").
func (c *Calendar) Validate() error {
	if c.ID == "" {
		return fieldErr("id", "is required")
	}
	if !IDPattern.MatchString(c.ID) {
		return fieldErr("id", "%q must match %s (lower-case letters, digits, '-' and '_', at most 63 characters, starting with a letter or digit)", c.ID, IDPattern)
	}
	if len(c.Description) > MaxDescription {
		return fieldErr("description", "is %d bytes; at most %d", len(c.Description), MaxDescription)
	}
	if err := c.Labels.Validate(); err != nil {
		return err
	}
	if _, err := LoadLocation(c.TimeZone); err != nil {
		return err
	}
	if len(c.Dates) > MaxCalendarDates {
		return fieldErr("dates", "has %d dates; at most %d", len(c.Dates), MaxCalendarDates)
	}
	for i, d := range c.Dates {
		if err := checkDate(fmt.Sprintf("dates[%d]", i), d); err != nil {
			return err
		}
	}
	if len(c.Ranges) > MaxCalendarRanges {
		return fieldErr("ranges", "has %d ranges; at most %d", len(c.Ranges), MaxCalendarRanges)
	}
	for i, r := range c.Ranges {
		f := fmt.Sprintf("ranges[%d]", i)
		if err := checkDate(f+".from", r.From); err != nil {
			return err
		}
		if err := checkDate(f+".to", r.To); err != nil {
			return err
		}
		if r.To < r.From {
			return fieldErr(f+".to", "%s is before from %s", r.To, r.From)
		}
	}
	if len(c.Rules) > MaxCalendarRules {
		return fieldErr("rules", "has %d rules; at most %d", len(c.Rules), MaxCalendarRules)
	}
	for i, r := range c.Rules {
		if err := r.validate(fmt.Sprintf("rules[%d]", i)); err != nil {
			return err
		}
	}
	if len(c.Weekdays) > 7 {
		return fieldErr("weekdays", "has %d entries; at most 7", len(c.Weekdays))
	}
	for i, w := range c.Weekdays {
		if _, ok := parseWeekday(w); !ok {
			return fieldErr(fmt.Sprintf("weekdays[%d]", i), "%q is not a weekday; want one of %s", w, strings.Join(weekdayNames[:], ", "))
		}
	}
	return nil
}

func checkDate(field, s string) error {
	d, err := time.Parse(DateLayout, s)
	if err != nil || d.Format(DateLayout) != s {
		return fieldErr(field, "%q is not a date such as 2026-12-25", s)
	}
	return nil
}

func (r YearlyRule) validate(f string) error {
	if r.Month < 1 || r.Month > 12 {
		return fieldErr(f+".month", "is %d; want 1 to 12", r.Month)
	}
	if r.Weekday == "" {
		if r.Nth != 0 {
			return fieldErr(f+".nth", "needs a weekday; a rule is {month, day} or {month, weekday, nth}")
		}
		if r.Day < 1 || r.Day > daysIn(r.Month) {
			return fieldErr(f+".day", "is %d; want 1 to %d for month %d (or give weekday and nth instead)", r.Day, daysIn(r.Month), r.Month)
		}
		return nil
	}
	if r.Day != 0 {
		return fieldErr(f+".day", "is set with a weekday; a rule is {month, day} or {month, weekday, nth}")
	}
	if _, ok := parseWeekday(r.Weekday); !ok {
		return fieldErr(f+".weekday", "%q is not a weekday; want one of %s", r.Weekday, strings.Join(weekdayNames[:], ", "))
	}
	if r.Nth != -1 && (r.Nth < 1 || r.Nth > 5) {
		return fieldErr(f+".nth", "is %d; want 1 to 5, or -1 for the last", r.Nth)
	}
	return nil
}

// DecodeCalendar decodes a calendar strictly, as DecodeSchedule does a
// schedule: an unknown field or a wrong type is a *FieldError naming it.
func DecodeCalendar(r io.Reader) (*Calendar, error) {
	c := &Calendar{}
	if err := decodeStrict(r, "calendar", MaxCalendarBytes, c); err != nil {
		return nil, err
	}
	return c, nil
}

// validateCalendarRefs checks a schedule's excludeCalendars and
// onlyCalendars as ids (whether each exists is the catalog's check,
// which has the store).
func (s *Schedule) validateCalendarRefs() error {
	for _, l := range []struct {
		field string
		ids   []string
	}{{"excludeCalendars", s.ExcludeCalendars}, {"onlyCalendars", s.OnlyCalendars}} {
		if len(l.ids) > MaxScheduleCalendars {
			return fieldErr(l.field, "has %d calendars; at most %d", len(l.ids), MaxScheduleCalendars)
		}
		seen := map[string]bool{}
		for i, id := range l.ids {
			f := fmt.Sprintf("%s[%d]", l.field, i)
			if !IDPattern.MatchString(id) {
				return fieldErr(f, "%q is not a calendar id (it must match %s)", id, IDPattern)
			}
			if seen[id] {
				return fieldErr(f, "%q is listed twice", id)
			}
			seen[id] = true
		}
	}
	return nil
}

// CalendarIDs lists every calendar the schedule names, excluded ones
// first, each once.
func (s *Schedule) CalendarIDs() []string {
	var out []string
	seen := map[string]bool{}
	for _, id := range append(append([]string(nil), s.ExcludeCalendars...), s.OnlyCalendars...) {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// CalendarVerdict says whether the schedule fires at fire time t under its
// calendars, cals holding the ones found by id. skip is true when t falls
// on a day of an excluded calendar, or on no day of any onlyCalendars
// calendar; reason then names the calendar ("excluded by calendar
// holidays-de"). A calendar missing from cals (deleted since the schedule
// named it) has no days: it excludes nothing, and an onlyCalendars list
// whose calendars are all missing lets nothing fire; reason names the
// missing ones, so the skipped record says why.
func (s *Schedule) CalendarVerdict(t time.Time, cals map[string]*Calendar) (skip bool, reason string) {
	for _, id := range s.ExcludeCalendars {
		if c := cals[id]; c != nil && c.Contains(t) {
			return true, "excluded by calendar " + id
		}
	}
	if len(s.OnlyCalendars) == 0 {
		return false, ""
	}
	var missing []string
	for _, id := range s.OnlyCalendars {
		c := cals[id]
		if c == nil {
			missing = append(missing, id)
			continue
		}
		if c.Contains(t) {
			return false, ""
		}
	}
	reason = "not in onlyCalendars " + strings.Join(s.OnlyCalendars, ", ")
	if len(missing) > 0 {
		reason += " (calendar " + strings.Join(missing, ", ") + " not found)"
	}
	return true, reason
}

// MarkedTime is an upcoming fire time with its calendar verdict: Skipped
// times are decided, and recorded skipped with Reason, not run.
type MarkedTime struct {
	Time    time.Time `json:"time"`
	Skipped bool      `json:"skipped,omitempty"`
	Reason  string    `json:"reason,omitempty"`
}

// UpcomingMarked is Upcoming for a schedule with calendars: count fire
// times of spec strictly after start, each marked with s's calendar
// verdict (cals as CalendarVerdict takes them). `baton next --schedule`
// and `schedules describe` show them, so an operator sees the holiday the
// schedule will skip.
func (s *Schedule) UpcomingMarked(spec Spec, loc *time.Location, start time.Time, count int, cals map[string]*Calendar) []MarkedTime {
	out := []MarkedTime{}
	for _, t := range Upcoming(spec, loc, start, count) {
		skip, reason := s.CalendarVerdict(t, cals)
		out = append(out, MarkedTime{Time: t, Skipped: skip, Reason: reason})
	}
	return out
}
