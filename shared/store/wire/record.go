package wire

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"go.mongodb.org/mongo-driver/v2/event"
)

// EnvDir names the environment variable that switches the wire inventory
// on: a directory, into which every process that opens a store writes one
// file of the command shapes it sent. Unset, nothing is recorded and the
// store installs no monitor.
const EnvDir = "BATON_MONGO_WIRELOG"

// Recorder writes each distinct command shape it sees once, as one JSON
// line, to a file of its own. It keeps no values: a shape names the
// command, its options and its operators, never a field's content.
type Recorder struct {
	mu   sync.Mutex
	seen map[string]bool
	f    *os.File
}

var (
	envOnce sync.Once
	envRec  *Recorder
	envErr  error
)

// FromEnv returns the process's recorder when EnvDir is set, else nil.
// Every store of the process shares it, so a shape is written once per
// process however many stores send it.
func FromEnv() (*Recorder, error) {
	dir := os.Getenv(EnvDir)
	if dir == "" {
		return nil, nil
	}
	envOnce.Do(func() { envRec, envErr = NewRecorder(dir) })
	return envRec, envErr
}

// NewRecorder creates dir if need be, and a file in it named after the
// program and its process id (a test binary is one process).
func NewRecorder(dir string) (*Recorder, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil { //nolint:gosec // G703: dir is the developer's own BATON_MONGO_WIRELOG, a path they chose for their own files
		return nil, fmt.Errorf("wire: recorder: %w", err)
	}
	name := fmt.Sprintf("%s-%d-*.jsonl", filepath.Base(os.Args[0]), os.Getpid())
	f, err := os.CreateTemp(dir, name)
	if err != nil {
		return nil, fmt.Errorf("wire: recorder: %w", err)
	}
	return &Recorder{seen: map[string]bool{}, f: f}, nil
}

// Path is the file the recorder writes.
func (r *Recorder) Path() string { return r.f.Name() }

// Record writes s unless it has been written already.
func (r *Recorder) Record(s Shape) {
	if s.Command == "" {
		return
	}
	k := s.Key()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[k] {
		return
	}
	r.seen[k] = true
	b, err := json.Marshal(s)
	if err != nil {
		return
	}
	// One write per line, straight to the file: a test binary that
	// exits without closing anything still leaves whole lines.
	_, _ = r.f.Write(append(b, '\n'))
}

// Monitor is a command monitor that records the shape of every command
// started, chained before next (which may be nil).
func (r *Recorder) Monitor(next *event.CommandMonitor) *event.CommandMonitor {
	m := &event.CommandMonitor{
		Started: func(ctx context.Context, e *event.CommandStartedEvent) {
			s := Of(e.Command, nil)
			if s.Command == "" {
				// The driver hides security-sensitive commands
				// (hello with speculative auth, saslStart, …):
				// their name is all there is.
				s = Shape{Command: e.CommandName}
			}
			r.Record(s)
			if next != nil && next.Started != nil {
				next.Started(ctx, e)
			}
		},
	}
	if next != nil {
		m.Succeeded, m.Failed = next.Succeeded, next.Failed
	}
	return m
}
