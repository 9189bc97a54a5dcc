package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
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
		Short: "Show runs: across schedules, of one schedule, or one run",
	}
	cmd.AddCommand(newRunsListCmd(client), newRunsGetCmd(client))
	return groupCommand(cmd)
}

// runsListFlags are `runs list`'s flags.
type runsListFlags struct {
	id, status, source, since, token string
	selector                         string
	pageSize                         int
	all                              bool
	out                              *outputFormat
	watch                            *watchFlags
}

// query checks the filter flags before any request and returns GET /runs'
// query, or nil when only --schedule is given (the schedule's own
// history, whose unknown id is a 404). now anchors a --since duration.
func (f *runsListFlags) query(now time.Time) (url.Values, error) {
	q := url.Values{}
	if f.status != "" {
		if !schedule.RunStatus(f.status).Valid() {
			return nil, usageError("runs list: --status must be one of %s, not %q", joinEnum(schedule.AllRunStatuses()), f.status)
		}
		q.Set("status", f.status)
	}
	if f.source != "" {
		if !schedule.Source(f.source).Valid() {
			return nil, usageError("runs list: --source must be one of %s, not %q", joinEnum(schedule.AllSources()), f.source)
		}
		if f.status != "" || f.id != "" {
			return nil, usageError("runs list: --source cannot be combined with --status or --schedule (no index serves it)")
		}
		q.Set("source", f.source)
	}
	if f.since != "" {
		t, err := parseSince(f.since, now)
		if err != nil {
			return nil, usageError("runs list: --since %v", err)
		}
		q.Set("since", t.UTC().Format(time.RFC3339Nano))
	}
	if f.id != "" {
		if len(q) == 0 {
			return nil, nil
		}
		q.Set("schedule", f.id)
	}
	return q, nil
}

// parseSince reads --since: an RFC 3339 time, or a positive duration
// (1h, 30m) meaning that long before now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return time.Time{}, fmt.Errorf("must be an RFC 3339 time (2026-03-01T09:00:00Z) or a positive duration before now (1h, 30m), not %q", s)
	}
	return now.Add(-d), nil
}

func joinEnum[T ~string](vs []T) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

func newRunsListCmd(client clientFunc) *cobra.Command {
	var f runsListFlags
	list := &cobra.Command{
		Use:   "list [--schedule ID] [--status S] [--source S] [--since T]",
		Short: "List runs, newest fire time first: of all schedules, or of one",
		Example: "  baton runs list --status failed --since 1h\n" +
			"  baton runs list --schedule nightly --page-size 20",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := f.query(time.Now())
			if err != nil {
				return err
			}
			if err := checkPageSize(cmd, f.pageSize); err != nil {
				return err
			}
			if f.selector != "" {
				return f.listByLabel(cmd, client, q)
			}
			c, err := client()
			if err != nil {
				return err
			}
			path, what := "/runs", "runs list"
			if q == nil {
				path, what = "/schedules/"+url.PathEscape(f.id)+"/runs", "runs list --schedule "+f.id
			}
			header, row := runsListHeader, runsListRow
			if q == nil {
				header, row = scheduleRunsHeader, scheduleRunsRow
			}
			if f.watch.on {
				return runWatch(cmd.Context(), cmd, f.watch, f.out, watchSpec[schedule.Run]{
					fetch: func(ctx context.Context) ([]schedule.Run, error) {
						runs, _, err := fetchPages(ctx, c, path, q, f.pageSize, "", false,
							func(p *catalog.RunPage) ([]schedule.Run, string) { return p.Runs, p.NextPageToken })
						return runs, apiFailureOrNil(what, err)
					},
					key: func(r schedule.Run) string { return r.ID },
					// Not the heartbeat: a running run would print every beat.
					version: func(r schedule.Run) string {
						return fmt.Sprint(r.Status, r.Attempt, r.StartedAt.UnixNano(), r.FinishedAt.UnixNano())
					},
					header: header, row: row,
				})
			}
			runs, next, err := fetchPages(cmd.Context(), c, path, q, f.pageSize, f.token, f.all,
				func(p *catalog.RunPage) ([]schedule.Run, string) { return p.Runs, p.NextPageToken })
			if err != nil {
				return apiFailure(what, err)
			}
			if !f.out.table() {
				return f.out.print(cmd.OutOrStdout(), catalog.RunPage{Runs: nonNil(runs), NextPageToken: next}, nil)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, header)
			for _, r := range runs {
				fmt.Fprintln(tw, row(r))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if next != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "more: %s (or --all)\n", f.more(cmd, q, next))
			}
			return nil
		},
	}
	flagUsage(list)
	list.Flags().StringVar(&f.id, "schedule", "", "only the runs of this schedule id")
	list.Flags().StringVar(&f.status, "status", "", "only runs in this status: "+joinEnum(schedule.AllRunStatuses()))
	list.Flags().StringVar(&f.source, "source", "", "only runs of this source: "+joinEnum(schedule.AllSources())+" (not with --status or --schedule)")
	list.Flags().StringVar(&f.since, "since", "", "only runs fired at or after this RFC 3339 time, or this long ago (1h, 30m)")
	list.Flags().StringVarP(&f.selector, "selector", "l", "", fmt.Sprintf("only the runs of the schedules matching this label selector (key=value, key!=value, key in (v1,v2)); at most %d schedules, the newest page of runs only", maxLabelRunSchedules))
	list.Flags().IntVar(&f.pageSize, "page-size", 0, fmt.Sprintf("runs per page, 1 to %d (default %d)", catalog.MaxPageSize, catalog.DefaultPageSize))
	list.Flags().StringVar(&f.token, "page-token", "", "continue from the nextPageToken of an earlier page")
	list.Flags().BoolVar(&f.all, "all", false, "follow page tokens to the end")
	f.out = addOutput(list, `{"runs":[…],"nextPageToken":…}`)
	f.watch = addWatch(list, pagedWatch("the newest runs"))
	return list
}

