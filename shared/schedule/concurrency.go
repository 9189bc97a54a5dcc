package schedule

import "regexp"

// Concurrency puts a schedule in a concurrency group: at most Limit runs of
// the group's schedules execute at once, across schedules. A run that finds
// the group full is not dropped: it stays pending, recorded waiting for the
// group (Run.WaitingFor), and runs when a slot frees, the oldest fire time
// of the group first. Slots are leases (group-<name>-<k>, k in [0, Limit));
// see shared/scheduler/group.go.
//
// Schedules of one group should carry the same Limit. When they differ,
// each run counts against its own schedule's Limit: it may take one of the
// first Limit slots only. So the group never runs more than the largest
// Limit at once, and a schedule with a smaller Limit starts only while one of
// its first Limit slots is free. (Refusing the write instead would need a
// read of the group's other schedules on every write, and would still race
// two concurrent writes.)
type Concurrency struct {
	// Group is the group's name (GroupPattern).
	Group string `bson:"group" json:"group"`
	// Limit is how many of the group's runs may execute at once, 1 to
	// MaxConcurrencyLimit.
	Limit int `bson:"limit" json:"limit"`
}

// MaxConcurrencyLimit bounds Concurrency.Limit: each slot is a lease object
// that a run may have to try, so a larger group costs reads per run.
const MaxConcurrencyLimit = 100

// GroupPattern is what a concurrency group's name must match: it becomes
// part of lease object names (group-<name>-<k>).
var GroupPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// validate checks the group against the schedule's target: a gpu target's
// run outlives its executor (the GPU pool finishes it), so no slot could be
// held for as long as it runs; the GPU pool has its own slots.
func (c *Concurrency) validate(t Target) error {
	if c.Group == "" {
		return fieldErr("concurrency.group", "is required")
	}
	if !GroupPattern.MatchString(c.Group) {
		return fieldErr("concurrency.group", "%q must match %s (lower-case letters, digits, '-' and '_', at most 63 characters, starting with a letter or digit)", c.Group, GroupPattern)
	}
	if c.Limit < 1 || c.Limit > MaxConcurrencyLimit {
		return fieldErr("concurrency.limit", "is %d; want 1 to %d", c.Limit, MaxConcurrencyLimit)
	}
	if t.Type == TargetGPU {
		return fieldErr("concurrency", "is not supported for gpu targets: a GPU job outlives its executor, and the GPU pool bounds its own concurrency")
	}
	return nil
}
