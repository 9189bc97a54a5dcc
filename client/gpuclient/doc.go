// Package gpuclient is the Go client of baton's GPU function: enqueue,
// read, list and cancel GPU jobs, the pool's view, and a job's logs. It is
// a package of its own so that the schedules client (package client) does
// not carry the GPU dispatcher's dependencies; it sends every request
// through a client.Client on the GPU function's URL, so errors, retries,
// auth and If-Match behave as there.
package gpuclient
