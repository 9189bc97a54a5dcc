// Command gpu-worker is baton's Cloud Run GPU worker service. It runs one
// job at a time with the command in BATON_WORKER_COMMAND (a JSON argv
// list), heartbeats and reports to the GPUCallback function at BATON_CONTROL_URL
// with a Google ID token (or Bearer BATON_TOKEN locally), stores output in
// BATON_BUCKET, and on SIGTERM reports its job interrupted. The logic is in
// shared/gpu/worker; the Dockerfile beside this file builds it on a CUDA
// runtime image.
package main
