package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/schedule"
)

// clientFunc makes the API client when a command runs (not when it is
// built), so a missing variable only matters to commands that call the API.
type clientFunc func() (*apiClient, error)

func init() {
	rootCmd.AddCommand(newSchedulesCmd(schedulesClientFromEnv))
	rootCmd.AddCommand(newRunsCmd(schedulesClientFromEnv))
}

// fieldFlags maps API field names to the CLI flags that set them, so an
// error from the API also names the flag to fix.
var fieldFlags = map[string]string{
	"id": "--id", "description": "--description", "cron": "--cron", "timeZone": "--tz",
	"target.type": "--target-url, --builtin or --gpu", "target.http.url": "--target-url", "target.http.method": "--method",
	"target.http.headers": "--header", "target.http.body": "--body", "target.http.timeout": "--timeout",
	"target.builtin.name": "--builtin", "target.builtin.args": "--arg", "reason": "--reason",
	"target.gpu.payload": "--gpu-payload", "target.gpu.priority": "--gpu-priority",
	"target.gpu.maxAttempts": "--gpu-max-attempts", "target.gpu.timeout": "--gpu-timeout",
	"target.gpu.tenant": "--gpu-tenant", "target.gpu.gpuType": "--gpu-type", "target.gpu.preemptible": "--gpu-preemptible",
	"overlap": "--overlap", "catchup": "--catchup", "maxCatchup": "--max-catchup", "catchupWindow": "--catchup-window",
	"retry.maxAttempts": "--retry-attempts", "retry.backoff": "--retry-backoff", "leaseTTL": "--lease-ttl",
	"enabled": "--enabled", "labels": "--label", "excludeCalendars": "--exclude-calendar", "onlyCalendars": "--only-calendar", "If-Match": "--if-match", "pageSize": "--page-size", "pageToken": "--page-token",
}

// newSchedulesCmd builds `baton schedules …`. It is a constructor so tests
// get fresh flags and their own client.
func newSchedulesCmd(client clientFunc) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "schedules",
		Aliases: []string{"schedule", "sched"},
		Short:   "Create, list, change, pause, resume and trigger schedules through the Schedules API",
		Long: `Manage schedules through the Schedules API. The CLI calls
$BATON_SCHEDULES_URL, or $BATON_URL/Schedules when that is unset, with
"Authorization: Bearer $BATON_TOKEN". A change is live at the next tick.`,
	}
	groupCommand(cmd)
	cmd.AddCommand(
		schedulesListCmd(client), schedulesGetCmd(client), schedulesDescribeCmd(client, time.Now), schedulesCreateCmd(client),
		schedulesUpdateCmd(client), schedulesDeleteCmd(client),
		schedulesActionCmd(client, "pause", "Disable a schedule: the tick stops firing it"),
		schedulesActionCmd(client, "resume", "Enable a schedule; its next run is computed from now"),
		schedulesActionCmd(client, "trigger", "Run a schedule now (source manual), enabled or not"),
		schedulesBackfillCmd(client, time.Now),
		schedulesHistoryCmd(client),
	)
	return cmd
}

// exactlyOneID checks the positional ID argument with exit status 2.
func exactlyOneID(name string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageError("schedules %s: want exactly one argument, the schedule id, got %d", name, len(args))
		}
		return nil
	}
}

// flagUsage makes flag errors exit 2, like every other usage error.
func flagUsage(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError("%s: %v", c.CommandPath(), err)
	})
}

// apiFailure turns an error from the API into exit status 1, keeping usage
// errors (2) as they are.
func apiFailure(op string, err error) error {
	var ee *exitError
	if errors.As(err, &ee) {
		return err // main finds the code with errors.As, through any wrapping
	}
	return &exitError{code: 1, err: fmt.Errorf("%s: %w", op, err)}
}

