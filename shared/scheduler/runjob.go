package scheduler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// A cloudRunJob-target run, like a gpu one, outlives its executor: a task
// of a Cloud Run job may run for 168 hours. The executor claims the run,
// which records the job (schedule.Run.RunJob: the run is now "starting"),
// starts an execution with RunJob and records its name
// (schedule.Run.Execution), and leaves; the run stays running. The sweep
// reads the execution every RunJobPoll (one GetExecution per execution in
// flight) and ends the run from its outcome: succeeded; failed, with its
// failed-task count and the first failure's reason; or cancelled. A failed
// run follows the schedule's retry policy (a new run, a new execution).
//
// Starting is idempotent per run, though RunJob has no request id. Every
// execution carries the run id in its env (schedule.EnvRunID), and
// Cloud Run reports an execution's overridden env in its template. So
// whoever starts an execution for a run that may already have one (the
// executor after a RunJob whose answer was lost; the sweep, for a run
// still starting once its executor's job lease is gone) first lists the
// job's newest executions for that run id (ListExecutions), and calls
// RunJob only when there is none. RunJob itself is never retried blindly:
// the client makes one attempt (no retry on Unavailable). The run's
// "starting" mark (RunJob without Execution) is what sends a dead
// executor's run to that lookup instead of to the failover.

// RunJobs is the Run Admin API v2 subset a cloudRunJob target uses;
// shared/cloudrun implements it over the official client.
type RunJobs interface {
	// RunJob starts an execution and returns its full name.
	RunJob(ctx context.Context, req *runpb.RunJobRequest) (string, error)
	// FindExecution returns the newest execution of job whose env has
	// key=value.
	FindExecution(ctx context.Context, job, key, value string) (name string, found bool, err error)
	// GetExecution reads an execution.
	GetExecution(ctx context.Context, name string) (*runpb.Execution, error)
	// CancelExecution asks for an execution to stop.
	CancelExecution(ctx context.Context, name string) error
}

// ErrNoRunJobs means a cloudRunJob target ran on an engine without a Run
// Admin API client.
var ErrNoRunJobs = errcode.New(errcode.FailedPrecondition, "scheduler: cloudRunJob targets need the Run Admin API, and no client is configured")

// ErrJobNotAllowed means a cloudRunJob target's job is not on
// BATON_ALLOWED_JOBS at execution time (the list may have shrunk since the
// schedule was written).
var ErrJobNotAllowed = errcode.New(errcode.PermissionDenied, "scheduler: job is not on BATON_ALLOWED_JOBS")

// runJobHandOff reports whether s's runs start a Cloud Run execution.
func runJobHandOff(s *schedule.Schedule) bool {
	return s.Target.Type == schedule.TargetCloudRunJob && s.Target.CloudRunJob != nil
}

// handedOffWork names what a handed-off run's work is, for messages.
func handedOffWork(r *runDoc) string {
	switch {
	case r.GPUJob != "":
		return "gpu job " + r.GPUJob
	case r.Execution != "":
		return "Cloud Run execution " + r.Execution
	case r.RunJob != "":
		return "an execution of Cloud Run job " + r.RunJob + " (starting)"
	}
	return "its target"
}

// runJobRequest is the RunJob call of run r: the target's overrides, and
// the run's id, fire time, schedule and fence in the env.
func runJobRequest(r *schedule.Run, t *schedule.CloudRunJobTarget) *runpb.RunJobRequest {
	env := map[string]string{}
	maps.Copy(env, t.Env)
	addRunIdentity(env, r, identityKeys{schedule.EnvRunID, schedule.EnvSchedule, schedule.EnvFireTime, schedule.EnvFence})
	co := &runpb.RunJobRequest_Overrides_ContainerOverride{Args: t.Args}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		co.Env = append(co.Env, &runpb.EnvVar{Name: k, Values: &runpb.EnvVar_Value{Value: env[k]}})
	}
	o := &runpb.RunJobRequest_Overrides{ContainerOverrides: []*runpb.RunJobRequest_Overrides_ContainerOverride{co}, TaskCount: int32(t.TaskCount)} //nolint:gosec // validated ≤ MaxRunJobTasks
	if d := t.Timeout.D(); d > 0 {
		o.Timeout = durationpb.New(d)
	}
	return &runpb.RunJobRequest{Name: t.Job, Overrides: o}
}

// permanentRunJob reports an answer that a repeat of the same RunJob
// cannot change: the request, the job or the grant is wrong.
func permanentRunJob(err error) bool {
	if errors.Is(err, ErrNoRunJobs) || errors.Is(err, ErrJobNotAllowed) {
		return true
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.NotFound, codes.PermissionDenied, codes.FailedPrecondition, codes.Unauthenticated, codes.Unimplemented:
		return true
	}
	return false
}

