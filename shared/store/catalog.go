package store

import (
	"context"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
)

// MaxMergedReads bounds the documents one page of limit runs of
// Catalog.ListAllRuns reads without a ScheduleID: a query per decider
// shard (and one for the runs stored without a shard), each at most limit.
func MaxMergedReads(limit int) int64 {
	return int64(schedule.DeciderShards()+1) * int64(limit)
}

// RunFilter selects runs across schedules for Catalog.ListAllRuns. A zero
// field matches every run.
type RunFilter struct {
	// Status, when set, keeps the runs in that status.
	Status schedule.RunStatus
	// Source, when set, keeps the runs of that source.
	Source schedule.Source
	// ScheduleID, when set, keeps the runs of that schedule.
	ScheduleID string
	// Since, when set, keeps the runs whose fire time is at or after it.
	Since time.Time
}

// Indexed reports whether an implementation must serve f from an index
// with the list's keyset order (fire time, then id, newest first): no
// filter; Status, Source or ScheduleID alone; or ScheduleID with Status,
// each with or without Since. Other combinations (Source with Status or
// ScheduleID) have no index, and ListAllRuns refuses them rather than scan.
func (f RunFilter) Indexed() bool {
	if f.Source == "" {
		return true
	}
	return f.Status == "" && f.ScheduleID == ""
}

// Catalog is the Schedules API's view: schedule create, read, list,
// versioned update and delete, and a schedule's run history. Validation,
// defaults and versions are the caller's (shared/catalog); the view stores
// what it is given, under the conditions each method names.
type Catalog interface {
	// Create inserts sc under its id.
	//
	// Guard: no document has sc.ID.
	//
	// Errors: ErrConflict (wrapped) when the id is taken by another
	// schedule, or when the schedule found under it cannot be shown to be sc
	// (a failed read-back is taken for "taken": answering "exists" for the
	// caller's own create is the safe mistake).
	//
	// Lost answer: the id is read back; a stored schedule equal to sc field
	// for field (down to createdAt, the caller's clock) is this create, and
	// Create returns nil. A read-back that fails too gives ErrUnknownOutcome
	// (wrapped).
	Create(ctx context.Context, sc *schedule.Schedule) error

	// Get reads one schedule by id, or returns ErrNotFound (wrapped). It
	// writes nothing.
	Get(ctx context.Context, id string) (schedule.Schedule, error)

	// ListSchedules reads one page of schedules in id order, at most limit
	// (1..1000), from the position token names (empty for the first page),
	// with a keyset cursor: a page of n reads n documents, however deep.
	// next is empty on the last page. A token that is malformed, edited or
	// from another list is ErrBadPageToken (wrapped). It writes nothing.
	//
	// sel, when given, are label terms (schedule.LabelSelector: =, !=,
	// in) a schedule must all satisfy to be listed; the filter is part of
	// the query (= and in are served by the labels index), still
	// keyset-paged, and a token is bound to sel.
	ListSchedules(ctx context.Context, limit int, token string, sel ...schedule.LabelTerm) (page []schedule.Schedule, next string, err error)

	// ListRuns reads one page of the runs of schedule scheduleID, newest
	// fire time first (ties by id), as ListSchedules pages. Runs outlive
	// their schedule; an id without runs gives an empty page, not an error.
	ListRuns(ctx context.Context, scheduleID string, limit int, token string) (page []schedule.Run, next string, err error)

	// ListAllRuns reads one page of the runs f selects, across schedules,
	// newest fire time first (ties by id), as ListSchedules pages. With
	// ScheduleID set, a page of n reads n documents. Without it, the
	// indexes lead with the decider shard (the runs' vshard, so that a
	// minute's inserts do not write one hot range), and a page may merge
	// one query per shard: it reads at most (DeciderShards()+1) × limit
	// documents (MaxMergedReads). A token is bound to f: one from another
	// filter is ErrBadPageToken (wrapped). A filter that is not Indexed is
	// ErrUnindexed (wrapped), with nothing read. It writes nothing.
	ListAllRuns(ctx context.Context, f RunFilter, limit int, token string) (page []schedule.Run, next string, err error)

	// GetRun reads one run by id, or returns ErrNotFound (wrapped). It
	// writes nothing.
	GetRun(ctx context.Context, id string) (schedule.Run, error)

	// Update replaces the stored schedule cur with next (same id): every
	// field next holds is written, and the fields cur holds that next
	// omits are removed, except the fields the tick owns (the misfire
	// flag, its fences) and the id and createdAt, which are never written,
	// so an edit racing a tick cannot undo the tick's bookkeeping.
	//
	// Guard: the stored version is still cur.Version (compare-and-set).
	//
	// Errors: ErrConflict (wrapped) when the version moved or the schedule
	// is gone; the caller re-reads to tell which.
	//
	// Lost answer: ErrUnknownOutcome (wrapped), never ErrConflict; the
	// write is not retried (its retry would miss its own condition).
	Update(ctx context.Context, cur, next *schedule.Schedule) error

	// Delete removes schedule id; its runs stay, as history.
	//
	// Guard: the schedule exists and, when version is not 0, its stored
	// version is version.
	//
	// Errors: ErrConflict (wrapped) when nothing matched: gone, or another
	// version.
	//
	// Lost answer: ErrUnknownOutcome (wrapped).
	Delete(ctx context.Context, id string, version int64) error

	// PutVersion writes the change record v under its _id (v.ID), whole,
	// replacing the document there: writing the same record again is
	// harmless, so a lost answer is retried.
	//
	// Guard: when v is not Final, the stored record (if any) is not Final
	// either: a record that may not have landed never overwrites one that
	// did.
	//
	// Errors: ErrConflict (wrapped) when the guard fails.
	//
	// Lost answer: retried (the write is idempotent); ErrUnknownOutcome
	// (wrapped) when the retries run out.
	PutVersion(ctx context.Context, v *schedule.VersionRecord) error

	// ListVersions reads one page of the change records of schedule
	// scheduleID, newest first (_id descending: incarnation, then
	// version), as ListSchedules pages: a page of n reads n documents. An
	// id without records gives an empty page. It writes nothing.
	ListVersions(ctx context.Context, scheduleID string, limit int, token string) (page []schedule.VersionRecord, next string, err error)

	// PruneVersions deletes the oldest change records of schedule
	// scheduleID whose _id is below belowID (the record a retention bound
	// keeps last), at most limit (1..1000) of them, and returns how many
	// it deleted: reads and writes are bounded by limit.
	//
	// Guard: none (every record it deletes is past the bound).
	//
	// Lost answer: ErrUnknownOutcome (wrapped); pruning again is harmless.
	PruneVersions(ctx context.Context, scheduleID, belowID string, limit int) (int, error)

	// DeleteExpiredVersions deletes at most limit (1..1000) change
	// records whose expireAt is at or before now, oldest first, and
	// returns how many: where the database has no TTL policy (FerretDB),
	// the sweep calls it. Reads and writes are bounded by limit.
	DeleteExpiredVersions(ctx context.Context, now time.Time, limit int) (int, error)
}
