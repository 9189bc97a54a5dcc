// Package runjobs is an in-process emulator of the subset of the Cloud Run
// Admin API v2 that baton's cloudRunJob target uses, served over gRPC and
// talked to by the official client (cloud.google.com/go/run/apiv2) pointed
// at Addr() (Server.ClientOptions). Each job is a shell command on this
// machine; each task of an execution runs it as a local process, with the
// execution's args and env overrides and the CLOUD_RUN_* variables Cloud
// Run sets.
//
// Served: Jobs.GetJob and Jobs.RunJob (returning the long-running
// operation whose metadata is the execution), Executions.GetExecution,
// ListExecutions and CancelExecution, and Operations.GetOperation (done when
// the execution is). Everything else answers Unimplemented.
//
// With Options.Dir, executions are journalled there and each task runs in
// its own session, outliving the emulator; a Start on the same Dir replays
// the journal, so an execution survives a restart and ends once, from its
// tasks' real exit statuses (journal.go describes the files). Where it differs
// from Google's service is in docs/emulators-runjobs.md.
package runjobs
