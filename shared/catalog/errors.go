package catalog

import (
	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/store"
)

// Sentinel errors. Callers branch on these with errors.Is; the HTTP layer
// answers them by their errcode.Code (httpapi.From), named in each comment
// with its status. Invalid input is reported as a *schedule.FieldError
// instead, which names the field.
var (
	// ErrNotFound: no schedule has the id. It is a store.ErrNotFound:
	// NotFound, HTTP 404.
	ErrNotFound = errcode.Wrap(errcode.NotFound, store.ErrNotFound, "catalog: schedule not found").WithAnswer("no such schedule")
	// ErrRunNotFound: no run has the id. It is a store.ErrNotFound:
	// NotFound, HTTP 404 (the handler names the id).
	ErrRunNotFound = errcode.Wrap(errcode.NotFound, store.ErrNotFound, "catalog: run not found").WithAnswer("no such run")
	// ErrExists: Create was given an id that is already taken.
	// AlreadyExists, HTTP 409.
	ErrExists = errcode.New(errcode.AlreadyExists, "catalog: a schedule with this id already exists").WithAnswer("a schedule with this id already exists")
	// ErrVersionMismatch: the caller's precondition (If-Match) names a
	// version other than the stored one. FailedPrecondition, HTTP 412: GET
	// it again and retry.
	ErrVersionMismatch = errcode.New(errcode.FailedPrecondition, "catalog: schedule version does not match").
				WithAnswer("the schedule has changed since the version in If-Match; GET it again and retry")
	// ErrBusy: an unconditional update lost the race for the stored
	// version several times in a row. Conflict, HTTP 409; retrying is safe.
	ErrBusy = errcode.New(errcode.Conflict, "catalog: schedule is being changed concurrently").WithAnswer("the schedule is being changed concurrently; retry")
	// ErrNoTrigger: the service was built without a Triggerer.
	// Unavailable, HTTP 503.
	ErrNoTrigger = errcode.New(errcode.Unavailable, "catalog: manual trigger is not configured").WithAnswer("manual trigger is not available in this deployment")
)
