package gpu

import (
	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/store"
)

// Sentinel errors. Callers branch on them with errors.Is; the HTTP layer
// answers them by their errcode.Code (httpapi.From), named in each comment.
var (
	// ErrNotFound: no job with that id. It is a store.ErrNotFound:
	// NotFound, HTTP 404.
	ErrNotFound = errcode.Wrap(errcode.NotFound, store.ErrNotFound, "gpu: job not found")
	// ErrStaleFence: the caller's (slot, epoch) no longer holds the job; it
	// must stop working on it. It is a store.ErrStaleFence: StaleFence,
	// HTTP 409.
	ErrStaleFence = errcode.Wrap(errcode.StaleFence, store.ErrStaleFence, "gpu: stale fence: the job is no longer held by this slot and epoch")
	// ErrForbidden: the caller's (slot, epoch) holds the job, but it did
	// not send that dispatch's secret (a wrong one, or none: a worker
	// built before secrets). It is not the worker the job was sent to.
	// PermissionDenied, HTTP 403.
	ErrForbidden = errcode.New(errcode.PermissionDenied, "gpu: forbidden: the callback does not carry the secret of the dispatch that holds the job")
	// ErrCancelled: the job was cancelled while the caller held it. The
	// worker must stop its child and then report completion, which frees
	// the slot. Conflict, HTTP 409.
	ErrCancelled = errcode.New(errcode.Conflict, "gpu: job cancelled")
	// ErrPreempted: the dispatcher preempted the job while the caller held
	// it (docs/gpu.md, Preemption). The worker must stop its child and
	// report, which requeues the job without using an attempt. Conflict,
	// HTTP 409, as ErrCancelled: the worker does the same for both.
	ErrPreempted = errcode.New(errcode.Conflict, "gpu: job preempted")
	// ErrFinished: the job already reached a terminal state, so it cannot
	// be cancelled. Conflict, HTTP 409.
	ErrFinished = errcode.New(errcode.Conflict, "gpu: job already finished")
	// ErrBadPool: the pool configuration cannot be parsed. InvalidArgument.
	ErrBadPool = errcode.New(errcode.InvalidArgument, "gpu: bad pool")
	// ErrRefused: the worker refused the job (a non-2xx answer, or it
	// could not be reached). After a transient refusal (429, 408, 5xx,
	// unreachable) the job is requeued without using an attempt; after a
	// permanent one (any other 4xx) it uses an attempt, and is dead once
	// it has used maxAttempts. Either way the slot backs off. Unavailable.
	ErrRefused = errcode.New(errcode.Unavailable, "gpu: worker refused the job")
	// ErrUnanswered: POST /run went out but its answer was lost (a timeout
	// or a broken connection), so the worker may be running the job. The
	// job keeps its slot and lease: the worker's first heartbeat confirms
	// it, and if none comes, the sweep requeues it once the lease expires.
	// UnknownOutcome.
	ErrUnanswered = errcode.New(errcode.UnknownOutcome, "gpu: worker did not answer POST /run")
)
