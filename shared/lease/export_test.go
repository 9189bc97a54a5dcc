package lease

import "time"

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