func schedulesListCmd(client clientFunc) *cobra.Command {
	var (
		pageSize int
		token    string
		all      bool
		selector string
		out      *outputFormat
		watch    *watchFlags
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List schedules, in id order, one page at a time",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkPageSize(cmd, pageSize); err != nil {
				return err
			}
			sel, err := schedule.ParseLabelSelector("--selector", selector)
			if err != nil {
				return usageError("schedules list: %v", err)
			}
			var q url.Values
			if len(sel) > 0 {
				q = url.Values{"labelSelector": {sel.String()}}
			}
			c, err := client()
			if err != nil {
				return err
			}
			if watch.on {
				return runWatch(cmd.Context(), cmd, watch, out, watchSpec[schedule.Schedule]{
					fetch: func(ctx context.Context) ([]schedule.Schedule, error) {
						list, _, err := fetchPages(ctx, c, "/schedules", q, pageSize, "", false,
							func(p *catalog.SchedulePage) ([]schedule.Schedule, string) { return p.Schedules, p.NextPageToken })
						return list, apiFailureOrNil("schedules list", err)
					},
					key: func(sc schedule.Schedule) string { return sc.ID },
					// The tick moves nextRunAt without a new version.
					version: func(sc schedule.Schedule) string {
						return fmt.Sprint(sc.Version, sc.Enabled, sc.NextRunAt.UnixNano())
					},
					header: scheduleListHeader, row: scheduleListRow,
				})
			}
			list, next, err := fetchPages(cmd.Context(), c, "/schedules", q, pageSize, token, all,
				func(p *catalog.SchedulePage) ([]schedule.Schedule, string) { return p.Schedules, p.NextPageToken })
			if err != nil {
				return apiFailure("schedules list", err)
			}
			if !out.table() {
				return out.print(cmd.OutOrStdout(), catalog.SchedulePage{Schedules: nonNil(list), NextPageToken: next}, nil)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, scheduleListHeader)
			for _, sc := range list {
				fmt.Fprintln(tw, scheduleListRow(sc))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if next != "" {
				more := ""
				if len(sel) > 0 {
					// Quoted when the shell would split or expand it
					// (in's space and parentheses, !=); a selector holds
					// no quote of its own.
					more = " -l " + sel.String()
					if strings.ContainsAny(sel.String(), " ()!") {
						more = " -l '" + sel.String() + "'"
					}
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "more: baton schedules list%s --page-token %s (or --all)\n", more, next)
			}
			return nil
		},
	}
	flagUsage(cmd)
	cmd.Flags().IntVar(&pageSize, "page-size", 0, fmt.Sprintf("schedules per page, 1 to %d (default %d)", catalog.MaxPageSize, catalog.DefaultPageSize))
	cmd.Flags().StringVar(&token, "page-token", "", "continue from the nextPageToken of an earlier page")
	cmd.Flags().BoolVar(&all, "all", false, "follow page tokens to the end")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "only schedules matching this label selector: key=value, key!=value, key in (v1,v2), comma-separated, all must match")
	out = addOutput(cmd, `{"schedules":[…],"nextPageToken":…}`)
	watch = addWatch(cmd, pagedWatch("the first ids in order"))
	return cmd
}

// scheduleListHeader and scheduleListRow are the table of schedules list
// (and of its --watch).
const scheduleListHeader = "ID\tENABLED\tCRON\tTIME ZONE\tTARGET\tNEXT RUN\tVERSION"

