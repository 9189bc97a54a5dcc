package tasks

import (
	"container/heap"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// queue is one queue's configuration, its tasks and its dispatch state.
// Every field is guarded by Server.mu.
type queue struct {
	name, id string
	pb       *cloudtaskspb.Queue // config with defaults filled, and state

	tasks map[string]*task // live tasks by full name
	ready readyHeap        // live tasks not in flight, by (schedule, seq)
	// inflight counts attempts in flight, for max_concurrent_dispatches.
	inflight int
	// tat is the token bucket as GCRA's theoretical arrival time: a
	// dispatch at now is allowed when now ≥ tat − (burst−1)·interval, and
	// moves tat to max(tat, now) + interval. Integer time keeps the
	// spacing exact: with burst 1, dispatches are at least interval apart.
	tat time.Time

	tombs     map[string]time.Time // task name → when it is free again
	tombOrder []tomb               // the same, oldest first, to expire them

	wake chan struct{} // buffered 1: something changed, look again
	gone chan struct{} // closed by DeleteQueue
}

type tomb struct {
	name  string
	until time.Time
}

// task is one live task. The proto is the FULL view, kept current for
// GetTask.
type task struct {
	pb       *cloudtaskspb.Task
	id       string
	seq      uint64
	schedule time.Time // when the next attempt is due
	index    int       // in queue.ready; -1 when not there (in flight)
	inflight bool
	deleted  bool // removed while an attempt was in flight

	attempts   int       // dispatches so far
	executions int       // earlier attempts answered with a status below 500
	first      time.Time // start of attempt 1, for max_retry_duration
	prevStatus int       // status of the previous attempt, 0 for none
	prevReason string    // why the previous attempt failed
}

// readyHeap orders tasks by due time, then creation: "oldest first".
type readyHeap []*task

func (h readyHeap) Len() int { return len(h) }
func (h readyHeap) Less(i, j int) bool {
	if !h[i].schedule.Equal(h[j].schedule) {
		return h[i].schedule.Before(h[j].schedule)
	}
	return h[i].seq < h[j].seq
}
func (h readyHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *readyHeap) Push(x any) {
	t := x.(*task)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *readyHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.index = -1
	return t
}

func newQueue(pb *cloudtaskspb.Queue, id string) *queue {
	return &queue{
		name: pb.Name, id: id, pb: pb,
		tasks: map[string]*task{}, tombs: map[string]time.Time{},
		wake: make(chan struct{}, 1), gone: make(chan struct{}),
	}
}

// poke wakes the queue's loop without blocking.
func (q *queue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// taken reports whether name belongs to a live task or an unexpired
// tombstone, expiring old tombstones on the way.
func (q *queue) taken(name string, now time.Time) bool {
	for len(q.tombOrder) > 0 && !q.tombOrder[0].until.After(now) {
		t := q.tombOrder[0]
		q.tombOrder = q.tombOrder[1:]
		if until, ok := q.tombs[t.name]; ok && !until.After(now) {
			delete(q.tombs, t.name)
		}
	}
	if _, live := q.tasks[name]; live {
		return true
	}
	until, ok := q.tombs[name]
	return ok && until.After(now)
}

// removeLocked ends a live task and keeps its name taken until the
// tombstone expires. Every tombstone has the same length, so tombOrder
// stays sorted by expiry.
func (s *Server) removeLocked(q *queue, t *task, now time.Time) {
	if t.index >= 0 {
		heap.Remove(&q.ready, t.index)
	}
	if t.inflight {
		t.deleted = true
	}
	delete(q.tasks, t.pb.Name)
	until := now.Add(s.tombstone)
	q.tombs[t.pb.Name] = until
	q.tombOrder = append(q.tombOrder, tomb{t.pb.Name, until})
	s.logJournal(s.appendLocked(record{Op: "rm", Name: t.pb.Name, Until: until}))
}

// loop dispatches q's tasks as they fall due until the queue is deleted or
// the server stops.
func (s *Server) loop(q *queue) {
	defer s.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		s.mu.Lock()
		next, ok := s.dispatchLocked(q, time.Now())
		s.mu.Unlock()
		var due <-chan time.Time
		if ok {
			timer.Reset(time.Until(next))
			due = timer.C
		}
		select {
		case <-s.stopCtx.Done():
			return
		case <-q.gone:
			return
		case <-q.wake:
		case <-due:
		}
		timer.Stop()
	}
}

// dispatchLocked starts every attempt that is due and allowed at now, and
// returns when to look again (ok false: only when poked, by a new task, an
// attempt ending, a resume or a config change).
func (s *Server) dispatchLocked(q *queue, now time.Time) (next time.Time, ok bool) {
	if s.stopping || q.pb.State != cloudtaskspb.Queue_RUNNING {
		return time.Time{}, false
	}
	rl := q.pb.RateLimits
	// A rate below one a day is taken as one a day, so the products below
	// stay far inside time.Duration.
	interval := time.Duration(min(float64(time.Second)/rl.MaxDispatchesPerSecond, float64(24*time.Hour)))
	burst := time.Duration(rl.MaxBurstSize)
	for q.ready.Len() > 0 {
		t := q.ready[0]
		if t.schedule.After(now) {
			return t.schedule, true
		}
		if q.inflight >= int(rl.MaxConcurrentDispatches) {
			return time.Time{}, false
		}
		if allowed := q.tat.Add(-(burst - 1) * interval); now.Before(allowed) {
			return allowed, true
		}
		q.tat = later(q.tat, now).Add(interval)
		heap.Pop(&q.ready)
		s.startLocked(q, t, now)
	}
	return time.Time{}, false
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// startLocked marks t in flight, updates its counters as the real service
// shows them during an attempt, and sends the request in a goroutine.
func (s *Server) startLocked(q *queue, t *task, now time.Time) {
	t.inflight = true
	t.attempts++
	q.inflight++
	if t.attempts == 1 {
		t.first = now
		t.pb.FirstAttempt = &cloudtaskspb.Attempt{DispatchTime: timestamppb.New(now)}
	}
	t.pb.DispatchCount = int32(t.attempts) //nolint:gosec // G115: one task's dispatches in an emulator never reach 2^31
	t.pb.LastAttempt = &cloudtaskspb.Attempt{
		ScheduleTime: timestamppb.New(t.schedule),
		DispatchTime: timestamppb.New(now),
	}
	a := Attempt{Queue: q.name, Task: t.pb.Name, Number: t.attempts, ScheduleTime: t.schedule, Start: now}
	req := s.requestLocked(q, t)
	// Journalled in flight: if the process dies before the answer is
	// recorded, the next server delivers the task again.
	s.logJournal(s.saveTaskLocked(t))
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		a = s.send(req, a)
		s.mu.Lock()
		dropped, policy := s.finishLocked(q, t, a)
		s.mu.Unlock()
		if dropped {
			s.log.Warn("tasks: task dropped: retries exhausted", "queue", a.Queue, "task", a.Task,
				"attempts", a.Number, "maxAttempts", policy.maxAttempts,
				"maxRetryDuration", policy.maxRetryDuration.String(), "lastError", a.Error)
		}
	}()
}

// finishLocked applies an ended attempt: a 2xx ends the task; a failure
// schedules the retry the queue's RetryConfig allows, or drops the task
// when there is none (dropped, under that policy). The attempt is recorded
// last, so whoever sees it in Attempts also sees its effect on the task.
func (s *Server) finishLocked(q *queue, t *task, a Attempt) (dropped bool, policy retryPolicy) {
	t.inflight = false
	q.inflight--
	if a.Status != 0 {
		t.pb.ResponseCount++
		if a.Status < 500 {
			t.executions++
		}
	}
	t.pb.LastAttempt.ResponseTime = timestamppb.New(a.End)
	t.pb.LastAttempt.ResponseStatus = responseStatus(a)
	t.prevStatus, t.prevReason = a.Status, retryReason(a)

	policy = policyOf(q.pb.RetryConfig)
	switch {
	case t.deleted:
		// Deleted (or its queue purged or deleted) while in flight.
	case a.OK():
		s.removeLocked(q, t, a.End)
	case s.stopping:
		// Shutting down: no retry is scheduled, the task dies with the server.
	case policy.exhausted(t.attempts, t.first, a.End):
		s.removeLocked(q, t, a.End)
		dropped = true
	default:
		t.schedule = a.End.Add(policy.backoff(t.attempts - 1))
		t.pb.ScheduleTime = timestamppb.New(t.schedule)
		heap.Push(&q.ready, t)
		s.logJournal(s.saveTaskLocked(t))
	}
	s.recordLocked(a)
	q.poke()
	return dropped, policy
}
