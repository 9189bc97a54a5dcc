package tasks

import (
	"bufio"
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/protobuf/encoding/protojson"
)

// Cloud Tasks keeps queues and tasks durably: the queue "persists the task
// until it is successfully executed or the number of retries is
// exhausted", and "if a task is successfully added, the queue will deliver
// it at least once" (https://cloud.google.com/tasks/docs/concepts); it
// "errs on the side of guaranteed execution" over duplicates
// (https://cloud.google.com/tasks/docs/common-pitfalls). With Options.Dir set,
// the emulator does the same across its own restarts: every change to a
// queue or a task is appended to a journal before the RPC that made it
// answers, and Start replays it.
//
// The journal is JSON lines, one record per change, and is written with
// plain write(2) calls and no fsync: a record is in the kernel's page cache
// when the RPC answers, so it survives the process being killed (SIGKILL,
// a panic, an OOM kill), not the machine losing power. Start rewrites it
// compacted (the live state only) and so does a running server when it has
// grown to several times its live state.

// journalFile is the journal's name under Options.Dir.
const journalFile = "tasks.jsonl"

// record is one journal line.
type record struct {
	// Op is "queue" (a queue created or changed: Queue is its state),
	// "dq" (queue Name deleted, its name taken until Until), "task" (a
	// task created or its dispatch state changed) or "rm" (task Name
	// ended, its name taken until Until).
	Op    string          `json:"op"`
	Name  string          `json:"name,omitempty"`
	Until time.Time       `json:"until,omitzero"`
	Queue json.RawMessage `json:"queue,omitempty"`
	Task  json.RawMessage `json:"task,omitempty"`
	// The task's dispatch state, for op "task".
	Seq        uint64    `json:"seq,omitempty"`
	Schedule   time.Time `json:"schedule,omitzero"`
	Attempts   int       `json:"attempts,omitempty"`
	Executions int       `json:"executions,omitempty"`
	First      time.Time `json:"first,omitzero"`
	PrevStatus int       `json:"prevStatus,omitempty"`
	PrevReason string    `json:"prevReason,omitempty"`
	// InFlight marks the record written as an attempt started: if the
	// journal ends there, the attempt's answer was never recorded and the
	// task is dispatched again (at-least-once).
	InFlight bool `json:"inFlight,omitempty"`
}

// journal appends records to the file under Dir. Guarded by Server.mu.
type journal struct {
	path    string
	f       *os.File
	written int // records appended since the last compaction
}

// openJournal replays dir's journal into s (queues, tasks, tombstones),
// then rewrites it compacted and keeps it open for appending. Called by
// Start before any queue loop runs.
func (s *Server) openJournal(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("tasks: data dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, journalFile)
	now := time.Now()
	n, err := s.replay(path, now)
	if err != nil {
		return err
	}
	s.journal = &journal{path: path}
	if err := s.compactLocked(now); err != nil {
		return err
	}
	live := 0
	for _, q := range s.queues {
		live += len(q.tasks)
	}
	s.log.Info("tasks: journal replayed", "path", path, "records", n, "queues", len(s.queues), "tasks", live)
	return nil
}

// replay applies path's records to s. A last line cut short (the process
// killed mid-write) is ignored: its RPC never answered.
func (s *Server) replay(path string, now time.Time) (int, error) {
	f, err := os.Open(path) //nolint:gosec // G304: the path is the operator's data dir
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("tasks: open journal: %w", err)
	}
	defer func() { _ = f.Close() }()
	r := bufio.NewReader(f)
	n := 0
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			if len(line) > 0 {
				s.log.Warn("tasks: journal: last record cut short; ignored", "path", path, "bytes", len(line))
			}
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("tasks: read journal: %w", err)
		}
		var rec record
		if err := json.Unmarshal(line, &rec); err != nil {
			return n, fmt.Errorf("tasks: journal %s: record %d: %w", path, n+1, err)
		}
		if err := s.apply(&rec, now); err != nil {
			return n, fmt.Errorf("tasks: journal %s: record %d: %w", path, n+1, err)
		}
		n++
	}
}

