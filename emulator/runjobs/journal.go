package runjobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The journal (Options.Dir) keeps each execution in DIR/EXECUTION-ID/:
//
//	execution.json  the record below, written before any task starts
//	task-N.start    written before task N's process is started
//	task-N.pid      the task's process (and process group) id, written by
//	                the task's wrapper shell itself
//	task-N.exit     the task's exit status, written by the wrapper when
//	                the command ends (renamed into place: never partial)
//	task-N.timeout  the emulator killed the task at its timeout
//	task-N.log      the task's stdout and stderr
//	cancelled       CancelExecution was called
//
// A task runs in its own session (setsid), so it outlives the emulator and
// the process group of `baton local`; a restarted emulator reads the files
// back and waits on the same processes, so the execution ends once, from
// its tasks' real exit statuses, and no task is started twice.

// record is an execution as journalled: enough to rebuild its resource
// and start the tasks that had not started.
type record struct {
	Name    string        `json:"name"`
	Job     string        `json:"job"`
	Seq     int           `json:"seq"`
	Command string        `json:"command"`
	Args    []string      `json:"args,omitempty"`
	Env     []envVar      `json:"env,omitempty"`
	Tasks   int32         `json:"tasks"`
	Timeout time.Duration `json:"timeout"`
	Start   time.Time     `json:"start"`
}

type envVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// pollEvery is how often a task the emulator did not start itself (one
// replayed from the journal) is looked at: its exit file, its process.
const pollEvery = 100 * time.Millisecond

// wrapper runs the task's command ($2, given "$@" after it) in a child
// shell, so that an `exit` in the command cannot skip the bookkeeping, and
// records its own pid first and the command's exit status last.
const wrapper = `echo $$ > "$1.pid"; b=$1; c=$2; shift 2; /bin/sh -c "$c" sh "$@"; echo $? > "$b.exit.tmp"; mv "$b.exit.tmp" "$b.exit"`

func execID(name string) string {
	_, id, _ := strings.Cut(name, "/executions/")
	return id
}

func (s *Server) execDir(name string) string { return filepath.Join(s.dir, execID(name)) }

// writeFile writes b to path through a rename, so that a reader (or a
// replay after a kill) sees all of it or nothing.
func writeFile(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// journal records a new execution before its tasks start.
func (s *Server) journal(r record) error {
	dir := s.execDir(r.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("runjobs: journal %s: %w", r.Name, err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("runjobs: journal %s: %w", r.Name, err)
	}
	if err := writeFile(filepath.Join(dir, "execution.json"), b); err != nil {
		return fmt.Errorf("runjobs: journal %s: %w", r.Name, err)
	}
	return nil
}

func toEnvVars(env []*runpb.EnvVar) []envVar {
	var out []envVar
	for _, e := range env {
		out = append(out, envVar{Name: e.GetName(), Value: e.GetValue()})
	}
	return out
}

func fromEnvVars(env []envVar) []*runpb.EnvVar {
	var out []*runpb.EnvVar
	for _, e := range env {
		out = append(out, &runpb.EnvVar{Name: e.Name, Values: &runpb.EnvVar_Value{Value: e.Value}})
	}
	return out
}

// replay reads the journal back: every execution is known again, and one
// not completed goes on from where its tasks are (called by Start, before
// serving).
func (s *Server) replay() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("runjobs: replay %s: %w", s.dir, err)
	}
	for _, ent := range entries {
		if !ent.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.dir, ent.Name(), "execution.json")) //nolint:gosec // G304: the emulator's own journal
		if errors.Is(err, os.ErrNotExist) {
			continue // killed before the record landed: RunJob never answered
		}
		if err != nil {
			return fmt.Errorf("runjobs: replay %s: %w", ent.Name(), err)
		}
		var r record
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("runjobs: replay %s: %w", ent.Name(), err)
		}
		s.seq = max(s.seq, r.Seq)
		x := s.newExecution(r)
		if _, err := os.Stat(filepath.Join(s.dir, ent.Name(), "cancelled")); err == nil {
			x.cancel()
		}
		s.log.Info("runjobs: execution replayed", "execution", r.Name)
	}
	return nil
}

