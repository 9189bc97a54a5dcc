package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/schedule"
)

func init() {
	rootCmd.AddCommand(newCalendarsCmd(schedulesClientFromEnv))
}

// newCalendarsCmd builds `baton calendars …`: the calendars that
// schedules name in excludeCalendars and onlyCalendars.
func newCalendarsCmd(client clientFunc) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "calendars",
		Aliases: []string{"calendar", "cal"},
		Short:   "Create, show, list and delete calendars (days schedules exclude or keep to)",
		Long: `Manage calendars through the Schedules API (/calendars). A calendar is a
set of days, read in its own time zone: dates, date ranges (both ends
included), yearly rules and weekdays. A schedule lists calendars in
excludeCalendars (it does not fire on their days; the fire is recorded
skipped, naming the calendar) or onlyCalendars (it fires on their days only).
A change is live at the next tick.`,
	}
	groupCommand(cmd)
	cmd.AddCommand(calendarsPutCmd(client), calendarsGetCmd(client), calendarsListCmd(client), calendarsDeleteCmd(client))
	return cmd
}

func oneCalendarID(name string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageError("calendars %s: want exactly one argument, the calendar id, got %d", name, len(args))
		}
		return nil
	}
}

func calendarsPutCmd(client clientFunc) *cobra.Command {
	var (
		file, tz, description, ifMatch string
		dates, ranges, rules, weekdays []string
		out                            *outputFormat
	)
	cmd := &cobra.Command{
		Use:   "put ID",
		Short: "Create a calendar, or replace it whole",
		Long: `Create the calendar ID, or replace the stored one whole (PUT). The body is
read from --file (JSON, - for stdin); the flags set its fields over the file's.`,
		Example: `  baton calendars put holidays-de --tz Europe/Berlin --date 2026-12-25 --date 2026-12-26 \
      --range 2026-12-28..2026-12-31 --rule 1-1 --rule 11/thu/4 --rule 5/mon/-1
  baton calendars put weekend --weekday sat --weekday sun
  baton calendars put holidays-de -f holidays.json --if-match 3`,
		Args: oneCalendarID("put"),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{}
			if file != "" {
				var data []byte
				var err error
				if file == "-" {
					data, err = io.ReadAll(cmd.InOrStdin())
				} else {
					data, err = os.ReadFile(file)
				}
				if err != nil {
					return usageError("calendars put: --file: %v", err)
				}
				if err := json.Unmarshal(data, &body); err != nil {
					return usageError("calendars put: --file %s: want one JSON object: %v", file, err)
				}
			}
			fs := cmd.Flags()
			if fs.Changed("tz") {
				body["timeZone"] = tz
			}
			if fs.Changed("description") {
				body["description"] = description
			}
			if fs.Changed("date") {
				body["dates"] = dates
			}
			if fs.Changed("weekday") {
				body["weekdays"] = weekdays
			}
			if fs.Changed("range") {
				var rs []schedule.DateRange
				for _, r := range ranges {
					from, to, ok := strings.Cut(r, "..")
					if !ok {
						return usageError("calendars put: --range %q: want FROM..TO, such as 2026-12-24..2026-12-31", r)
					}
					rs = append(rs, schedule.DateRange{From: from, To: to})
				}
				body["ranges"] = rs
			}
			if fs.Changed("rule") {
				var rs []schedule.YearlyRule
				for _, r := range rules {
					rule, err := parseRuleFlag(r)
					if err != nil {
						return usageError("calendars put: --rule %q: %v", r, err)
					}
					rs = append(rs, rule)
				}
				body["rules"] = rs
			}
			c, err := client()
			if err != nil {
				return err
			}
			h := http.Header{}
			if ifMatch != "" {
				h.Set("If-Match", ifMatch)
			}
			var raw json.RawMessage
			if _, err := c.do(cmd.Context(), http.MethodPut, "/calendars/"+url.PathEscape(args[0]), nil, h, body, &raw); err != nil {
				return apiFailure("calendars put "+args[0], calendarFlagHint(err))
			}
			return printCalendar(cmd, raw, out)
		},
	}
	flagUsage(cmd)
	fs := cmd.Flags()
	fs.StringVarP(&file, "file", "f", "", "read the calendar as JSON from a file, or - for stdin; flags override its fields")
	fs.StringVar(&tz, "tz", "", "IANA time zone the days are read in (default UTC)")
	fs.StringVar(&description, "description", "", "free text")
	fs.StringArrayVar(&dates, "date", nil, "a day, such as 2026-12-25 (repeatable)")
	fs.StringArrayVar(&ranges, "range", nil, "days FROM..TO, both included, such as 2026-12-24..2026-12-31 (repeatable)")
	fs.StringArrayVar(&rules, "rule", nil, "a yearly day: MONTH-DAY (12-25) or MONTH/WEEKDAY/NTH (11/thu/4; nth -1 is the last) (repeatable)")
	fs.StringArrayVar(&weekdays, "weekday", nil, "a day of every week: sun, mon, … sat (repeatable)")
	fs.StringVar(&ifMatch, "if-match", "", "only replace if the stored version is this one (the ETag of get); else fail with 412")
	out = addOutput(cmd, "the stored calendar")
	return cmd
}

