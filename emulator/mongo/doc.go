// Package mongo runs an embedded MongoDB API that behaves like Firestore with
// MongoDB compatibility closely enough for baton's tests and local stack.
//
// It is FerretDB v1 (SQLite backend) in-process, behind a small wire-protocol
// front of our own. The front exists because FerretDB v1's conditional
// findOneAndUpdate and updateOne are not atomic (it queries, then writes by
// _id without re-checking the filter), and because Firestore refuses things
// FerretDB accepts. See front.go.
package mongo
