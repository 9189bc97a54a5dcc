package lease

// SetBeforeRenew installs a hook run before each renew (it may block, to
// simulate a paused holder). Tests only.
func SetBeforeRenew(m *Manager, f func(name string)) { m.beforeRenew = f }