func scheduleListRow(sc schedule.Schedule) string {
	return fmt.Sprintf("%s\t%t\t%s\t%s\t%s\t%s\t%d", sc.ID, sc.Enabled, sc.Cron, zoneName(sc.TimeZone), targetSummary(sc.Target), nextRun(&sc), sc.Version)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func schedulesGetCmd(client clientFunc) *cobra.Command {
	var out *outputFormat
	cmd := &cobra.Command{
		Use:   "get ID",
		Short: "Show one schedule",
		Args:  exactlyOneID("get"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if _, err := c.do(cmd.Context(), http.MethodGet, "/schedules/"+url.PathEscape(args[0]), nil, nil, nil, &raw); err != nil {
				return apiFailure("schedules get "+args[0], err)
			}
			return printSchedule(cmd, raw, out)
		},
	}
	flagUsage(cmd)
	out = addOutput(cmd, "editable, and accepted back by update -f")
	return cmd
}

// printSchedule prints an API answer holding one schedule: as is for
// -o json or yaml, else as a field: value card.
func printSchedule(cmd *cobra.Command, raw json.RawMessage, out *outputFormat) error {
	var sc schedule.Schedule
	if err := json.Unmarshal(raw, &sc); err != nil {
		return fmt.Errorf("decode schedule: %w", err)
	}
	return out.print(cmd.OutOrStdout(), sc, func() error { return scheduleCard(cmd.OutOrStdout(), &sc) })
}

// scheduleCard writes sc as a field: value card.
func scheduleCard(w io.Writer, sc *schedule.Schedule) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("ID", sc.ID)
	if sc.Description != "" {
		row("Description", sc.Description)
	}
	row("Cron", sc.Cron)
	row("Time zone", zoneName(sc.TimeZone))
	row("Target", targetSummary(sc.Target))
	row("Enabled", strconv.FormatBool(sc.Enabled))
	if sc.PauseReason != "" {
		row("Pause reason", sc.PauseReason)
	}
	if sc.PausedBy != "" {
		row("Paused by", sc.PausedBy+" at "+sc.PausedAt.Format(time.RFC3339))
	}
	if !sc.PausedUntil.IsZero() {
		row("Paused until", sc.PausedUntil.Format(time.RFC3339)+" (then resumes by itself)")
	}
	row("Next run", nextRun(sc))
	row("Overlap", string(sc.Overlap))
	if sc.Shards > 0 {
		shards := strconv.Itoa(sc.Shards)
		if len(sc.ShardParams) > 0 {
			shards += " (params " + strings.Join(sc.ShardParams, ", ") + ")"
		}
		row("Shards", shards)
	}
	if c := sc.Concurrency; c != nil {
		row("Concurrency", fmt.Sprintf("group %s, at most %d at once", c.Group, c.Limit))
	}
	catchup := fmt.Sprintf("%s (window %s", sc.Catchup, sc.CatchupWindow)
	if sc.Catchup == schedule.CatchupAll {
		catchup += fmt.Sprintf(", at most %d", sc.MaxCatchup)
	}
	row("Catch-up", catchup+")")
	row("Retry", fmt.Sprintf("%d attempt(s), backoff %s", sc.Retry.MaxAttempts, sc.Retry.Backoff))
	row("Lease TTL", sc.LeaseTTL.String())
	if sc.Misfire {
		row("Misfire", "pending (one more run after the current one)")
	}
	row("Version", strconv.FormatInt(sc.Version, 10))
	row("Created", sc.CreatedAt.UTC().Format(time.RFC3339))
	row("Updated", sc.UpdatedAt.UTC().Format(time.RFC3339))
	return tw.Flush()
}

func zoneName(tz string) string {
	if tz == "" {
		return "UTC"
	}
	return tz
}

// nextRun shows the next fire time in the schedule's own zone, which is how
// its cron expression reads.
func nextRun(sc *schedule.Schedule) string {
	if !sc.Enabled {
		return "- (paused)"
	}
	if sc.NextRunAt.IsZero() {
		return "-"
	}
	t := sc.NextRunAt
	if loc, err := schedule.LoadLocation(sc.TimeZone); err == nil {
		t = t.In(loc)
	}
	return t.Format(time.RFC3339)
}

func targetSummary(t schedule.Target) string {
	switch {
	case t.HTTP != nil:
		return t.HTTP.Method + " " + t.HTTP.URL
	case t.Builtin != nil:
		s := "builtin " + t.Builtin.Name
		for _, k := range slices.Sorted(maps.Keys(t.Builtin.Args)) {
			s += " " + k + "=" + t.Builtin.Args[k]
		}
		return s
	case t.GPU != nil:
		return fmt.Sprintf("gpu (priority %d)", t.GPU.Priority)
	case t.CloudRunJob != nil:
		return "cloudRunJob " + t.CloudRunJob.Job
	}
	return t.Type
}

