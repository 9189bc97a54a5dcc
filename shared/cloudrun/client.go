package cloudrun

import (
	"context"
	"errors"
	"fmt"

	run "cloud.google.com/go/run/apiv2"
	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// MaxScan bounds how many of a job's executions, newest first,
// FindExecution reads: an execution a run started is among the job's
// newest, since the run is running.
const MaxScan = 300

// Client starts and reads executions of Cloud Run jobs.
type Client struct {
	jobs  *run.JobsClient
	execs *run.ExecutionsClient
}

// New dials the Run Admin API with opts.
func New(ctx context.Context, opts ...option.ClientOption) (*Client, error) {
	jobs, err := run.NewJobsClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("cloudrun: jobs client: %w", err)
	}
	execs, err := run.NewExecutionsClient(ctx, opts...)
	if err != nil {
		_ = jobs.Close()
		return nil, fmt.Errorf("cloudrun: executions client: %w", err)
	}
	return &Client{jobs: jobs, execs: execs}, nil
}

// Close closes the connections.
func (c *Client) Close() error {
	return errors.Join(c.jobs.Close(), c.execs.Close())
}

// RunJob starts an execution and returns its name (the operation's
// metadata) without waiting for it. The client makes one attempt: RunJob
// has no request id, so a retry after a lost answer could start a second
// execution; the caller looks for the first one instead (FindExecution).
func (c *Client) RunJob(ctx context.Context, req *runpb.RunJobRequest) (string, error) {
	op, err := c.jobs.RunJob(ctx, req)
	if err != nil {
		return "", fmt.Errorf("cloudrun: run %s: %w", req.GetName(), err)
	}
	x, err := op.Metadata()
	if err != nil || x.GetName() == "" {
		if err == nil {
			err = errors.New("its metadata names none")
		}
		return "", fmt.Errorf("cloudrun: run %s: operation %s carries no execution: %w", req.GetName(), op.Name(), err)
	}
	return x.GetName(), nil
}

// FindExecution returns the newest execution of job whose container env
// has key=value (baton's run id), looking at the job's MaxScan newest.
func (c *Client) FindExecution(ctx context.Context, job, key, value string) (name string, found bool, err error) {
	it := c.execs.ListExecutions(ctx, &runpb.ListExecutionsRequest{Parent: job, PageSize: 100})
	for range MaxScan {
		x, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return "", false, nil
		}
		if err != nil {
			return "", false, fmt.Errorf("cloudrun: list executions of %s: %w", job, err)
		}
		for _, ctr := range x.GetTemplate().GetContainers() {
			for _, e := range ctr.GetEnv() {
				if e.GetName() == key && e.GetValue() == value {
					return x.GetName(), true, nil
				}
			}
		}
	}
	return "", false, nil
}

// GetExecution reads an execution.
func (c *Client) GetExecution(ctx context.Context, name string) (*runpb.Execution, error) {
	x, err := c.execs.GetExecution(ctx, &runpb.GetExecutionRequest{Name: name})
	if err != nil {
		return nil, fmt.Errorf("cloudrun: get %s: %w", name, err)
	}
	return x, nil
}

// CancelExecution asks Cloud Run to stop an execution; it does not wait.
func (c *Client) CancelExecution(ctx context.Context, name string) error {
	if _, err := c.execs.CancelExecution(ctx, &runpb.CancelExecutionRequest{Name: name}); err != nil {
		return fmt.Errorf("cloudrun: cancel %s: %w", name, err)
	}
	return nil
}

// EmulatorOptions point the client at a Run Admin API emulator on addr
// (CLOUD_RUN_EMULATOR_HOST): no credentials, plaintext gRPC.
func EmulatorOptions(addr string) []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(addr),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}
