package lease

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Callers branch on these with errors.Is.
var (
	// ErrHeld: another live holder has the lease. The error is a *HeldError.
	ErrHeld = errors.New("lease: held by another holder")
	// ErrLost: the lease was lost while held: a renew got 412 (someone else
	// took it or broke it), or the trust window closed without a renew.
	ErrLost = errors.New("lease: lost")
	// ErrNotHeld: the operation needs a held lease and this one is not held
	// (already released). Lease.Err returns it after a clean Release.
	ErrNotHeld = errors.New("lease: not held")
	// ErrNotFound: the lease is free (never acquired, released or broken).
	ErrNotFound = errors.New("lease: not found (free)")
	// ErrBadTTL: the ttl is too short for a heartbeat to fit in the trust
	// window, or the options are inconsistent.
	ErrBadTTL = errors.New("lease: bad ttl")
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
