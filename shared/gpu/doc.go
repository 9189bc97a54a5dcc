// Package gpu is baton's busy-aware dispatcher for a pool of GPU workers
// (Cloud Run GPU services, or local in-process workers).
//
// # Model
//
// The queue lives in the database, not in the workers. Each GPU slot (one
// instance of a worker service running one job) is a document in
// gpu_slots: {_id, worker, jobId, leaseUntil, epoch}. Each job is a
// document in gpu_jobs whose status moves
//
//	queued → dispatched → running → succeeded | failed | dead | cancelled
//
// # Dispatch
//
// Dispatch claims a slot whose lease has run out (a free slot has a lease in
// the past) with a conditional findOneAndUpdate that bumps the slot's epoch,
// then claims the best queued job (priority descending, then createdAt,
// then _id) with a second one, links the two, and POSTs /run to the worker
// with the job, the slot, the epoch, the dispatch's secret and when the
// job's lease (set at the claim) runs out. A worker that answers 429, 408 or 5xx, or cannot be
// reached, costs the job no attempt: the job goes back to the queue and
// the slot backs off briefly. Any other 4xx would be repeated on every
// send, so it uses an attempt, and the job is dead once it has used
// maxAttempts.
//
// The protocol is crash-safe without transactions. A dispatcher that dies
// after claiming a slot leaves a slot whose lease expires, so it becomes
// claimable again. One that dies after claiming the job leaves a dispatched
// job whose own lease expires, so Sweep requeues it.
//
// # Fencing
//
// Every write a slot holder makes is conditional on the (slot, epoch) pair
// it was given. A slot's epoch only goes up, so the pair is unique forever,
// and a worker that was paused, partitioned or presumed dead gets
// ErrStaleFence (HTTP 409) and stops its child.
//
// The pair is public (GET /gpu/jobs/{id} shows it), so it only says which
// hold a callback claims, not that the caller is the worker holding it.
// Each dispatch therefore draws a secret that POST /run alone carries;
// the job and the slot store its SHA-256, and the worker's callbacks send
// it back in SecretHeader. A fence that holds without that secret gets
// ErrForbidden (HTTP 403) and changes nothing.
//
// The callbacks are also their own routes (CallbackRoutes), deployed as
// the GPUCallback function apart from the operators' API
// (OperatorRoutes), so that the workers' invoker grant does not reach
// enqueue or cancel, and operators' grants do not reach the callbacks.
//
// # Events instead of keyspace notifications
//
// A completion callback frees the slot and dispatches the next job before
// it answers; Enqueue dispatches at once; Sweep, called by every tick,
// requeues jobs whose lease expired (attempts+1) and marks dead those that
// used up maxAttempts.
//
// The worker side lives in package gpu/worker.
package gpu
