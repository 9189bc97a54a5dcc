// Package catalog is baton's schedule service: create, read, update
// (JSON merge patch), delete, pause, resume and trigger-now for schedules,
// plus run history, over shared/store. NewHandler serves it as the REST API
// behind the Schedules function.
//
// # Every write validates everything
//
// Create and Update decode strictly, merge, then run the whole schedule
// through (*schedule.Schedule).Normalize and recompute nextRunAt from now.
// An invalid schedule is refused with a *schedule.FieldError naming the
// field, and nothing is written. Because the tick reads nextRunAt from the
// database, a change is live at the next tick: nobody redeploys.
//
// # Conditional writes
//
// Firestore has no retryable writes, so every write here is idempotent or
// conditional (DESIGN.md §5). Create inserts with the schedule id as _id, so
// a duplicate is ErrExists, never a second document; since the store also
// answers "already there" for an insert of ours whose answer was lost,
// Create compares the stored schedule with its own and answers success
// when they are the same. Update and Delete are
// conditional on the stored version: with an explicit precondition
// (If-Match) a changed version is ErrVersionMismatch; without one, Update
// re-reads and re-applies the patch, because a merge patch means "these
// fields, on whatever is there now".
//
// # History of changes
//
// Every write (create, update, pause, resume, delete) records a
// schedule.Change: actor (WithActor; the handler puts httpapi.Actor there),
// time, version, field-level diff. The change travels in the document the
// write writes (Schedule.LastChange), so a write cannot land without it.
// Before its conditional write, the next write copies the stored version's
// change into schedule_versions (copyForward), final, under the
// deterministic id schedule.VersionID; every writer that read the version
// copies the same record, so retries and losing racers rewrite it
// identically, and a failed copy fails the write instead of losing the
// change. A delete writes its record first, not final (it never overwrites
// a final one, and ListVersions hides it while the schedule is there).
// Records past VersionsKept are pruned in bounded batches by the writes;
// each expires at At + history.keep (the sweep or Firestore's TTL deletes
// it).
//
// # Lists
//
// Schedules are listed by _id, and runs newest first by (fireTime, _id),
// both with store.Page's keyset cursor, never skip: a page of n costs n
// document reads however deep it is. Page tokens are opaque to callers.
// The runs query is served by the "history" index in mongostore.SchedulerIndexes,
// and the schedule list by its "list" index on _id: Firestore indexes
// nothing, not even _id, unless told to.
//
// # Calendars
//
// Calendars (calendars.go) are shared sets of days, written whole with PUT
// (create, or a compare-and-set replace) and listed by _id like schedules.
// A schedule write that newly names a calendar that does not exist is a
// 400 naming the entry; deleting a calendar that schedules still name is
// allowed, and the tick treats it as having no days.
package catalog
