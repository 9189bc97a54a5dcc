package store

import "github.com/baton-cron/baton/shared/errcode"

// Sentinel errors. Callers branch on these with errors.Is, or on their
// errcode.Code, which each one carries (named in its comment); the domain
// packages wrap them, so errcode.Code of a domain error is the storage
// code unless the domain refines it.
var (
	// ErrNotFound: no document matched a read by id. NotFound.
	ErrNotFound = errcode.New(errcode.NotFound, "store: not found")
	// ErrConflict: a conditional write matched nothing because the condition
	// (an old value, a version) no longer holds. Aborted: a concurrent
	// change won, and a retry of the whole operation will see it.
	ErrConflict = errcode.New(errcode.Aborted, "store: conflict")
	// ErrStaleFence: a fenced write was refused because a holder with a newer
	// epoch has written. It wraps ErrConflict, yet its code is
	// StaleFence: the caller must stop, not retry.
	ErrStaleFence = errcode.Wrap(errcode.StaleFence, ErrConflict, "store: conflict: stale fencing token")
	// ErrContended: a write met Firestore's Aborted (112, "too much
	// contention" on a hot document) on every attempt of its retry budget.
	// Each 112 says the attempt did not commit, so the write was not
	// applied. It wraps ErrConflict: a racer (a claim, a compare-and-set)
	// that hears it has lost as cleanly as to a changed condition, and
	// whatever made the document hot (another writer) will be seen by a
	// retry of the whole operation. A caller for whom ErrConflict means
	// "the condition no longer holds, stop" (a holder's heartbeat, an
	// If-Match update) must test ErrContended first: its condition may
	// still hold, and only the write failed. Aborted.
	ErrContended = errcode.Wrap(errcode.Aborted, ErrConflict, "store: conflict: contention outlasted the retries (Aborted 112); the write was not applied")
	// ErrUnknownOutcome: a write failed in a way that does not say whether
	// it was applied (DeadlineExceeded 262, MaxTimeMSExpired 50, a write
	// concern error, a dropped connection, a context that ended), and
	// nothing afterwards settled it. It never wraps ErrConflict: a caller
	// must read back, or leave the decision to a later sweep, rather than
	// take the write for refused. A conditional write is not retried after
	// such an error, because a retry of a write that landed would miss its
	// own condition and report a conflict for the caller's own write.
	// UnknownOutcome.
	ErrUnknownOutcome = errcode.New(errcode.UnknownOutcome, "store: outcome unknown (the write may or may not have been applied)")
	// ErrRetryableWrites: the URI asks for retryable writes, which Firestore
	// does not support. InvalidArgument.
	ErrRetryableWrites = errcode.New(errcode.InvalidArgument, "store: retryWrites=true is not supported: Firestore with MongoDB compatibility has no retryable writes; use retryWrites=false (baton makes every write idempotent instead)")
	// ErrBadPageToken: a page token was malformed, tampered with, or issued
	// for a different query. InvalidArgument.
	ErrBadPageToken = errcode.New(errcode.InvalidArgument, "store: invalid page token")
	// ErrUnindexed: a list was asked for a combination of filters that no
	// index serves (RunFilter.Indexed); it is refused rather than run as a
	// scan billed for every document. InvalidArgument.
	ErrUnindexed = errcode.New(errcode.InvalidArgument, "store: no index serves this combination of filters")
)
