// Package storetest is the conformance suite of baton's storage layer: the
// guarantees every implementation must give, run against each of them by
// one call, Run. It is modelled on river's riverdrivertest and go-cloud
// docstore's drivertest: the suite owns the cases, and an implementation
// supplies only a Harness that opens stores (and, if it can, injects
// faults).
//
// Today the storage layer is shared/store (store.Store and
// store.Collection over the MongoDB API), and the cases pin what baton's
// domain code relies on it for:
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
// The suite is meant to grow: when the domain-shaped interfaces of the
// storage seam (schedules, runs, GPU slots) exist, their cases go here too,
// beside these, and Harness gains the methods that open them.
//
// shared/store/conformance_test.go runs the suite against the embedded
// emulator in make test, and against any MongoDB-API endpoint named by
// BATON_TEST_MONGO_URI (docs/deploy.md has the command).
package storetest
