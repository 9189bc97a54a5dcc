package errcode

import (
	"context"
	"errors"
	"strconv"
)

// ErrorCode says what kind of failure an error is, whatever package made
// it. The zero value is OK. The set is the part of gRPC's codes that baton
// needs, plus StaleFence, Conflict and UnknownOutcome, which baton's
// callers must tell apart.
type ErrorCode int

// The codes. Their numbers are not stable; compare with the names.
const (
	// OK: no error.
	OK ErrorCode = iota
	// Unknown: the error was not classified. Treat it as a server fault.
	Unknown
	// Internal: a server-side failure that is not the caller's doing, such
	// as a failed tick; the caller can only retry later.
	Internal
	// InvalidArgument: the input is wrong (a *FieldError names the field),
	// whatever the state of the system.
	InvalidArgument
	// NotFound: the thing named does not exist.
	NotFound
	// AlreadyExists: a create named an id that is taken.
	AlreadyExists
	// Conflict: the current state of the resource refuses the operation (a
	// cancelled or finished job, a schedule changing under the caller).
	Conflict
	// StaleFence: a fenced write was refused because a holder with a newer
	// epoch has written; the caller has lost its claim and must stop.
	StaleFence
	// FailedPrecondition: a precondition the caller gave (If-Match, a held
	// lease) does not hold.
	FailedPrecondition
	// Aborted: a conditional write lost a race inside the server; the
	// state is consistent and the whole operation may be retried.
	Aborted
	// PermissionDenied: the caller is known but may not do this.
	PermissionDenied
	// ResourceExhausted: no capacity now (a busy worker); retry later.
	ResourceExhausted
	// Unavailable: a dependency or feature is not there now; retry later.
	Unavailable
	// Canceled: the caller's context was cancelled.
	Canceled
	// DeadlineExceeded: the caller's deadline passed before an answer.
	DeadlineExceeded
	// UnknownOutcome: a write failed without saying whether it was
	// applied. It is not Aborted: the caller must read back rather than
	// take the write for refused.
	UnknownOutcome
	// Unimplemented: the implementation does not offer the operation (a
	// server without change streams cannot watch); the caller falls back.
	Unimplemented
)

var names = [...]string{
	OK:                 "OK",
	Unknown:            "Unknown",
	Internal:           "Internal",
	InvalidArgument:    "InvalidArgument",
	NotFound:           "NotFound",
	AlreadyExists:      "AlreadyExists",
	Conflict:           "Conflict",
	StaleFence:         "StaleFence",
	FailedPrecondition: "FailedPrecondition",
	Aborted:            "Aborted",
	PermissionDenied:   "PermissionDenied",
	ResourceExhausted:  "ResourceExhausted",
	Unavailable:        "Unavailable",
	Canceled:           "Canceled",
	DeadlineExceeded:   "DeadlineExceeded",
	UnknownOutcome:     "UnknownOutcome",
	Unimplemented:      "Unimplemented",
}

// String returns the code's name, such as "NotFound".
func (c ErrorCode) String() string {
	if c >= 0 && int(c) < len(names) {
		return names[c]
	}
	return "ErrorCode(" + strconv.Itoa(int(c)) + ")"
}

// Coder is implemented by errors that know their code: *Error, and typed
// errors such as *FieldError or lease's *HeldError.
type Coder interface {
	ErrorCode() ErrorCode
}

// Error is an error with a code. Sentinels are *Error values compared by
// identity with errors.Is.
type Error struct {
	code   ErrorCode
	msg    string
	err    error
	answer string
}

// New returns a sentinel with code c and message msg.
func New(c ErrorCode, msg string) *Error { return &Error{code: c, msg: msg} }

// Wrap returns a sentinel with code c and message msg that wraps err, so
// errors.Is(w, err) holds while Code(w) is c, not err's code: a stale fence
// is a conflict to errors.Is, yet StaleFence to Code. An empty msg keeps
// err's text.
func Wrap(c ErrorCode, err error, msg string) *Error { return &Error{code: c, msg: msg, err: err} }

// Error returns the message, or the wrapped error's text when there is
// none. It does not append what it wraps: a wrapping sentinel such as
// "catalog: schedule not found" names the failure itself, and callers add
// the operation with fmt.Errorf.
func (e *Error) Error() string {
	if e.msg == "" && e.err != nil {
		return e.err.Error()
	}
	return e.msg
}

// Unwrap returns the wrapped error, or nil.
func (e *Error) Unwrap() error { return e.err }

// WithAnswer returns a copy of e that an API answers with the message s
// instead of the error chain's text: "no such schedule" rather than
// "catalog: get x: catalog: schedule not found", which is written for logs.
// Use it at a sentinel's definition, so the copy is the sentinel.
func (e *Error) WithAnswer(s string) *Error {
	c := *e
	c.answer = s
	return &c
}

// Answer is the message an API shows for e, or "" to show the chain's text.
func (e *Error) Answer() string { return e.answer }

// ErrorCode returns the code.
func (e *Error) ErrorCode() ErrorCode { return e.code }

// Code classifies err: OK for nil; else the code of the first error in its
// chain that has one (a Coder), so the outermost classification wins; else
// Canceled or DeadlineExceeded for an ended context; else Unknown.
func Code(err error) ErrorCode {
	if err == nil {
		return OK
	}
	var c Coder
	if errors.As(err, &c) {
		return c.ErrorCode()
	}
	switch {
	case errors.Is(err, context.Canceled):
		return Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return DeadlineExceeded
	}
	return Unknown
}

// FieldError is invalid input: it names the input field at fault and says
// why. It is the one validation error of baton (schedules, GPU jobs, the
// rent calculator); the HTTP layer answers it with a 400 whose field is
// Field and whose message is Reason.
type FieldError struct {
	// Field is the JSON path or query parameter at fault, such as
	// "target.http.url"; empty when the input as a whole is wrong.
	Field string
	// Reason is a sentence for people, without the field name.
	Reason string
	// Err is an optional kind that callers branch on with errors.Is, such
	// as rent.ErrNegative; nil when the reason is only for people.
	Err error
}

// Error returns "field: reason", or the reason alone without a field.
func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// Unwrap returns Err, so errors.Is(err, rent.ErrNegative) works.
func (e *FieldError) Unwrap() error { return e.Err }

// ErrorCode is InvalidArgument, whatever Err's code.
func (e *FieldError) ErrorCode() ErrorCode { return InvalidArgument }
