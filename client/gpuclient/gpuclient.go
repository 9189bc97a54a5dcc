package gpuclient

import (
	"context"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	"github.com/baton-cron/baton/client"
	"github.com/baton-cron/baton/shared/gpu"
)

// Client calls one deployment's GPU function.
type Client struct{ c *client.Client }

// New returns a client of the GPU function at base, such as
// http://127.0.0.1:8080/GPU under baton local; opts are the schedules
// client's (token, HTTP client, retries).
func New(base string, opts ...client.Option) (*Client, error) {
	c, err := client.New(base, opts...)
	if err != nil {
		return nil, err
	}
	return &Client{c: c}, nil
}

// Enqueue queues a job and says whether this call created it: with an id,
// enqueueing it again returns the first job (created false), so a create
// with an id may be retried safely after a lost answer.
func (g *Client) Enqueue(ctx context.Context, req gpu.EnqueueRequest) (job *gpu.Job, created bool, err error) {
	var out gpu.Job
	status, err := g.status(ctx, http.MethodPost, "/gpu/jobs", nil, req, &out)
	if err != nil {
		return nil, false, err
	}
	return &out, status == http.StatusCreated, nil
}

// status is Do, telling a new job from an existing id: POST /gpu/jobs
// sets Location only on its 201.
func (g *Client) status(ctx context.Context, method, path string, q url.Values, body, out any) (int, error) {
	h, err := g.c.Do(ctx, method, path, q, nil, body, out)
	if err != nil {
		return 0, err
	}
	if h.Get("Location") != "" {
		return http.StatusCreated, nil
	}
	return http.StatusOK, nil
}

// Job reads one job.
func (g *Client) Job(ctx context.Context, id string) (*gpu.Job, error) {
	var out gpu.Job
	if _, err := g.c.Do(ctx, http.MethodGet, "/gpu/jobs/"+url.PathEscape(id), nil, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Cancel cancels a queued or running job.
func (g *Client) Cancel(ctx context.Context, id string) (*gpu.Job, error) {
	var out gpu.Job
	if _, err := g.c.Do(ctx, http.MethodPost, "/gpu/jobs/"+url.PathEscape(id)+":cancel", nil, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListQuery selects jobs; a zero field matches every job.
type ListQuery struct {
	Status   gpu.JobStatus
	Tenant   string
	PageSize int
}

// JobsPage reads one page of jobs, newest first, from token on.
func (g *Client) JobsPage(ctx context.Context, q ListQuery, token string) (*gpu.JobPage, error) {
	v := url.Values{}
	if q.Status != "" {
		v.Set("status", string(q.Status))
	}
	if q.Tenant != "" {
		v.Set("tenant", q.Tenant)
	}
	if q.PageSize > 0 {
		v.Set("pageSize", strconv.Itoa(q.PageSize))
	}
	if token != "" {
		v.Set("pageToken", token)
	}
	var out gpu.JobPage
	if _, err := g.c.Do(ctx, http.MethodGet, "/gpu/jobs", v, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Jobs iterates over the jobs q selects, newest first, a page at a time.
func (g *Client) Jobs(ctx context.Context, q ListQuery) iter.Seq2[gpu.Job, error] {
	return func(yield func(gpu.Job, error) bool) {
		token := ""
		for {
			p, err := g.JobsPage(ctx, q, token)
			if err != nil {
				yield(gpu.Job{}, err)
				return
			}
			for _, j := range p.Jobs {
				if !yield(j, nil) {
					return
				}
			}
			if p.NextPageToken == "" {
				return
			}
			token = p.NextPageToken
		}
	}
}

// Pool reads the pool's view: each slot, each tenant, the queue heads.
func (g *Client) Pool(ctx context.Context) (*gpu.PoolView, error) {
	var out gpu.PoolView
	if _, err := g.c.Do(ctx, http.MethodGet, "/gpu/pool", nil, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Logs copies a job's stdout or stderr ("stdout", "stderr") of attempt
// (0: the latest that ran) to w as it arrives.
func (g *Client) Logs(ctx context.Context, id, stream string, attempt int, w io.Writer) error {
	v := url.Values{"stream": {stream}}
	if attempt > 0 {
		v.Set("attempt", strconv.Itoa(attempt))
	}
	_, err := g.c.Stream(ctx, "/gpu/jobs/"+url.PathEscape(id)+"/logs", v, w)
	return err
}
