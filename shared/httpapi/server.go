package httpapi

import (
	"net/http"
	"time"
)

// Timeouts bound how long one client may hold a connection of a baton
// server. With ReadHeaderTimeout alone, a client that sent its headers
// could trickle the body for ever, holding a connection and a goroutine;
// Read bounds the whole request, body included, and Idle a kept-alive
// connection between requests. Zero fields mean none (Go's default).
type Timeouts struct {
	// ReadHeader bounds reading the request line and headers.
	ReadHeader time.Duration
	// Read bounds reading the whole request, from accepting the
	// connection (or the end of the previous request) to the end of the
	// body.
	Read time.Duration
	// Write bounds the handler and the response, from the end of the
	// request headers. It cuts off any handler that takes longer, so it is
	// left zero where a handler runs long (the Run and Tick functions
	// execute targets for up to 30 minutes) and set where every handler
	// answers at once.
	Write time.Duration
	// Idle bounds a kept-alive connection waiting for its next request.
	Idle time.Duration
}

// DefaultTimeouts suit baton's APIs, whose request bodies are small JSON
// documents (a GPU job's payload, at most 1 MiB, is the largest): a minute
// to send one is generous on any link that should be served. Write is
// zero; servers whose handlers are all quick use QuickWriteTimeout.
var DefaultTimeouts = Timeouts{
	ReadHeader: 10 * time.Second,
	Read:       time.Minute,
	Idle:       2 * time.Minute,
}

// QuickWriteTimeout is the Write timeout of servers whose handlers all
// answer without waiting on work (health checks, a GPU worker accepting a
// job it then runs in the background).
const QuickWriteTimeout = time.Minute

// NewServer returns a server for h with the timeouts t. Every HTTP server
// baton runs is made here, so none is left with ReadHeaderTimeout alone.
func NewServer(h http.Handler, t Timeouts) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
	}
}

// WithWrite returns t with its Write timeout set to d.
func (t Timeouts) WithWrite(d time.Duration) Timeouts {
	t.Write = d
	return t
}
