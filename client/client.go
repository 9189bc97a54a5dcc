package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/httpapi"
)

// TokenFunc returns the bearer token of one request: baton local's token,
// or in the cloud a Google ID token for the function's URL, as
// google.golang.org/api/idtoken's token source gives it (call its Token
// and return AccessToken). It is called for every request, so it should
// cache.
type TokenFunc func(ctx context.Context) (string, error)

// Client calls one deployment's Schedules function. It is safe for
// concurrent use.
type Client struct {
	base      string
	http      *http.Client
	token     TokenFunc
	retries   int
	backoff   time.Duration
	userAgent string
	maxBody   int64
}

// Option configures New.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (its transport, its timeout); the
// default has a 60 s timeout.
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithToken sends a fixed bearer token (BATON_TOKEN under baton local).
func WithToken(token string) Option {
	return func(c *Client) {
		c.token = func(context.Context) (string, error) { return token, nil }
	}
}

// WithTokenFunc sends the token f returns with every request: the hook for
// Google ID tokens in the cloud.
func WithTokenFunc(f TokenFunc) Option { return func(c *Client) { c.token = f } }

// WithRetries sets how often a retryable failure is retried (default 3)
// and the first delay, which doubles (default 200 ms); a Retry-After
// answer header, when longer, is honoured up to 30 s. 0 turns retries off.
func WithRetries(n int, backoff time.Duration) Option {
	return func(c *Client) { c.retries, c.backoff = n, backoff }
}

// WithUserAgent names the caller in the User-Agent header, for the
// server's logs.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a client of the Schedules function at base, such as
// https://REGION-PROJECT.cloudfunctions.net/Schedules, or
// http://127.0.0.1:8080/Schedules under baton local.
func New(base string, opts ...Option) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: %q is not an http(s) URL", base)
	}
	c := &Client{
		base:      strings.TrimRight(base, "/"),
		http:      &http.Client{Timeout: 60 * time.Second},
		retries:   3,
		backoff:   200 * time.Millisecond,
		userAgent: "baton-go-client",
		maxBody:   64 << 20,
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// BaseURL is the function URL the client calls.
func (c *Client) BaseURL() string { return c.base }

// Error is an error answer of the API in its one shape, or a failure to
// reach it (Status 0, Code ""). Callers branch on Code (or on
// errcode.Code(err), which ErrorCode feeds), never on Message.
type Error struct {
	// Status is the HTTP status; 0 when no answer came.
	Status int
	// Code is the API's stable code, such as "invalid_argument",
	// "not_found", "failed_precondition" (httpapi's Code constants).
	Code string
	// Message is for people.
	Message string
	// Field names the input field or query parameter at fault, if any.
	Field string
	// Op is the request, "PATCH /schedules/nightly".
	Op string
	// Err is the transport failure when Status is 0.
	Err error
}

// Error names the request, then the field, then the reason.
func (e *Error) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("%s: %v", e.Op, e.Err)
	}
	msg := fmt.Sprintf("%s: HTTP %d %s: ", e.Op, e.Status, e.Code)
	if e.Field != "" {
		msg += e.Field + ": "
	}
	return msg + e.Message
}

// Unwrap returns the transport failure, if any.
func (e *Error) Unwrap() error { return e.Err }

// ErrorCode maps the API's code back to baton's error codes, so that
// errcode.Code(err) works on client errors as it does on the server's.
func (e *Error) ErrorCode() errcode.ErrorCode {
	switch e.Code {
	case httpapi.CodeInvalidArgument, httpapi.CodeTooLarge:
		return errcode.InvalidArgument
	case httpapi.CodeNotFound:
		return errcode.NotFound
	case httpapi.CodeConflict:
		return errcode.Conflict
	case httpapi.CodeFailedPrecondition:
		return errcode.FailedPrecondition
	case httpapi.CodePermissionDenied, httpapi.CodeUnauthenticated:
		return errcode.PermissionDenied
	case httpapi.CodeResourceExhausted:
		return errcode.ResourceExhausted
	case httpapi.CodeUnavailable:
		return errcode.Unavailable
	}
	if e.Status == 0 {
		return errcode.Unavailable
	}
	return errcode.Unknown
}

