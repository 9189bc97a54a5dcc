package doctor

// SetBeforeProbe makes Deep call f as each probe starts, until restore is
// called: a test interrupts a run at a known command with it.
func SetBeforeProbe(f func(name string)) (restore func()) {
	beforeProbe = f
	return func() { beforeProbe = nil }
}
