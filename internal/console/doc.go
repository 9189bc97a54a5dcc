// Package console is baton's operator web console: server-rendered pages
// (html/template, embedded with the binary) for schedules, runs, the GPU
// pool and leases, with forms to pause, resume, trigger and delete.
//
// The console is an HTTP client of baton's own API, the routes the CLI
// calls, never of the store: so `baton local` mounts it next to the
// functions and `baton console` serves the same pages on 127.0.0.1 against
// a deployed baton with the operator's credentials. Because it adds those
// credentials to every API call, it refuses cross-origin POSTs
// (http.CrossOriginProtection), can refuse non-loopback Host headers (DNS
// rebinding), and sends a self-only Content-Security-Policy.
//
// Every page works without JavaScript; a small script polls the page and
// swaps its <main> in place (live updates).
package console
