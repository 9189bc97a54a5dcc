package rent

import (
	"errors"
	"fmt"
)

// Reasons a field is refused. Callers branch with errors.Is on a
// *FieldError; the message is for people.
var (
	// ErrMissing: a required field is absent.
	ErrMissing = errors.New("missing")
	// ErrSyntax: the value is not a number of the expected form.
	ErrSyntax = errors.New("malformed")
	// ErrNegative: an amount or rate is below zero.
	ErrNegative = errors.New("negative")
	// ErrRange: the value is outside the accepted range, or a result would
	// not fit in int64 won.
	ErrRange = errors.New("out of range")
	// ErrConflict: fields that contradict each other (a deposit above the
	// jeonse, both directions at once).
	ErrConflict = errors.New("conflicting fields")
	// ErrUnknown: a field or parameter this calculator does not take.
	ErrUnknown = errors.New("unknown field")
)

// FieldError names the input field at fault and why.
type FieldError struct {
	// Field is the JSON field or query parameter, e.g. "jeonse".
	Field string
	// Reason is one of the Err* sentinels above.
	Reason error
	// Message is a sentence for people, without the field name.
	Message string
}

// Error implements error.
func (e *FieldError) Error() string { return "rent: " + e.Field + ": " + e.Message }

// Unwrap returns the reason, so errors.Is(err, rent.ErrNegative) works.
func (e *FieldError) Unwrap() error { return e.Reason }

func fieldErr(field string, reason error, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Reason: reason, Message: fmt.Sprintf(format, args...)}
}
