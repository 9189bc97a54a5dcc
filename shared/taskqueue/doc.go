// Package taskqueue is baton's execution plane on Cloud Tasks: it turns a
// scheduler.Task (the runs of one schedule that one Run invocation
// executes) into a Cloud Task whose HTTP target is the Run function, with an
// OIDC token of the dispatch service account.
//
// # Why a queue
//
// Cloud Scheduler starts execution n+1 of a job only after execution n has
// finished, so a Tick that executed its runs would delay every schedule by
// the slowest target. Tick therefore only decides and enqueues; each run
// executes in its own Run invocation, which Cloud Tasks retries with the
// queue's backoff when it answers an error.
//
// # Exactly one task per hand-off
//
// The task id is derived from the run ids (scheduler.TaskName), and Cloud
// Tasks refuses a second task with the name of a live task, or of one that
// finished or was deleted in the last hour or so: CreateTask answers
// ALREADY_EXISTS, which Dispatch reports as success. A duplicated tick, or
// a retried CreateTask whose first answer was lost, therefore enqueues
// nothing twice. CreateTask is retried (bounded, with backoff) on
// UNAVAILABLE and DEADLINE_EXCEEDED for that reason: the retry is safe.
//
// # More than one queue
//
// One queue dispatches at most 500 tasks a second
// (https://cloud.google.com/tasks/docs/quotas). Config.Queues lists several;
// each schedule's tasks go to the queue QueueIndex picks from its id, so a
// task name is always created on the same queue and its deduplication
// holds. Changing the number of queues moves schedules: a task created just
// before the change can be created again on its new queue. Run's claim and
// job lease make that second delivery change nothing, as for any
// redelivery.
//
// # Locally
//
// Open points the official client at emulator/tasks when
// CLOUD_TASKS_EMULATOR_HOST is set, exactly as in the cloud but without TLS
// or credentials. There are no Google credentials to sign an OIDC token, so
// a local queue sends the stack's bearer token as a header instead.
package taskqueue
