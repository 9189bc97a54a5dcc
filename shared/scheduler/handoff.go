package scheduler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// Dispatcher hands runs to the execution plane: Cloud Tasks in the cloud,
// emulator/tasks locally (shared/taskqueue implements it). Cloud Scheduler
// starts a job's next execution only after the last one finished, so a Tick
// that executed its runs would delay every schedule by the slowest target;
// with a Dispatcher, Tick only decides and enqueues, and each task calls the
// Run function, which executes under the job lease (Engine.Execute).
type Dispatcher interface {
	// Dispatch creates one task that calls Run with t. t.Name is
	// deterministic, and a name that already exists is success: a
	// duplicated tick, or a retry of a Dispatch whose answer was lost,
	// enqueues nothing twice.
	Dispatch(ctx context.Context, t Task) error
}

// Task is one hand-off: the runs of one schedule that one Run invocation
// executes, oldest first, or a page of such hand-offs of several
// schedules. It is the body of the task's HTTP request.
type Task struct {
	// Name is the task id, derived from the runs (TaskName).
	Name string `json:"-"`
	// ScheduleID is the schedule the runs belong to; empty in a page.
	ScheduleID string `json:"scheduleId,omitempty"`
	// Runs are run ids, oldest fire time first; empty in a page.
	Runs []string `json:"runs,omitempty"`
	// Page, when set, is the hand-offs of several schedules that one Run
	// invocation executes at once, each as if it were its own task
	// (pageTasks). Cloud Tasks bills an operation for the create and one
	// for each delivery, and Cloud Run a request fee: a tick's schedules
	// that share a task share them. An entry is never a page itself.
	Page []Task `json:"page,omitempty"`
	// After, when set, is the last run of the previous chunk of the same
	// batch: this task waits (Run answers 503) until that run is no longer
	// pending or running, so a batch split into chunks still executes
	// oldest first.
	After string `json:"after,omitempty"`
	// At, when set, is the earliest time the task may be delivered (a
	// retry's backoff).
	At time.Time `json:"-"`
}

// MaxTaskRuns bounds the runs of one task, so that its body (at most ~100
// bytes a run id) stays far below Run's body limit (MaxTaskBody) and Cloud
// Tasks' task size. A longer batch (a catch-up "all" decides up to
// schedule.MaxMaxCatchup runs at once) is split into chunks chained with
// After.
const MaxTaskRuns = 100

// MaxTaskBody is the Run function's body limit.
const MaxTaskBody = 32 << 10

// TaskName derives a task id from the run ids and a salt. The same runs
// give the same name, which Cloud Tasks refuses to create twice. The salt
// is empty for a tick's decisions and for retries; the sweep sets it to the
// reservation it won, so a run it recovers (its task lost, or its Run dead)
// gets a new task instead of meeting its old name's tombstone. The name
// starts with a hash, as Cloud Tasks advises, so that names do not cluster.
func TaskName(runs []string, salt string) string {
	h := sha256.Sum256([]byte(strings.Join(runs, "\n") + "\n" + salt))
	return "run-" + hex.EncodeToString(h[:20])
}

// runCount is the runs t executes, its page's included.
func (t Task) runCount() int {
	n := len(t.Runs)
	for _, p := range t.Page {
		n += len(p.Runs)
	}
	return n
}

// RunIDs lists the runs t executes, its page's in page order.
func (t Task) RunIDs() []string {
	if len(t.Page) == 0 {
		return t.Runs
	}
	ids := make([]string, 0, t.runCount())
	for _, p := range t.Page {
		ids = append(ids, p.Runs...)
	}
	return ids
}

