package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/schedule"
)

func init() { rootCmd.AddCommand(newGPUCmd(gpuClientFromEnv)) }

// gpuClientFromEnv builds the client for the GPU function:
// BATON_GPU_URL when set (the cloud), else $BATON_URL/GPU.
func gpuClientFromEnv() (*apiClient, error) {
	base, from := config.Get(config.EnvGPUURL), config.EnvGPUURL
	if base == "" {
		base, from = strings.TrimRight(config.Get(config.EnvURL), "/")+"/"+config.FnGPU, config.EnvURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError("%s=%q is not an http(s) URL", from, base)
	}
	return &apiClient{base: strings.TrimRight(base, "/"), token: config.Get(config.EnvToken), http: gpuHTTP()}, nil
}

// newGPUCmd builds `baton gpu …`.
func newGPUCmd(client clientFunc) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gpu",
		Short: "Enqueue, inspect and cancel GPU jobs; show the GPU pool",
		Long: `Talk to the GPU function: $BATON_GPU_URL, or $BATON_URL/GPU when that
is unset, with "Authorization: Bearer $BATON_TOKEN".`,
	}
	cmd.AddCommand(gpuEnqueueCmd(client), gpuGetCmd(client), gpuListCmd(client), gpuCancelCmd(client), gpuPoolCmd(client))
	return groupCommand(cmd)
}

