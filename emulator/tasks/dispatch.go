package tasks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
)

// Header names the real service sets on an HTTP task's request, and the
// User-Agent it sends.
const (
	HeaderQueueName        = "X-CloudTasks-QueueName"
	HeaderTaskName         = "X-CloudTasks-TaskName"
	HeaderRetryCount       = "X-CloudTasks-TaskRetryCount"
	HeaderExecutionCount   = "X-CloudTasks-TaskExecutionCount"
	HeaderETA              = "X-CloudTasks-TaskETA"
	HeaderPreviousResponse = "X-CloudTasks-TaskPreviousResponse"
	HeaderRetryReason      = "X-CloudTasks-TaskRetryReason"
	UserAgent              = "Google-Cloud-Tasks"
)

// StatusDeadlineExceeded is the Attempt.Error of an attempt cut off by the
// dispatch deadline, as the real service names that failure.
const StatusDeadlineExceeded = "DEADLINE_EXCEEDED"

// reasonUnavailable is the retry reason after an attempt that got no
// answer for another reason than the deadline (a refused connection, say).
const reasonUnavailable = "UNAVAILABLE"

// errDeadline is the cancel cause of an attempt that ran out of time.
var errDeadline = errors.New(StatusDeadlineExceeded)

// request is what one attempt sends, copied out of the task under the lock
// so that the request runs without it.
type request struct {
	method, url string
	header      http.Header
	body        []byte
	deadline    time.Duration
}

// requestLocked builds the attempt's request: the task's own headers, minus
// those the real service computes or reserves, then the service's headers.
func (s *Server) requestLocked(q *queue, t *task) request {
	hr := t.pb.GetHttpRequest()
	h := http.Header{}
	for k, v := range hr.GetHeaders() {
		if reservedHeader(k) {
			continue
		}
		h.Set(k, v)
	}
	h.Set(HeaderQueueName, q.id)
	h.Set(HeaderTaskName, t.id)
	// Retry count: earlier attempts of any outcome. Execution count:
	// earlier attempts the handler answered, 5xx answers excluded.
	h.Set(HeaderRetryCount, strconv.Itoa(t.attempts-1))
	h.Set(HeaderExecutionCount, strconv.Itoa(t.executions))
	h.Set(HeaderETA, formatETA(t.schedule))
	if t.attempts > 1 {
		if t.prevStatus != 0 {
			h.Set(HeaderPreviousResponse, strconv.Itoa(t.prevStatus))
		}
		h.Set(HeaderRetryReason, t.prevReason)
	}
	h.Set("User-Agent", UserAgent)
	// An OIDC (or OAuth) token replaces any Authorization header the task
	// carries; here it is the local bearer token, or nothing.
	if hr.GetOidcToken() != nil || hr.GetOauthToken() != nil {
		h.Del("Authorization")
		if s.token != "" {
			h.Set("Authorization", "Bearer "+s.token)
		}
	}
	return request{
		method:   methodName(hr.GetHttpMethod()),
		url:      hr.GetUrl(),
		header:   h,
		body:     hr.GetBody(),
		deadline: t.pb.GetDispatchDeadline().AsDuration(),
	}
}