// pageTasks packs the tasks that can share a delivery into pages of at
// most max runs: those delivered now (no At) that wait for nothing (no
// After). A page's entries run concurrently, each exactly as its own task
// would, so packing changes what a run costs, not what it does. A task
// alone in its page stays as it was (same name, same queue), and so does
// every task when max is 1. A page is named after its entries' names, so
// the same hand-offs give the same page, which Cloud Tasks creates once.
func pageTasks(tasks []Task, max int) []Task {
	if max <= 1 {
		return tasks
	}
	var out, packable, page []Task
	for _, t := range tasks {
		if t.After != "" || !t.At.IsZero() || len(t.Runs) >= max {
			out = append(out, t)
			continue
		}
		packable = append(packable, t)
	}
	// In name order: the same hand-offs, decided in any order (a page's
	// schedules are decided concurrently), make the same pages.
	sort.Slice(packable, func(i, j int) bool { return packable[i].Name < packable[j].Name })
	runs := 0
	flush := func() {
		switch len(page) {
		case 0:
		case 1:
			out = append(out, page[0])
		default:
			names := make([]string, len(page))
			for i, p := range page {
				names[i] = p.Name
				page[i].Name = ""
			}
			out = append(out, Task{Name: TaskName(names, "page"), Page: page})
		}
		page, runs = nil, 0
	}
	for _, t := range packable {
		if runs+len(t.Runs) > max {
			flush()
		}
		page = append(page, t)
		runs += len(t.Runs)
	}
	flush()
	return out
}

// DefaultPageSlots is Config.PageSlots' default: Terraform's
// run_concurrency, the schedules a Run instance executed at once when
// each had its own request.
const DefaultPageSlots = 80

// handOffConcurrency bounds the enqueues one tick has in flight.
const handOffConcurrency = 16

// tasksFor makes one task of each schedule's runs, in order, except for
// allow schedules, which run concurrently without a job lease and get one
// task per run. The catch-up runs of one schedule share a task because,
// handed off one by one, they would be delivered at once, run out of order
// and meet each other's job lease.
func tasksFor(work []*scheduleWork) []Task {
	var out []Task
	for _, w := range work {
		ids := make([]string, len(w.runs))
		for i, r := range w.runs {
			ids[i] = r.ID
		}
		if w.s.Overlap != schedule.OverlapAllow {
			after := ""
			for len(ids) > 0 {
				n := min(MaxTaskRuns, len(ids))
				out = append(out, Task{Name: TaskName(ids[:n], w.salt), ScheduleID: w.s.ID, Runs: ids[:n], After: after})
				after = ids[n-1]
				ids = ids[n:]
			}
			continue
		}
		for _, id := range ids {
			one := []string{id}
			out = append(out, Task{Name: TaskName(one, w.salt), ScheduleID: w.s.ID, Runs: one})
		}
	}
	return out
}

// handOff enqueues the work's tasks, handOffConcurrency at a time. A failed
// enqueue is counted and logged, and its runs stay pending, due at once:
// the next sweep recovers them, under a new task name.
func (e *Engine) handOff(ctx context.Context, work []*scheduleWork, c *counters) {
	tasks := pageTasks(tasksFor(work), e.cfg.TaskRuns)
	byID := map[string]*runDoc{}
	for _, w := range work {
		for _, r := range w.runs {
			byID[r.ID] = r
		}
	}
	sem := make(chan struct{}, handOffConcurrency)
	var wg sync.WaitGroup
	for _, t := range tasks {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ids := t.RunIDs()
			if err := e.cfg.Tasks.Dispatch(ctx, t); err != nil {
				c.errors.Add(1)
				e.log.Error("hand off runs failed; the sweep enqueues them again", "schedule", t.ScheduleID, "runs", ids, "task", t.Name, "err", err)
				e.dueNow(ctx, ids, byID)
				return
			}
			c.enqueued.Add(int64(len(ids)))
		}()
	}
	wg.Wait()
}

// dueNow makes the runs of a task that could not be enqueued due at once,
// so that the next sweep hands them off again, instead of the sweep after
// the decider's reservation (a minute). Conditional on the sweepAt this
// engine wrote; a run claimed or moved meanwhile is left alone.
func (e *Engine) dueNow(ctx context.Context, ids []string, byID map[string]*runDoc) {
	now := e.now().UTC()
	for _, id := range ids {
		r := byID[id]
		if r == nil || !r.SweepAt.After(now) {
			continue
		}
		if err := e.moveSweep(ctx, id, schedule.RunPending, r.SweepAt, now); err != nil && !errors.Is(err, store.ErrConflict) {
			e.log.Warn("make a run that was not handed off due failed; it waits for its reservation", "run", id, "err", err)
		}
	}
}

