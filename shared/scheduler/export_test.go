package scheduler

// SetAfterInsert installs a hook that runs after a schedule's runs are
// inserted and before its nextRunAt is advanced; an error aborts the tick
// there, as a crash would.
func SetAfterInsert(e *Engine, fn func(scheduleID string) error) { e.afterInsert = fn }

// SetBeforeInsert installs a hook that runs when a schedule's runs are about
// to be inserted, after the tick lease was last checked (the moment a
// paused tick would wake past its lease); an error aborts the tick there.
func SetBeforeInsert(e *Engine, fn func(scheduleID string) error) { e.beforeInsert = fn }

// SetBeforeRelease installs a hook that runs in a job lease holder after its
// last misfire check and before it releases the lease.
func SetBeforeRelease(e *Engine, fn func(scheduleID string)) { e.beforeRelease = fn }

// SetBeforeMisfireWrite installs a hook that runs just before the second
// write of buffer_one's two-write steps ("flag" and "run").
func SetBeforeMisfireWrite(e *Engine, fn func(scheduleID, step string)) { e.beforeMisfireWrite = fn }

// SetBeforeGroupWait installs a hook that runs just before a run records
// that it waits for its concurrency group.
func SetBeforeGroupWait(e *Engine, fn func(runID string)) { e.beforeGroupWait = fn }

// PageTasks is pageTasks, for the packing's own tests.
func PageTasks(tasks []Task, max int) []Task { return pageTasks(tasks, max) }
