// Package worker is baton's GPU worker: the HTTP server behind
// cmd/gpu-worker (one Cloud Run GPU instance) and behind each local worker
// that `baton local` runs in-process.
//
// POST /run accepts one job at a time (202) and answers 429 while a job
// runs. The job's command (Config.Command, an argv list) gets the payload
// on stdin and BATON_JOB_ID, BATON_JOB_ATTEMPT, BATON_JOB_FENCE and
// BATON_JOB_SLOT in its environment, and, for the job of a sharded
// schedule's run, BATON_SHARD, BATON_SHARD_COUNT and BATON_SHARD_PARAM.
// While it runs, the worker heartbeats
// the control plane (POST {control}/gpu/jobs/{id}:heartbeat with the
// fence in the body and the dispatch's secret from /run in the
// gpu.SecretHeader header, as on :complete); a 409 means the job was cancelled or taken back, and the worker
// kills the command's process group. It kills it at the job's timeout too,
// and when the job's lease is about to run out with no heartbeat accepted
// (self-fencing: the sweep may then give the job to another slot). That
// clock starts at the claim (the request's leaseUntil), not at receipt,
// and each accepted heartbeat restarts it from when the beat was sent.
// stdout and stderr stream to the bucket under outputs/<jobId>/<attempt>/.
// The worker marks itself free as soon as the command is gone and then
// reports POST …:complete, so the dispatcher may hand it the next job at
// once. Shutdown (SIGTERM) stops the command and reports the job
// interrupted, so it is requeued without waiting for its lease.
//
// GET /healthz answers with the busy state and, where nvidia-smi exists,
// its GPU summary.
package worker