// scheduleFlags are the flags of create and update. Each flag that was set
// becomes one field of a JSON merge patch, so update changes only those.
type scheduleFlags struct {
	file                             string
	id, description, cron, tz        string
	targetURL, method, body, timeout string
	headers                          []string
	builtin                          string
	args                             []string
	labels                           []string
	gpu                              bool
	gpuPayload, gpuTimeout           string
	gpuTenant, gpuType               string
	gpuPreemptible                   bool
	gpuPriority, gpuMaxAttempts      int
	overlap, catchup, catchupWindow  string
	maxCatchup, retryAttempts        int
	retryBackoff, leaseTTL           string
	enabled                          bool
	excludeCals, onlyCals            []string
	pubsubTopic, pubsubData          string
	pubsubAttrs                      []string
	orderingKey                      string
	runJob, runRegion, runTimeout    string
	runArgs, runEnv                  []string
	runTasks                         int
	out                              *outputFormat
	ifMatch                          string
	flags                            *pflag.FlagSet
	forUpdate                        bool
	_                                struct{}
}

func (f *scheduleFlags) register(fs *pflag.FlagSet, forUpdate bool) {
	f.flags, f.forUpdate = fs, forUpdate
	fs.StringVarP(&f.file, "file", "f", "", "read the schedule (create) or the merge patch (update) as JSON from a file, or - for stdin; flags override it")
	if !forUpdate {
		fs.StringVar(&f.id, "id", "", "schedule id: lower-case letters, digits, - and _ (default: generated)")
	}
	fs.StringVar(&f.description, "description", "", "free text")
	fs.StringVar(&f.cron, "cron", "", `cron expression: 5 fields, 6 with leading seconds, @hourly…, "@every 90s"`)
	fs.StringVar(&f.tz, "tz", "", "IANA time zone such as Europe/Berlin (default UTC)")
	fs.StringVar(&f.targetURL, "target-url", "", "http target: the URL to call (its host must be on BATON_ALLOWED_TARGETS)")
	fs.StringVar(&f.method, "method", "", "http target: method (default POST)")
	fs.StringArrayVar(&f.headers, "header", nil, `http target: a header "Name: value" (repeatable; an empty value removes it on update)`)
	fs.StringVar(&f.body, "body", "", "http target: request body")
	fs.StringVar(&f.timeout, "timeout", "", "http target: timeout such as 30s")
	fs.StringVar(&f.builtin, "builtin", "", "builtin target: noop, sleep or fail")
	fs.StringArrayVar(&f.args, "arg", nil, "builtin target: an argument key=value, such as duration=5s (repeatable; an empty value removes it on update)")
	fs.StringArrayVar(&f.labels, "label", nil, "a label key=value (repeatable); on update, key- removes it, as kubectl label does")
	fs.BoolVar(&f.gpu, "gpu", false, "gpu target: hand runs to the GPU pool")
	fs.StringVar(&f.gpuPayload, "gpu-payload", "", "gpu target: the job's payload")
	fs.IntVar(&f.gpuPriority, "gpu-priority", 0, "gpu target: priority (higher first)")
	fs.IntVar(&f.gpuMaxAttempts, "gpu-max-attempts", 0, "gpu target: attempts before the job is dead (default 3)")
	fs.StringVar(&f.gpuTimeout, "gpu-timeout", "", "gpu target: timeout such as 10m")
	fs.StringVar(&f.gpuTenant, "gpu-tenant", "", `gpu target: whose job each run's job is, for fair share and quotas (default "default")`)
	fs.StringVar(&f.gpuType, "gpu-type", "", "gpu target: run only on a slot of this GPU type (a BATON_GPU_POOL entry's @type); default any slot")
	fs.BoolVar(&f.gpuPreemptible, "gpu-preemptible", false, "gpu target: let a more urgent job stop and requeue each run's job (--gpu-preemptible=false turns it off on update)")
	fs.StringVar(&f.pubsubTopic, "pubsub-topic", "", "pubsub target: publish each run to this topic, projects/P/topics/T (on BATON_ALLOWED_TOPICS)")
	fs.StringVar(&f.pubsubData, "pubsub-data", "", "pubsub target: the message's data")
	fs.StringArrayVar(&f.pubsubAttrs, "pubsub-attr", nil, "pubsub target: a message attribute key=value (repeatable; an empty value removes it on update)")
	fs.StringVar(&f.orderingKey, "ordering-key", "", "pubsub target: the message's ordering key")
	fs.StringVar(&f.runJob, "cloudrun-job", "", "cloudRunJob target: run an execution of this Cloud Run job per run, projects/P/locations/R/jobs/J (on BATON_ALLOWED_JOBS)")
	fs.StringVar(&f.runRegion, "cloudrun-region", "", "cloudRunJob target: the job's region (checked against the job name)")
	fs.StringArrayVar(&f.runArgs, "cloudrun-arg", nil, "cloudRunJob target: an argument of the execution, replacing the job's (repeatable, in order; on update the list replaces the stored one)")
	fs.StringArrayVar(&f.runEnv, "cloudrun-env", nil, "cloudRunJob target: an env override NAME=VALUE (repeatable; an empty value removes it on update)")
	fs.IntVar(&f.runTasks, "cloudrun-tasks", 0, "cloudRunJob target: the execution's task count (default: the job's)")
	fs.StringVar(&f.runTimeout, "cloudrun-task-timeout", "", "cloudRunJob target: each task's timeout, at most 168h (default: the job's)")
	fs.StringVar(&f.overlap, "overlap", "", "overlap policy: skip, buffer_one (default) or allow")
	fs.StringVar(&f.catchup, "catchup", "", "catch-up policy: latest (default), all or none")
	fs.IntVar(&f.maxCatchup, "max-catchup", 0, "catch-up all: at most this many missed runs (default 10)")
	fs.StringVar(&f.catchupWindow, "catchup-window", "", "never fire a missed time older than this, such as 1h (default 1h)")
	fs.IntVar(&f.retryAttempts, "retry-attempts", 0, "attempts per run, counting the first (default 1: no retry)")
	fs.StringVar(&f.retryBackoff, "retry-backoff", "", "delay before the first retry, doubling after (default 30s)")
	fs.StringVar(&f.leaseTTL, "lease-ttl", "", "job lease TTL, heartbeated while a run executes (default 30s)")
	fs.BoolVar(&f.enabled, "enabled", true, "whether the tick fires it (--enabled=false creates it paused)")
	fs.StringSliceVar(&f.excludeCals, "exclude-calendar", nil, `calendar ids on whose days it does not fire (repeatable or comma-separated; "" clears)`)
	fs.StringSliceVar(&f.onlyCals, "only-calendar", nil, `calendar ids outside whose days it does not fire (repeatable or comma-separated; "" clears)`)
	if forUpdate {
		fs.StringVar(&f.ifMatch, "if-match", "", "only update if the stored version is this one (the ETag of get); else fail with 412")
	}
}

