// Package scheduler is an in-process Cloud Scheduler emulator for HTTP
// targets. `baton local` uses it to call /Tick; tests use it to prove that
// baton copes with what the real service does: at-least-once delivery,
// retries that carry the same X-CloudScheduler-ScheduleTime, and attempts
// cut off at the attempt deadline.
//
// # What it sends
//
// Every attempt is an HTTP request to the job's target with
//
//	X-CloudScheduler: true
//	X-CloudScheduler-JobName: projects/local/locations/local/jobs/NAME
//	X-CloudScheduler-ScheduleTime: 2026-11-30T12:00:00Z   (RFC 3339, UTC)
//	Authorization: Bearer TOKEN                           (when the job has one)
//	User-Agent: Google-Cloud-Scheduler
//
// The schedule time is fixed when an execution starts and is the same on
// every retry of it. For TriggerNow (the real service's "force run") it is
// the time of the trigger.
//
// # Retries, like the real RetryConfig
//
// A 2xx answer ends an execution. Anything else (another status, a
// transport error, the attempt deadline) is a failed attempt, retried with
// the real service's rules: retryCount (0–5, default 0) retries and/or
// until maxRetryDuration has passed since the first attempt (when both are
// set, retrying goes on until both limits are reached); the wait starts at
// minBackoff (default 5s), doubles maxDoublings times (default 5), then grows
// linearly by minBackoff×2^maxDoublings, capped at maxBackoff (default 1h).
// With min 10s, max 300s and 3 doublings the waits are 10, 20, 40, 80, 160,
// 240, 300, 300 … seconds. The attempt deadline (default 3m) cancels the
// request and records DEADLINE_EXCEEDED.
//
// An execution blocks its job's loop, so a time that passes while
// retries go on is skipped, as the real service documents.
//
// # Differences from the real service
//
//   - Deadlines shorter than the real minimum of 15s are allowed, so tests
//     stay fast. Bounds of retryCount (0–5) are enforced as the real API does.
//   - Only HTTP targets; the bearer token is a fixed string, not an OIDC token.
//   - Times are judged on an injected Clock; ManualClock makes tests exact and
//     instant.
package scheduler
