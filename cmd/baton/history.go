package main

import (
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/schedule"
)

// schedulesHistoryCmd builds `baton schedules history ID`: the schedule's
// change records (GET /schedules/{id}/versions), newest first.
func schedulesHistoryCmd(client clientFunc) *cobra.Command {
	var (
		pageSize int
		token    string
		all      bool
		out      *outputFormat
	)
	cmd := &cobra.Command{
		Use:     "history ID",
		Aliases: []string{"versions"},
		Short:   "Show a schedule's history of changes: who changed what, when, newest first",
		Long: `Show the change records of a schedule: one per write (create, update,
pause, resume, delete) with its version, who made it, when, and the fields
it changed (before → after). A deleted schedule's history is still shown.
Records are kept up to the last 100 per schedule and for history.keep
(BATON_HISTORY_KEEP, default 30d).`,
		Example: `  baton schedules history nightly
  baton schedules history nightly -o json --all`,
		Args: exactlyOneID("history"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkPageSize(cmd, pageSize); err != nil {
				return err
			}
			c, err := client()
			if err != nil {
				return err
			}
			list, next, err := fetchPages(cmd.Context(), c, "/schedules/"+url.PathEscape(args[0])+"/versions", nil, pageSize, token, all,
				func(p *catalog.VersionPage) ([]schedule.VersionRecord, string) { return p.Versions, p.NextPageToken })
			if err != nil {
				return apiFailure("schedules history "+args[0], err)
			}
			return out.print(cmd.OutOrStdout(), catalog.VersionPage{Versions: nonNil(list), NextPageToken: next}, func() error {
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "VERSION\tOP\tACTOR\tAT\tCHANGES")
				for _, v := range list {
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", v.Version, v.Op, v.Actor, v.At.UTC().Format(time.RFC3339), diffSummary(v))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				if next != "" {
					fmt.Fprintf(cmd.ErrOrStderr(), "more: baton schedules history %s --page-token %s (or --all)\n", args[0], next)
				}
				return nil
			})
		},
	}
	flagUsage(cmd)
	cmd.Flags().IntVar(&pageSize, "page-size", 0, fmt.Sprintf("records per page, 1 to %d (default %d)", catalog.MaxPageSize, catalog.DefaultPageSize))
	cmd.Flags().StringVar(&token, "page-token", "", "continue from the nextPageToken of an earlier page")
	cmd.Flags().BoolVar(&all, "all", false, "follow page tokens to the end")
	out = addOutput(cmd, `{"versions":[{"version","op","actor","at","diff":[{"field","before","after"}]}…],"nextPageToken":…}`)
	return cmd
}

// diffSummary is a record's changes on one line: "field: before → after"
// for a few fields, values cut short; a create or delete lists fields only.
func diffSummary(v schedule.VersionRecord) string {
	const most = 4
	var parts []string
	for i, d := range v.Diff {
		if i == most {
			parts = append(parts, fmt.Sprintf("(+%d more)", len(v.Diff)-most))
			break
		}
		if v.Op == schedule.ChangeCreate || v.Op == schedule.ChangeDelete {
			parts = append(parts, d.Field)
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %s → %s", d.Field, short(d.Before), short(d.After)))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}

// short is a JSON value for a table cell: "∅" when absent, cut at 40 bytes.
func short(s string) string {
	switch {
	case s == "":
		return "∅"
	case len(s) > 40:
		return s[:37] + "..."
	}
	return s
}
