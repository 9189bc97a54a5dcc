package store

import (
	"context"
	"time"

	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/schedule"
)

// Schedules is the scheduler's view of the schedules collection: the due
// query, the fenced advance, the misfire flag of buffer_one, and the reads
// the sweep, the daemon and the epoch floor make.
//
// Two fences guard a schedule. The tick lease's epoch (Schedule.Fence)
// guards the advance of nextRunAt; the job lease's epoch (Misfire.JobFence)
// guards the clearing of the misfire flag. Each is recorded by the write it
// guards, so a holder that paused past its lease cannot write after a newer
// holder has.
type Schedules interface {
	// Due reads one page of the due schedules: enabled, with nextRunAt at
	// or before now, in (nextRunAt, id) order, at most limit of them
	// (1..1000), from the position token names (empty for the first page).
	// It reads only due documents, one per schedule returned, however deep
	// the page: a keyset cursor, not skip. next is empty on the last page;
	// pass it back with the same now for the next one. A schedule inserted
	// behind the cursor during a scan is seen by the next tick; none is
	// returned twice. A token from another query is ErrBadPageToken. It
	// writes nothing.
	Due(ctx context.Context, now time.Time, limit int, token string) (page []schedule.Schedule, next string, err error)

	// DueInShard is Due restricted to the schedules of one virtual decider
	// shard (Schedule.DeciderShard == vshard): the read of one partition's
	// decider, which holds that shard's tick lease. The same contract as
	// Due otherwise; a token of another shard's page is ErrBadPageToken. It
	// reads only the shard's due documents (an index led by the shard), so
	// deciders of different shards never read or write one index range.
	DueInShard(ctx context.Context, vshard int, now time.Time, limit int, token string) (page []schedule.Schedule, next string, err error)

	// NextDue reads the earliest nextRunAt of an enabled schedule (one
	// document), or ok false when no schedule is enabled. It writes
	// nothing.
	NextDue(ctx context.Context) (at time.Time, ok bool, err error)

	// Advance moves the schedule read as read to its next fire time next,
	// under the tick lease fence f, and records f.Epoch as the schedule's
	// fence; a zero next disables the schedule instead (the expression never
	// fires again). A non-nil remaining is stored as the schedule's
	// remainingRuns in the same write, so the count of fires left moves
	// exactly when the decision is committed, once.
	//
	// Guard: the stored schedule still has the nextRunAt read (and, when
	// read.Version is not 0, the version read: an edit may recompute the same
	// nextRunAt), and its stored fence is at most f.Epoch. So of two ticks
	// that read the same nextRunAt, at most one advances.
	//
	// Errors: ErrStaleFence (wrapped) when a newer tick lease epoch has
	// advanced the schedule (the caller must stop); ErrConflict (wrapped)
	// when the nextRunAt or version moved, or the schedule was deleted, with
	// no newer fence (an edit won; the caller goes on). Telling the two apart
	// costs one read, on the refusal path only.
	//
	// Lost answer: ErrUnknownOutcome (wrapped), never ErrConflict or
	// ErrStaleFence: a write that landed is not retried (its retry would
	// miss its own condition), so the caller must not take it for refused.
	Advance(ctx context.Context, read *schedule.Schedule, next time.Time, remaining *int64, f Fence) error

	// DropChange removes from schedule id's document the copy of the
	// change that produced its version (lastChange), once the caller has
	// written that change's record into the history (Catalog.PutVersion):
	// the copy is there so that a write cannot land without its change,
	// and once the record is written it only makes every later advance
	// rewrite a larger document (a create's change is most of a schedule's
	// bytes: two Firestore write units an advance instead of one).
	//
	// Guard: the stored version is still version and its lastChange is
	// that version's; otherwise ErrConflict (wrapped), and nothing is
	// written: an edit has landed, and its change is the document's now.
	// Lost answer: ErrUnknownOutcome (wrapped); dropping again is safe.
	DropChange(ctx context.Context, id string, version int64) error

	// Get reads one schedule by id, or returns ErrNotFound (wrapped). It
	// writes nothing.
	Get(ctx context.Context, id string) (schedule.Schedule, error)

	// SetMisfire sets the misfire flag of schedule id for a fire buffered at
	// fireTime. A flag that is down opens a new window (misfireAt =
	// fireTime); a flag that is up joins the open one (misfireAt becomes
	// the later of the two). With bump, the misfire sequence (Misfire.Seq)
	// goes up by one, so the misfire run of the window gets a new id.
	//
	// Guard: none beyond the flag's own state, which picks the write (not a
	// fence: the buffering executor holds no job lease). Setting it again is
	// idempotent, except that a repeated bump skips a number.
	//
	// Errors: ErrConflict (wrapped) when both writes missed: the flag was
	// cleared between them, or the schedule is gone; the caller may try
	// again.
	//
	// Lost answer: ErrUnknownOutcome (wrapped); the caller reads the flag
	// back (HasMisfire) to settle it.
	SetMisfire(ctx context.Context, id string, fireTime time.Time, bump bool) error

	// ClearMisfire clears the misfire flag of schedule id under the job
	// lease epoch jobEpoch, records jobEpoch as the schedule's job fence,
	// and returns the misfire bookkeeping as it is after the clear (the
	// window's fire time and sequence name the misfire run).
	//
	// Guard: the flag is set, and the stored job fence is at most jobEpoch
	// (or absent).
	//
	// Errors: ErrConflict (wrapped) when the flag is not set, the schedule
	// is gone, or a newer job lease epoch has cleared it: this method does
	// not tell a stale fence apart (it would cost a read, and the caller
	// does the same in every case: nothing).
	//
	// Lost answer: the schedule is read back; when the flag is down under
	// jobEpoch, the clear is taken as ours and returns nil with the state
	// read. Otherwise the error wraps ErrUnknownOutcome.
	ClearMisfire(ctx context.Context, id string, jobEpoch int64) (Misfire, error)

	// PausedUntil reads up to limit paused schedules whose pausedUntil is
	// at or before now, oldest first: the timed pauses that are over. Only
	// timed pauses carry pausedUntil, so the read grows with the pauses
	// that are due, not with the schedules. It writes nothing.
	PausedUntil(ctx context.Context, now time.Time, limit int) ([]schedule.Schedule, error)

	// Unpause ends the timed pause of the schedule read as read: enabled,
	// nextRunAt next, the version one up, updatedAt at, and the pause's
	// reason, author, start and end removed. A zero next ends only the
	// timer: the schedule stays paused, with its reason, author and start,
	// and no pausedUntil (it has no fire time left to resume at). The same
	// write sets the schedule's lastChange to the change it makes (by
	// "baton"); copying the previous one into the history is the caller's.
	//
	// Guard: the stored schedule is still paused at the version read (an
	// operator's resume or edit since wins).
	//
	// Errors: ErrConflict (wrapped) when the guard fails or the schedule
	// is gone.
	//
	// Lost answer: ErrUnknownOutcome (wrapped); a repeat is refused by the
	// guard if the first landed, so the caller reads again rather than
	// retry.
	Unpause(ctx context.Context, read *schedule.Schedule, next, at time.Time) error

	// HasMisfire reports whether schedule id has its misfire flag set (a
	// metered count of at most one document). A missing schedule is false.
	HasMisfire(ctx context.Context, id string) (bool, error)

	// Misfired reads at most limit schedules whose misfire flag is set and
	// whose id sorts after after ("": from the first), in id order: a page
	// of the sweep's stranded misfires, which the caller resumes after the
	// last id returned. Without the order and the cursor, the database's
	// natural order (Firestore's is neither insertion nor _id order, and
	// may be the same every time) could hand the same flagged schedules,
	// the ones the sweep must leave alone, to every sweep and starve the
	// rest. It writes nothing.
	Misfired(ctx context.Context, after string, limit int) ([]schedule.Schedule, error)

	// EditedAfter reads at most limit schedules edited after the position
	// (updatedAt, id) = (after, afterID), in (updatedAt, id) order: the
	// daemon's poll for edits where there is no change stream. The caller
	// resumes from the last schedule returned. It writes nothing.
	EditedAfter(ctx context.Context, after time.Time, afterID string, limit int) ([]schedule.Schedule, error)

	// HighestTickFence is the highest tick lease epoch recorded on any
	// schedule (0 when none): the tick lease's epoch floor. One indexed
	// read.
	HighestTickFence(ctx context.Context) (int64, error)

	// JobFence is the job lease epoch recorded on schedule id (0 when none,
	// or the schedule is gone): part of its job lease's epoch floor.
	JobFence(ctx context.Context, id string) (int64, error)
}

