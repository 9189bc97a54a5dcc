package gpu

// SetEmptyFillHook lets a test act in the window between fill finding no
// queued job and freeing the slot it holds.
func SetEmptyFillHook(d *Dispatcher, f func()) { d.testHookEmptyFill = f }

// TenantHint is the single-tenant hint kept for slotID's type, whatever
// its age: the tenant and whether that read found it alone.
func TenantHint(d *Dispatcher, slotID string) (tenant string, single bool) {
	d.hintMu.Lock()
	defer d.hintMu.Unlock()
	h := d.hint[d.types[slotID]]
	return h.tenant, h.single
}
