// Package mongo runs an embedded MongoDB API that behaves like Firestore with
// MongoDB compatibility closely enough for baton's tests and local stack.
//
// It is FerretDB v1 (SQLite backend) in-process, behind a small wire-protocol
// front of our own (front.go). The front exists for two reasons:
//
//   - FerretDB v1's conditional findOneAndUpdate and updateOne are not
//     atomic: it queries, then writes by _id without re-checking the filter,
//     so racing compare-and-sets can all "win". The front lets one write at
//     a time touch a document (contention.go), which makes them atomic;
//     in strict mode a write that overlaps another on its document gets
//     112, as Firestore answers Aborted under contention. Reads run
//     concurrently.
//   - Firestore refuses things FerretDB accepts or fakes. The front answers
//     retryable writes (any command carrying txnNumber), transactions and
//     $changeStream with an error that says why, and forwards nothing.
//     In strict mode it also refuses any command, option, stage or
//     operator that Google's pages do not list as supported: the
//     allowlist (allowlist.go), one entry per feature with its page.
//
// The front answers explain itself (explain.go), with a plan computed from
// the collection's indexes and named as Firestore's Query Explain names
// its nodes (IndexScan, TableScan), since FerretDB's explain says nothing
// about indexes; baton doctor --deep judges the hot queries by it.
//
// Strict mode (the default; Options.Lax turns it off) also requires load
// balanced handshakes and adds serviceId to their hello (strict.go),
// shuffles unsorted results (order.go) and enforces Firestore's document
// limits (limits.go).
//
// For fault tests, the front also implements mongod's failCommand fail
// point (configureFailPoint), with a namespace filter of baton's own
// (failpoint.go).
//
// Start returns a running Server; URI is what clients dial. See
// docs/emulators-mongo.md for measurements and the differences from
// Firestore.
package mongo