// The tables of runs list: one schedule's history (no SCHEDULE column),
// and GET /runs across schedules. --watch prints the same rows.
const (
	scheduleRunsHeader = "RUN\tFIRE TIME\tSOURCE\tSTATUS\tATTEMPT\tFINISHED\tDETAIL"
	runsListHeader     = "RUN\tSCHEDULE\tFIRE TIME\tSOURCE\tSTATUS\tATTEMPT\tFINISHED\tDETAIL"
)

func scheduleRunsRow(r schedule.Run) string {
	return fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%s\t%s", r.ID, r.FireTime.UTC().Format(time.RFC3339), r.Source, r.Status, r.Attempt, orDash(r.FinishedAt), runDetail(r))
}

func runsListRow(r schedule.Run) string {
	return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s", r.ID, r.ScheduleID, r.FireTime.UTC().Format(time.RFC3339), r.Source, r.Status, r.Attempt, orDash(r.FinishedAt), runDetail(r))
}

// more is the command line that continues a listing after its page, for
// the hint on stderr. A --since duration is given as the time it meant
// (the query's), since the page token is bound to that time.
func (f *runsListFlags) more(cmd *cobra.Command, q url.Values, next string) string {
	parts := []string{cmd.CommandPath()}
	add := func(flag, v string) {
		if v != "" {
			parts = append(parts, "--"+flag, v)
		}
	}
	add("schedule", f.id)
	add("status", f.status)
	add("source", f.source)
	add("since", q.Get("since"))
	if cmd.Flags().Changed("page-size") {
		add("page-size", strconv.Itoa(f.pageSize))
	}
	add("page-token", next)
	return strings.Join(parts, " ")
}

func newRunsGetCmd(client clientFunc) *cobra.Command {
	var out *outputFormat
	get := &cobra.Command{
		Use:     "get ID",
		Short:   "Show one run",
		Example: "  baton runs get 'nightly@20260301T023000Z'",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("runs get: takes exactly one argument, the run id (see baton runs list)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			var r schedule.Run
			if _, err := c.do(cmd.Context(), http.MethodGet, "/runs/"+url.PathEscape(args[0]), nil, nil, nil, &r); err != nil {
				return apiFailure("runs get "+args[0], err)
			}
			return out.print(cmd.OutOrStdout(), r, func() error { return writeRunCard(cmd.OutOrStdout(), r) })
		},
	}
	flagUsage(get)
	out = addOutput(get, "the run")
	return get
}

