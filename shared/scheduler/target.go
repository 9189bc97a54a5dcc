package scheduler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"google.golang.org/api/idtoken"

	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/fence"
	"github.com/baton-cron/baton/shared/schedule"
)

// ErrNoGPU means a gpu target ran on an engine without a GPU dispatcher.
var ErrNoGPU = errcode.New(errcode.FailedPrecondition, "scheduler: gpu targets need the GPU dispatcher (BATON_GPU_POOL), and none is configured")

// ErrTargetNotAllowed means an http target's host is not on the allowlist at
// execution time (the allowlist may have shrunk since the schedule was
// written, or a redirect pointed elsewhere).
var ErrTargetNotAllowed = errcode.New(errcode.PermissionDenied, "scheduler: target host is not on BATON_ALLOWED_TARGETS")

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
		id, err := e.cfg.GPU.EnqueueRun(ctx, r.ID, r.GPUTarget(*t.GPU))
		if err != nil {
			return "", fmt.Errorf("gpu enqueue: %w", err)
		}
		return "gpu job " + id, nil
	case schedule.TargetHTTP:
		if t.HTTP == nil {
			return "", errors.New("http target without an http block")
		}
		return e.callHTTP(ctx, r, t.HTTP)
	case schedule.TargetPubSub:
		if t.PubSub == nil {
			return "", errors.New("pubsub target without a pubsub block")
		}
		return e.callPubSub(ctx, r, t.PubSub)
	case schedule.TargetCloudRunJob:
		// Started by runTarget and ended by the sweep (runjob.go), never
		// called and waited for.
		return "", errors.New("cloudRunJob targets are started by the executor, not called")
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
	if v := schedule.ShardValue(r); v != "" {
		// Which shard of its fire this request is, and its parameter.
		req.Header.Set(schedule.ShardHeader, v)
		if r.ShardParam != "" {
			req.Header.Set(schedule.ShardParamHeader, r.ShardParam)
		}
	}
	if r.Epoch > 0 {
		// The job lease's fencing token, so that the target can refuse a
		// holder that lost its lease (shared/fence). allow runs hold none.
		req.Header.Set(fence.Header, fence.Token{Lease: runJobLease(r), Epoch: r.Epoch}.String())
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
		// The run's error is returned by the API and logged, so by default
		// it holds the status line only: a failing answer's body can carry
		// a token or a stack trace. errorExcerpt opts in to a short,
		// redacted excerpt.
		msg := fmt.Sprintf("http target answered %s", resp.Status)
		if h.ErrorExcerpt {
			if ex := excerpt(snippet); ex != "" {
				msg += ": " + ex
			}
		}
		return out, errors.New(msg)
	}
	return out, nil
}

// maxExcerpt bounds the excerpt of a failing answer's body kept on a run.
const maxExcerpt = 200

// secretLike matches what a failing answer's body must not leak into a
// run: bearer and OAuth tokens, JWTs, and key=value or "key": "value"
// pairs whose key names a credential.
var secretLike = regexp.MustCompile(`(?i)(bearer\s+\S+|ya29\.[\w.-]+|eyJ[\w-]+\.[\w-]+\.[\w-]*|AIza[\w-]{20,}|` +
	`["']?(authorization|api[-_]?key|access[-_]?token|refresh[-_]?token|id[-_]?token|token|secret|password|passwd|client[-_]?secret)["']?\s*[:=]\s*("[^"]*"|'[^']*'|[^\s,;&}]+))`)