// ReasonPaused is the reason of a run recorded skipped because its schedule
// was paused after the run was decided; the sweep's recovery and Run both
// record it, and only manual runs of a paused schedule execute.
const ReasonPaused = "schedule paused before the run executed"

// pausedSince reports whether the decided runs of s are to be skipped
// because s was paused after they were decided. A disabled schedule is not
// always a paused one: the decision that spends the last of remainingRuns,
// or the last fire before endAt, disables it in the same guarded write as
// its runs' hand-off, and those runs are the schedule's last, which must
// execute. So a disabled schedule that has no fire left (remainingRuns 0,
// or no fire time after now: endAt passed) has ended, and its decided runs
// run, unless an operator paused it explicitly (pausedAt is set by
// :pause), which still wins. A schedule that ended cannot be paused in the
// sense of a pause skipping fires it would have had: it has none.
func pausedSince(s *schedule.Schedule, now time.Time) bool {
	if s.Enabled {
		return false
	}
	if !s.PausedAt.IsZero() || s.PausedBy != "" {
		return true
	}
	if s.RemainingRuns != nil && *s.RemainingRuns <= 0 {
		return false
	}
	// endAt, or an expression that ends: the tick disables a schedule
	// whose spec has no fire time left, as it does at remainingRuns 0.
	spec, err := s.Spec()
	if err != nil {
		return true // unreadable: as before, a disabled schedule does not run
	}
	loc, err := schedule.LoadLocation(s.TimeZone)
	if err != nil {
		return true
	}
	return !schedule.Next(spec, loc, now).IsZero()
}

// ErrRetryTask says that Execute left a run pending: something failed on
// the way (the database, the lease store), the job lease ended before the
// claim, or a retry met the previous run still holding the job lease. The
// task should be delivered again. The Run function answers 503 for it, and Cloud Tasks
// retries with backoff; the sweep is the safety net when the retries run
// out. Every other outcome answers 200, because a redelivery would change
// nothing: a finished run is not run again. Its errcode.Code is
// Unavailable.
var ErrRetryTask = errcode.New(errcode.Unavailable, "scheduler: run left pending; deliver the task again")

// RunState is one run's state after Execute.
type RunState struct {
	ID     string             `json:"id"`
	Status schedule.RunStatus `json:"status"`
	// Note says why Execute did not execute the run, when it did not.
	Note string `json:"note,omitempty"`
}

// Outcome is Execute's answer, and the Run function's JSON body.
type Outcome struct {
	// ScheduleID and Runs are the task's; a page's are in Page.
	ScheduleID string     `json:"scheduleId,omitempty"`
	Runs       []RunState `json:"runs,omitempty"`
	// Page is the outcome of each entry of a page task, in its order.
	Page []*Outcome `json:"page,omitempty"`
	// Executed counts the runs this delivery claimed and executed (misfire
	// reruns included).
	Executed int `json:"executed"`
	// Errors counts operations that failed.
	Errors int `json:"errors"`
	// Took is the wall time.
	Took string `json:"took"`
}

type deliveryKey struct{}

// withDelivery carries the task's delivery to the claim, which records it on
// the run.
func withDelivery(ctx context.Context, d *schedule.Delivery) context.Context {
	if d == nil {
		return ctx
	}
	return context.WithValue(ctx, deliveryKey{}, d)
}

func deliveryFrom(ctx context.Context) *schedule.Delivery {
	d, _ := ctx.Value(deliveryKey{}).(*schedule.Delivery)
	return d
}