// writeRunCard prints a run for people, one field a line, omitting what
// the run does not have.
func writeRunCard(w io.Writer, r schedule.Run) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	when := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	}
	line("Run", r.ID)
	line("Schedule", r.ScheduleID)
	line("Fire time", when(r.FireTime))
	line("Source", string(r.Source))
	line("Status", string(r.Status))
	line("Attempt", strconv.Itoa(r.Attempt))
	line("Reason", r.Reason)
	line("Created", when(r.CreatedAt))
	line("Started", when(r.StartedAt))
	line("Heartbeat", when(r.HeartbeatAt))
	line("Finished", when(r.FinishedAt))
	if r.Holder != "" {
		line("Lease", fmt.Sprintf("%s (epoch %d)", r.Holder, r.Epoch))
	}
	line("GPU job", r.GPUJob)
	line("Cloud Run execution", r.Execution)
	if r.ExitCode != nil {
		line("Exit code", strconv.Itoa(*r.ExitCode))
	}
	line("Output", r.Output)
	line("Error", r.Error)
	return tw.Flush()
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

// maxLabelRunSchedules bounds the schedules `runs list -l` resolves its
// selector to. Runs carry no labels, so the selector is answered by
// listing the matching schedules (one page of at most this many, plus one
// to tell "too many") and then one page of runs of each: at most
// maxLabelRunSchedules+1 schedule reads and maxLabelRunSchedules ×
// page-size run reads, bounded whatever the collection holds.
const maxLabelRunSchedules = 50

// listByLabel is `runs list -l`: the newest page-size runs across the
// schedules the selector matches, merged newest fire time first (ties by
// run id, descending, as GET /runs orders them). It has no next page: a
// token would have to carry one position per schedule.
func (f *runsListFlags) listByLabel(cmd *cobra.Command, client clientFunc, q url.Values) error {
	const what = "runs list -l"
	switch {
	case f.id != "":
		return usageError("%s: -l cannot be combined with --schedule (it selects the schedules)", what)
	case f.source != "":
		return usageError("%s: -l cannot be combined with --source (no index serves source with a schedule)", what)
	case f.token != "" || f.all:
		return usageError("%s: -l lists the newest page only; --page-token and --all are not supported with it", what)
	case f.watch.on:
		return usageError("%s: -l cannot be combined with --watch", what)
	}
	sel, err := schedule.ParseLabelSelector("--selector", f.selector)
	if err != nil {
		return usageError("%s: %v", what, err)
	}
	c, err := client()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	scheds, _, err := fetchPages(ctx, c, "/schedules", url.Values{"labelSelector": {sel.String()}}, maxLabelRunSchedules+1, "", false,
		func(p *catalog.SchedulePage) ([]schedule.Schedule, string) { return p.Schedules, p.NextPageToken })
	if err != nil {
		return apiFailure(what, err)
	}
	if len(scheds) > maxLabelRunSchedules {
		return usageError("%s: %q matches more than %d schedules; narrow the selector (runs carry no labels, so each schedule's runs are read separately)", what, sel.String(), maxLabelRunSchedules)
	}
	n := f.pageSize
	if n == 0 {
		n = catalog.DefaultPageSize
	}
	var runs []schedule.Run
	more := false
	for _, sc := range scheds {
		sq := url.Values{"schedule": {sc.ID}}
		for k, v := range q {
			sq[k] = v
		}
		got, next, err := fetchPages(ctx, c, "/runs", sq, n, "", false,
			func(p *catalog.RunPage) ([]schedule.Run, string) { return p.Runs, p.NextPageToken })
		if err != nil {
			return apiFailure(what, err)
		}
		runs = append(runs, got...)
		more = more || next != ""
	}
	slices.SortFunc(runs, func(a, b schedule.Run) int {
		if c := b.FireTime.Compare(a.FireTime); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	if len(runs) > n {
		runs, more = runs[:n], true
	}
	if !f.out.table() {
		return f.out.print(cmd.OutOrStdout(), catalog.RunPage{Runs: nonNil(runs)}, nil)
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, runsListHeader)
	for _, r := range runs {
		fmt.Fprintln(tw, runsListRow(r))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if more {
		fmt.Fprintf(cmd.ErrOrStderr(), "the newest %d runs of %d schedules; older ones: --since, or runs list --schedule ID\n", n, len(scheds))
	}
	return nil
}