// startExecution returns the execution of run r, starting it unless one
// exists: when lookFirst, it first looks for an execution carrying r's id.
// It calls RunJob at most once. RunJob has no request id, and an error
// other than a refusal (permanentRunJob) leaves its outcome unknown: the
// execution may have been created, and may not be listed yet while Google
// still processes the request. So it is not retried here, where a lookup
// a few milliseconds later could miss it and start a second execution:
// the run stays starting, and the sweep looks for the execution by the run
// id once the job lease is free (at least its TTL later), and only then
// starts one.
func (e *Engine) startExecution(ctx context.Context, r *schedule.Run, t *schedule.CloudRunJobTarget, lookFirst bool) (string, error) {
	if e.cfg.RunJobs == nil {
		return "", ErrNoRunJobs
	}
	if !schedule.IsAllowedJob(t.Job, e.cfg.AllowedJobs) {
		return "", fmt.Errorf("cloudRunJob target %s: %w", t.Job, ErrJobNotAllowed)
	}
	if lookFirst {
		name, found, err := e.cfg.RunJobs.FindExecution(ctx, t.Job, schedule.EnvRunID, r.ID)
		if err != nil {
			// Unknown: starting now could start a second execution.
			return "", fmt.Errorf("look for the execution of run %s: %w", r.ID, err)
		}
		if found {
			return name, nil
		}
	}
	return e.cfg.RunJobs.RunJob(ctx, runJobRequest(r, t))
}

// handToRunJob starts the execution of the claimed run r and leaves r
// running for the sweep to end. It returns a non-nil error only when the
// start is refused for good: the caller records the run failed. Any other
// failure leaves the run starting, and the sweep starts (or finds) its
// execution once the job lease is free.
func (e *Engine) handToRunJob(ctx context.Context, s *schedule.Schedule, r *runDoc, epoch int64, c *counters) error {
	name, err := e.startExecution(ctx, &r.Run, s.Target.CloudRunJob, false)
	if err != nil && permanentRunJob(err) {
		return err
	}
	if err != nil {
		c.errors.Add(1)
		e.log.Warn("start of the Cloud Run execution failed; the run stays starting and the sweep finds or starts it", "run", r.ID, "job", r.RunJob, "err", err)
		return nil
	}
	r.Execution = name
	werr := e.runs.RecordExecution(context.WithoutCancel(ctx), r.ID, epoch, time.Time{}, name, "Cloud Run execution "+name, e.now().UTC().Add(e.cfg.RunJobPoll))
	if werr != nil {
		// The claim's sweepAt stands: the sweep finds the execution by
		// the run id in its env.
		e.log.Warn("record the Cloud Run execution failed; the sweep finds it by the run id", "run", r.ID, "execution", name, "err", werr)
	}
	e.log.Info("run handed to a Cloud Run execution", "run", r.ID, "execution", name)
	return nil
}

// settleRunJobRun is the sweep's step for a running cloudRunJob run whose
// sweepAt passed.
func (e *Engine) settleRunJobRun(ctx context.Context, r *runDoc, now time.Time, c *counters) {
	if e.cfg.RunJobs == nil {
		e.endRunJob(ctx, r, nil, ErrNoRunJobs.Error(), false, now, c)
		return
	}
	if r.Execution == "" {
		e.startMissing(ctx, r, now, c)
		return
	}
	x, err := e.cfg.RunJobs.GetExecution(ctx, r.Execution)
	switch {
	case status.Code(err) == codes.NotFound:
		e.endRunJob(ctx, r, nil, fmt.Sprintf("Cloud Run execution %s no longer exists", r.Execution), true, now, c)
	case err != nil:
		c.errors.Add(1)
		e.log.Warn("read the Cloud Run execution of a run failed; looking again later", "run", r.ID, "execution", r.Execution, "err", err)
		e.postpone(ctx, r, now, e.reservation(), c)
	case x.GetCompletionTime() == nil:
		if e.orphaned(ctx, r, now, c) {
			return
		}
		e.postpone(ctx, r, now, e.cfg.RunJobPoll, c)
	default:
		e.endRunJob(ctx, r, x, "", true, now, c)
	}
}

// orphaned cancels the execution of a run whose schedule was deleted, or
// no longer runs that job, and ends the run: nobody wants its outcome.
// One read of the schedule per look at a running execution.
func (e *Engine) orphaned(ctx context.Context, r *runDoc, now time.Time, c *counters) bool {
	var s schedule.Schedule
	err := e.getSchedule(ctx, r.ScheduleID, &s)
	var why string
	switch {
	case errors.Is(err, store.ErrNotFound):
		why = "schedule deleted"
	case err != nil:
		return false // unknown: look again later
	case !runJobHandOff(&s) || s.Target.CloudRunJob.Job != r.RunJob:
		why = "the schedule no longer runs job " + r.RunJob
	default:
		return false
	}
	if err := e.cfg.RunJobs.CancelExecution(ctx, r.Execution); err != nil && status.Code(err) != codes.FailedPrecondition && status.Code(err) != codes.NotFound {
		c.errors.Add(1)
		e.log.Warn("cancel the execution of an abandoned run failed; trying again later", "run", r.ID, "execution", r.Execution, "err", err)
		return false
	}
	e.endRunJob(ctx, r, nil, why+" while its execution ran; execution "+r.Execution+" cancelled", false, now, c)
	return true
}

