// Package store is baton's data layer over Firestore with MongoDB
// compatibility, on go.mongodb.org/mongo-driver/v2.
//
// Firestore does not support retryable writes, so Open insists on
// retryWrites=false. With driver retries off, an application retry must not
// duplicate anything, so the package offers only idempotent writes:
//
//   - InsertIdempotent takes a deterministic _id and treats a duplicate key as
//     "already done";
//   - UpdateOne, FindOneAndUpdate and DeleteOne are conditional, and return
//     ErrConflict when the condition no longer holds;
//   - FencedUpdate adds a fencing-token condition (a lease epoch), and returns
//     ErrStaleFence when a newer holder has written since; its filter must
//     hold the document's _id, by which a refused write is re-read.
//
// Firestore bills per document read, and skip(N) still reads the N documents
// it skips, so lists page with a keyset cursor (Page) and every read is
// counted by a Meter. PageSkip exists only as the baseline for benchmarks, and
// meters the skipped documents as read.
package store
