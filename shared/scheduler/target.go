package scheduler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/api/idtoken"

	"github.com/baton-cron/baton/shared/schedule"
)

// ErrNoGPU: a gpu target ran on an engine without a GPU dispatcher.
var ErrNoGPU = errors.New("scheduler: gpu targets need the GPU dispatcher (BATON_GPU_POOL), and none is configured")

// ErrTargetNotAllowed: an http target's host is not on the allowlist at
// execution time (the allowlist may have shrunk since the schedule was
// written, or a redirect pointed elsewhere).
var ErrTargetNotAllowed = errors.New("scheduler: target host is not on BATON_ALLOWED_TARGETS")

// Headers every http target request carries, so the target can deduplicate
// too.
const (
	HeaderRunID    = "X-Baton-Run-Id"
	HeaderFireTime = "X-Baton-Fire-Time"
)

// callTarget runs a run's target and returns a short output.
func (e *Engine) callTarget(ctx context.Context, s *schedule.Schedule, r *schedule.Run) (string, error) {
	t := s.Target
	switch t.Type {
	case schedule.TargetBuiltin:
		if t.Builtin == nil {
			return "", errors.New("builtin target without a builtin block")
		}
		fn, ok := lookupBuiltin(t.Builtin.Name)
		if !ok {
			return "", fmt.Errorf("builtin %q is not registered (have %v)", t.Builtin.Name, Builtins())
		}
		return fn(ctx, t.Builtin.Args)
	case schedule.TargetGPU:
		if t.GPU == nil {
			return "", errors.New("gpu target without a gpu block")
		}
		if e.cfg.GPU == nil {
			return "", ErrNoGPU
		}
		id, err := e.cfg.GPU.EnqueueRun(ctx, r.ID, *t.GPU)
		if err != nil {
			return "", fmt.Errorf("gpu enqueue: %w", err)
		}
		return "gpu job " + id, nil
	case schedule.TargetHTTP:
		if t.HTTP == nil {
			return "", errors.New("http target without an http block")
		}
		return e.callHTTP(ctx, r, t.HTTP)
	default:
		return "", fmt.Errorf("unknown target type %q", t.Type)
	}
}

func (e *Engine) callHTTP(ctx context.Context, r *schedule.Run, h *schedule.HTTPTarget) (string, error) {
	u, err := url.Parse(h.URL)
	if err != nil {
		return "", fmt.Errorf("http target: url: %w", err)
	}
	if !schedule.IsAllowedHost(u, e.cfg.AllowedTargets) {
		return "", fmt.Errorf("http target %s: %w", u.Host, ErrTargetNotAllowed)
	}
	timeout := h.Timeout.D()
	if timeout <= 0 {
		timeout = schedule.DefaultHTTPTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	method := h.Method
	if method == "" {
		method = schedule.DefaultHTTPMethod
	}
	var body io.Reader
	if h.Body != "" {
		body = strings.NewReader(h.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return "", fmt.Errorf("http target: request: %w", err)
	}
	for k, v := range h.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set(HeaderRunID, r.ID)
	req.Header.Set(HeaderFireTime, r.FireTime.UTC().Format(time.RFC3339))
	client, err := e.clientFor(ctx, h.URL)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("http target: %w", err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	out := fmt.Sprintf("HTTP %d", resp.StatusCode)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return out, fmt.Errorf("http target answered %d: %s", resp.StatusCode, strings.TrimSpace(string(snippet)))
	}
	return out, nil
}

// clientFor returns the client for a target URL: the configured one, or
// (Config.IDToken) an idtoken client whose audience is the URL, cached per
// audience. Either way redirects are re-checked against the allowlist, so
// an allowed host cannot bounce a run to a forbidden one.
func (e *Engine) clientFor(ctx context.Context, audience string) (*http.Client, error) {
	if !e.cfg.IDToken {
		return e.withRedirectCheck(e.http), nil
	}
	if c, ok := e.idClients.Load(audience); ok {
		return c.(*http.Client), nil
	}
	c, err := idtoken.NewClient(context.WithoutCancel(ctx), audience)
	if err != nil {
		return nil, fmt.Errorf("http target: OIDC ID token client for %s: %w", audience, err)
	}
	c = e.withRedirectCheck(c)
	e.idClients.Store(audience, c)
	return c, nil
}

func (e *Engine) withRedirectCheck(c *http.Client) *http.Client {
	cp := *c
	allowed := e.cfg.AllowedTargets
	cp.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !schedule.IsAllowedHost(req.URL, allowed) {
			return fmt.Errorf("redirect to %s: %w", req.URL.Host, ErrTargetNotAllowed)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &cp
}
