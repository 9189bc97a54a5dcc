package rent

import (
	"fmt"

	"github.com/baton-cron/baton/shared/errcode"
)

// Reasons a field is refused. Callers branch with errors.Is on a
// *FieldError; its Reason is for people. Each is InvalidArgument.
var (
	// ErrMissing: a required field is absent.
	ErrMissing = errcode.New(errcode.InvalidArgument, "missing")
	// ErrSyntax: the value is not a number of the expected form.
	ErrSyntax = errcode.New(errcode.InvalidArgument, "malformed")
	// ErrNegative: an amount or rate is below zero.
	ErrNegative = errcode.New(errcode.InvalidArgument, "negative")
	// ErrRange: the value is outside the accepted range, or a result would
	// not fit in int64 won.
	ErrRange = errcode.New(errcode.InvalidArgument, "out of range")
	// ErrConflict: fields that contradict each other (a deposit above the
	// jeonse, both directions at once).
	ErrConflict = errcode.New(errcode.InvalidArgument, "conflicting fields")
	// ErrUnknown: a field or parameter this calculator does not take.
	ErrUnknown = errcode.New(errcode.InvalidArgument, "unknown field")
)

// FieldError names the input field at fault and why: Field is the JSON
// field or query parameter (e.g. "jeonse"), Err one of the Err* sentinels
// above, and Reason a sentence for people without the field name. It is
// errcode.FieldError, baton's one validation error, so the HTTP layer
// answers it like any other: a 400 naming the field.
type FieldError = errcode.FieldError

func fieldErr(field string, reason error, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Err: reason, Reason: fmt.Sprintf(format, args...)}
}
