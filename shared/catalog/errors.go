package catalog

import "errors"

// Sentinel errors. Callers (and NewHandler) branch on these with errors.Is.
// Invalid input is reported as a *schedule.FieldError instead, which names
// the field.
var (
	// ErrNotFound: no schedule has the id. HTTP 404.
	ErrNotFound = errors.New("catalog: schedule not found")
	// ErrExists: Create was given an id that is already taken. HTTP 409.
	ErrExists = errors.New("catalog: a schedule with this id already exists")
	// ErrVersionMismatch: the caller's precondition (If-Match) names a
	// version other than the stored one. HTTP 412.
	ErrVersionMismatch = errors.New("catalog: schedule version does not match")
	// ErrBusy: an unconditional update lost the race for the stored
	// version several times in a row. HTTP 409; retrying is safe.
	ErrBusy = errors.New("catalog: schedule is being changed concurrently")
	// ErrNoTrigger: the service was built without a Triggerer. HTTP 503.
	ErrNoTrigger = errors.New("catalog: manual trigger is not configured")
)
