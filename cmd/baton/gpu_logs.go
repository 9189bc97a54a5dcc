package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/gpu"
)

// init adds `baton gpu logs` to the gpu command built in gpu.go (whose
// init runs first: a package's files are initialised in name order).
func init() {
	for _, c := range rootCmd.Commands() {
		if c.Name() == "gpu" {
			c.AddCommand(gpuLogsCmd(gpuClientFromEnv))
			return
		}
	}
	panic("baton: gpu_logs.go: no gpu command to add logs to")
}

// followPoll is how often `gpu logs --follow` asks whether the job ended.
const followPoll = time.Second

func gpuLogsCmd(client clientFunc) *cobra.Command {
	var (
		stderr, follow bool
		attempt        int
	)
	cmd := &cobra.Command{
		Use:   "logs JOB_ID",
		Short: "Print a job's stdout (or --stderr) as the worker stored it in the bucket",
		Long: `Print what a GPU job's command wrote to stdout, or to stderr with
--stderr, byte for byte, from the object the worker stored in the bucket
(outputs/<id>/<attempt>/stdout|stderr), through the GPU function's
GET /gpu/jobs/{id}/logs. By default it is the job's latest attempt that ran;
--attempt picks another.

A worker's upload becomes visible only when the command ends, so there is no
live tail: a job still queued or running has no output yet, and without
--follow that is an error (exit 1). --follow waits for it: it polls the job
every second until it is terminal (succeeded, failed, dead or cancelled),
then prints the stream.

Output longer than 32 MiB is cut there (the function's answer limit), with a
warning on stderr; the whole object is in the bucket.`,
		Example: `  baton gpu logs 9f2c… --stderr
  baton gpu logs 9f2c… --follow
  baton gpu logs 9f2c… --attempt 1 --stderr`,
		Args: gpuOneID("logs"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("attempt") && (attempt < 1 || attempt > gpu.MaxMaxAttempts) {
				return usageError("gpu logs: --attempt must be from 1 to %d, not %d", gpu.MaxMaxAttempts, attempt)
			}
			c, err := client()
			if err != nil {
				return err
			}
			id := args[0]
			ctx := cmd.Context()
			if follow {
				if err := waitTerminal(ctx, c, id); err != nil {
					return apiFailure("gpu logs", err)
				}
			}
			q := url.Values{"stream": {gpu.StreamStdout}}
			if stderr {
				q.Set("stream", gpu.StreamStderr)
			}
			if attempt > 0 {
				q.Set("attempt", strconv.Itoa(attempt))
			}
			h, err := c.stream(ctx, "/gpu/jobs/"+url.PathEscape(id)+"/logs", q, cmd.OutOrStdout())
			if err != nil {
				var ae *apiError
				// The job exists and its object does not: say how to wait.
				if !follow && errors.As(err, &ae) && ae.Status == http.StatusNotFound && strings.Contains(ae.Message, " yet") {
					err = fmt.Errorf("%w (--follow waits for the job to end)", err)
				}
				return apiFailure("gpu logs", err)
			}
			if size := h.Get(gpu.LogTruncatedHeader); size != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "baton: gpu logs: the object holds %s bytes; this is its first %d (read the rest from the bucket)\n", size, gpu.MaxLogBytes)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&stderr, "stderr", false, "print the stderr stream instead of stdout")
	f.BoolVarP(&follow, "follow", "f", false, "wait until the job is terminal, then print (objects appear only when the command ends)")
	f.IntVar(&attempt, "attempt", 0, "the attempt to read (default: the latest attempt that ran)")
	flagUsage(cmd)
	return cmd
}

// waitTerminal polls the job until it is terminal or ctx ends.
func waitTerminal(ctx context.Context, c *apiClient, id string) error {
	t := time.NewTicker(followPoll)
	defer t.Stop()
	for {
		var job gpu.Job
		if _, err := c.do(ctx, "GET", "/gpu/jobs/"+url.PathEscape(id), nil, nil, nil, &job); err != nil {
			return err
		}
		if gpu.Terminal(job.Status) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for job %s (%s): %w", id, job.Status, ctx.Err())
		case <-t.C:
		}
	}
}

// stream GETs path and copies a 2xx answer's body to w as it arrives (no
// JSON, no limit beyond the server's), through the client package's
// Stream; anything else is an *apiError. It has no overall timeout,
// unlike do: a large object may take a while, and the connection's own
// timeouts still apply.
func (c *apiClient) stream(ctx context.Context, path string, q url.Values, w io.Writer) (http.Header, error) {
	sdk, err := c.sdk()
	if err != nil {
		return nil, usageError("%v", err)
	}
	h, err := sdk.Stream(ctx, path, q, w)
	if err != nil {
		return nil, c.cliError(err, config.EnvGPUURL)
	}
	return h, nil
}