func gpuEnqueueCmd(client clientFunc) *cobra.Command {
	var (
		req         gpu.EnqueueRequest
		payloadFile string
		timeout     time.Duration
		out         *outputFormat
	)
	cmd := &cobra.Command{
		Use:   "enqueue",
		Short: "Queue a job; it is dispatched at once if a GPU slot is free",
		Example: `  baton gpu enqueue --payload 'echo hello from $BATON_JOB_ID'
  baton gpu enqueue --payload-file job.json --priority 10 --timeout 30m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if payloadFile != "" {
				var b []byte
				var err error
				if payloadFile == "-" {
					b, err = io.ReadAll(cmd.InOrStdin())
				} else {
					b, err = os.ReadFile(payloadFile)
				}
				if err != nil {
					return usageError("--payload-file: %v", err)
				}
				req.Payload = string(b)
			}
			req.Timeout = schedule.Duration(timeout)
			c, err := client()
			if err != nil {
				return err
			}
			var job gpu.Job
			if _, err := c.do(cmd.Context(), "POST", "/gpu/jobs", nil, nil, req, &job); err != nil {
				return apiFailure("gpu enqueue", err)
			}
			return printJob(cmd.OutOrStdout(), out, &job)
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.ID, "id", "", "idempotency key: enqueueing the same id again returns the first job")
	f.StringVar(&req.Payload, "payload", "", "the job's input, given to the worker's command on stdin")
	f.StringVar(&payloadFile, "payload-file", "", "read the payload from a file (- for stdin)")
	f.IntVar(&req.Priority, "priority", 0, "0 to 1000; higher runs first (within the job's tenant)")
	f.StringVar(&req.Tenant, "tenant", "", "whose job it is, for fair share and quotas (default \"default\")")
	f.StringVar(&req.GPUType, "gpu-type", "", "run only on a slot of this GPU type (a BATON_GPU_POOL entry's @type); default any slot")
	f.IntVar(&req.MaxAttempts, "max-attempts", 0, "lease expiries before the job is dead (default 3)")
	f.DurationVar(&timeout, "timeout", 0, "kill the command after this long (default 1h)")
	cmd.MarkFlagsMutuallyExclusive("payload", "payload-file")
	flagUsage(cmd)
	out = addOutput(cmd, "the job")
	return cmd
}

func gpuGetCmd(client clientFunc) *cobra.Command {
	var out *outputFormat
	cmd := &cobra.Command{
		Use:   "get JOB_ID",
		Short: "Show one job: status, attempts, exit code, output location and the start of stdout",
		Args:  gpuOneID("get"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			var job gpu.Job
			if _, err := c.do(cmd.Context(), "GET", "/gpu/jobs/"+url.PathEscape(args[0]), nil, nil, nil, &job); err != nil {
				return apiFailure("gpu get", err)
			}
			return printJob(cmd.OutOrStdout(), out, &job)
		},
	}
	flagUsage(cmd)
	out = addOutput(cmd, "the job")
	return cmd
}

func gpuCancelCmd(client clientFunc) *cobra.Command {
	var out *outputFormat
	cmd := &cobra.Command{
		Use:   "cancel JOB_ID",
		Short: "Cancel a queued or running job (a running command is killed at its next heartbeat)",
		Args:  gpuOneID("cancel"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			var job gpu.Job
			if _, err := c.do(cmd.Context(), "POST", "/gpu/jobs/"+url.PathEscape(args[0])+":cancel", nil, nil, nil, &job); err != nil {
				return apiFailure("gpu cancel", err)
			}
			return printJob(cmd.OutOrStdout(), out, &job)
		},
	}
	flagUsage(cmd)
	out = addOutput(cmd, "the job")
	return cmd
}

func gpuListCmd(client clientFunc) *cobra.Command {
	var (
		status, token string
		tenant        string
		pageSize      int
		all           bool
		output        *outputFormat
		watch         *watchFlags
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List jobs, newest first (keyset pages)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkPageSize(cmd, pageSize); err != nil {
				return err
			}
			c, err := client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if status != "" {
				q.Set("status", status)
			}
			if tenant != "" {
				q.Set("tenant", tenant)
			}
			if watch.on {
				return runWatch(cmd.Context(), cmd, watch, output, watchSpec[gpu.Job]{
					fetch: func(ctx context.Context) ([]gpu.Job, error) {
						jobs, _, err := fetchPages(ctx, c, "/gpu/jobs", q, pageSize, "", false,
							func(p *gpu.JobPage) ([]gpu.Job, string) { return p.Jobs, p.NextPageToken })
						return jobs, apiFailureOrNil("gpu list", err)
					},
					key: func(j gpu.Job) string { return j.ID },
					// Not the heartbeat or the lease: a running job would
					// print every beat.
					version: func(j gpu.Job) string {
						return fmt.Sprint(j.Status, j.Attempts, j.Worker, j.Epoch, j.ExitCode != nil)
					},
					header: gpuListHeader, row: gpuListRow,
				})
			}
			jobs, next, err := fetchPages(cmd.Context(), c, "/gpu/jobs", q, pageSize, token, all,
				func(p *gpu.JobPage) ([]gpu.Job, string) { return p.Jobs, p.NextPageToken })
			if err != nil {
				return apiFailure("gpu list", err)
			}
			out := cmd.OutOrStdout()
			if !output.table() {
				return output.print(out, gpu.JobPage{Jobs: nonNil(jobs), NextPageToken: next}, nil)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, gpuListHeader)
			for _, j := range jobs {
				fmt.Fprintln(tw, gpuListRow(j))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if next != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "more: baton gpu list --page-token %s (or --all)\n", next)
			}
			return nil
		},
	}
	f := cmd.Flags()
	var statuses []string
	for _, s := range gpu.AllJobStatuses() {
		statuses = append(statuses, string(s))
	}
	f.StringVar(&status, "status", "", "only jobs in this status: "+strings.Join(statuses, ", "))
	f.StringVar(&tenant, "tenant", "", "only this tenant's jobs")
	f.StringVar(&token, "page-token", "", "continue from a previous page")
	f.IntVar(&pageSize, "page-size", 0, fmt.Sprintf("jobs per page, 1 to %d (default 50)", catalog.MaxPageSize))
	f.BoolVar(&all, "all", false, "follow every page")
	output = addOutput(cmd, `{"jobs":[…],"nextPageToken":…}`)
	watch = addWatch(cmd, pagedWatch("the newest jobs"))
	flagUsage(cmd)
	return cmd
}

// gpuListHeader and gpuListRow are the table of gpu list (and of its
// --watch).
const gpuListHeader = "ID\tSTATUS\tTENANT\tPRIO\tATTEMPTS\tEXIT\tCREATED\tWORKER"

func gpuListRow(j gpu.Job) string {
	exit := "-"
	if j.ExitCode != nil {
		exit = fmt.Sprint(*j.ExitCode)
	}
	return fmt.Sprintf("%s\t%s\t%s\t%d\t%d/%d\t%s\t%s\t%s", j.ID, j.Status, j.TenantOf(), j.Priority, j.Attempts, j.MaxAttempts, exit, j.CreatedAt.Format(time.RFC3339), j.Worker)
}

func gpuPoolCmd(client clientFunc) *cobra.Command {
	var (
		out   *outputFormat
		watch *watchFlags
	)
	cmd := &cobra.Command{
		Use:   "pool",
		Short: "Show each GPU slot (type, state, job, tenant, fence epoch, lease left), each tenant (queued, running, weight, quota, share, decayed usage, target share, deficit) and the heads of the queues in dispatch order",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			if watch.on {
				return runWatch(cmd.Context(), cmd, watch, out, watchSpec[gpu.SlotView]{
					fetch: func(ctx context.Context) ([]gpu.SlotView, error) {
						var pool struct {
							Slots []gpu.SlotView `json:"slots"`
						}
						_, err := c.do(ctx, "GET", "/gpu/pool", nil, nil, nil, &pool)
						return pool.Slots, apiFailureOrNil("gpu pool", err)
					},
					key: func(s gpu.SlotView) string { return s.ID },
					// Not the lease time left, which changes every poll.
					version: func(s gpu.SlotView) string { return fmt.Sprint(s.State, s.JobID, s.Epoch) },
					header:  gpuPoolHeader, row: gpuPoolRow,
				})
			}
			var raw json.RawMessage
			if _, err := c.do(cmd.Context(), "GET", "/gpu/pool", nil, nil, nil, &raw); err != nil {
				return apiFailure("gpu pool", err)
			}
			if !out.table() {
				return out.print(cmd.OutOrStdout(), raw, nil)
			}
			var pool gpu.PoolView
			if err := json.Unmarshal(raw, &pool); err != nil {
				return fmt.Errorf("gpu pool: decode: %w", err)
			}
			return printPool(cmd.OutOrStdout(), pool)
		},
	}
	out = addOutput(cmd, "the API's {\"slots\":[…],\"tenants\":[…],\"next\":[…]}")
	watch = addWatch(cmd, "Each poll reads GET /gpu/pool once: one row per configured slot.")
	flagUsage(cmd)
	return cmd
}

// gpuPoolHeader and gpuPoolRow are the table of gpu pool (and of its
// --watch).
const gpuPoolHeader = "SLOT\tTYPE\tSTATE\tJOB\tTENANT\tEPOCH\tLEASE LEFT"

func gpuPoolRow(s gpu.SlotView) string {
	tenant := ""
	if s.JobID != "" {
		tenant = s.Tenant
	}
	return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%d\t%.1fs", s.ID, orDashStr(s.GPUType), s.State, orDashStr(s.JobID), orDashStr(tenant), s.Epoch, s.LeaseLeft)
}

// printPool prints gpu pool's three tables: the slots, the tenants, and
// the heads of the tenants' queues in the order fair share would dispatch
// them.
func printPool(w io.Writer, pool gpu.PoolView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, gpuPoolHeader)
	for _, s := range pool.Slots {
		fmt.Fprintln(tw, gpuPoolRow(s))
	}
	fmt.Fprintln(tw)
	// USAGE, TARGET and DEFICIT say why a job waits: fair share gives
	// the next slot to the smallest USAGE ÷ WEIGHT (docs/gpu.md).
	fmt.Fprintln(tw, "TENANT\tQUEUED\tRUNNING\tWEIGHT\tQUOTA\tSHARE\tUSAGE\tTARGET\tDEFICIT")
	for _, t := range pool.Tenants {
		quota := "-"
		if t.Quota > 0 {
			quota = fmt.Sprint(t.Quota)
		}
		deficit := t.Deficit
		if math.Abs(deficit) < 0.05 {
			deficit = 0 // not "-0.0s"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%.1f\t%.1fs\t%.0f%%\t%+.1fs\n", t.Tenant, t.Queued, t.Running, t.Weight, quota, t.Share, t.Usage, 100*t.TargetShare, deficit)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "NEXT\tJOB\tTENANT\tPRIO\tTYPE")
	for _, n := range pool.Next {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\n", n.Position, n.JobID, n.Tenant, n.Priority, orDashStr(n.GPUType))
	}
	return tw.Flush()
}

// printJob prints one job: as the API has it for -o json or yaml, else as
// a field: value card.
func printJob(w io.Writer, out *outputFormat, j *gpu.Job) error {
	return out.print(w, j, func() error { return jobCard(w, j) })
}

// jobCard writes j as a field: value card, leaving out what is not set.
func jobCard(w io.Writer, j *gpu.Job) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	opt := func(k, v string) {
		if v != "" {
			row(k, v)
		}
	}
	optTime := func(k string, t *time.Time) {
		if t != nil && !t.IsZero() {
			row(k, t.UTC().Format(time.RFC3339))
		}
	}
	row("ID", j.ID)
	row("Status", string(j.Status))
	row("Priority", strconv.Itoa(j.Priority))
	row("Attempts", fmt.Sprintf("%d/%d", j.Attempts, j.MaxAttempts))
	row("Timeout", j.Timeout.String())
	opt("Source", j.Source)
	row("Created", j.CreatedAt.UTC().Format(time.RFC3339))
	opt("Slot", j.Slot)
	opt("Worker", j.Worker)
	if j.Epoch != 0 {
		row("Epoch", strconv.FormatInt(j.Epoch, 10))
	}
	optTime("Lease until", j.LeaseUntil)
	optTime("Dispatched", j.DispatchedAt)
	optTime("Started", j.StartedAt)
	optTime("Heartbeat", j.HeartbeatAt)
	optTime("Finished", j.FinishedAt)
	if j.ExitCode != nil {
		row("Exit code", strconv.Itoa(*j.ExitCode))
	}
	opt("Output", j.Output)
	opt("Error", oneLine(j.Error))
	opt("Payload", oneLine(j.Payload))
	opt("Stdout", oneLine(j.Stdout))
	return tw.Flush()
}

// oneLine keeps a card one row per field: newlines are shown as \n and a
// long value is cut at 200 bytes (-o json has it whole).
func oneLine(s string) string {
	s = strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", `\n`)
	if len(s) > 200 {
		s = s[:197] + "..."
	}
	return s
}

func orDashStr(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func gpuOneID(name string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageError("gpu %s: want exactly one argument, the job id, got %d", name, len(args))
		}
		return nil
	}
}

func gpuHTTP() *http.Client { return &http.Client{Timeout: 60 * time.Second} }
