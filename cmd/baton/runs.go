package main

import (
	"fmt"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/schedule"
)

// newRunsCmd builds `baton runs …`: run history from the Schedules API.
func newRunsCmd(client clientFunc) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "Show the run history of schedules",
	}
	var (
		id       string
		pageSize int
		token    string
		all      bool
		out      *outputFormat
	)
	list := &cobra.Command{
		Use:     "list --schedule ID",
		Short:   "List a schedule's runs, newest fire time first",
		Example: "  baton runs list --schedule nightly --page-size 20",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if id == "" {
				return usageError("runs list: --schedule ID is required")
			}
			if err := checkPageSize(cmd, pageSize); err != nil {
				return err
			}
			c, err := client()
			if err != nil {
				return err
			}
			runs, next, err := fetchPages(cmd.Context(), c, "/schedules/"+url.PathEscape(id)+"/runs", nil, pageSize, token, all,
				func(p *catalog.RunPage) ([]schedule.Run, string) { return p.Runs, p.NextPageToken })
			if err != nil {
				return apiFailure("runs list --schedule "+id, err)
			}
			if !out.table() {
				return out.print(cmd.OutOrStdout(), catalog.RunPage{Runs: nonNil(runs), NextPageToken: next}, nil)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RUN\tFIRE TIME\tSOURCE\tSTATUS\tATTEMPT\tFINISHED\tDETAIL")
			for _, r := range runs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.FireTime.UTC().Format(time.RFC3339), r.Source, r.Status, r.Attempt, orDash(r.FinishedAt), runDetail(r))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if next != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "more: baton runs list --schedule %s --page-token %s (or --all)\n", id, next)
			}
			return nil
		},
	}
	flagUsage(list)
	list.Flags().StringVar(&id, "schedule", "", "the schedule id (required)")
	list.Flags().IntVar(&pageSize, "page-size", 0, fmt.Sprintf("runs per page, 1 to %d (default %d)", catalog.MaxPageSize, catalog.DefaultPageSize))
	list.Flags().StringVar(&token, "page-token", "", "continue from the nextPageToken of an earlier page")
	list.Flags().BoolVar(&all, "all", false, "follow page tokens to the end")
	out = addOutput(list, `{"runs":[…],"nextPageToken":…}`)
	cmd.AddCommand(list)
	return groupCommand(cmd)
}

func orDash(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// runDetail is the one thing worth reading about a run: why it was skipped,
// why it failed, or what it produced.
func runDetail(r schedule.Run) string {
	s := r.Output
	switch {
	case r.Reason != "":
		s = r.Reason
	case r.Error != "":
		s = r.Error
	}
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	if s == "" {
		return "-"
	}
	return s
}