// IsNotFound reports whether err is the API's 404.
func IsNotFound(err error) bool { return hasCode(err, httpapi.CodeNotFound) }

// IsPreconditionFailed reports whether err is the API's 412: the version
// given with IfMatch is no longer the stored one.
func IsPreconditionFailed(err error) bool { return hasCode(err, httpapi.CodeFailedPrecondition) }

// IsConflict reports whether err is the API's 409 (an id already taken).
func IsConflict(err error) bool { return hasCode(err, httpapi.CodeConflict) }

func hasCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// WriteOption conditions a write.
type WriteOption func(*http.Request)

// IfMatch makes a write conditional on the stored version still being
// version (the Version of the object read, its ETag): otherwise the API
// answers 412 and writes nothing (IsPreconditionFailed). 0 adds no
// condition.
func IfMatch(version int64) WriteOption {
	return func(r *http.Request) {
		if version != 0 {
			r.Header.Set("If-Match", ETag(version))
		}
	}
}

// ETag formats a version as the API's entity tag.
func ETag(version int64) string { return `"` + strconv.FormatInt(version, 10) + `"` }

// Do sends one request to any route of the function the client calls,
// for the routes the typed methods do not cover yet (the GPU function's,
// with a client on its URL) and for callers that print the answer as it
// came: body is sent as JSON ([]byte and json.RawMessage as they are),
// header is added to the request (If-Match, Accept), and a 2xx answer is
// decoded into out: a *json.RawMessage or *[]byte gets the bytes as they
// are. It retries as the typed methods do, and returns the answer's
// header (also with an error, when an answer came).
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, header http.Header, body, out any) (http.Header, error) {
	r := request{method: method, path: path, query: query, body: body, out: out}
	if len(header) > 0 {
		r.opts = append(r.opts, func(req *http.Request) {
			for k, vs := range header {
				req.Header[http.CanonicalHeaderKey(k)] = vs
			}
		})
	}
	_, h, err := c.do(ctx, r)
	return h, err
}

// request is one call.
type request struct {
	method, path string
	query        url.Values
	body         any // JSON-encoded; a []byte or json.RawMessage is sent as is
	opts         []WriteOption
	out          any // decoded from a 2xx answer, when non-nil
}

// do sends r, retrying what is safe to retry, and returns the answer's
// status and header.
func (c *Client) do(ctx context.Context, r request) (int, http.Header, error) {
	op := r.method + " " + r.path
	var body []byte
	if r.body != nil {
		switch b := r.body.(type) {
		case []byte:
			body = b
		case json.RawMessage:
			body = b
		default:
			var err error
			if body, err = json.Marshal(b); err != nil {
				return 0, nil, fmt.Errorf("client: %s: encode body: %w", op, err)
			}
		}
	}
	delay := c.backoff
	for attempt := 0; ; attempt++ {
		status, header, data, err := c.once(ctx, r, op, body)
		if err == nil {
			if raw, ok := r.out.(*[]byte); ok {
				*raw = data
			} else if r.out != nil && len(data) > 0 {
				if err := json.Unmarshal(data, r.out); err != nil {
					return status, header, fmt.Errorf("client: %s: decode answer: %w", op, err)
				}
			}
			return status, header, nil
		}
		if attempt >= c.retries || !retryable(r.method, err) || ctx.Err() != nil {
			return status, header, err
		}
		wait := delay
		if ra, perr := strconv.Atoi(header.Get("Retry-After")); perr == nil && time.Duration(ra)*time.Second > wait {
			wait = min(time.Duration(ra)*time.Second, 30*time.Second)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return status, header, err
		case <-t.C:
		}
		delay *= 2
	}
}

