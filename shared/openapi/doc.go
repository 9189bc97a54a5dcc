// Package openapi holds baton's HTTP contract: the OpenAPI 3.1 document of
// the Schedules, GPU, GPUCallback and Rent functions (openapi.yaml), kept
// beside the code so that a change to a route is a change to this file in
// the same commit. The document is embedded in every binary and served as
// JSON at /openapi.json by the Schedules function and by `baton local`.
//
// The contract cannot drift unnoticed: tests/ validates every request and
// response of the end-to-end suite against it (openapitest), and
// `make openapi-lint` runs standard linters on it.
package openapi
