// Package tasks is an in-process Cloud Tasks v2 emulator for HTTP tasks,
// served over gRPC. Tick hands each decided run to Cloud Tasks (queue
// baton-runs) as an HTTP POST to the Run function; locally, `baton local`
// and the tests start this server and talk to it with the official client,
// cloud.google.com/go/cloudtasks/apiv2, pointed at Addr() (Server.Client,
// or Server.ClientOptions: an endpoint, no credentials, plaintext gRPC).
// The Go client does not read CLOUD_TASKS_EMULATOR_HOST itself; baton
// reads it and passes those options.
//
// It exists so that baton's hand-off is tested against what the real
// service does: deduplication by task name (ALREADY_EXISTS, including
// after the task finished), retries with the documented backoff, attempts
// cut off at the dispatch deadline, and rate and concurrency limits.
//
// # What is served
//
// CreateQueue, GetQueue, ListQueues (the only filter understood is
// "state: PAUSED" and the like), UpdateQueue (creates a missing queue,
// honours update_mask on rate_limits, retry_config and their fields),
// DeleteQueue, PauseQueue, ResumeQueue, PurgeQueue; CreateTask, GetTask,
// ListTasks, DeleteTask. Every other RPC
// answers Unimplemented. Names are checked against the real grammar
// (projects/P/locations/L/queues/Q, task id [A-Za-z0-9_-]{1,500}), and bad
// input is InvalidArgument with a message that starts with the field,
// "task.dispatch_deadline: …". Unknown queues and tasks are NotFound, a
// taken name is AlreadyExists, and a queue name deleted too recently is
// FailedPrecondition.
//
// CreateTask validates like the real API: only http_request tasks (an
// app_engine_http_request is Unimplemented); url http(s); a body only with
// POST, PUT or PATCH; dispatch_deadline in [15s, 30m], default 10m;
// schedule_time at most 30 days ahead, unset or past meaning now, kept to
// the microsecond; at most 100KB. An empty name gets a generated id. A
// name that belongs to a live task, or to one that succeeded, was dropped
// or was deleted less than Options.Tombstone ago (default 1h, as real), is
// AlreadyExists: baton counts that as success.
//
// # What it sends
//
// When a task is due, its queue dispatches it, oldest schedule_time first,
// at most max_concurrent_dispatches at once and at most
// max_dispatches_per_second through a token bucket of max_burst_size. A
// paused queue dispatches nothing. Each attempt is the task's request
// (http_method, default POST; its headers; its body) with
//
//	X-CloudTasks-QueueName: baton-runs              (the short queue id)
//	X-CloudTasks-TaskName: run-3f…                   (the short task id)
//	X-CloudTasks-TaskRetryCount: 2                   (earlier attempts, any outcome)
//	X-CloudTasks-TaskExecutionCount: 1               (earlier attempts answered, 5xx excluded)
//	X-CloudTasks-TaskETA: 1796110689.990456          (this attempt's schedule time, epoch seconds)
//	X-CloudTasks-TaskPreviousResponse: 503           (retries only, when the last attempt got a status)
//	X-CloudTasks-TaskRetryReason: HTTP 503           (retries only)
//	User-Agent: Google-Cloud-Tasks
//	Authorization: Bearer TOKEN                      (tasks with an oidc_token, when Options.Token is set)
//
// The task's own Host, Content-Length, User-Agent, X-Google-*,
// X-AppEngine-* and X-CloudTasks-* headers are dropped or replaced, as the
// real service documents; an OIDC token replaces its Authorization header.
// Content-Type is not set for you.
//
// # Retries, like the real RetryConfig
//
// A 2xx ends the task: it is removed and its name is tombstoned. Anything
// else (another status, a transport error, the dispatch deadline, which
// records DEADLINE_EXCEEDED) is a failed attempt. The retry is due the
// backoff after the failure ends: min_backoff (default 0.1s), doubled
// max_doublings times (default 16), then growing linearly by
// min_backoff×2^max_doublings, never above max_backoff (default 3600s).
// With min 10s, max 300s and 3 doublings the waits are 10, 20, 40, 80, 160,
// 240, 300, 300 … seconds. Retrying stops once the task has had
// max_attempts attempts (default 100) and max_retry_duration (default 0)
// has passed since its first attempt. max_attempts -1 or a zero
// max_retry_duration leaves only the other limit; with both unlimited,
// retrying never stops. A task out of retries is dropped, tombstoned and
// logged at WARN. GetTask shows dispatch_count,
// response_count, first_attempt, last_attempt and the next schedule_time.
//
// # Differences from the real service
//
//   - No OIDC token is signed: Options.Token is sent as a bearer token on
//     tasks with an oidc_token (or oauth_token), and the local functions
//     check that instead; without Token such tasks carry no Authorization.
//   - Without Options.Dir everything is in memory and gone with the
//     process; tasks queued at Shutdown are lost. With it, a journal under
//     Dir keeps queues, tasks and tombstones across restarts (journal.go),
//     durable against a killed process, not a lost machine.
//   - Task names stay taken for Options.Tombstone (default 1h, the real
//     "~1 hour"); a deleted queue's name is refused for the same time, not
//     the real 7 days. A name tombstoned by PurgeQueue is held too.
//   - Durations are not truncated to whole seconds: the real service
//     truncates min_backoff, max_backoff and max_retry_duration to the
//     second, the emulator honours 10ms, so tests stay fast.
//   - max_burst_size, output only in the real v2 API, is honoured when set;
//     unset, it is max_dispatches_per_second/5 (at least 1), which gives the
//     real 100 for the default 500/s; the real rule is not documented.
//   - No system throttling: a 429 or 503 slows nothing down beyond the
//     queue's backoff, Retry-After is ignored, and there is no ramp-up.
//   - X-CloudTasks-TaskRetryReason values are not documented; the emulator
//     sends "HTTP <status>", DEADLINE_EXCEEDED or UNAVAILABLE (no answer).
//     X-CloudTasks-TaskPreviousResponse is left out when the previous
//     attempt got no status.
//   - The status line is the answer: a handler that sends its status and
//     then stalls keeps that status (the attempt ends when the body does,
//     or at the deadline); the real behaviour there is not documented.
//   - The BASIC view leaves out the HTTP body; FULL needs no permission.
//   - Only http_request tasks; no App Engine tasks, RunTask, BufferTask,
//     IAM, locations, CMEK, queue.yaml, 31-day task expiry, or ListQueues
//     filters other than state.
//   - Delivery is exactly once per attempt and never early: real Cloud
//     Tasks is at-least-once and may, rarely, deliver a task twice; the
//     emulator never does, so a test that needs a duplicate makes one.
package tasks
