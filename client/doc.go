// Package client is the Go client of baton's HTTP API: the Schedules
// function's schedules, runs and calendars, typed with the same model types
// the server uses (shared/schedule). The CLI and the console use it; so
// can any Go program that manages schedules.
//
// Lists are iterators (iter.Seq2) that fetch one keyset page at a time;
// the Page methods give single pages. Every object carries its version,
// which is its ETag: pass IfMatch(obj.Version) to a write so that it
// fails with a FailedPrecondition *Error when someone else changed the
// object since it was read. Errors are *Error values carrying the API's
// stable code; errors.As them, or branch on errcode.Code(err).
//
// A request is retried only where that cannot apply it twice: a GET on a
// transport failure or a 429/502/503/504 answer, and any request on a
// baton 429 or 503 answer, which says the server applied nothing.
package client
