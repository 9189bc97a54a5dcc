package store

import (
	"context"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
)

// RunRecord is a run as the scheduler's run path stores it: the model's Run
// plus the bookkeeping of the sweep and of the deciding tick, which the
// Schedules API does not show.
type RunRecord struct {
	schedule.Run `bson:",inline"`
	// SweepAt is when the sweep should look at the run. For a pending run
	// it is when a sweep may pick it up (its due time for a retry; for a
	// fresh run, the end of the deciding tick's reservation); for a running
	// run it is when its heartbeat counts as stopped; on a failed run it is
	// the owed-retry mark. Finished runs owed nothing have none.
	SweepAt time.Time `bson:"sweepAt,omitempty"`
	// TickFence is the tick lease epoch under which a tick decided the run
	// (inserted it, or found it already there and adopted it). A tick whose
	// advance is refused as stale undoes the runs it inserted, and only
	// while they still carry its epoch: a newer tick that decided the same
	// fire time has adopted it by then. Runs no tick decided have none.
	TickFence int64 `bson:"tickFence,omitempty"`
	// Waiting is set (MarkWaiting) on a due retry or misfire run that met
	// its schedule's job lease held: its holder, or the failover of a dead
	// one, runs it next.
	Waiting bool `bson:"waiting,omitempty"`
	// GroupAt is, on a run waiting for a slot of its concurrency group
	// (WaitForGroup), its fire time: the group line's order. A field of
	// its own, not fireTime, because the line's index is DENSE (it holds
	// every run, a run without group under null): ordered by fireTime, it
	// would take every run insert of a tick in one time-ordered range; by
	// groupAt, which only waiting runs carry, the others sit under (null,
	// status, null, _id), spread by their ids.
	GroupAt time.Time `bson:"groupAt,omitempty"`
	// NotifyAt is the notification outbox: set, the run owes its schedule
	// a NotifyEvent, due for delivery at NotifyAt. The write that records
	// the run's outcome sets it, so the outcome and the event land
	// together or not at all; a delivery clears it (NoticeDone).
	NotifyAt    time.Time      `bson:"notifyAt,omitempty"`
	NotifyEvent schedule.Event `bson:"notifyEvent,omitempty"`
	// NotifyAttempts counts the failed deliveries; NotifyError is the last
	// one's error, and stays when delivery gave up.
	NotifyAttempts int    `bson:"notifyAttempts,omitempty"`
	NotifyError    string `bson:"notifyError,omitempty"`
}

// Notice is the event an outcome write queues on its run (the outbox): the
// event, due for delivery at At. A nil *Notice queues nothing.
type Notice struct {
	Event schedule.Event
	// At is when the event is due, in milliseconds (as the database keeps
	// it): a delivery's clear is conditional on it.
	At time.Time
}

// RunClaim is what a claim records on the run it moves from pending to
// running.
type RunClaim struct {
	// Token tells this claim from any other, even one by the same holder
	// at the same epoch: a claim whose answer was lost is ours only if
	// the run carries our token.
	Token string
	// Holder is the executor; Epoch the job lease epoch it holds, or 0 for
	// a run of an allow schedule, which has no job lease. A non-zero
	// Epoch fences the claim and is recorded on the run.
	Holder string
	Epoch  int64
	// At is when the run starts (startedAt and the first heartbeatAt);
	// SweepAt is when its heartbeat counts as stopped.
	At      time.Time
	SweepAt time.Time
	// Delivery, when set, is the task delivery that claimed the run.
	Delivery *schedule.Delivery
	// GPUJob, when set, is the GPU job that will finish the run.
	GPUJob string
	// RunJob, when set, is the Cloud Run job whose execution will finish
	// the run: from the claim on, the run is starting an execution.
	RunJob string
}

// RunOutcome is a finished run's result.
type RunOutcome struct {
	// Status is succeeded or failed.
	Status schedule.RunStatus
	// ExpireAt, when set, is when the finished run may be deleted
	// (FinishedAt + the schedule's history.keep), written with the outcome.
	ExpireAt time.Time
	// FinishedAt is when the outcome was recorded, in milliseconds (as
	// the database keeps it): a read-back compares it.
	FinishedAt time.Time
	// Output is a short summary; Error the failure (recorded only when
	// Status is failed).
	Output string
	Error  string
	// ExitCode, when set, is a GPU job's exit status.
	ExitCode *int
	// RetryOwedAt, when set, keeps the owed-retry mark (sweepAt) on a
	// failed run until its retry is recorded; zero clears sweepAt.
	RetryOwedAt time.Time
	// Notice, when set, is queued by the same write (see RunRecord.NotifyAt).
	Notice *Notice
}

