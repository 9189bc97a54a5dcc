package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/baton-cron/baton/shared/errcode"
)

// Error is the one error shape every baton endpoint answers with. Field names
// the offending input field, so a client can point at it without parsing
// Message.
type Error struct {
	// Status is the HTTP status; it is not serialised.
	Status int `json:"-"`
	// Code is a stable, machine-readable reason such as "invalid_argument".
	Code string `json:"code"`
	// Message is for people.
	Message string `json:"message"`
	// Field is the JSON field (or query parameter) at fault, if any.
	Field string `json:"field,omitempty"`
}

// Error implements error.
func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Stable error codes. Clients branch on these, never on messages.
const (
	CodeInvalidArgument    = "invalid_argument"
	CodeNotFound           = "not_found"
	CodeConflict           = "conflict"
	CodeFailedPrecondition = "failed_precondition"
	CodeUnauthenticated    = "unauthenticated"
	CodeTooLarge           = "payload_too_large"
	CodeMethodNotAllowed   = "method_not_allowed"
	CodeUnavailable        = "unavailable"
	CodeInternal           = "internal"
	CodePermissionDenied   = "permission_denied"
	CodeResourceExhausted  = "resource_exhausted"
)

// BadRequest returns a 400 that names the field and the reason. The message
// is built by Sprintf, so an input value echoed with %q is cut to MaxEcho
// bytes.
func BadRequest(field, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeInvalidArgument, Field: field, Message: Sprintf(format, args...)}
}

// TooLarge returns a 413 for a body over limit bytes.
func TooLarge(limit int64) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge, Message: fmt.Sprintf("body is larger than %d bytes", limit)}
}

// NotFound returns a 404.
func NotFound(format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: Sprintf(format, args...)}
}

// Conflict returns a 409, used for stale fences and lost races.
func Conflict(format string, args ...any) *Error {
	return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: Sprintf(format, args...)}
}

// PreconditionFailed returns a 412, used when If-Match does not hold.
func PreconditionFailed(format string, args ...any) *Error {
	return &Error{Status: http.StatusPreconditionFailed, Code: CodeFailedPrecondition, Message: Sprintf(format, args...)}
}

// MethodNotAllowed returns a 405.
func MethodNotAllowed(method string) *Error {
	return &Error{Status: http.StatusMethodNotAllowed, Code: CodeMethodNotAllowed, Message: fmt.Sprintf("method %s is not allowed here", method)}
}

// WriteJSON writes v as JSON with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		slog.Warn("httpapi: write response", "error", err)
	}
}

// WriteError writes err in the shared shape, with the status and code that
// From gives it. An unclassified error is logged and becomes an opaque 500,
// so internal details never leak to callers. Message and Field are cut to
// MaxMessageBytes and MaxFieldBytes.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	he, internal := From(err)
	if internal {
		slog.Error("httpapi: internal error", "error", err.Error(), "method", r.Method, "path", r.URL.Path)
	}
	// Cut what any error carries, however it was built: the body of an
	// error must not grow with the input it refuses.
	out := *he
	out.Message = cutTo(out.Message, MaxMessageBytes)
	out.Field = cutTo(out.Field, MaxFieldBytes)
	WriteJSON(w, out.Status, map[string]*Error{"error": &out})
}

// From is the one place that maps an error to an HTTP answer. An *Error in
// err's chain is the answer as built; a body over its limit is a 413; a
// *errcode.FieldError is a 400 naming its field, with its reason as the
// message; anything else is answered by errcode.Code(err), with err's text
// as the message. internal reports a
// 500 whose message hides err: the caller should log err.
//
//	InvalidArgument                       400 invalid_argument
//	PermissionDenied                      403 permission_denied
//	NotFound                              404 not_found
//	AlreadyExists, Conflict, StaleFence   409 conflict
//	FailedPrecondition                    412 failed_precondition
//	ResourceExhausted                     429 resource_exhausted
//	Unavailable, Aborted, Canceled        503 unavailable
//	anything else                         500 internal
//
// Aborted (a conditional write lost a race inside the server) is a 503,
// not a 409: workers take a 409 for "stop this job", and this one should
// be retried.
func From(err error) (he *Error, internal bool) {
	var (
		maxErr *http.MaxBytesError
		fe     *errcode.FieldError
	)
	switch {
	case errors.As(err, &he):
		return he, false
	case errors.As(err, &maxErr):
		return TooLarge(maxErr.Limit), false
	}
	code := errcode.Code(err)
	// The outermost code decides: a handler that wraps a failure as
	// Internal gets a 500 even if a FieldError is deeper in the chain.
	if code == errcode.InvalidArgument && errors.As(err, &fe) {
		return BadRequest(fe.Field, "%s", fe.Reason), false
	}
	status, name := statusOf(code)
	if status == http.StatusInternalServerError {
		return &Error{Status: status, Code: CodeInternal, Message: "internal error; see the server log"}, true
	}
	msg := err.Error()
	// The outermost sentinel's answer, when it has one, is written for
	// the caller; the chain's text is written for the log.
	var ans interface{ Answer() string }
	if errors.As(err, &ans) && ans.Answer() != "" {
		msg = ans.Answer()
	}
	switch code {
	case errcode.Aborted:
		msg += "; retry"
	case errcode.Canceled:
		// The caller hung up; nobody reads this answer.
		msg = "request cancelled"
	}
	return &Error{Status: status, Code: name, Message: msg}, false
}

// statusOf is the HTTP status and stable code string of an error code.
func statusOf(c errcode.ErrorCode) (int, string) {
	switch c {
	case errcode.InvalidArgument:
		return http.StatusBadRequest, CodeInvalidArgument
	case errcode.PermissionDenied:
		return http.StatusForbidden, CodePermissionDenied
	case errcode.NotFound:
		return http.StatusNotFound, CodeNotFound
	case errcode.AlreadyExists, errcode.Conflict, errcode.StaleFence:
		return http.StatusConflict, CodeConflict
	case errcode.FailedPrecondition:
		return http.StatusPreconditionFailed, CodeFailedPrecondition
	case errcode.ResourceExhausted:
		return http.StatusTooManyRequests, CodeResourceExhausted
	case errcode.Unavailable, errcode.Aborted, errcode.Canceled:
		return http.StatusServiceUnavailable, CodeUnavailable
	}
	return http.StatusInternalServerError, CodeInternal
}

// ParseError reads an error answer of status with body data, as a client
// of a baton API sees it: baton's shape ({"error": {...}}) as it is, and
// anything else (a proxy, a load balancer) as the status text with the
// start of the body as the message. The CLI and the console share it.
func ParseError(status int, data []byte) *Error {
	var e struct {
		Error *Error `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil && e.Error != nil && e.Error.Code != "" {
		e.Error.Status = status
		return e.Error
	}
	text := strings.TrimSpace(string(data))
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	return &Error{Status: status, Code: http.StatusText(status), Message: text}
}