// parseRuleFlag reads --rule: "12-25" or "11/thu/4". The API validates
// the values; this only splits them.
func parseRuleFlag(s string) (schedule.YearlyRule, error) {
	if m, d, ok := strings.Cut(s, "-"); ok && !strings.Contains(s, "/") {
		month, err1 := strconv.Atoi(m)
		day, err2 := strconv.Atoi(d)
		if err1 != nil || err2 != nil {
			return schedule.YearlyRule{}, fmt.Errorf("want MONTH-DAY such as 12-25")
		}
		return schedule.YearlyRule{Month: month, Day: day}, nil
	}
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return schedule.YearlyRule{}, fmt.Errorf("want MONTH-DAY (12-25) or MONTH/WEEKDAY/NTH (11/thu/4)")
	}
	month, err1 := strconv.Atoi(parts[0])
	nth, err2 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil {
		return schedule.YearlyRule{}, fmt.Errorf("want MONTH/WEEKDAY/NTH such as 11/thu/4")
	}
	return schedule.YearlyRule{Month: month, Weekday: parts[1], Nth: nth}, nil
}

// calendarFlagHint names the flag of a field the API refused.
func calendarFlagHint(err error) error {
	var ae *apiError
	if !errors.As(err, &ae) || ae.Field == "" {
		return err
	}
	flag := map[string]string{"timeZone": "--tz", "description": "--description", "dates": "--date", "ranges": "--range", "rules": "--rule", "weekdays": "--weekday", "If-Match": "--if-match"}
	key := ae.Field
	if i := strings.IndexAny(key, "[."); i >= 0 {
		key = key[:i]
	}
	if f, ok := flag[key]; ok {
		return fmt.Errorf("%w (flag %s)", err, f)
	}
	return err
}

func printCalendar(cmd *cobra.Command, raw json.RawMessage, out *outputFormat) error {
	var c schedule.Calendar
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("decode calendar: %w", err)
	}
	return out.print(cmd.OutOrStdout(), c, func() error { return calendarCard(cmd.OutOrStdout(), &c) })
}

// calendarCard writes c as a field: value card.
func calendarCard(w io.Writer, c *schedule.Calendar) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("ID", c.ID)
	if c.Description != "" {
		row("Description", c.Description)
	}
	row("Time zone", zoneName(c.TimeZone))
	row("Days", calendarSummary(c))
	row("Version", strconv.FormatInt(c.Version, 10))
	row("Updated", c.UpdatedAt.UTC().Format(time.RFC3339))
	return tw.Flush()
}

// calendarSummary spells a calendar's days on one line.
func calendarSummary(c *schedule.Calendar) string {
	var parts []string
	parts = append(parts, c.Dates...)
	for _, r := range c.Ranges {
		parts = append(parts, r.From+".."+r.To)
	}
	for _, r := range c.Rules {
		if r.Weekday == "" {
			parts = append(parts, fmt.Sprintf("every %02d-%02d", r.Month, r.Day))
		} else {
			parts = append(parts, fmt.Sprintf("every %d/%s/%d", r.Month, r.Weekday, r.Nth))
		}
	}
	if len(c.Weekdays) > 0 {
		parts = append(parts, "every "+strings.Join(c.Weekdays, ","))
	}
	if len(parts) == 0 {
		return "(none)"
	}
	return strings.Join(parts, " ")
}

