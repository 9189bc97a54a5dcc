package store

// Runs is the scheduler's view of the runs collection: deterministic-id
// inserts, claims, heartbeats, outcomes and the sweeps.
type Runs interface{}
