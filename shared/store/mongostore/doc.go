// Package mongostore is baton's implementation of the storage contract
// (shared/store.Backend) over Firestore with MongoDB
// compatibility, on go.mongodb.org/mongo-driver/v2.
//
// Firestore does not support retryable writes, so Open insists on
// retryWrites=false. With driver retries off, an application retry must not
// duplicate anything, so the package offers only idempotent writes:
//
//   - InsertIdempotent takes a deterministic _id and treats a duplicate key as
//     "already done", and, not relying on that one code, reads the _id back
//     after any other error: a document of the same kind there is "already
//     done" too;
//   - UpdateOne, FindOneAndUpdate and DeleteOne are conditional, and return
//     ErrConflict when the condition no longer holds;
//   - FencedUpdate adds a fencing-token condition (a lease epoch), and returns
//     ErrStaleFence when a newer holder has written since; its filter must
//     hold the document's _id, by which a refused write is re-read.
//
// Firestore answers Aborted (112, not applied) and DeadlineExceeded (262,
// maybe applied) under contention. Every write is retried after 112, a
// bounded few times with jittered backoff (retryWrite); a conditional
// write whose every attempt met one reports ErrContended, a conflict
// (nothing was applied). After 262 only an
// insert is retried, since its retry can only answer a duplicate; a
// conditional write is not, because a retry of a write that landed would
// miss its own condition and report ErrConflict for the caller's own
// write. It returns ErrUnknownOutcome, which wraps neither ErrConflict nor
// ErrStaleFence, as does any write that may have landed (a lost
// connection, a write concern error). docs/emulators-mongo.md has the
// whole table of codes.
//
// Firestore bills per document read, and skip(N) still reads the N documents
// it skips, so lists page with a keyset cursor (Page) and every read is
// counted by a Meter. (The skip/limit baseline the benchmarks compare with
// is internal/skipscan, outside the store.)
//
// The guarantees above are pinned by one conformance suite,
// shared/store/storetest, which every implementation must pass; it runs
// against the emulator in make test, and against a real database named by
// BATON_TEST_MONGO_URI (docs/deploy.md).
package mongostore