func calendarsGetCmd(client clientFunc) *cobra.Command {
	var out *outputFormat
	cmd := &cobra.Command{
		Use:   "get ID",
		Short: "Show one calendar",
		Args:  oneCalendarID("get"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if _, err := c.do(cmd.Context(), http.MethodGet, "/calendars/"+url.PathEscape(args[0]), nil, nil, nil, &raw); err != nil {
				return apiFailure("calendars get "+args[0], err)
			}
			return printCalendar(cmd, raw, out)
		},
	}
	flagUsage(cmd)
	out = addOutput(cmd, "accepted back by put -f")
	return cmd
}

func calendarsListCmd(client clientFunc) *cobra.Command {
	var (
		pageSize int
		token    string
		all      bool
		out      *outputFormat
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List calendars, in id order, one page at a time",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkPageSize(cmd, pageSize); err != nil {
				return err
			}
			c, err := client()
			if err != nil {
				return err
			}
			list, next, err := fetchPages(cmd.Context(), c, "/calendars", nil, pageSize, token, all,
				func(p *catalog.CalendarPage) ([]schedule.Calendar, string) { return p.Calendars, p.NextPageToken })
			if err != nil {
				return apiFailure("calendars list", err)
			}
			if !out.table() {
				return out.print(cmd.OutOrStdout(), catalog.CalendarPage{Calendars: nonNil(list), NextPageToken: next}, nil)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTIME ZONE\tDAYS\tVERSION")
			for _, cal := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", cal.ID, zoneName(cal.TimeZone), calendarSummary(&cal), cal.Version)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if next != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "more: baton calendars list --page-token %s (or --all)\n", next)
			}
			return nil
		},
	}
	flagUsage(cmd)
	cmd.Flags().IntVar(&pageSize, "page-size", 0, fmt.Sprintf("calendars per page, 1 to %d (default %d)", catalog.MaxPageSize, catalog.DefaultPageSize))
	cmd.Flags().StringVar(&token, "page-token", "", "continue from the nextPageToken of an earlier page")
	cmd.Flags().BoolVar(&all, "all", false, "follow page tokens to the end")
	out = addOutput(cmd, `{"calendars":[…],"nextPageToken":…}`)
	return cmd
}

func calendarsDeleteCmd(client clientFunc) *cobra.Command {
	return deleteCmd(client, "calendars", "Delete a calendar (schedules that still name it treat it as having no days)", oneCalendarID("delete"))
}

// scheduleCalendars reads the calendars sc names through the API, one GET
// each (at most 2*schedule.MaxScheduleCalendars). A calendar that is gone
// is left out, as the tick leaves it out: it has no days.
func scheduleCalendars(cmd *cobra.Command, c *apiClient, sc *schedule.Schedule) (map[string]*schedule.Calendar, error) {
	out := map[string]*schedule.Calendar{}
	for _, id := range sc.CalendarIDs() {
		var cal schedule.Calendar
		_, err := c.do(cmd.Context(), http.MethodGet, "/calendars/"+url.PathEscape(id), nil, nil, nil, &cal)
		var ae *apiError
		switch {
		case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: calendar %s named by schedule %s does not exist; it counts as having no days\n", id, sc.ID)
		case err != nil:
			return nil, err
		default:
			out[id] = &cal
		}
	}
	return out, nil
}

// calendarMark is the note after a fire time that a calendar skips.
func calendarMark(m schedule.MarkedTime) string {
	if !m.Skipped {
		return ""
	}
	return "  (skipped: " + m.Reason + ")"
}

// calendarList sets a schedule's calendar list from --exclude-calendar or
// --only-calendar when given: the ids, or null (cleared) for "".
func calendarList(changed func(string) bool, set func(v any, path ...string), flag string, ids []string, field string) {
	if !changed(flag) {
		return
	}
	var keep []string
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" {
			keep = append(keep, id)
		}
	}
	if len(keep) == 0 {
		set(nil, field)
		return
	}
	set(keep, field)
}