// apply replays one record.
func (s *Server) apply(rec *record, now time.Time) error {
	switch rec.Op {
	case "queue":
		pb := &cloudtaskspb.Queue{}
		if err := protojson.Unmarshal(rec.Queue, pb); err != nil {
			return fmt.Errorf("queue: %w", err)
		}
		if q, ok := s.queues[pb.Name]; ok {
			q.pb = pb
			return nil
		}
		delete(s.queueTombs, pb.Name)
		s.queues[pb.Name] = newQueue(pb, pb.Name[strings.LastIndex(pb.Name, "/")+1:])
	case "dq":
		delete(s.queues, rec.Name)
		if rec.Until.After(now) {
			s.queueTombs[rec.Name] = rec.Until
		}
	case "task":
		pb := &cloudtaskspb.Task{}
		if err := protojson.Unmarshal(rec.Task, pb); err != nil {
			return fmt.Errorf("task: %w", err)
		}
		q, ok := s.queues[queueOf(pb.Name)]
		if !ok {
			return nil // its queue was deleted later on; a "dq" removed it
		}
		t, ok := q.tasks[pb.Name]
		if !ok {
			t = &task{id: pb.Name[strings.LastIndex(pb.Name, "/")+1:], index: -1}
			q.tasks[pb.Name] = t
			delete(q.tombs, pb.Name)
		}
		t.pb, t.seq, t.schedule = pb, rec.Seq, rec.Schedule
		t.attempts, t.executions, t.first = rec.Attempts, rec.Executions, rec.First
		t.prevStatus, t.prevReason = rec.PrevStatus, rec.PrevReason
		if rec.InFlight {
			// The attempt's end was never recorded: the server stopped
			// with it in flight. It counts as an attempt that got no
			// answer, and the task is due again at once.
			t.prevStatus, t.prevReason = 0, reasonUnavailable
		}
		s.taskSeq = max(s.taskSeq, rec.Seq)
	case "rm":
		q, ok := s.queues[queueOf(rec.Name)]
		if !ok {
			return nil
		}
		delete(q.tasks, rec.Name)
		if rec.Until.After(now) {
			q.tombs[rec.Name] = rec.Until
		}
	default:
		return fmt.Errorf("unknown op %q", rec.Op)
	}
	return nil
}

// queueOf is the queue's full name in a task's full name.
func queueOf(taskName string) string {
	if i := strings.Index(taskName, "/tasks/"); i >= 0 {
		return taskName[:i]
	}
	return ""
}

