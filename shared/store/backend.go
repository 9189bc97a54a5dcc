package store

import "context"

// Backend is one database holding all of baton's state, seen through the
// domain-shaped interfaces its packages use: Schedules and Runs (the
// scheduler's run path), Catalog (the Schedules API) and GPU (the GPU
// queue). Each interface names what the domain does, not how a database
// does it, and each method documents its guard (the condition under which
// it writes), the error it returns when the guard does not hold, and what
// it guarantees when the write landed but its answer was lost.
//
// shared/store/mongostore is the implementation over the MongoDB API
// (Firestore with MongoDB compatibility, and the embedded emulator);
// shared/store/storetest is the conformance suite every implementation
// must pass.
type Backend interface {
	// Schedules is the scheduler's view of the schedules.
	Schedules() Schedules
	// Runs is the scheduler's view of the runs.
	Runs() Runs
	// Catalog is the Schedules API's view of schedules and their runs.
	Catalog() Catalog
	// Calendars is the calendars, read by the API and the tick.
	Calendars() Calendars
	// GPU is the GPU queue: jobs and worker slots.
	GPU() GPU
	// Meter counts the documents every view reads and writes.
	Meter() *Meter
	// Close releases the connection.
	Close(ctx context.Context) error
}
