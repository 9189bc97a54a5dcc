package store

import "context"

// Runs is the scheduler's view of the runs collection: deterministic-id
// inserts, claims, heartbeats, outcomes and the sweeps.
type Runs interface {
	// HighestFence is the highest job lease epoch recorded as the fence of
	// any run of schedule scheduleID (0 when none): part of its job
	// lease's epoch floor. One indexed read. It writes nothing.
	HighestFence(ctx context.Context, scheduleID string) (int64, error)
}