// DeciderShardBackfiller is an optional capability of a Backend: storing
// the decider shard (schedule.DeciderShardOf) on schedules written before
// baton had decider shards, or under another V. DueInShard cannot see a
// schedule without one. Backends whose schedules all went through
// schedule.Normalize (in-memory ones) need not have it.
type DeciderShardBackfiller interface {
	// BackfillDeciderShards sets the decider shard among v shards on every
	// schedule whose stored one is missing or differs, pageSize schedules
	// a read, and returns how many it wrote. It is idempotent and safe
	// beside any other write: the value is a pure function of the id.
	BackfillDeciderShards(ctx context.Context, v, pageSize int) (written int, err error)
}

// Misfire is a schedule's buffer_one bookkeeping.
type Misfire struct {
	// Set is the misfire flag.
	Set bool
	// At is the latest fire time buffered since the flag was last cleared:
	// the misfire run's fire time.
	At time.Time
	// Seq is bumped by each setting that starts a new misfire run id.
	Seq int64
	// JobFence is the job lease epoch that last cleared the flag.
	JobFence int64
}

// ScheduleWatcher is an optional capability of a Schedules: a stream of
// schedule edits, so the daemon wakes at once for an edit that moves a
// schedule earlier. The daemon asks for it with a type assertion and polls
// (EditedAfter) when the view does not have it, or when WatchSchedules
// fails.
type ScheduleWatcher interface {
	// WatchSchedules opens a stream of the edits made from now on. When
	// the server cannot watch (no change streams: FerretDB, the emulator)
	// the error wraps ErrCannotWatch; any other error is a failure to open
	// the stream (the context ended, the connection failed).
	WatchSchedules(ctx context.Context) (ScheduleStream, error)
}

// ScheduleStream is an open stream of schedule edits. It is not safe for
// concurrent use.
type ScheduleStream interface {
	// Next blocks until the next edit and returns it, or returns false
	// when the stream ended: ctx ended, or the stream failed (Err).
	Next(ctx context.Context) (ScheduleEdit, bool)
	// Err is the error that ended the stream, or nil.
	Err() error
	// Close releases the stream.
	Close(ctx context.Context) error
}

// ScheduleEdit is one edit a ScheduleStream saw.
type ScheduleEdit struct {
	// ID is the edited schedule's id ("" when the event names none).
	ID string
	// NextRunAt is the schedule's nextRunAt after the edit, or zero when
	// unknown (a delete, or an event without the document).
	NextRunAt time.Time
}

// ErrCannotWatch says the server has no change streams, so
// ScheduleWatcher cannot open a stream; the caller polls instead.
// Unimplemented.
var ErrCannotWatch = errcode.New(errcode.Unimplemented, "store: the server cannot watch for changes (no change streams)")
