package scheduler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"google.golang.org/api/idtoken"

	"github.com/baton-cron/baton/shared/fence"
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
	if r.Epoch > 0 {
		// The job lease's fencing token, so that the target can refuse a
		// holder that lost its lease (shared/fence). allow runs hold none.
		req.Header.Set(fence.Header, fence.Token{Lease: JobLease(r.ScheduleID), Epoch: r.Epoch}.String())
	}
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
	ts, err := idtoken.NewTokenSource(context.WithoutCancel(ctx), audience)
	if err != nil {
		return nil, fmt.Errorf("http target: OIDC ID token client for %s: %w", audience, err)
	}
	out := e.withRedirectCheck(idTokenClient(e.http, audience, ts))
	e.idClients.Store(audience, out)
	return out, nil
}

// idTokenClient returns a copy of base that adds ts's ID token to requests
// for the audience's own scheme and host only: a redirect to another
// (allowed) host must not carry a token it could replay against the
// audience. The token goes through base's guarded transport (guardClient),
// so the dial-time address check holds for OIDC requests too.
func idTokenClient(base *http.Client, audience string, ts oauth2.TokenSource) *http.Client {
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	aud, _ := url.Parse(audience)
	c := *base
	c.Transport = audienceOnly{aud: aud, token: &oauth2.Transport{Source: ts, Base: rt}, plain: rt}
	return &c
}

// audienceOnly sends requests for aud's scheme and host through token and
// every other request through plain.
type audienceOnly struct {
	aud          *url.URL
	token, plain http.RoundTripper
}

func (a audienceOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	if a.aud != nil && strings.EqualFold(r.URL.Scheme, a.aud.Scheme) && strings.EqualFold(r.URL.Host, a.aud.Host) {
		return a.token.RoundTrip(r)
	}
	return a.plain.RoundTrip(r)
}

// ErrTargetAddress: an http target's host name resolved to a loopback,
// link-local (the metadata server, 169.254.169.254), unspecified or
// multicast address that BATON_ALLOWED_TARGETS does not list itself.
var ErrTargetAddress = errors.New("scheduler: target host resolves to a loopback, link-local or unspecified address that BATON_ALLOWED_TARGETS does not list")

// guardClient returns a copy of c whose transport checks, at dial time, the
// address actually connected to: the allowlist is checked on host names, and
// a name it allows (any subdomain under a wildcard, or a name whose DNS is
// changed later) must not reach the metadata server or the host's own
// loopback services. Such an address passes only when the allowlist names
// that IP itself, or (loopback only) when the URL's host is a listed
// "localhost". Checking the dialled connection, not a prior lookup, leaves
// no window for DNS rebinding. A transport that is not an *http.Transport
// cannot be hooked and is used as it is.
func guardClient(c *http.Client, allowed []string) *http.Client {
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	t, ok := rt.(*http.Transport)
	if !ok {
		return c
	}
	t = t.Clone()
	dial := t.DialContext
	if dial == nil && t.Dial != nil { //nolint:staticcheck // honour a caller's legacy Dial
		legacy := t.Dial //nolint:staticcheck
		dial = func(_ context.Context, network, addr string) (net.Conn, error) { return legacy(network, addr) }
	}
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if err := checkDialed(addr, conn.RemoteAddr(), allowed); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return conn, nil
	}
	cp := *c
	cp.Transport = t
	return &cp
}

// checkDialed applies guardClient's rule to one connection: addr is what
// was dialled (host:port, before resolution), remote where it went.
func checkDialed(addr string, remote net.Addr, allowed []string) error {
	tcp, ok := remote.(*net.TCPAddr)
	if !ok {
		return nil
	}
	ip := tcp.IP
	if !ip.IsLoopback() && !ip.IsLinkLocalUnicast() && !ip.IsLinkLocalMulticast() && !ip.IsUnspecified() && !ip.IsMulticast() {
		return nil
	}
	host, _, _ := net.SplitHostPort(addr)
	if ip.IsLoopback() && strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return nil // the URL's host passed IsAllowedHost, so localhost is listed
	}
	if schedule.IsAllowedHost(&url.URL{Scheme: "http", Host: net.JoinHostPort(ip.String(), strconv.Itoa(tcp.Port))}, allowed) {
		return nil
	}
	return fmt.Errorf("dial %s: connected to %s: %w", addr, ip, ErrTargetAddress)
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
