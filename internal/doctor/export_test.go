package doctor

// SetAfterProbe makes Deep call f after each probe, until the test ends:
// a test interrupts a run at a known point with it.
func SetAfterProbe(f func(name string)) (restore func()) {
	afterProbe = f
	return func() { afterProbe = nil }
}
