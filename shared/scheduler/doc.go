// Package scheduler is baton's tick algorithm (DESIGN.md flows 1, 3 and 4):
// it decides which schedules fire, records each decision as a run document
// with a deterministic _id, advances nextRunAt with a fenced conditional
// update, and executes the fired runs, each under its own job lease.
//
// # Tick
//
// Engine.Tick takes the tick lease ("tick", object leases/tick.json). A busy
// lease is a normal outcome: the Summary says "skipped" and names the
// holder. Under the lease it pages through the due schedules
// ({enabled: true, nextRunAt <= now}, sorted by (nextRunAt, _id), keyset
// cursor, never skip), works out each schedule's fire times from its
// catch-up policy, inserts one pending run per fire time
// (store.InsertIdempotent: a duplicate key means an earlier or concurrent
// tick already decided it) and advances nextRunAt with store.FencedUpdate,
// whose filter holds the old nextRunAt and whose fence is the tick lease's
// epoch. Then it releases the tick lease — the lease covers deciding, never
// executing — executes the runs, and sweeps. A tick whose advance is
// refused as stale (a newer tick decided the schedule) stops, and records
// skipped the runs it inserted for that schedule; one that stops early for
// any reason still executes what it had committed.
//
// # Exactly once
//
// Three mechanisms together make a fire time run once:
//
//   - the run _id is schedule.RunID(scheduleID, fireTime, …), so a
//     duplicated or concurrent tick inserts nothing new;
//   - nextRunAt only moves forward from the value the tick read, under the
//     tick lease's fencing epoch, so a tick that lost its lease cannot move
//     it;
//   - a run is executed only by whoever moves it from pending to running
//     with a conditional update carrying the job lease's epoch (the claim),
//     so a run re-decided after a crash, or found by the sweep, is executed
//     by one claimant only.
//
// # Overlap and misfire
//
// "The previous run still holds the job lease" is detected where it is
// true: when the executor's Acquire of job-<scheduleID> returns
// lease.ErrHeld. skip records the run as skipped with a reason; buffer_one
// records it as buffered and sets the schedule's misfire flag; allow takes
// no job lease at all. The buffer_one hand-off is race-free: the holder
// clears the flag (conditionally) before releasing and runs once more, and
// checks it once more after releasing, re-acquiring if it is set; the
// buffering side, after setting the flag, tries to acquire the lease
// itself. Whichever of the two acquires the lease after the flag is set
// sees it, so no misfire is lost, and any number of misfires during one run
// collapse into one extra run with source "misfire" (ElasticJob semantics).
//
// # Calendars
//
// A due schedule that names calendars (excludeCalendars, onlyCalendars)
// has the fire times they skip taken out of its plan before remainingRuns
// counts, each recorded skipped with the calendar as its reason under the
// run id it would have had, so a duplicated tick records it once
// (calendar.go). A tick reads each named calendar at most once
// (calendarCache), and only for schedules with a fire time to decide; a
// calendar that is gone has no days, and the schedule keeps advancing.
//
// # Daemon
//
// Daemon holds the tick lease continuously, ticks on its own timer at
// second granularity, and wakes early on schedule edits, which it sees by a
// change stream where the server has them, or by polling on
// (updatedAt, _id) with a keyset cursor where it does not (the emulator and,
// by default, Firestore).
package scheduler
