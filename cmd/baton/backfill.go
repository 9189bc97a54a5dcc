package main

import (
	"fmt"
	"net/http"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/shared/schedule"
)

// schedulesBackfillCmd builds `schedules backfill ID --from T --to T
// [--dry-run]`: POST /schedules/ID:backfill, following nextPageToken until
// the window is covered, so a long window is one command.
func schedulesBackfillCmd(client clientFunc, now func() time.Time) *cobra.Command {
	var (
		out      *outputFormat
		from, to string
		dryRun   bool
	)
	cmd := &cobra.Command{
		Use:   "backfill ID --from T --to T [--dry-run]",
		Short: "Run a schedule's past fire times in [--from, --to) (source backfill); a fire time that already ran is not run again",
		Long: `Record and run the runs of every fire time of the schedule in [--from, --to),
with source backfill, through the same hand-off as scheduled runs, under the
schedule's overlap policy. Run ids are those of scheduled runs, so a fire time
that already ran gets no second run, and repeating a backfill creates nothing.
--dry-run lists the fire times and which already have a run, writing nothing.
--from and --to are RFC 3339 times or durations before now (2h); --to may not
be in the future. A failed call is safe to repeat.`,
		Example: "  baton schedules backfill nightly --from 2026-03-01T00:00:00Z --to 2026-03-08T00:00:00Z --dry-run\n" +
			"  baton schedules backfill minutely --from 1h --to 0s",
		Args: exactlyOneID("backfill"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from == "" {
				return usageError("schedules backfill: --from is required (RFC 3339, or a duration before now such as 24h)")
			}
			n := now()
			start, err := parseSince(from, n)
			if err != nil {
				return usageError("schedules backfill: --from %v", err)
			}
			end := n
			if to != "0s" && to != "now" {
				if end, err = parseSince(to, n); err != nil {
					return usageError("schedules backfill: --to %v", err)
				}
			}
			c, err := client()
			if err != nil {
				return err
			}
			total := schedule.BackfillResult{Schedule: args[0], DryRun: dryRun, Fires: []schedule.BackfillFire{}}
			req := schedule.BackfillRequest{Start: start.UTC(), End: end.UTC(), DryRun: dryRun}
			for {
				var page schedule.BackfillResult
				if _, err := c.do(cmd.Context(), http.MethodPost, "/schedules/"+url.PathEscape(args[0])+":backfill", nil, nil, req, &page); err != nil {
					return apiFailure("schedules backfill "+args[0], err)
				}
				total.Fires = append(total.Fires, page.Fires...)
				total.Created += page.Created
				total.Existing += page.Existing
				if page.NextPageToken == "" {
					break
				}
				req.PageToken = page.NextPageToken
			}
			return out.print(cmd.OutOrStdout(), total, func() error {
				w := cmd.OutOrStdout()
				if dryRun {
					tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "FIRE TIME\tRUN\tEXISTS\tSTATUS")
					for _, f := range total.Fires {
						fmt.Fprintf(tw, "%s\t%s\t%t\t%s\n", f.FireTime.Format(time.RFC3339), f.Run, f.Existed, f.Status)
					}
					if err := tw.Flush(); err != nil {
						return err
					}
					_, err := fmt.Fprintf(w, "dry run: %d fire times, %d already have a run; nothing written\n", len(total.Fires), total.Existing)
					return err
				}
				_, err := fmt.Fprintf(w, "backfilled %s: %d fire times, %d runs created, %d already there\n", args[0], len(total.Fires), total.Created, total.Existing)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "start of the window (inclusive): RFC 3339, or a duration before now (24h)")
	cmd.Flags().StringVar(&to, "to", "0s", "end of the window (exclusive): RFC 3339, or a duration before now; 0s (default) is now")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list the fire times and which already ran; write nothing")
	flagUsage(cmd)
	out = addOutput(cmd, "the backfill result (fires, created, existing)")
	return cmd
}
