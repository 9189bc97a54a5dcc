// Package mongo runs an embedded MongoDB API that behaves like Firestore with
// MongoDB compatibility closely enough for baton's tests and local stack.
//
// It is FerretDB v1 (SQLite backend) in-process, behind a small wire-protocol
// front of our own (front.go). The front exists for two reasons:
//
//   - FerretDB v1's conditional findOneAndUpdate and updateOne are not
//     atomic: it queries, then writes by _id without re-checking the filter,
//     so racing compare-and-sets can all "win". The front runs write
//     commands (insert, update, delete, findAndModify) one at a time, which
//     makes them atomic. Reads run concurrently.
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
// For fault tests, the front also implements mongod's failCommand fail
// point (configureFailPoint), with a namespace filter of baton's own
// (failpoint.go).
//
// Start returns a running Server; URI is what clients dial. See
// docs/emulators-mongo.md for measurements and the differences from
// Firestore.
package mongo
