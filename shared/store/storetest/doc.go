// Package storetest is the conformance suite of baton's storage layer: the
// guarantees every implementation must give, run against each of them by
// one call, Run. It is modelled on river's riverdrivertest and go-cloud
// docstore's drivertest: the suite owns the cases, and an implementation
// supplies only a Harness that opens stores (and, if it can, injects
// faults).
//
// The cases come in two layers. The domain cases run through the
// store.Backend the harness opens, and pin the rules the domain packages
// rely on, each written once inside the implementation:
//
//   - Runs: a claim moves a run out of pending once (of 20 racers exactly
//     one wins; a running or finished run is refused), the run's writes
//     are fenced by the job lease epoch and guarded by its status, the
//     deterministic-id insert is idempotent, and a lost answer is settled
//     by reading back or reported ErrUnknownOutcome, never ErrConflict;
//   - Schedules: the advance is guarded on the nextRunAt it read (of 20
//     racers one wins) and fenced by the tick lease epoch, the misfire
//     flag is set, joined and cleared once, the due query returns exactly
//     the due schedules, and watching is optional (ErrCannotWatch);
//   - Catalog: versioned updates win once, creates are idempotent,
//     deletes are conditional, lists are keyset pages;
//   - GPU: slot claims and job claims win once, the queue order is
//     priority then age, every callback is fenced by the slot's epoch,
//     enqueue is idempotent, and lost answers are ErrUnknownOutcome.
//
// The primitive cases run on the MongoDB implementation's Collection
// (mongostore.Collection), the building block every domain method is made
// of:
//
//   - compare-and-set is atomic: of 20 racing conditional writes exactly
//     one wins, and of 20 racing fenced writes the newest epoch wins;
//   - InsertIdempotent with a deterministic _id inserts once, however many
//     twins race it;
//   - fences refuse a stale epoch (ErrStaleFence, which wraps ErrConflict),
//     allow an equal or newer one and record the newer; a filter miss
//     under a fence that is not newer is ErrConflict, not ErrStaleFence;
//   - keyset pages cover every document exactly once, in order, with
//     equal sort keys and with inserts running during the scan;
//   - the Meter counts the documents returned, and the fence check of a
//     refused FencedUpdate;
//   - the error codes (ErrNotFound, ErrConflict, ErrStaleFence,
//     ErrUnknownOutcome), their errors.Is relations, and the errcode.Code
//     of each error an operation returns (NotFound, Aborted, StaleFence,
//     UnknownOutcome), which the HTTP layer answers by;
//   - under injected faults: Aborted (112) is retried to success, and a
//     write that landed but whose answer was lost (262) is reported as
//     ErrUnknownOutcome for a conditional write, never ErrConflict, and as
//     inserted=false, nil for an insert.
//
// Fault cases need the server's help (MongoDB's failCommand fail point,
// which baton's emulator implements); a Harness that cannot inject faults
// says so, and those cases are skipped with its reason.
//
// A Backend other than mongostore runs the suite with RunBackend and a
// BackendHarness: the domain cases run on it, and the primitive cases,
// which test mongostore's Collection, skip with that reason.
// shared/store/memstore/conformance_test.go runs it so against the
// in-memory store, whose own injector stands in for the fail point.
//
// shared/store/mongostore/conformance_test.go runs the suite against the
// embedded emulator in make test, and against any MongoDB-API endpoint
// named by BATON_TEST_MONGO_URI (docs/deploy.md has the command).
package storetest