// durableTask runs (or, after a restart, waits on) task index of x, a
// process in its own session that outlives the emulator. Closing the
// emulator leaves it running (taskAbandoned): the next start picks it up.
func (s *Server) durableTask(ctx context.Context, x *execution, r record, index int32) (taskOutcome, string) {
	base := filepath.Join(s.execDir(r.Name), "task-"+strconv.Itoa(int(index)))
	id := execID(r.Name)
	if outcome, msg, done := s.taskEnded(x, base, index, r.Timeout); done {
		return outcome, msg
	}
	var waited chan error
	pid := 0 // our own child's: known before its wrapper writes the pid file
	kill := func() {
		if pid > 0 {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			return
		}
		s.killTask(base)
	}
	started := time.Now()
	if st, err := os.Stat(base + ".start"); err == nil {
		started = st.ModTime() // started by an earlier run of the emulator
	} else {
		if ctx.Err() != nil {
			if s.ctx.Err() != nil {
				return taskAbandoned, ""
			}
			return taskCancelled, ""
		}
		if err := writeFile(base+".start", nil); err != nil {
			return taskFailed, fmt.Sprintf("%s-task%d: %v", id, index, err)
		}
		logf, err := os.OpenFile(base+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600) //nolint:gosec // G304: the emulator's own journal
		if err != nil {
			return taskFailed, fmt.Sprintf("%s-task%d: %v", id, index, err)
		}
		c := exec.Command("/bin/sh", append([]string{"-c", wrapper, "sh", base, r.Command + ` "$@"`}, r.Args...)...) //nolint:gosec // the operator's own command, from --run-job
		// Its own session: not in baton local's process group, so not
		// killed with it; the task's process group is its pid.
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		c.Stdout, c.Stderr = logf, logf
		c.Env = taskEnv(x.pb.GetJob(), id, fromEnvVars(r.Env), index, r.Tasks)
		err = c.Start()
		_ = logf.Close()
		if err != nil {
			return taskFailed, fmt.Sprintf("%s-task%d: %v", id, index, err)
		}
		pid = c.Process.Pid
		waited = make(chan error, 1)
		go func() { waited <- c.Wait() }()
	}
	deadline := time.NewTimer(time.Until(started.Add(r.Timeout)))
	defer deadline.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case <-waited: //nolint:errcheck // the outcome is read from the exit file the wrapper wrote, not from Wait
			waited = nil
			if outcome, msg, done := s.taskEnded(x, base, index, r.Timeout); done {
				return outcome, msg
			}
			return taskFailed, fmt.Sprintf("%s-task%d: the task ended without an exit status", id, index)
		case <-ctx.Done():
			if s.ctx.Err() != nil {
				return taskAbandoned, ""
			}
			kill()
			return taskCancelled, ""
		case <-deadline.C:
			_ = writeFile(base+".timeout", nil)
			kill()
			return taskFailed, fmt.Sprintf("%s-task%d: the task timed out after %s", id, index, r.Timeout)
		case <-tick.C:
			if waited != nil {
				continue // our own child: Wait says when it ends
			}
			if outcome, msg, done := s.taskEnded(x, base, index, r.Timeout); done {
				return outcome, msg
			}
			if !alive(base) {
				if outcome, msg, done := s.taskEnded(x, base, index, r.Timeout); done {
					return outcome, msg
				}
				return taskFailed, fmt.Sprintf("%s-task%d: the task ended without an exit status", id, index)
			}
		}
	}
}

// taskEnded reads what the journal says of a task that has ended: its
// exit status, or the emulator's own kill at its timeout or on cancel.
func (s *Server) taskEnded(x *execution, base string, index int32, timeout time.Duration) (taskOutcome, string, bool) {
	id := execID(x.pb.GetName())
	if b, err := os.ReadFile(base + ".exit"); err == nil { //nolint:gosec // G304: the emulator's own journal
		code, err := strconv.Atoi(strings.TrimSpace(string(b)))
		switch {
		case err != nil:
			return taskFailed, fmt.Sprintf("%s-task%d: unreadable exit status %q", id, index, b), true
		case code == 0:
			return taskSucceeded, "", true
		}
		return taskFailed, fmt.Sprintf("%s-task%d: the container exited with an exit code of %d", id, index, code), true
	}
	if _, err := os.Stat(base + ".timeout"); err == nil {
		return taskFailed, fmt.Sprintf("%s-task%d: the task timed out after %s", id, index, timeout), true
	}
	if _, err := os.Stat(base + ".pid"); err == nil && !alive(base) {
		if _, err := os.Stat(filepath.Join(filepath.Dir(base), "cancelled")); err == nil {
			return taskCancelled, "", true
		}
	}
	return 0, "", false
}

// alive says whether the task's process still exists. Without a pid file
// the wrapper may not have written it yet: alive until it has.
func alive(base string) bool {
	pid, ok := taskPid(base)
	if !ok {
		return true
	}
	return syscall.Kill(pid, 0) == nil
}

func taskPid(base string) (int, bool) {
	b, err := os.ReadFile(base + ".pid") //nolint:gosec // G304: the emulator's own journal
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil && pid > 1
}

// killTask kills the task's whole process group (the session setsid made).
func (s *Server) killTask(base string) {
	if pid, ok := taskPid(base); ok {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// completionTime is when a replayed execution's last task ended, as its
// exit files say.
func completionTime(dir string) *timestamppb.Timestamp {
	var last time.Time
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".exit") {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().After(last) {
			last = info.ModTime()
		}
	}
	if last.IsZero() {
		return timestamppb.Now()
	}
	return timestamppb.New(last)
}