// startMissing finds or starts the execution of a run still starting
// whose executor has left (its job lease is free): the executor died
// between the claim and recording the execution, or its RunJob answers
// were lost.
func (e *Engine) startMissing(ctx context.Context, r *runDoc, now time.Time, c *counters) {
	if left, alive := e.jobAlive(ctx, r); alive {
		e.postpone(ctx, r, now, left, c) // its executor may still be starting it
		return
	}
	var s schedule.Schedule
	err := e.getSchedule(ctx, r.ScheduleID, &s)
	switch {
	case err != nil && !errors.Is(err, store.ErrNotFound):
		c.errors.Add(1)
		e.log.Warn("read the schedule of a starting run failed; looking again later", "run", r.ID, "err", err)
		e.postpone(ctx, r, now, e.reservation(), c)
		return
	case err != nil || !runJobHandOff(&s) || s.Target.CloudRunJob.Job != r.RunJob:
		// Nobody wants a new execution; one that did start is found
		// and cancelled.
		if name, found, ferr := e.cfg.RunJobs.FindExecution(ctx, r.RunJob, schedule.EnvRunID, r.ID); ferr == nil && found {
			_ = e.cfg.RunJobs.CancelExecution(ctx, name)
		}
		e.endRunJob(ctx, r, nil, "the schedule was deleted or changed before the run's execution was recorded", false, now, c)
		return
	}
	name, err := e.startExecution(ctx, &r.Run, s.Target.CloudRunJob, true)
	if err != nil {
		if permanentRunJob(err) {
			e.endRunJob(ctx, r, nil, err.Error(), false, now, c)
			return
		}
		c.errors.Add(1)
		e.log.Warn("find or start the execution of a starting run failed; trying again later", "run", r.ID, "err", err)
		e.postpone(ctx, r, now, e.reservation(), c)
		return
	}
	if err := e.runs.RecordExecution(ctx, r.ID, 0, r.SweepAt, name, "Cloud Run execution "+name, now.Add(e.cfg.RunJobPoll)); err != nil && !errors.Is(err, store.ErrConflict) {
		c.errors.Add(1)
		e.log.Warn("record the execution of a starting run failed; the next sweep finds it", "run", r.ID, "execution", name, "err", err)
		return
	}
	e.log.Warn("execution of a run was not recorded by its executor; recorded by the sweep", "run", r.ID, "execution", name)
}

// endRunJob records a cloudRunJob run's outcome from its completed
// execution x (or, with x nil, fails it with reason, retried when
// retryable). A cancelled execution is not retried: someone stopped it.
func (e *Engine) endRunJob(ctx context.Context, r *runDoc, x *runpb.Execution, reason string, retryable bool, now time.Time, c *counters) {
	o := store.RunOutcome{FinishedAt: now, Status: schedule.RunFailed}
	what := handedOffWork(r)
	out := what
	if x != nil {
		out = fmt.Sprintf("Cloud Run execution %s: %d of %d tasks succeeded", x.GetName(), x.GetSucceededCount(), x.GetTaskCount())
		var msg string
		for _, cond := range x.GetConditions() {
			if cond.GetType() == "Completed" {
				msg = cond.GetMessage()
			}
		}
		switch {
		case x.GetCancelledCount() > 0 || completedReason(x) == runpb.Condition_CANCELLED:
			reason, retryable = fmt.Sprintf("Cloud Run execution %s was cancelled", x.GetName()), false
		case x.GetFailedCount() > 0:
			reason = fmt.Sprintf("Cloud Run execution %s failed: %d of %d tasks failed: %s", x.GetName(), x.GetFailedCount(), x.GetTaskCount(), msg)
		default:
			o.Status = schedule.RunSucceeded
		}
	}
	o.Output = truncate(out, 1024)
	e.endSwept(ctx, r, o, reason, retryable, what, now, c)
}

// completedReason is the execution reason of x's Completed condition.
func completedReason(x *runpb.Execution) runpb.Condition_ExecutionReason {
	for _, cond := range x.GetConditions() {
		if cond.GetType() == "Completed" {
			return cond.GetExecutionReason()
		}
	}
	return runpb.Condition_EXECUTION_REASON_UNDEFINED
}
