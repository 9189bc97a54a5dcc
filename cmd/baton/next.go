package main

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/shared/schedule"
)

// nextMaxCount bounds -n so a typo cannot print forever.
const nextMaxCount = 10000

// newNextCmd builds `baton next`. It is a constructor, not a package
// variable, so that tests get fresh flags on every run.
func newNextCmd(now func() time.Time, client clientFunc) *cobra.Command {
	var (
		tz      string
		from    string
		count   int
		out     *outputFormat
		schedID string
	)
	cmd := &cobra.Command{
		Use:   "next EXPR | next --schedule ID",
		Short: "Print the next fire times of a cron expression",
		Long: `Print the next fire times of a cron expression, one per line, in RFC 3339
with the zone's offset. EXPR is 5-field unix cron, 6 fields with leading
seconds, @hourly/@daily/…, or "@every 90s"; quote it. DST gaps fire once at
the end of the gap; repeated fall-back times fire at their first occurrence.
With --schedule ID it reads that schedule through the API instead and prints
its real upcoming times: its zone, H fields, DST policy, jitter and
startAt/endAt applied, and each time its calendars skip marked
"(skipped: excluded by calendar ID)".`,
		Example: `  baton next '*/15 * * * *' --tz Europe/Berlin --from 2026-03-29T01:30:00+01:00 -n 4
  baton next --schedule nightly -n 10`,
		Args: func(cmd *cobra.Command, args []string) error {
			if schedID != "" {
				if len(args) != 0 || tz != "" {
					return usageError("next: --schedule takes no expression and no --tz: the schedule has its own")
				}
				return nil
			}
			if len(args) != 1 {
				return usageError("next: want exactly one argument, the cron expression (quote it), got %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if count < 1 || count > nextMaxCount {
				return usageError("next: -n %d: want 1 to %d", count, nextMaxCount)
			}
			expr := ""
			var spec schedule.Spec
			var err error
			var sc schedule.Schedule
			var cals map[string]*schedule.Calendar
			if schedID != "" {
				c, cerr := client()
				if cerr != nil {
					return cerr
				}
				if _, err := c.do(cmd.Context(), http.MethodGet, "/schedules/"+url.PathEscape(schedID), nil, nil, nil, &sc); err != nil {
					return apiFailure("next --schedule "+schedID, err)
				}
				if spec, err = sc.Spec(); err != nil {
					return fmt.Errorf("next: schedule %s: cron %q: %w", schedID, sc.Cron, err)
				}
				expr, tz = sc.Cron, sc.TimeZone
				if cals, err = scheduleCalendars(cmd, c, &sc); err != nil {
					return apiFailure("next --schedule "+schedID+": calendars", err)
				}
			} else {
				expr = args[0]
				if spec, err = schedule.Parse(expr); err != nil {
					return usageError("next: %v", err)
				}
			}
			loc, err := schedule.LoadLocation(tz)
			if err != nil {
				return usageError("next: --tz: %v", err)
			}
			start := now()
			if from != "" {
				if start, err = time.Parse(time.RFC3339, from); err != nil {
					return usageError("next: --from %q is not RFC 3339 (such as 2026-03-29T01:30:00+01:00): %v", from, err)
				}
			}
			// A schedule's calendars mark the times they skip; an
			// expression has none, and nothing is marked.
			marked := sc.UpcomingMarked(spec, loc, start, count, cals)
			times := make([]time.Time, len(marked))
			doc := nextDoc{Expression: expr, Schedule: schedID, TimeZone: zoneName(tz)}
			for i, m := range marked {
				times[i] = m.Time
				if m.Skipped {
					doc.Skipped = append(doc.Skipped, m)
				}
			}
			doc.FireTimes = times
			w := cmd.OutOrStdout()
			return out.print(w, doc, func() error {
				for _, m := range marked {
					if _, err := fmt.Fprintln(w, m.Time.Format(time.RFC3339)+calendarMark(m)); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageError("next: %v", err)
	})
	cmd.Flags().StringVar(&tz, "tz", "", "IANA time zone such as Europe/Berlin (default UTC)")
	cmd.Flags().StringVar(&from, "from", "", "list fire times strictly after this RFC 3339 time (default now)")
	cmd.Flags().IntVarP(&count, "count", "n", 5, "how many fire times to print")
	cmd.Flags().StringVar(&schedID, "schedule", "", "print the upcoming times of this schedule (read through the API) instead of an expression")
	out = addOutput(cmd, `{"expression":…,"timeZone":…,"fireTimes":[…]}`)
	return cmd
}

// nextDoc is what next -o json|yaml prints.
type nextDoc struct {
	Expression string      `json:"expression"`
	Schedule   string      `json:"schedule,omitempty"`
	TimeZone   string      `json:"timeZone"`
	FireTimes  []time.Time `json:"fireTimes"`
	// Skipped are the fire times the schedule's calendars skip (recorded
	// skipped, not run), with the reason.
	Skipped []schedule.MarkedTime `json:"skipped,omitempty"`
}

func init() {
	rootCmd.AddCommand(newNextCmd(time.Now, schedulesClientFromEnv))
}
