// Package wire names what a MongoDB command uses, without its values: the
// command, its options, its pipeline stages and its query, update,
// projection and index operators. That list (a Shape) is what Firestore
// with MongoDB compatibility either supports or refuses, so the Mongo
// emulator's allowlist (emulator/mongo/allowlist.go) checks shapes, and
// mongostore records the shapes it sends (Recorder) for the wire inventory
// that `make test` checks against the allowlist.
//
// The package depends on the BSON library and the driver's event types
// only: the functions link it through mongostore, and must not link the
// emulators.
package wire
