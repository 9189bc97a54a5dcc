package gpu

import "errors"

// Sentinel errors. Callers branch on them with errors.Is; the HTTP layer
// maps them to status codes (see Handler).
var (
	// ErrNotFound: no job with that id.
	ErrNotFound = errors.New("gpu: job not found")
	// ErrStaleFence: the caller's (slot, epoch) no longer holds the job; it
	// must stop working on it. HTTP 409.
	ErrStaleFence = errors.New("gpu: stale fence: the job is no longer held by this slot and epoch")
	// ErrForbidden: the caller's (slot, epoch) holds the job, but it did
	// not send that dispatch's secret (a wrong one, or none: a worker
	// built before secrets). It is not the worker the job was sent to.
	// HTTP 403.
	ErrForbidden = errors.New("gpu: forbidden: the callback does not carry the secret of the dispatch that holds the job")
	// ErrCancelled: the job was cancelled while the caller held it. The
	// worker must stop its child and then report completion, which frees
	// the slot. HTTP 409.
	ErrCancelled = errors.New("gpu: job cancelled")
	// ErrFinished: the job already reached a terminal state, so it cannot
	// be cancelled. HTTP 409.
	ErrFinished = errors.New("gpu: job already finished")
	// ErrBadPool: the pool configuration cannot be parsed.
	ErrBadPool = errors.New("gpu: bad pool")
	// ErrRefused: the worker refused the job (a non-2xx answer, or it
	// could not be reached). After a transient refusal (429, 408, 5xx,
	// unreachable) the job is requeued without using an attempt; after a
	// permanent one (any other 4xx) it uses an attempt, and is dead once
	// it has used maxAttempts. Either way the slot backs off.
	ErrRefused = errors.New("gpu: worker refused the job")
	// ErrUnanswered: POST /run went out but its answer was lost (a timeout
	// or a broken connection), so the worker may be running the job. The
	// job keeps its slot and lease: the worker's first heartbeat confirms
	// it, and if none comes, the sweep requeues it once the lease expires.
	ErrUnanswered = errors.New("gpu: worker did not answer POST /run")
)