// patch builds the JSON object the flags (and --file) describe. For update
// it is a merge patch: a null removes a field, which is how switching the
// target type drops the old target.
func (f *scheduleFlags) patch(stdin io.Reader) (map[string]any, error) {
	doc := map[string]any{}
	if f.file != "" {
		var data []byte
		var err error
		if f.file == "-" {
			data, err = io.ReadAll(stdin)
		} else {
			data, err = os.ReadFile(f.file)
		}
		if err != nil {
			return nil, usageError("--file: %v", err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil || doc == nil {
			return nil, usageError("--file %s: want one JSON object: %v", f.file, err)
		}
	}
	changed := f.flags.Changed
	set := func(v any, path ...string) {
		m := doc
		for _, k := range path[:len(path)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		m[path[len(path)-1]] = v
	}
	str := func(flag, val string, path ...string) {
		if changed(flag) {
			set(val, path...)
		}
	}
	num := func(flag string, val int, path ...string) {
		if changed(flag) {
			set(val, path...)
		}
	}
	if !f.forUpdate {
		str("id", f.id, "id")
	}
	str("description", f.description, "description")
	str("cron", f.cron, "cron")
	str("tz", f.tz, "timeZone")
	str("overlap", f.overlap, "overlap")
	str("catchup", f.catchup, "catchup")
	num("max-catchup", f.maxCatchup, "maxCatchup")
	str("catchup-window", f.catchupWindow, "catchupWindow")
	num("retry-attempts", f.retryAttempts, "retry", "maxAttempts")
	str("retry-backoff", f.retryBackoff, "retry", "backoff")
	str("lease-ttl", f.leaseTTL, "leaseTTL")
	if changed("enabled") {
		set(f.enabled, "enabled")
	}
	calendarList(changed, set, "exclude-calendar", f.excludeCals, "excludeCalendars")
	calendarList(changed, set, "only-calendar", f.onlyCals, "onlyCalendars")

	var kinds []string
	if changed("target-url") {
		kinds = append(kinds, schedule.TargetHTTP)
	}
	if changed("builtin") {
		kinds = append(kinds, schedule.TargetBuiltin)
	}
	if changed("gpu") && f.gpu || changed("gpu-payload") && !changed("gpu") {
		kinds = append(kinds, schedule.TargetGPU)
	}
	if changed("pubsub-topic") {
		kinds = append(kinds, schedule.TargetPubSub)
	}
	if changed("cloudrun-job") {
		kinds = append(kinds, schedule.TargetCloudRunJob)
	}
	if len(kinds) > 1 {
		return nil, usageError("choose one target: --target-url (http), --builtin, --gpu, --pubsub-topic or --cloudrun-job, not %s", strings.Join(kinds, " and "))
	}
	if len(kinds) == 1 {
		set(kinds[0], "target", "type")
		for _, other := range []string{schedule.TargetHTTP, schedule.TargetBuiltin, schedule.TargetGPU, schedule.TargetPubSub, schedule.TargetCloudRunJob} {
			if other != kinds[0] {
				set(nil, "target", other)
			}
		}
		// A gpu target may have no fields of its own (all defaults).
		if target := doc["target"].(map[string]any); target[kinds[0]] == nil {
			target[kinds[0]] = map[string]any{}
		}
	}
	str("target-url", f.targetURL, "target", "http", "url")
	str("method", f.method, "target", "http", "method")
	str("body", f.body, "target", "http", "body")
	str("timeout", f.timeout, "target", "http", "timeout")
	for _, h := range f.headers {
		name, value, ok := strings.Cut(h, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" {
			return nil, usageError("--header %q: want \"Name: value\"", h)
		}
		if value == "" {
			set(nil, "target", "http", "headers", name)
		} else {
			set(value, "target", "http", "headers", name)
		}
	}
	str("builtin", f.builtin, "target", "builtin", "name")
	for _, a := range f.args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return nil, usageError("--arg %q: want key=value", a)
		}
		if v == "" {
			set(nil, "target", "builtin", "args", k)
		} else {
			set(v, "target", "builtin", "args", k)
		}
	}
	for _, l := range f.labels {
		if k, ok := strings.CutSuffix(l, "-"); ok && f.forUpdate && !strings.Contains(l, "=") {
			set(nil, "labels", k)
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return nil, usageError("--label %q: want key=value (or key- on update, to remove it)", l)
		}
		set(v, "labels", k)
	}
	str("gpu-payload", f.gpuPayload, "target", "gpu", "payload")
	num("gpu-priority", f.gpuPriority, "target", "gpu", "priority")
	num("gpu-max-attempts", f.gpuMaxAttempts, "target", "gpu", "maxAttempts")
	str("gpu-timeout", f.gpuTimeout, "target", "gpu", "timeout")
	str("gpu-tenant", f.gpuTenant, "target", "gpu", "tenant")
	str("gpu-type", f.gpuType, "target", "gpu", "gpuType")
	if changed("gpu-preemptible") {
		set(f.gpuPreemptible, "target", "gpu", "preemptible")
	}
	str("pubsub-topic", f.pubsubTopic, "target", "pubsub", "topic")
	str("pubsub-data", f.pubsubData, "target", "pubsub", "data")
	str("ordering-key", f.orderingKey, "target", "pubsub", "orderingKey")
	for _, a := range f.pubsubAttrs {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return nil, usageError("--pubsub-attr %q: want key=value", a)
		}
		if v == "" {
			set(nil, "target", "pubsub", "attributes", k)
		} else {
			set(v, "target", "pubsub", "attributes", k)
		}
	}
	str("cloudrun-job", f.runJob, "target", "cloudRunJob", "job")
	str("cloudrun-region", f.runRegion, "target", "cloudRunJob", "region")
	str("cloudrun-task-timeout", f.runTimeout, "target", "cloudRunJob", "timeout")
	num("cloudrun-tasks", f.runTasks, "target", "cloudRunJob", "taskCount")
	if changed("cloudrun-arg") {
		set(f.runArgs, "target", "cloudRunJob", "args")
	}
	for _, e := range f.runEnv {
		k, v, ok := strings.Cut(e, "=")
		if !ok || k == "" {
			return nil, usageError("--cloudrun-env %q: want NAME=VALUE", e)
		}
		if v == "" {
			set(nil, "target", "cloudRunJob", "env", k)
		} else {
			set(v, "target", "cloudRunJob", "env", k)
		}
	}
	return doc, nil
}