// retryable says whether a failed request may be sent again. A GET reads
// only, so any transient failure may be retried. A write may have been
// applied when its answer was lost, so it is retried only on a baton
// answer that says nothing was applied: 429 (no capacity) and 503
// (unavailable, or a conditional write inside the server lost a race).
func retryable(method string, err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	read := method == http.MethodGet || method == http.MethodHead
	switch {
	case e.Status == 0:
		return read
	case e.Status == http.StatusTooManyRequests || e.Code == httpapi.CodeUnavailable:
		return true
	case e.Status == http.StatusBadGateway || e.Status == http.StatusServiceUnavailable || e.Status == http.StatusGatewayTimeout:
		return read
	}
	return false
}

func (c *Client) once(ctx context.Context, r request, op string, body []byte) (int, http.Header, []byte, error) {
	u := c.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, rd)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("client: %s: %w", op, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	for _, o := range r.opts {
		o(req)
	}
	if c.token != nil {
		tok, err := c.token(ctx)
		if err != nil {
			return 0, nil, nil, fmt.Errorf("client: %s: get a token: %w", op, err)
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, nil, nil, &Error{Op: op, Err: fmt.Errorf("cannot reach %s: %w", c.base, err)}
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, c.maxBody))
	if err != nil {
		return res.StatusCode, res.Header, nil, &Error{Op: op, Err: fmt.Errorf("read answer: %w", err)}
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		e := httpapi.ParseError(res.StatusCode, data)
		return res.StatusCode, res.Header, nil, &Error{Op: op, Status: res.StatusCode, Code: e.Code, Message: e.Message, Field: e.Field}
	}
	return res.StatusCode, res.Header, data, nil
}

// PageOptions select one page of a list.
type PageOptions struct {
	// PageSize is 1..500; 0 is the server's default (50).
	PageSize int
	// PageToken is the NextPageToken of the previous page; empty for the
	// first.
	PageToken string
}

func (o PageOptions) query() url.Values {
	q := url.Values{}
	if o.PageSize > 0 {
		q.Set("pageSize", strconv.Itoa(o.PageSize))
	}
	if o.PageToken != "" {
		q.Set("pageToken", o.PageToken)
	}
	return q
}

func pathID(prefix, id string) string { return prefix + url.PathEscape(id) }

// Stream GETs path and copies a 2xx answer's body to w as it arrives,
// without decoding it and without the HTTP client's overall timeout (a
// job's log may take a while; the connection's own timeouts still apply):
// the GPU function's logs. An error answer is an *Error. It is not
// retried: a retry after part of the body was copied would copy it twice.
func (c *Client) Stream(ctx context.Context, path string, query url.Values, w io.Writer) (http.Header, error) {
	op := http.MethodGet + " " + path
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("client: %s: %w", op, err)
	}
	req.Header.Set("User-Agent", c.userAgent)
	if c.token != nil {
		tok, err := c.token(ctx)
		if err != nil {
			return nil, fmt.Errorf("client: %s: get a token: %w", op, err)
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	hc := *c.http
	hc.Timeout = 0
	res, err := hc.Do(req)
	if err != nil {
		return nil, &Error{Op: op, Err: fmt.Errorf("cannot reach %s: %w", c.base, err)}
	}
	defer res.Body.Close()
	if res.StatusCode < 200 || res.StatusCode > 299 {
		data, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		if err != nil {
			return res.Header, &Error{Op: op, Err: fmt.Errorf("read answer: %w", err)}
		}
		e := httpapi.ParseError(res.StatusCode, data)
		return res.Header, &Error{Op: op, Status: res.StatusCode, Code: e.Code, Message: e.Message, Field: e.Field}
	}
	if _, err := io.Copy(w, res.Body); err != nil {
		return res.Header, &Error{Op: op, Err: fmt.Errorf("read answer: %w", err)}
	}
	return res.Header, nil
}