// Execute is the Run function's work (flow 1, step 6): it executes the runs
// of one task, oldest first, each under the schedule's job lease and overlap
// policy (or without a lease for allow), exactly as a tick that executed
// them itself would. Only the claim (pending → running, fenced) executes a
// run, so a redelivered task, a second task for the same run (the sweep's),
// or a concurrent delivery executes nothing twice: a run that is no longer
// pending is reported and left alone.
//
// It returns ErrRetryTask (with the Outcome) when a run is still pending,
// and an error wrapping ErrRetryTask (without one) when the runs or the
// schedule could not be read. A run that does not exist is reported with a
// note: it will not appear later, so the task is not worth delivering again.
func (e *Engine) Execute(ctx context.Context, t Task, d *schedule.Delivery) (*Outcome, error) {
	if len(t.Page) > 0 {
		return e.executePage(ctx, t, d)
	}
	if err := checkTask(t); err != nil {
		return nil, err
	}
	return e.executeOne(ctx, t, d)
}

// checkTask refuses a task no engine would have sent.
func checkTask(t Task) error {
	if len(t.Page) > 0 {
		if t.ScheduleID != "" || len(t.Runs) > 0 {
			return fmt.Errorf("scheduler: execute: a page has no scheduleId or runs of its own")
		}
		for i, p := range t.Page {
			if len(p.Page) > 0 {
				return fmt.Errorf("scheduler: execute: page entry %d is a page", i)
			}
			if err := checkTask(p); err != nil {
				return fmt.Errorf("page entry %d: %w", i, err)
			}
		}
	} else if t.ScheduleID == "" || len(t.Runs) == 0 {
		return fmt.Errorf("scheduler: execute: a task needs scheduleId and runs")
	}
	if n := t.runCount(); n > MaxTaskRuns {
		return fmt.Errorf("scheduler: execute: %d runs; at most %d per task", n, MaxTaskRuns)
	}
	return nil
}

// executePage executes a page's entries at once, each as Execute executes
// a task of its own, and answers ErrRetryTask when any of them does: the
// redelivery executes only what is still pending, because a run that was
// claimed is not pending any more. At once, not one after another, so
// that a slow target delays no other schedule's run.
func (e *Engine) executePage(ctx context.Context, t Task, d *schedule.Delivery) (*Outcome, error) {
	start := time.Now()
	if err := checkTask(t); err != nil {
		return nil, err
	}
	out := &Outcome{Page: make([]*Outcome, len(t.Page))}
	errs := make([]error, len(t.Page))
	var wg sync.WaitGroup
	for i, p := range t.Page {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.pageSlots <- struct{}{}
			defer func() { <-e.pageSlots }()
			o, err := e.executeOne(ctx, p, d)
			if o == nil {
				// Nothing was read: every run of the entry is still to do.
				o = &Outcome{ScheduleID: p.ScheduleID, Errors: 1}
				for _, id := range p.Runs {
					o.Runs = append(o.Runs, RunState{ID: id, Status: schedule.RunPending, Note: "not read: " + err.Error()})
				}
			}
			out.Page[i], errs[i] = o, err
		}()
	}
	wg.Wait()
	var retry error
	for i, o := range out.Page {
		out.Executed += o.Executed
		out.Errors += o.Errors
		if errs[i] != nil && retry == nil {
			retry = errs[i]
		}
	}
	out.Took = time.Since(start).String()
	if retry != nil {
		return out, fmt.Errorf("scheduler: execute page: %w: %w", retry, ErrRetryTask)
	}
	return out, nil
}

