package store

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers branch on these with errors.Is.
var (
	// ErrNotFound: no document matched a read by id.
	ErrNotFound = errors.New("store: not found")
	// ErrConflict: a conditional write matched nothing because the condition
	// (an old value, a version) no longer holds.
	ErrConflict = errors.New("store: conflict")
	// ErrStaleFence: a fenced write was refused because a holder with a newer
	// epoch has written. It wraps ErrConflict.
	ErrStaleFence = fmt.Errorf("%w: stale fencing token", ErrConflict)
	// ErrRetryableWrites: the URI asks for retryable writes, which Firestore
	// does not support.
	ErrRetryableWrites = errors.New("store: retryWrites=true is not supported: Firestore with MongoDB compatibility has no retryable writes; use retryWrites=false (baton makes every write idempotent instead)")
	// ErrBadPageToken: a page token was malformed, tampered with, or issued
	// for a different query.
	ErrBadPageToken = errors.New("store: invalid page token")
)
