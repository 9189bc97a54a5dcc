package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/schedule"
)

// Sizes of what schedules describe shows.
const (
	describeRuns      = 10 // the last runs, one page of the runs list
	describeFireTimes = 5  // the next fire times
)

// describeDoc is what schedules describe -o json|yaml prints: one
// document with the schedule, its recent runs (newest fire time first) and
// its next fire times (in its time zone).
type describeDoc struct {
	Schedule      schedule.Schedule `json:"schedule"`
	RecentRuns    []schedule.Run    `json:"recentRuns"`
	NextFireTimes []time.Time       `json:"nextFireTimes"`
	// SkippedFireTimes are those of NextFireTimes that the schedule's
	// calendars skip, with the reason.
	SkippedFireTimes []schedule.MarkedTime `json:"skippedFireTimes,omitempty"`
	// Fires is, for a sharded schedule, the aggregate of each fire among
	// the recent runs (GET /runs/{fireId}): succeeded only when all its
	// shards are.
	Fires []schedule.Run `json:"fires,omitempty"`
}

// schedulesDescribeCmd builds `baton schedules describe ID`: the schedule's
// config, its last runs and its next fire times, computed here as
// `baton next` computes them.
func schedulesDescribeCmd(client clientFunc, now func() time.Time) *cobra.Command {
	var out *outputFormat
	cmd := &cobra.Command{
		Use:   "describe ID",
		Short: fmt.Sprintf("Show a schedule with its last %d runs and next %d fire times", describeRuns, describeFireTimes),
		Long: fmt.Sprintf(`Show a schedule's config, its last %d runs (newest fire time first) and its
next %d fire times after now, in its time zone (computed locally, as baton next
does; a paused schedule fires them only once resumed). In the table a change
of UTC offset between two fire times (DST) is marked.`, describeRuns, describeFireTimes),
		Example: "  baton schedules describe nightly\n  baton schedules describe nightly -o yaml",
		Args:    exactlyOneID("describe"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			id := url.PathEscape(args[0])
			var doc describeDoc
			if _, err := c.do(cmd.Context(), http.MethodGet, "/schedules/"+id, nil, nil, nil, &doc.Schedule); err != nil {
				return apiFailure("schedules describe "+args[0], err)
			}
			var page catalog.RunPage
			q := url.Values{"pageSize": {strconv.Itoa(describeRuns)}}
			if _, err := c.do(cmd.Context(), http.MethodGet, "/schedules/"+id+"/runs", q, nil, nil, &page); err != nil {
				return apiFailure("schedules describe "+args[0]+": runs", err)
			}
			doc.RecentRuns = nonNil(page.Runs)
			if doc.Schedule.Shards > 0 {
				seen := map[string]bool{}
				for _, r := range doc.RecentRuns {
					fire := schedule.FireID(r.ID)
					if seen[fire] || r.Shard == nil {
						continue
					}
					seen[fire] = true
					var agg schedule.Run
					if _, err := c.do(cmd.Context(), http.MethodGet, "/runs/"+url.PathEscape(fire), nil, nil, nil, &agg); err != nil {
						return apiFailure("schedules describe "+args[0]+": fire "+fire, err)
					}
					doc.Fires = append(doc.Fires, agg)
				}
			}
			doc.NextFireTimes = []time.Time{}
			spec, err := doc.Schedule.Spec()
			if err != nil {
				return fmt.Errorf("schedules describe %s: cron %q: %w", args[0], doc.Schedule.Cron, err)
			}
			loc, err := schedule.LoadLocation(doc.Schedule.TimeZone)
			if err != nil {
				return fmt.Errorf("schedules describe %s: time zone: %w", args[0], err)
			}
			cals, err := scheduleCalendars(cmd, c, &doc.Schedule)
			if err != nil {
				return apiFailure("schedules describe "+args[0]+": calendars", err)
			}
			for _, m := range doc.Schedule.UpcomingMarked(spec, loc, now(), describeFireTimes, cals) {
				doc.NextFireTimes = append(doc.NextFireTimes, m.Time)
				if m.Skipped {
					doc.SkippedFireTimes = append(doc.SkippedFireTimes, m)
				}
			}
			w := cmd.OutOrStdout()
			return out.print(w, doc, func() error { return describeTable(w, &doc) })
		},
	}
	flagUsage(cmd)
	out = addOutput(cmd, `{"schedule":…,"recentRuns":[…],"nextFireTimes":[…]}`)
	return cmd
}

// describeTable writes the schedule card, then the recent runs, then the
// next fire times.
func describeTable(w io.Writer, doc *describeDoc) error {
	if err := scheduleCard(w, &doc.Schedule); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nRecent runs (last %d):\n", describeRuns)
	if len(doc.RecentRuns) == 0 {
		fmt.Fprintln(w, "  none")
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  RUN\tFIRE TIME\tSOURCE\tSTATUS\tATTEMPT\tFINISHED\tDETAIL")
		for _, r := range doc.RecentRuns {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.FireTime.UTC().Format(time.RFC3339), r.Source, r.Status, r.Attempt, orDash(r.FinishedAt), runDetail(r))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(doc.Fires) > 0 {
		fmt.Fprintf(w, "\nFires (%d shards each; succeeded only when every shard is):\n", doc.Schedule.Shards)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  FIRE\tFIRE TIME\tSTATUS\tSHARDS")
		for _, f := range doc.Fires {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", f.ID, f.FireTime.UTC().Format(time.RFC3339), f.Status, f.Reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\nNext fire times (%s):\n", zoneName(doc.Schedule.TimeZone))
	if len(doc.NextFireTimes) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for i, t := range doc.NextFireTimes {
		line := "  " + t.Format(time.RFC3339)
		for _, m := range doc.SkippedFireTimes {
			if m.Time.Equal(t) {
				line += calendarMark(m)
			}
		}
		if i > 0 {
			if prev := doc.NextFireTimes[i-1]; schedule.OffsetChanged(prev, t) {
				line += fmt.Sprintf("  (DST: UTC offset %s -> %s)", prev.Format("-07:00"), t.Format("-07:00"))
			}
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}
