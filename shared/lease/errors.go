package lease

import (
	"fmt"
	"time"

	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/store"
)

// Sentinel errors. Callers branch on these with errors.Is, or on the
// errcode.Code named in each comment.
var (
	// ErrHeld: another live holder has the lease. The error is a *HeldError.
	// Conflict.
	ErrHeld = errcode.New(errcode.Conflict, "lease: held by another holder")
	// ErrLost: the lease was lost while held: a renew got 412 (someone else
	// took it or broke it), or the trust window closed without a renew.
	// Aborted: the work under it must stop and may start again under a
	// new lease.
	ErrLost = errcode.New(errcode.Aborted, "lease: lost")
	// ErrNotHeld: the operation needs a held lease and this one is not held
	// (already released). Lease.Err returns it after a clean Release.
	// FailedPrecondition.
	ErrNotHeld = errcode.New(errcode.FailedPrecondition, "lease: not held")
	// ErrNotFound: the lease is free (never acquired, released or broken).
	// It is a store.ErrNotFound: NotFound.
	ErrNotFound = errcode.Wrap(errcode.NotFound, store.ErrNotFound, "lease: not found (free)")
	// ErrBadTTL: the ttl is too short for a heartbeat to fit in the trust
	// window, or the options are inconsistent. InvalidArgument.
	ErrBadTTL = errcode.New(errcode.InvalidArgument, "lease: bad ttl")
	// ErrBadPageToken: a ListPage token that ListPage did not issue for
	// this prefix (made up, edited, or from another list). It is a
	// store.ErrBadPageToken: InvalidArgument.
	ErrBadPageToken = errcode.Wrap(errcode.InvalidArgument, store.ErrBadPageToken, "lease: invalid page token")
)

// HeldError says who holds a lease and until when it is theirs. It matches
// ErrHeld under errors.Is.
type HeldError struct {
	// Name is the lease name.
	Name string
	// Holder is the live holder's id.
	Holder string
	// Epoch is the live holder's fencing epoch.
	Epoch int64
	// ExpiresAt is the object's Updated + ttl + skew: the earliest time a
	// contender may take over if the holder stops renewing.
	ExpiresAt time.Time
}

// Error names the lease, its holder and when a contender may take over.
func (e *HeldError) Error() string {
	return fmt.Sprintf("lease %q: held by %s (epoch %d) until %s", e.Name, e.Holder, e.Epoch, e.ExpiresAt.UTC().Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// ErrorCode is ErrHeld's code, Conflict, for errcode.Code.
func (e *HeldError) ErrorCode() errcode.ErrorCode { return ErrHeld.ErrorCode() }