// excerpt is the start of a failing answer's body, with anything that looks
// like a credential replaced, invalid UTF-8 dropped, and cut to maxExcerpt.
func excerpt(body []byte) string {
	s := strings.ToValidUTF8(strings.TrimSpace(string(body)), "")
	s = secretLike.ReplaceAllString(s, "[redacted]")
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxExcerpt {
		s = strings.ToValidUTF8(s[:maxExcerpt], "") + "…"
	}
	return s
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

// ErrTargetAddress means an http target's host name resolved only to addresses
// an http target may not reach: loopback, link-local (the metadata server,
// 169.254.169.254), unspecified or multicast ones that BATON_ALLOWED_TARGETS
// does not name itself, or private, CGNAT, NAT64 and ULA ones whose host the
// allowlist does not mark with schedule.PrivatePrefix.
var ErrTargetAddress = errcode.New(errcode.PermissionDenied, "scheduler: target host resolves only to addresses that BATON_ALLOWED_TARGETS does not open to http targets (loopback, link-local, private, CGNAT, NAT64, ULA)")

// guardClient returns a copy of c whose transport checks, before it
// connects, the address it is about to connect to: the allowlist is checked
// on host names, and a name it allows (any subdomain under a wildcard, or a
// name whose DNS is changed later) must not reach the metadata server, the
// host's own loopback services or a private network. The dialer resolves
// the name itself, checks each address, and connects to a checked address
// only, so a DNS answer that changes between a check and the connect (DNS
// rebinding) gets nowhere, and a refused address is never connected to: the
// run's error cannot tell an open port from a closed one. A transport that
// is not an *http.Transport cannot be hooked and is used as it is.
func guardClient(c *http.Client, allowed []string, lookup func(ctx context.Context, host string) ([]net.IPAddr, error)) *http.Client {
	if lookup == nil {
		lookup = net.DefaultResolver.LookupIPAddr
	}
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	t, ok := rt.(*http.Transport)
	if !ok {
		return c
	}
	t = t.Clone()
	if t.MaxIdleConnsPerHost == 0 {
		// Go keeps 2 idle connections a host by default
		// (http.DefaultMaxIdleConnsPerHost). A Run instance serves up to
		// run_concurrency runs at once, often of one target host: with 2,
		// all but two of their connections close after each run, and the
		// next runs pay a new TCP and TLS handshake each.
		t.MaxIdleConnsPerHost = targetIdleConnsPerHost
		t.MaxIdleConns = max(t.MaxIdleConns, targetIdleConnsPerHost)
	}
	dial := t.DialContext
	if dial == nil && t.Dial != nil { //nolint:staticcheck // honour a caller's legacy Dial
		legacy := t.Dial //nolint:staticcheck
		dial = func(_ context.Context, network, addr string) (net.Conn, error) { return legacy(network, addr) }
	}
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", addr, err)
		}
		var ips []net.IP
		if ip := net.ParseIP(host); ip != nil {
			ips = []net.IP{ip}
		} else {
			addrs, err := lookup(ctx, host)
			if err != nil {
				return nil, fmt.Errorf("dial %s: %w", addr, err)
			}
			for _, a := range addrs {
				ips = append(ips, a.IP)
			}
		}
		var firstErr error
		for _, ip := range ips {
			if err := checkAddress(host, ip, port, allowed); err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			conn, err := dial(ctx, network, net.JoinHostPort(ip.String(), port))
			if err == nil {
				return conn, nil
			}
			firstErr = err
		}
		if firstErr == nil {
			firstErr = fmt.Errorf("dial %s: no address", addr)
		}
		return nil, firstErr
	}
	cp := *c
	cp.Transport = t
	return &cp
}

// targetIdleConnsPerHost is how many idle connections to one target host
// the engine keeps: Run's default concurrency (run_concurrency, 80) and
// then some, so that a full instance's runs of one host reuse theirs.
const targetIdleConnsPerHost = 128

// cgnat and nat64 are ranges net.IP has no method for.
var (
	cgnat = mustCIDR("100.64.0.0/10")
	nat64 = []*net.IPNet{mustCIDR("64:ff9b::/96"), mustCIDR("64:ff9b:1::/48")}
)

func mustCIDR(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}

// privateAddress reports whether ip is on a network that is not the
// public internet's, beyond the host-local ranges: RFC 1918, CGNAT, NAT64
// and ULA (fc00::/7).
func privateAddress(ip net.IP) bool {
	if ip.IsPrivate() || cgnat.Contains(ip) {
		return true
	}
	for _, n := range nat64 {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// checkAddress applies guardClient's rule to one address that host (as
// dialled, before resolution) resolved to, before connecting to it.
func checkAddress(host string, ip net.IP, port string, allowed []string) error {
	named := schedule.IsAllowedHost(&url.URL{Scheme: "http", Host: net.JoinHostPort(ip.String(), port)}, allowed)
	switch {
	case ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() || ip.IsMulticast():
		if named || ip.IsLoopback() && strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
			return nil // the URL's host passed IsAllowedHost, so localhost is listed
		}
	case privateAddress(ip):
		if named || schedule.AllowsPrivate(&url.URL{Scheme: "http", Host: net.JoinHostPort(host, port)}, allowed) {
			return nil
		}
	default:
		return nil
	}
	return fmt.Errorf("dial %s: refused %s before connecting: %w", net.JoinHostPort(host, port), ip, ErrTargetAddress)
}

func (e *Engine) withRedirectCheck(c *http.Client) *http.Client {
	cp := *c
	allowed := e.cfg.AllowedTargets
	cp.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !schedule.IsAllowedHost(req.URL, allowed) {
			return fmt.Errorf("redirect to %s: %w", req.URL.Host, ErrTargetNotAllowed)
		}
		if !strings.EqualFold(req.URL.Host, via[0].URL.Host) {
			// The schedule's headers (API keys, say) were meant for the
			// target's host: another host gets baton's own headers only.
			// (net/http drops Authorization and Cookie itself, not these.)
			keep := http.Header{}
			for _, k := range []string{HeaderRunID, HeaderFireTime, fence.Header, "User-Agent"} {
				if v := req.Header.Values(k); len(v) > 0 {
					keep[k] = v
				}
			}
			req.Header = keep //nolint:gosec // this narrows the headers across origins to baton's own, none a credential (net/http drops Authorization and Cookie)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &cp
}
