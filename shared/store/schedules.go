package store

// Schedules is the scheduler's view of the schedules collection: the due
// query, the fenced advance, and the misfire flag.
type Schedules interface{}