// executeOne is Execute for one schedule's task.
func (e *Engine) executeOne(ctx context.Context, t Task, d *schedule.Delivery) (*Outcome, error) {
	start := time.Now()
	out := &Outcome{ScheduleID: t.ScheduleID}
	if t.After != "" {
		// Chunk n+1 of a batch waits for chunk n's last run to be done.
		prev, err := e.runs.Get(ctx, t.After)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("scheduler: execute: read run %s: %w: %w", t.After, err, ErrRetryTask)
		}
		if err == nil && (prev.Status == schedule.RunPending || prev.Status == schedule.RunRunning) {
			out.Took = time.Since(start).String()
			for _, id := range t.Runs {
				out.Runs = append(out.Runs, RunState{ID: id, Status: schedule.RunPending, Note: "waiting behind " + t.After})
			}
			return out, ErrRetryTask
		}
	}
	var c counters
	w := &scheduleWork{}
	// The schedule is read while the runs are: nearly every delivery
	// finds a run pending and needs it, and the two reads in a row were
	// a round trip of every run's time, which the Run instance is billed
	// for (docs/cost.md). A redelivery that finds nothing pending wastes
	// the read.
	type scheduleRead struct {
		s   schedule.Schedule
		err error
	}
	sched := make(chan scheduleRead, 1)
	go func() {
		var r scheduleRead
		r.err = e.getSchedule(ctx, t.ScheduleID, &r.s)
		sched <- r
	}()
	states := make([]RunState, len(t.Runs))
	found := 0
	for i, id := range t.Runs {
		states[i] = RunState{ID: id}
		rd, err := e.runs.Get(ctx, id)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				states[i].Note = "no such run"
				continue
			}
			return nil, fmt.Errorf("scheduler: execute: read run %s: %w: %w", id, err, ErrRetryTask)
		}
		found++
		states[i].Status = rd.Status
		if rd.ScheduleID != t.ScheduleID {
			states[i].Note = "belongs to schedule " + rd.ScheduleID
			continue
		}
		if rd.Status != schedule.RunPending {
			// A redelivery, or another task's run: whoever claimed it owns it.
			states[i].Note = "not pending: already claimed or finished"
			continue
		}
		w.runs = append(w.runs, rd)
	}
	if found == 0 {
		// Nothing to wait for: a run is inserted before its task is
		// created, so a missing one will not appear later.
		e.log.Warn("task names no existing run", "schedule", t.ScheduleID, "runs", t.Runs)
	}
	if len(w.runs) > 0 {
		r := <-sched
		w.s = r.s
		if err := r.err; err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				return nil, fmt.Errorf("scheduler: execute: read schedule %s: %w: %w", t.ScheduleID, err, ErrRetryTask)
			}
			now := e.now().UTC()
			for _, r := range w.runs {
				e.abandon(ctx, r, "schedule deleted before the run executed", now, &c)
			}
			w.runs = nil
		}
	}
	if len(w.runs) > 0 && pausedSince(&w.s, e.now().UTC()) {
		// Paused since the decision: as the sweep's recovery does, run
		// only what an operator asked for (trigger, backfill).
		now := e.now().UTC()
		kept := w.runs[:0]
		for _, r := range w.runs {
			if r.Source.OperatorAsked() {
				kept = append(kept, r)
				continue
			}
			e.abandon(ctx, r, ReasonPaused, now, &c)
		}
		w.runs = kept
	}
	if len(w.runs) > 0 {
		e.execute(withBudget(withDelivery(ctx, d), start.Add(e.cfg.RunBudget)), []*scheduleWork{w}, &c)
	}
	// Read back what happened: the answer says it, and a run still pending
	// after a failure is what makes the task worth delivering again. A run
	// this execution claimed is not pending any more, whatever came after:
	// its status is what we last wrote, without a read (a round trip of
	// every run's billed time, and a read unit).
	pending := false
	for i := range states {
		if states[i].Note != "" {
			continue
		}
		if st, ok := c.settled.Load(states[i].ID); ok {
			states[i].Status = st.(schedule.RunStatus) //nolint:forcetypeassert // settle stores nothing else
			continue
		}
		rd, err := e.runs.Get(ctx, states[i].ID)
		if err != nil {
			c.errors.Add(1)
			pending = true // unknown: let the queue deliver again; the claim keeps it once
			continue
		}
		states[i].Status = rd.Status
		if rd.Status == schedule.RunPending {
			pending = true
		}
	}
	out.Runs = states
	out.Executed = int(c.fired.Load())
	out.Errors = int(c.errors.Load())
	out.Took = time.Since(start).String()
	if pending {
		return out, ErrRetryTask
	}
	return out, nil
}
