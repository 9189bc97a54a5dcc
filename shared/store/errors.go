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
	// ErrUnknownOutcome: a write failed in a way that does not say whether
	// it was applied (DeadlineExceeded 262, MaxTimeMSExpired 50, a write
	// concern error, a dropped connection, a context that ended), and
	// nothing afterwards settled it. It never wraps ErrConflict: a caller
	// must read back, or leave the decision to a later sweep, rather than
	// take the write for refused. A conditional write is not retried after
	// such an error, because a retry of a write that landed would miss its
	// own condition and report a conflict for the caller's own write.
	ErrUnknownOutcome = errors.New("store: outcome unknown (the write may or may not have been applied)")
	// ErrRetryableWrites: the URI asks for retryable writes, which Firestore
	// does not support.
	ErrRetryableWrites = errors.New("store: retryWrites=true is not supported: Firestore with MongoDB compatibility has no retryable writes; use retryWrites=false (baton makes every write idempotent instead)")
	// ErrBadPageToken: a page token was malformed, tampered with, or issued
	// for a different query.
	ErrBadPageToken = errors.New("store: invalid page token")
)
