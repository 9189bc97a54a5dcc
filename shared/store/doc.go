// Package store is the contract between baton's domain packages and its
// database: the domain-shaped interfaces (Backend and its views Schedules,
// Runs, Catalog and GPU), the fencing token (Fence), the Meter that counts
// documents read and written, and the errors every implementation returns
// (ErrNotFound, ErrConflict, ErrStaleFence, ErrContended, ErrUnknownOutcome,
// ErrBadPageToken), each carrying an errcode.Code that the HTTP layer
// answers by.
//
// The domain packages (shared/scheduler, shared/gpu, shared/catalog) import
// this package and never a database driver. Fencing and idempotency are the
// implementation's: each rule is written once, inside the method that
// needs it, and documented on the interface, including what the method
// guarantees when its write landed but the answer was lost.
//
// shared/store/mongostore implements the contract over the MongoDB API
// (Firestore with MongoDB compatibility, and the embedded emulator).
// shared/store/memstore is an in-memory implementation for benchmarks and
// simulations (baton bench scale), never for correctness tests the
// emulator can run.
// shared/store/storetest is the conformance suite every implementation
// must pass; it runs against the emulator in make test, and against a real
// database named by BATON_TEST_MONGO_URI (docs/deploy.md).
package store
