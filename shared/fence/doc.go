// Package fence lets a service that baton calls refuse a zombie holder.
//
// A lease guarantees one live holder, not one writer: a holder that paused
// (a long GC, a frozen VM) past its lease and wakes up still believes it
// holds it, and its late requests arrive after a newer holder's. baton's own
// database writes are fenced by the lease's epoch, which only goes up. The
// same token leaves baton on every http target request, as the header
//
//	X-Baton-Fence: <lease>:<epoch>     e.g. X-Baton-Fence: job-nightly:42
//
// (a GPU job gets its slot's epoch as BATON_JOB_FENCE), so that the target
// can refuse it too: keep the highest epoch seen per lease, accept a
// request whose epoch is at least that, and refuse a lower one. This is
// Kleppmann's fencing token and Chubby's sequencer, at the edge of baton.
//
// Checker keeps the highest epochs in memory, which is right for a single
// process. A service with several instances keeps them where its own data
// lives and makes the check and the write one conditional update, for
// example in SQL:
//
//	UPDATE fences SET epoch = $2 WHERE lease = $1 AND epoch <= $2
//	-- 0 rows (and the row exists): the caller is a zombie; refuse.
//
// Runs of allow schedules hold no lease and carry no fence.
package fence
