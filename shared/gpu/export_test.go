package gpu

// SetEmptyFillHook lets a test act in the window between fill finding no
// queued job and freeing the slot it holds.
func SetEmptyFillHook(d *Dispatcher, f func()) { d.testHookEmptyFill = f }