// reservedHeader reports the task headers the real service ignores or
// replaces: Host and Content-Length (computed), User-Agent (set to
// Google-Cloud-Tasks), X-Google-* and X-AppEngine-* (Google's), and
// X-CloudTasks-* (the service's own).
func reservedHeader(k string) bool {
	k = http.CanonicalHeaderKey(k)
	switch k {
	case "Host", "Content-Length", "User-Agent":
		return true
	}
	for _, p := range []string{"X-Google-", "X-Appengine-", "X-Cloudtasks-"} {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// formatETA writes a time as the real TaskETA header does: seconds since
// the Unix epoch with a fractional part (here microseconds, the precision
// of schedule_time).
func formatETA(t time.Time) string {
	us := t.UnixMicro()
	sec, frac := us/1_000_000, us%1_000_000
	if frac < 0 {
		sec, frac = sec-1, frac+1_000_000
	}
	return fmt.Sprintf("%d.%06d", sec, frac)
}

func methodName(m cloudtaskspb.HttpMethod) string {
	switch m {
	case cloudtaskspb.HttpMethod_GET:
		return http.MethodGet
	case cloudtaskspb.HttpMethod_HEAD:
		return http.MethodHead
	case cloudtaskspb.HttpMethod_PUT:
		return http.MethodPut
	case cloudtaskspb.HttpMethod_DELETE:
		return http.MethodDelete
	case cloudtaskspb.HttpMethod_PATCH:
		return http.MethodPatch
	case cloudtaskspb.HttpMethod_OPTIONS:
		return http.MethodOptions
	default:
		return http.MethodPost
	}
}

// send makes one attempt, cut off at the dispatch deadline, and fills in
// a's outcome. Close cancels it through hardCtx.
func (s *Server) send(r request, a Attempt) Attempt {
	ctx, cancel := context.WithTimeoutCause(s.hardCtx, r.deadline, errDeadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.method, r.url, bytes.NewReader(r.body))
	if err != nil {
		a.Error = fmt.Sprintf("build request: %v", err)
	} else {
		req.Header = r.header
		resp, err := s.client.Do(req)
		switch {
		case err != nil && errors.Is(context.Cause(ctx), errDeadline):
			a.Error = StatusDeadlineExceeded
		case err != nil:
			a.Error = err.Error()
		default:
			// The status line is the answer; the body is read (a little of
			// it) only so the connection can be reused.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			_ = resp.Body.Close()
			a.Status = resp.StatusCode
			if a.Status < 200 || a.Status > 299 {
				a.Error = fmt.Sprintf("HTTP %d", a.Status)
			}
		}
	}
	a.End = time.Now()
	level := slog.LevelInfo
	if !a.OK() {
		level = slog.LevelWarn
	}
	s.log.Log(context.Background(), level, "tasks: attempt", "queue", a.Queue, "task", a.Task,
		"url", r.url, "attempt", a.Number, "scheduleTime", a.ScheduleTime.UTC().Format(time.RFC3339Nano),
		"status", a.Status, "error", a.Error, "duration", a.End.Sub(a.Start).String())
	return a
}

// retryReason is the X-CloudTasks-TaskRetryReason value for the attempt
// after a. The real values are not documented; these name the failure the
// way Attempt.Error does, without the transport error's free text.
func retryReason(a Attempt) string {
	switch {
	case a.Error == StatusDeadlineExceeded:
		return StatusDeadlineExceeded
	case a.Status != 0:
		return fmt.Sprintf("HTTP %d", a.Status)
	default:
		return reasonUnavailable
	}
}

// responseStatus is Attempt.response_status: the HTTP status mapped to the
// closest gRPC code, as the real service reports it.
func responseStatus(a Attempt) *spb.Status {
	msg := a.Error
	var c codes.Code
	switch {
	case a.Error == StatusDeadlineExceeded:
		c = codes.DeadlineExceeded
	case a.Status == 0:
		c = codes.Unavailable
	case a.Status >= 200 && a.Status <= 299:
		c, msg = codes.OK, ""
	default:
		c = httpCode(a.Status)
	}
	return &spb.Status{Code: int32(c), Message: msg}
}

// httpCode maps an HTTP status to a gRPC code, as google.rpc.Code documents
// the HTTP mapping of each code.
func httpCode(status int) codes.Code {
	switch status {
	case http.StatusBadRequest:
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusConflict:
		return codes.Aborted
	case http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case 499:
		return codes.Canceled
	case http.StatusNotImplemented:
		return codes.Unimplemented
	case http.StatusServiceUnavailable:
		return codes.Unavailable
	case http.StatusGatewayTimeout:
		return codes.DeadlineExceeded
	}
	switch {
	case status >= 400 && status < 500:
		return codes.FailedPrecondition
	case status >= 500:
		return codes.Internal
	}
	return codes.Unknown
}