func schedulesCreateCmd(client clientFunc) *cobra.Command {
	var f scheduleFlags
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a schedule from flags or a JSON file",
		Example: `  baton schedules create --id nightly --cron '30 2 * * *' --tz Europe/Berlin --target-url https://api.example.com/nightly
  baton schedules create --id tick-demo --cron '@every 10s' --builtin sleep --arg duration=2s --overlap skip
  baton schedules create -f nightly.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc, err := f.patch(cmd.InOrStdin())
			if err != nil {
				return err
			}
			// A create body is a whole schedule: drop the nulls a patch
			// would use to remove fields.
			body := catalog.MergePatch(map[string]any{}, doc)
			c, err := client()
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if _, err := c.do(cmd.Context(), http.MethodPost, "/schedules", nil, nil, body, &raw); err != nil {
				return apiFailure("schedules create", err)
			}
			return printSchedule(cmd, raw, f.out)
		},
	}
	flagUsage(cmd)
	f.register(cmd.Flags(), false)
	f.out = addOutput(cmd, "the created schedule")
	return cmd
}

func schedulesUpdateCmd(client clientFunc) *cobra.Command {
	var f scheduleFlags
	cmd := &cobra.Command{
		Use:   "update ID",
		Short: "Change a schedule: only the fields given change (a JSON merge patch)",
		Long: `Change a schedule. Only the fields given by flags (or in the --file JSON,
a merge patch: null resets a field to its default) change; the server
validates the whole result and recomputes the next run from now. The change
is live at the next tick. With --if-match VERSION the update fails with 412
if someone changed the schedule since you read that version.`,
		Example: `  baton schedules update nightly --cron '0 3 * * *'
  baton schedules update nightly --builtin noop --if-match 4
  baton schedules get nightly --json > s.json && $EDITOR s.json && baton schedules update nightly -f s.json`,
		Args: exactlyOneID("update"),
		RunE: func(cmd *cobra.Command, args []string) error {
			patch, err := f.patch(cmd.InOrStdin())
			if err != nil {
				return err
			}
			if len(patch) == 0 {
				return usageError("schedules update: nothing to change; give flags such as --cron, or --file")
			}
			c, err := client()
			if err != nil {
				return err
			}
			h := http.Header{}
			if f.ifMatch != "" {
				h.Set("If-Match", f.ifMatch)
			}
			var raw json.RawMessage
			if _, err := c.do(cmd.Context(), http.MethodPatch, "/schedules/"+url.PathEscape(args[0]), nil, h, patch, &raw); err != nil {
				return apiFailure("schedules update "+args[0], err)
			}
			return printSchedule(cmd, raw, f.out)
		},
	}
	flagUsage(cmd)
	f.register(cmd.Flags(), true)
	f.out = addOutput(cmd, "the updated schedule")
	return cmd
}

func schedulesDeleteCmd(client clientFunc) *cobra.Command {
	return deleteCmd(client, "schedules", "Delete a schedule (its run history stays)", exactlyOneID("delete"))
}

// deleteCmd is `baton <resource> delete ID [--if-match V]`: DELETE
// /<resource>/ID, conditional on the stored version when --if-match is set.
func deleteCmd(client clientFunc, resource, short string, args cobra.PositionalArgs) *cobra.Command {
	var ifMatch string
	cmd := &cobra.Command{
		Use:   "delete ID",
		Short: short,
		Args:  args,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			h := http.Header{}
			if ifMatch != "" {
				h.Set("If-Match", ifMatch)
			}
			if _, err := c.do(cmd.Context(), http.MethodDelete, "/"+resource+"/"+url.PathEscape(args[0]), nil, h, nil, nil); err != nil {
				return apiFailure(resource+" delete "+args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", args[0])
			return nil
		},
	}
	flagUsage(cmd)
	cmd.Flags().StringVar(&ifMatch, "if-match", "", "only delete if the stored version is this one; else fail with 412")
	return cmd
}

// schedulesActionCmd builds pause, resume and trigger: POST /schedules/ID:action.
func schedulesActionCmd(client clientFunc, action, short string) *cobra.Command {
	var (
		out    *outputFormat
		reason string
		until  string
	)
	cmd := &cobra.Command{
		Use:   action + " ID",
		Short: short,
		Args:  exactlyOneID(action),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			var body any
			if reason != "" || until != "" {
				b := map[string]string{}
				if reason != "" {
					b["reason"] = reason
				}
				if until != "" {
					t, err := time.Parse(time.RFC3339, until)
					if err != nil {
						d, derr := time.ParseDuration(until)
						if derr != nil || d <= 0 {
							return usageError("schedules pause: --until must be an RFC 3339 time or a positive duration from now (2h), not %q", until)
						}
						t = time.Now().Add(d)
					}
					b["until"] = t.UTC().Format(time.RFC3339)
				}
				body = b
			}
			var raw json.RawMessage
			if _, err := c.do(cmd.Context(), http.MethodPost, "/schedules/"+url.PathEscape(args[0])+":"+action, nil, nil, body, &raw); err != nil {
				return apiFailure("schedules "+action+" "+args[0], err)
			}
			if action != "trigger" {
				return printSchedule(cmd, raw, out)
			}
			var run schedule.Run
			if err := json.Unmarshal(raw, &run); err != nil {
				return fmt.Errorf("decode run: %w", err)
			}
			return out.print(cmd.OutOrStdout(), run, func() error {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "triggered %s: run %s (%s)\n", args[0], run.ID, run.Status)
				return err
			})
		},
	}
	if action == "pause" {
		cmd.Flags().StringVar(&reason, "reason", "", "why it is paused, kept on the schedule (pauseReason) until it is resumed")
		cmd.Flags().StringVar(&until, "until", "", "resume by itself at this time: RFC 3339, or a duration from now (2h)")
	}
	flagUsage(cmd)
	out = addOutput(cmd, "the schedule, or for trigger the run")
	return cmd
}
