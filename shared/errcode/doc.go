// Package errcode is baton's one error-code contract, in the way of
// go-cloud's gcerrors: every package classifies its own errors with an
// ErrorCode, and code that must act on an error (the HTTP layer choosing a
// status, a caller deciding whether to retry) asks Code(err) instead of
// knowing each package's sentinels.
//
// A sentinel is made with New (or Wrap, to refine the code of an error it
// wraps), so errors.Is still finds it by identity and Code finds its code
// through any chain of fmt.Errorf("...: %w") wrapping. A domain sentinel that
// means the same as a storage one wraps it with fmt.Errorf and so inherits
// its code: catalog's ErrNotFound is a store.ErrNotFound.
//
// The package imports only the standard library, so the HTTP layer, the
// storage layer and leaf packages such as shared/rent can all depend on it.
package errcode