// LegacyRuns is the vshard of Stale (and of the runs list's merge) that
// names the runs stored before runs carried a decider shard: they have no
// vshard field, and an index led by vshard keeps them under null (the
// Firestore indexes are DENSE, as MongoDB's are), so one more query per
// sweep finds them until they finish and expire.
const LegacyRuns = -1

// Runs is the scheduler's view of the runs collection: deterministic-id
// inserts, claims, heartbeats, outcomes and the sweeps.
//
// Every conditional write returns an error wrapping ErrConflict when its
// guard does not hold, and an error wrapping ErrUnknownOutcome (never
// ErrConflict) when the write may have landed but its answer was lost and
// nothing settled it, unless the method says otherwise. A write fenced by a
// job lease epoch (a run's Epoch, non-zero) is refused with ErrStaleFence
// (which wraps ErrConflict) when a holder with a newer epoch has written the
// run.
type Runs interface {
	// Insert records r, whose ID is deterministic, if no run with that ID
	// exists. Guard: none; a duplicate key means an earlier attempt or a
	// concurrent twin inserted it, and inserted is false with a nil error.
	// A lost answer is settled by reading the ID back: when the run is
	// there, inserted is false and the error nil, so inserted == false
	// means "it is there", never "another writer's". When the read-back
	// fails too, the error wraps ErrUnknownOutcome.
	Insert(ctx context.Context, r *RunRecord) (inserted bool, err error)
	// Get reads the run id, or returns an error wrapping ErrNotFound.
	Get(ctx context.Context, id string) (*RunRecord, error)

	// Adopt stamps a pending run that a tick found already recorded with
	// its tick lease epoch. Guard: the run is pending and its tickFence is
	// below epoch; a run that carries epoch or a newer one, that no tick
	// decided, or that is no longer pending gets ErrConflict.
	Adopt(ctx context.Context, id string, epoch int64) error
	// UndoStale records skipped, with reason, at at, a run that a stale
	// tick (epoch) decided, with expireAt (when set) for retention: it is
	// finished like any other skipped run. Guard: the run is pending and
	// still carries tickFence epoch (not adopted by a newer tick);
	// otherwise ErrConflict.
	UndoStale(ctx context.Context, id string, epoch int64, reason string, at, expireAt time.Time) error
	// Skip records a pending run skipped with reason, finished at at, and
	// clears its sweepAt; n, when set, is queued by the same write, and a
	// non-zero expireAt is recorded as the run's (retention). Guard: the
	// run is pending; otherwise ErrConflict.
	Skip(ctx context.Context, id, reason string, at, expireAt time.Time, n *Notice) error
	// PutBack returns a run that Skip recorded at skippedAt to pending,
	// due for the sweep at sweepAt, clearing its reason and finishedAt.
	// Guard: the run is skipped with that finishedAt; otherwise
	// ErrConflict.
	PutBack(ctx context.Context, id string, skippedAt, sweepAt time.Time) error
	// MarkWaiting marks a pending run as waiting for its schedule's job
	// lease, so that the holder runs it next (NextWaiting). Guard: the run
	// is pending; otherwise ErrConflict.
	MarkWaiting(ctx context.Context, id string) error
	// NextWaiting returns the pending run of scheduleID marked waiting
	// with the oldest fire time, or an error wrapping ErrNotFound. A
	// non-nil shard keeps to that shard's runs (its own job lease); nil
	// looks at every run of the schedule.
	NextWaiting(ctx context.Context, scheduleID string, shard *int) (*RunRecord, error)
	// WaitForGroup records on a pending run that it waits for a slot of
	// concurrency group (waitingFor reason, group group, groupAt its fire
	// time fireTime), and moves its sweepAt to sweepAt, when the sweep
	// looks at it again. Guard: the run is pending; otherwise ErrConflict.
	// Claim clears the three fields.
	WaitForGroup(ctx context.Context, id, group, reason string, fireTime, sweepAt time.Time) error
	// OldestGroupWaiting returns the pending run waiting for a slot of
	// group with the oldest fire time (groupAt, then the smallest id), or
	// an error wrapping ErrNotFound: the run next in line for the group.
	OldestGroupWaiting(ctx context.Context, group string) (*RunRecord, error)

	// Claim moves the run id from pending to running, recording c. Guard:
	// the run is pending, and, when c.Epoch is non-zero, no newer job
	// lease epoch has written it (ErrStaleFence); otherwise ErrConflict.
	// Whoever moves a run out of pending is its one executor. A lost
	// answer is settled by reading the run back: when it is running with
	// c.Token, the claim landed and Claim returns nil; otherwise the
	// write's error (wrapping ErrUnknownOutcome) is returned.
	Claim(ctx context.Context, id string, c RunClaim) error
	// Heartbeat records a running run's heartbeat at at and moves its
	// sweepAt. Guard: the run is running and, when epoch is non-zero (the
	// claim's job lease epoch), no newer epoch has written it
	// (ErrStaleFence); otherwise ErrConflict: it was failed over, or
	// fenced out. A lost answer wraps ErrUnknownOutcome; the next
	// heartbeat writes again.
	Heartbeat(ctx context.Context, id string, epoch int64, at, sweepAt time.Time) error
	// HandOff records on a running run that its work went to a GPU job
	// (output), with a heartbeat at at and the sweep's next look at
	// sweepAt. Guard and errors as Heartbeat's.
	HandOff(ctx context.Context, id string, epoch int64, output string, at, sweepAt time.Time) error
	// RecordExecution records on a running cloudRunJob run the execution
	// it started (output describes it), with the sweep's next look at
	// sweepAt. Guard: the run is running, carries no execution yet, and
	// either was written under epoch (epoch non-zero: fenced, as
	// Heartbeat) or has the sweepAt sweptAt the sweep read. ErrConflict
	// otherwise: another writer recorded it, or the run moved on.
	RecordExecution(ctx context.Context, id string, epoch int64, sweptAt time.Time, execution, output string, sweepAt time.Time) error
	// Finish records the outcome o of a running run executed under epoch
	// (0: an allow run, not fenced). Guard as Heartbeat's. After any
	// failed write the run is read back, and when it carries o.Status and
	// o.FinishedAt the outcome is there (a landed write whose answer was
	// lost, or an earlier attempt's) and Finish returns nil; otherwise
	// the write's error.
	Finish(ctx context.Context, id string, epoch int64, o RunOutcome) error
	// FinishSwept records the outcome o of a running run whose sweepAt the
	// sweep read as sweptAt (a gpu-target run, from its job). Guard: the
	// run is running with that sweepAt, so concurrent sweeps finish it
	// once; otherwise ErrConflict.
	FinishSwept(ctx context.Context, id string, sweptAt time.Time, o RunOutcome) error
	// FailOver records failed, with reason, at at, a running run whose
	// heartbeat stopped, and leaves the owed-retry mark retryOwedAt as its
	// sweepAt; n, when set, is queued by the same write, and a non-zero
	// expireAt is recorded as the run's (retention). Guard: the run is
	// running with the sweepAt the sweep read (sweptAt): a heartbeat that
	// landed meanwhile wins; otherwise ErrConflict.
	FailOver(ctx context.Context, id string, sweptAt time.Time, reason string, at, retryOwedAt, expireAt time.Time, n *Notice) error
	// RetryRecorded clears a failed run's owed-retry mark. Guard: the run
	// is failed and carries the mark; otherwise ErrConflict.
	RetryRecorded(ctx context.Context, id string) error
	// MoveSweep sets a run's sweepAt to to. Guard: the run is in status
	// with the sweepAt from that the caller read, so concurrent sweepers
	// agree on who reserved, postponed or deferred it, and a heartbeat or
	// a claim that landed meanwhile wins; otherwise ErrConflict.
	MoveSweep(ctx context.Context, id string, status schedule.RunStatus, from, to time.Time) error

	// Stale returns up to limit runs of the decider shards in shards
	// (their vshard field; LegacyRuns: the runs stored without one) in
	// status whose sweepAt is at or before now, the oldest sweepAt first:
	// the sweep's failover (running), owed retries (failed) and recovery
	// (pending). The sweep index leads with vshard (every run insert
	// writes sweepAt, all about one minute ahead, and one unsharded range
	// would take every insert of a tick), and a partition reads all its
	// shards in one query ($in on that leading key) rather than one query
	// a shard: V = 64 queries per status per tick would be 192 read units
	// a tick even with nothing to sweep.
	Stale(ctx context.Context, shards []int, status schedule.RunStatus, now time.Time, limit int) ([]RunRecord, error)
	// RunningAt returns a running run of scheduleID claimed under job
	// lease epoch, or an error wrapping ErrNotFound: what the holder that
	// a run met is doing. Shards have a job lease each, whose epochs
	// count apart: a non-nil shard keeps to that shard's runs; nil looks
	// at every run of the schedule (as do the shard arguments below).
	RunningAt(ctx context.Context, scheduleID string, shard *int, epoch int64) (*RunRecord, error)
	// PendingOf returns up to limit pending runs of scheduleID (of shard,
	// when non-nil), the oldest fire time first: the runs queued behind a
	// holder that the sweep has just failed over. It writes nothing.
	PendingOf(ctx context.Context, scheduleID string, shard *int, limit int) ([]RunRecord, error)
	// StartedAfter returns a run of scheduleID (of shard, when non-nil)
	// with a fire time after fireTime that has started (it carries
	// startedAt: running or finished after a claim) and is neither a
	// retry nor an operator's run (manual, backfill), or an error
	// wrapping ErrNotFound: the later fire that an older pending fire of
	// a skip or buffer_one schedule must not start after. One read.
	StartedAfter(ctx context.Context, scheduleID string, shard *int, fireTime time.Time) (*RunRecord, error)
	// RunningGPU returns a running run of scheduleID (of shard, when
	// non-nil), other than exceptID (empty for none), that handed its
	// work to a GPU job, or an error wrapping ErrNotFound.
	RunningGPU(ctx context.Context, scheduleID string, shard *int, exceptID string) (*RunRecord, error)
	// RunningRunJob is RunningGPU for runs whose work is a Cloud Run
	// execution (started, or starting).
	RunningRunJob(ctx context.Context, scheduleID string, shard *int, exceptID string) (*RunRecord, error)
	// LiveSibling returns, of the running runs of scheduleID (of shard,
	// when non-nil) decided at createdAt (by the same tick) whose sweepAt
	// is after now, the one with the latest sweepAt, or an error wrapping
	// ErrNotFound.
	LiveSibling(ctx context.Context, scheduleID string, shard *int, createdAt, now time.Time) (*RunRecord, error)

	// PendingNotices returns up to limit runs whose notice is due (notifyAt
	// at or before now), the oldest first: the notification sweep. One
	// indexed read; runs owing nothing are not read.
	PendingNotices(ctx context.Context, now time.Time, limit int) ([]RunRecord, error)
	// NoticeDone clears the notice of run id, queued for at: it was
	// delivered, or (gaveUp non-empty, recorded as notifyError) delivery
	// gave up. Guard: the run's notifyAt is at, so of two deliverers that
	// raced, one clears and the other gets ErrConflict (the event went
	// out twice, never zero times). A lost answer wraps ErrUnknownOutcome:
	// the notice may still be there, and is delivered again.
	NoticeDone(ctx context.Context, id string, at time.Time, gaveUp string) error
	// NoticeRetry records a failed delivery (errMsg) of run id's notice
	// queued for at, counts it in notifyAttempts and moves the notice to
	// next. Guard and lost answers as NoticeDone's.
	NoticeRetry(ctx context.Context, id string, at, next time.Time, errMsg string) error

	// HighestFence is the highest job lease epoch recorded as the fence of
	// any run of schedule scheduleID (0 when none): part of its job
	// lease's epoch floor. One indexed read. It writes nothing.
	HighestFence(ctx context.Context, scheduleID string) (int64, error)

	// DeleteExpired deletes at most limit (1..1000) runs whose expireAt is
	// at or before now, oldest first, and returns how many: the local
	// stand-in for Firestore's TTL policy. Only finished runs carry
	// expireAt, so a pending, running or waiting run is never deleted.
	// Reads and writes are bounded by limit.
	//
	// Guard: each deletion is conditional on the run still carrying an
	// expireAt at or before now.
	//
	// Lost answer: ErrUnknownOutcome (wrapped); deleting again is harmless.
	DeleteExpired(ctx context.Context, now time.Time, limit int) (int, error)
}
