// Package gcs runs an embedded Cloud Storage emulator: fake-gcs-server
// (github.com/fsouza/fake-gcs-server) in-process, behind a small HTTP front
// of our own that enforces the preconditions baton's lease relies on.
//
// fake-gcs-server v1.56.1 enforces ifGenerationMatch and ifGenerationNotMatch
// on uploads, atomically inside its backend, and answers 412. It ignores
// ifGenerationMatch, ifGenerationNotMatch, ifMetagenerationMatch and
// ifMetagenerationNotMatch on DELETE and on metadata PATCH/update, and
// ifMetagenerationMatch on uploads: a stale conditional delete deletes. Real
// GCS answers 412 conditionNotMet. The front (front.go) checks those
// preconditions against the live object and forwards only when they hold.
// It serialises check-then-forward per object, so the check and the act are
// atomic with respect to every other named write through the front.
//
// The server listens on 127.0.0.1, so other processes reach it through
// STORAGE_EMULATOR_HOST=Host(). Its public host is set to that address, so
// the Go client's XML-API reads (its default for downloads) are served too.
package gcs