// compactLocked rewrites the journal as the live state alone (queues,
// tasks, unexpired tombstones), to a temporary file renamed over the old
// one, rebuilds the in-memory indexes (ready heaps, tombstone order) from
// that state, and reopens the journal for appending.
func (s *Server) compactLocked(now time.Time) error {
	j := s.journal
	var recs []record
	for name, until := range s.queueTombs {
		if until.After(now) {
			recs = append(recs, record{Op: "dq", Name: name, Until: until})
		}
	}
	for _, q := range s.queues {
		qr, err := queueRecord(q)
		if err != nil {
			return err
		}
		recs = append(recs, qr)
		for name, until := range q.tombs {
			if until.After(now) {
				recs = append(recs, record{Op: "rm", Name: name, Until: until})
			}
		}
		for _, t := range q.tasks {
			tr, err := taskRecord(t)
			if err != nil {
				return err
			}
			recs = append(recs, tr)
		}
	}
	tmp := j.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600) //nolint:gosec // G304: the operator's data dir
	if err != nil {
		return fmt.Errorf("tasks: compact journal: %w", err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for i := range recs {
		if err := enc.Encode(&recs[i]); err != nil {
			_ = f.Close()
			return fmt.Errorf("tasks: compact journal: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		_ = f.Close()
		return fmt.Errorf("tasks: compact journal: %w", err)
	}
	// The rename replaces the whole history; the new file must be on disk
	// before it does.
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("tasks: compact journal: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("tasks: compact journal: %w", err)
	}
	if err := os.Rename(tmp, j.path); err != nil {
		return fmt.Errorf("tasks: compact journal: %w", err)
	}
	if j.f != nil {
		_ = j.f.Close()
	}
	if j.f, err = os.OpenFile(j.path, os.O_APPEND|os.O_WRONLY, 0o600); err != nil { //nolint:gosec // G304: the operator's data dir
		return fmt.Errorf("tasks: reopen journal: %w", err)
	}
	j.written = 0
	return nil
}

// rebuildLocked sets up the replayed queues' indexes: every task not in
// flight in the ready heap, tombstones in expiry order.
func (s *Server) rebuildLocked() {
	for _, q := range s.queues {
		q.ready = q.ready[:0]
		for _, t := range q.tasks {
			t.index = -1
			heap.Push(&q.ready, t)
		}
		q.tombOrder = q.tombOrder[:0]
		for name, until := range q.tombs {
			q.tombOrder = append(q.tombOrder, tomb{name, until})
		}
		sortTombs(q.tombOrder)
	}
}

func sortTombs(ts []tomb) {
	// Insertion sort: replay is rare and tombstones are few per queue.
	for i := 1; i < len(ts); i++ {
		for k := i; k > 0 && ts[k].until.Before(ts[k-1].until); k-- {
			ts[k], ts[k-1] = ts[k-1], ts[k]
		}
	}
}

func queueRecord(q *queue) (record, error) {
	b, err := protojson.Marshal(q.pb)
	if err != nil {
		return record{}, fmt.Errorf("tasks: journal queue %s: %w", q.name, err)
	}
	return record{Op: "queue", Queue: b}, nil
}

func taskRecord(t *task) (record, error) {
	b, err := protojson.Marshal(t.pb)
	if err != nil {
		return record{}, fmt.Errorf("tasks: journal task %s: %w", t.pb.Name, err)
	}
	return record{
		Op: "task", Task: b, Seq: t.seq, Schedule: t.schedule, Attempts: t.attempts,
		Executions: t.executions, First: t.first, PrevStatus: t.prevStatus, PrevReason: t.prevReason,
		InFlight: t.inflight,
	}, nil
}

// appendLocked writes rec to the journal (a no-op without one), compacting
// first when the journal has grown to several times the live state.
func (s *Server) appendLocked(rec record) error {
	j := s.journal
	if j == nil || j.f == nil {
		return nil // in memory, or closed with the server
	}
	b, err := json.Marshal(&rec)
	if err != nil {
		return fmt.Errorf("tasks: journal: %w", err)
	}
	// One write per record: a kill mid-way leaves at most the last line
	// cut short, which replay ignores.
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("tasks: journal write: %w", err)
	}
	j.written++
	if j.written > 10000 && j.written > 4*s.liveLocked() {
		if err := s.compactLocked(time.Now()); err != nil {
			s.log.Error("tasks: journal compaction failed; appending to the old one", "err", err)
		}
	}
	return nil
}

// liveLocked counts what a compacted journal holds.
func (s *Server) liveLocked() int {
	n := len(s.queueTombs)
	for _, q := range s.queues {
		n += 1 + len(q.tasks) + len(q.tombs)
	}
	return n
}

// saveQueueLocked journals q's configuration and state.
func (s *Server) saveQueueLocked(q *queue) error {
	if s.journal == nil {
		return nil
	}
	rec, err := queueRecord(q)
	if err != nil {
		return err
	}
	return s.appendLocked(rec)
}

// saveTaskLocked journals t and its dispatch state.
func (s *Server) saveTaskLocked(t *task) error {
	if s.journal == nil {
		return nil
	}
	rec, err := taskRecord(t)
	if err != nil {
		return err
	}
	return s.appendLocked(rec)
}

// logJournal logs a journal write that failed where no RPC can answer for
// it (a dispatch's bookkeeping): the state in memory goes on, and a restart
// replays the older state, which at worst delivers a task again.
func (s *Server) logJournal(err error) {
	if err != nil {
		s.log.Error("tasks: journal write failed; a restart may deliver a task again", "err", err)
	}
}

// closeJournal closes the journal file.
func (s *Server) closeJournal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.journal != nil && s.journal.f != nil {
		_ = s.journal.f.Close()
		s.journal.f = nil
	}
}
