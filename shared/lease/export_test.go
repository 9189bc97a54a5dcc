package lease

import (
	"context"
	"time"
)

// SetBeforeRenew installs a hook run before each renew (it may block, to
// simulate a paused holder). Tests only.
func SetBeforeRenew(m *Manager, f func(name string)) { m.beforeRenew = f }

// Stopping reports whether Release has asked l's heartbeat to stop. Tests
// only.
func Stopping(l *Lease) bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// TrustEnd returns the end of l's trust window. Tests only.
func TrustEnd(l *Lease) time.Time { return l.trustEnd() }

// ReleaseFreeState releases l by writing the free state to its object, as
// Release does when the marker cannot be written. Tests only: the fail
// point that would refuse the marker is the one the test needs for the
// free-state write.
func ReleaseFreeState(ctx context.Context, l *Lease) error {
	l.noMarker = true
	return l.Release(ctx)
}
