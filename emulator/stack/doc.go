// Package stack starts baton's whole local stack in one process: the Mongo
// emulator (FerretDB behind baton's front), the GCS emulator
// (fake-gcs-server behind baton's precondition front), every function on one
// HTTP port (functions.Mux), and a Cloud Scheduler emulator that calls /Tick.
// `baton local` is a thin command around Start; the end-to-end tests in
// tests/ use it with port 0.
//
// Start order is mongo, gcs (and the bucket), store, the HTTP server, hooks
// (local GPU workers and the like), then the scheduler. Close undoes it in
// reverse and gracefully: the scheduler stops and its tick in flight
// finishes, hooks stop, the HTTP server drains its requests
// (http.Server.Shutdown), then the clients and emulators close.
package stack
