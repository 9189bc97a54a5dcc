// Package functions holds baton's Cloud Functions entry points: Tick, Run,
// Schedules, GPU, GPUCallback and Rent. Each is thin: it decodes,
// authorises, calls shared/, and encodes. GPU serves the operators' GPU
// API and GPUCallback only the workers' callbacks, so that the invoker
// grants on each reach only its own routes.
//
// In the cloud each function is deployed alone (FUNCTION_TARGET) and serves
// every path under its own URL; init registers them with
// functions-framework-go. Locally, `baton local` and the end-to-end tests
// mount the same handlers on one mux with Mux, under /Tick, /Run,
// /Schedules, /GPU, /GPUCallback and /Rent. They do not use funcframework.Start for that because it offers
// no graceful shutdown and routes only exact paths.
//
// Deploys must not link the emulators:
// `go list -deps ./functions | grep -i -E 'ferret|fake-gcs'` prints nothing.
package functions
