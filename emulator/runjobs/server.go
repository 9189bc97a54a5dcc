package runjobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Defaults of a job created without them, as Cloud Run's: one task, a
// 10-minute task timeout
// (https://cloud.google.com/run/docs/configuring/task-timeout).
const (
	DefaultTaskTimeout = 10 * time.Minute
	// Project and Region are the project and region of every job here:
	// jobs are projects/local/locations/local/jobs/NAME.
	Project = "local"
	Region  = "local"
	// MaxTasks and MaxTaskTimeout are Cloud Run's limits on an
	// execution's overrides (https://cloud.google.com/run/quotas,
	// https://cloud.google.com/run/docs/configuring/task-timeout).
	MaxTasks       = 10000
	MaxTaskTimeout = 168 * time.Hour
	// Parallelism is how many tasks of one execution run at once here.
	Parallelism = 8
)

// Options configures a Server.
type Options struct {
	// Addr is the listen address; "" means 127.0.0.1:0.
	Addr string
	// Jobs maps a job id to the shell command (sh -c) each task runs;
	// the execution's args follow it as "$@".
	Jobs map[string]string
	// Logger receives the tasks' starts and ends; nil discards.
	Logger *slog.Logger
	// Dir, when set, keeps a journal of the executions there (baton
	// local's DATA_DIR/runjobs): each task runs in its own session and
	// outlives the emulator, and a Start on the same Dir knows every
	// execution again and waits on the tasks still running, so a restart
	// neither loses an execution nor starts one twice. Empty keeps
	// executions in memory, their tasks killed by Close.
	Dir string
}

// Server is a running emulator.
type Server struct {
	lis       net.Listener
	grpc      *grpc.Server
	serveDone chan struct{}
	log       *slog.Logger
	dir       string
	ctx       context.Context
	stop      context.CancelFunc
	wg        sync.WaitGroup

	mu    sync.Mutex
	jobs  map[string]string // full name → command
	execs map[string]*execution
	ops   map[string]string // operation name → execution name
	seq   int
	drop  int // RunJob answers still to drop
	fail  int // ListExecutions calls still to fail
	// started counts the executions RunJob created, for tests.
	started int
}

type execution struct {
	pb     *runpb.Execution // guarded by Server.mu
	rec    record
	cancel context.CancelFunc
	done   chan struct{}
}

// JobName is the full name of job id here.
func JobName(id string) string {
	return "projects/" + Project + "/locations/" + Region + "/jobs/" + id
}

// Start listens and serves until Close.
func Start(ctx context.Context, o Options) (*Server, error) {
	addr := cmp.Or(o.Addr, "127.0.0.1:0")
	lis, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("runjobs: start: listen %s: %w", addr, err)
	}
	s := &Server{lis: lis, grpc: grpc.NewServer(), serveDone: make(chan struct{}), log: o.Logger,
		jobs: map[string]string{}, execs: map[string]*execution{}, ops: map[string]string{}, dir: o.Dir}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	for id, cmd := range o.Jobs {
		s.jobs[JobName(id)] = cmd
	}
	s.ctx, s.stop = context.WithCancel(context.Background())
	if s.dir != "" {
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			_ = lis.Close()
			return nil, fmt.Errorf("runjobs: start: %w", err)
		}
		if err := s.replay(); err != nil { //nolint:contextcheck // replayed executions live on the server's context, not Start's caller's
			s.stop()
			s.wg.Wait()
			_ = lis.Close()
			return nil, fmt.Errorf("runjobs: start: %w", err)
		}
	}
	runpb.RegisterJobsServer(s.grpc, &jobs{s: s})
	runpb.RegisterExecutionsServer(s.grpc, &executions{s: s})
	longrunningpb.RegisterOperationsServer(s.grpc, &operations{s: s})
	go func() {
		defer close(s.serveDone)
		if err := s.grpc.Serve(lis); err != nil {
			s.log.Error("runjobs: grpc serve", "error", err)
		}
	}()
	return s, nil
}

// Addr is the host:port the server listens on (CLOUD_RUN_EMULATOR_HOST).
func (s *Server) Addr() string { return s.lis.Addr().String() }

// ClientOptions point the official client here: the endpoint, no
// credentials, plaintext gRPC.
func (s *Server) ClientOptions() []option.ClientOption {
	return ClientOptions(s.Addr())
}

// ClientOptions are the options that point the official client at an
// emulator listening on addr.
func ClientOptions(addr string) []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(addr),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

// DropRunJobAnswers makes the next n RunJob calls start their execution
// and then answer Unavailable, as a connection lost after the request
// landed does: for tests of what a lost answer does.
func (s *Server) DropRunJobAnswers(n int) {
	s.mu.Lock()
	s.drop = n
	s.mu.Unlock()
}

// FailListExecutions makes the next n ListExecutions calls answer
// Unavailable: for tests of a start whose lookup fails.
func (s *Server) FailListExecutions(n int) {
	s.mu.Lock()
	s.fail = n
	s.mu.Unlock()
}

// Started is how many executions RunJob has created.
func (s *Server) Started() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// Close stops serving. Without a Dir it kills the tasks still running;
// with one it leaves them running, for the next Start on that Dir.
func (s *Server) Close() error {
	s.stop()
	s.grpc.Stop()
	s.wg.Wait()
	<-s.serveDone
	return nil
}

// Wait blocks until execution name has completed, or ctx ends.
func (s *Server) Wait(ctx context.Context, name string) error {
	s.mu.Lock()
	x := s.execs[name]
	s.mu.Unlock()
	if x == nil {
		return fmt.Errorf("runjobs: wait %s: no such execution", name)
	}
	select {
	case <-x.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("runjobs: wait %s: %w", name, ctx.Err())
	}
}

func notFound(kind, name string) error {
	return status.Errorf(codes.NotFound, "Resource '%s' of kind '%s' in region '%s' in project '%s' does not exist.", name, kind, Region, Project)
}

func invalid(field, format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "%s: %s", field, fmt.Sprintf(format, args...))
}

type jobs struct {
	runpb.UnimplementedJobsServer
	s *Server
}

func (j *jobs) GetJob(_ context.Context, req *runpb.GetJobRequest) (*runpb.Job, error) {
	s := j.s
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd, ok := s.jobs[req.GetName()]
	if !ok {
		return nil, notFound("JOB", req.GetName())
	}
	return &runpb.Job{Name: req.GetName(), Template: &runpb.ExecutionTemplate{TaskCount: 1, Template: taskTemplate(cmd, nil, nil, DefaultTaskTimeout)}}, nil
}

// taskTemplate is the execution's template as Cloud Run reports it: one
// container, with the overrides' args and env applied.
func taskTemplate(cmd string, args []string, env []*runpb.EnvVar, timeout time.Duration) *runpb.TaskTemplate {
	return &runpb.TaskTemplate{
		Containers: []*runpb.Container{{Name: "job", Image: "local", Command: []string{"/bin/sh", "-c", cmd}, Args: args, Env: env}},
		Timeout:    durationpb.New(timeout),
		Retries:    &runpb.TaskTemplate_MaxRetries{MaxRetries: 0},
	}
}

func (j *jobs) RunJob(_ context.Context, req *runpb.RunJobRequest) (*longrunningpb.Operation, error) {
	s := j.s
	o := req.GetOverrides()
	tasks, timeout := int32(1), DefaultTaskTimeout
	var args []string
	var env []*runpb.EnvVar
	if o != nil {
		if o.GetTaskCount() < 0 || o.GetTaskCount() > MaxTasks {
			return nil, invalid("overrides.task_count", "must be between 1 and %d", MaxTasks)
		}
		if o.GetTaskCount() > 0 {
			tasks = o.GetTaskCount()
		}
		if o.Timeout != nil {
			d := o.GetTimeout().AsDuration()
			if d <= 0 || d > MaxTaskTimeout {
				return nil, invalid("overrides.timeout", "must be positive and at most %s", MaxTaskTimeout)
			}
			timeout = d
		}
		if len(o.GetContainerOverrides()) > 1 {
			return nil, invalid("overrides.container_overrides", "the job has one container")
		}
		for _, c := range o.GetContainerOverrides() {
			args, env = c.GetArgs(), c.GetEnv()
			for _, e := range env {
				if e.GetName() == "" || strings.Contains(e.GetName(), "=") || strings.HasPrefix(e.GetName(), "X_GOOGLE_") {
					return nil, invalid("overrides.container_overrides.env.name", "%q is not a permitted environment variable name", e.GetName())
				}
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd, ok := s.jobs[req.GetName()]
	if !ok {
		return nil, notFound("JOB", req.GetName())
	}
	_, id, _ := strings.Cut(req.GetName(), "/jobs/")
	seq := s.seq + 1
	r := record{Name: fmt.Sprintf("%s/executions/%s-%05d", req.GetName(), id, seq), Job: id, Seq: seq, Command: cmd,
		Args: args, Env: toEnvVars(env), Tasks: tasks, Timeout: timeout, Start: time.Now().UTC()}
	if s.dir != "" {
		// Journalled before any task starts: a restart knows every
		// execution whose tasks may be running.
		if err := s.journal(r); err != nil {
			return nil, status.Errorf(codes.Internal, "%v", err)
		}
	}
	s.seq = seq
	s.started++
	x := s.newExecution(r) //nolint:contextcheck // the execution outlives the RunJob request, as Cloud Run's does; the server's context (Close) or CancelExecution ends it
	op := opName(seq)
	if s.drop > 0 {
		s.drop--
		return nil, status.Error(codes.Unavailable, "runjobs: answer dropped after the execution started (fault injection)")
	}
	return operation(op, x.pb, false)
}

func opName(seq int) string {
	return fmt.Sprintf("projects/%s/locations/%s/operations/op-%05d", Project, Region, seq)
}

// newExecution makes the execution of r known and runs its tasks (with
// s.mu held).
func (s *Server) newExecution(r record) *execution {
	t := timestamppb.New(r.Start)
	env := fromEnvVars(r.Env)
	pb := &runpb.Execution{
		Name: r.Name, Uid: strconv.Itoa(r.Seq), Job: r.Job, CreateTime: t, StartTime: t, UpdateTime: t,
		TaskCount: r.Tasks, Parallelism: min(r.Tasks, Parallelism), RunningCount: r.Tasks,
		Template: taskTemplate(r.Command, r.Args, env, r.Timeout), Reconciling: true, Generation: 1,
	}
	ctx, cancel := context.WithCancel(s.ctx)
	x := &execution{pb: pb, rec: r, cancel: cancel, done: make(chan struct{})}
	s.execs[r.Name] = x
	s.ops[opName(r.Seq)] = r.Name
	s.wg.Add(1)
	go s.run(ctx, x, r.Command, r.Args, env, r.Tasks, r.Timeout)
	return x
}

func operation(name string, x *runpb.Execution, done bool) (*longrunningpb.Operation, error) {
	meta, err := anypb.New(x)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "runjobs: %v", err)
	}
	op := &longrunningpb.Operation{Name: name, Metadata: meta, Done: done}
	if done {
		op.Result = &longrunningpb.Operation_Response{Response: meta}
	}
	return op, nil
}

// run runs the tasks of x, Parallelism at a time, each under its timeout,
// and completes x when all have ended.
func (s *Server) run(ctx context.Context, x *execution, cmd string, args []string, env []*runpb.EnvVar, tasks int32, timeout time.Duration) {
	defer s.wg.Done()
	defer close(x.done)
	sem := make(chan struct{}, Parallelism)
	var wg sync.WaitGroup
	var failMsg string
	abandoned := false
	for i := range tasks {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var outcome taskOutcome
			var msg string
			if s.dir != "" {
				outcome, msg = s.durableTask(ctx, x, x.rec, i)
			} else {
				outcome, msg = s.task(ctx, x, cmd, args, env, i, tasks, timeout)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if outcome == taskAbandoned {
				abandoned = true
				return
			}
			x.pb.RunningCount--
			switch outcome {
			case taskSucceeded:
				x.pb.SucceededCount++
			case taskFailed:
				x.pb.FailedCount++
				if failMsg == "" {
					failMsg = msg
				}
			default:
				x.pb.CancelledCount++
			}
			x.pb.UpdateTime = timestamppb.Now()
		}()
	}
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if abandoned {
		return // closed with tasks running: the next Start completes it
	}
	now := timestamppb.Now()
	if s.dir != "" {
		now = completionTime(s.execDir(x.pb.GetName()))
	}
	x.pb.CompletionTime, x.pb.UpdateTime, x.pb.Reconciling = now, now, false
	c := &runpb.Condition{Type: "Completed", LastTransitionTime: now}
	switch {
	case x.pb.CancelledCount > 0:
		c.State, c.Reasons, c.Message = runpb.Condition_CONDITION_FAILED, &runpb.Condition_ExecutionReason_{ExecutionReason: runpb.Condition_CANCELLED}, "The execution was cancelled."
	case x.pb.FailedCount > 0:
		c.State, c.Reasons = runpb.Condition_CONDITION_FAILED, &runpb.Condition_ExecutionReason_{ExecutionReason: runpb.Condition_NON_ZERO_EXIT_CODE}
		c.Message = fmt.Sprintf("Task %s failed. %d of %d tasks failed.", failMsg, x.pb.FailedCount, x.pb.TaskCount)
	default:
		c.State, c.Message = runpb.Condition_CONDITION_SUCCEEDED, fmt.Sprintf("Execution completed successfully: %d tasks.", x.pb.TaskCount)
	}
	x.pb.Conditions = []*runpb.Condition{c}
	s.log.Info("runjobs: execution completed", "execution", x.pb.Name, "succeeded", x.pb.SucceededCount, "failed", x.pb.FailedCount, "cancelled", x.pb.CancelledCount)
}

type taskOutcome int

const (
	taskSucceeded taskOutcome = iota
	taskFailed
	taskCancelled
	// taskAbandoned: the emulator closed while the task ran on, outside
	// it; the next Start on the same Dir reads its outcome.
	taskAbandoned
)

// task runs task index of x as a process group, killed whole on cancel or
// timeout.
func (s *Server) task(ctx context.Context, x *execution, cmd string, args []string, env []*runpb.EnvVar, index, count int32, timeout time.Duration) (taskOutcome, string) {
	if ctx.Err() != nil {
		return taskCancelled, ""
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := exec.CommandContext(tctx, "/bin/sh", append([]string{"-c", cmd + ` "$@"`, "sh"}, args...)...) //nolint:gosec // the operator's own command, from --run-job
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = 5 * time.Second
	c.Stdout, c.Stderr = os.Stderr, os.Stderr
	id := execID(x.pb.GetName())
	c.Env = taskEnv(x.pb.GetJob(), id, env, index, count)
	err := c.Run()
	switch {
	case err == nil:
		return taskSucceeded, ""
	case ctx.Err() != nil:
		return taskCancelled, ""
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		return taskFailed, fmt.Sprintf("%s-task%d: the task timed out after %s", id, index, timeout)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return taskFailed, fmt.Sprintf("%s-task%d: the container exited with an exit code of %d", id, index, ee.ExitCode())
	}
	return taskFailed, fmt.Sprintf("%s-task%d: %v", id, index, err)
}

// taskEnv is a task's environment: the emulator's, the execution's
// overrides, and what Cloud Run sets in every task
// (https://cloud.google.com/run/docs/container-contract#jobs-env-vars).
func taskEnv(job, execID string, env []*runpb.EnvVar, index, count int32) []string {
	out := os.Environ()
	for _, e := range env {
		out = append(out, e.GetName()+"="+e.GetValue())
	}
	return append(out, "CLOUD_RUN_JOB="+job, "CLOUD_RUN_EXECUTION="+execID,
		"CLOUD_RUN_TASK_INDEX="+strconv.Itoa(int(index)), "CLOUD_RUN_TASK_ATTEMPT=0", "CLOUD_RUN_TASK_COUNT="+strconv.Itoa(int(count)))
}

type executions struct {
	runpb.UnimplementedExecutionsServer
	s *Server
}

func (e *executions) get(name string) (*execution, error) {
	x, ok := e.s.execs[name]
	if !ok {
		return nil, notFound("EXECUTION", name)
	}
	return x, nil
}

func (e *executions) GetExecution(_ context.Context, req *runpb.GetExecutionRequest) (*runpb.Execution, error) {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	x, err := e.get(req.GetName())
	if err != nil {
		return nil, err
	}
	return proto.CloneOf(x.pb), nil
}

// ListExecutions lists the executions of one job, newest first, pageSize
// at a time (default and most 100 here).
func (e *executions) ListExecutions(_ context.Context, req *runpb.ListExecutionsRequest) (*runpb.ListExecutionsResponse, error) {
	s := e.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail > 0 {
		s.fail--
		return nil, status.Error(codes.Unavailable, "runjobs: ListExecutions failed (fault injection)")
	}
	if _, ok := s.jobs[req.GetParent()]; !ok {
		return nil, notFound("JOB", req.GetParent())
	}
	var all []*runpb.Execution
	for _, x := range s.execs {
		if strings.HasPrefix(x.pb.GetName(), req.GetParent()+"/executions/") {
			all = append(all, x.pb)
		}
	}
	slices.SortFunc(all, func(a, b *runpb.Execution) int { return strings.Compare(b.GetName(), a.GetName()) })
	from := 0
	if t := req.GetPageToken(); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 || n > len(all) {
			return nil, invalid("page_token", "is not a token this server gave")
		}
		from = n
	}
	size := int(req.GetPageSize())
	if size <= 0 || size > 100 {
		size = 100
	}
	to := min(from+size, len(all))
	resp := &runpb.ListExecutionsResponse{}
	for _, x := range all[from:to] {
		resp.Executions = append(resp.Executions, proto.CloneOf(x))
	}
	if to < len(all) {
		resp.NextPageToken = strconv.Itoa(to)
	}
	return resp, nil
}

// CancelExecution stops the tasks of a running execution; the execution
// completes cancelled once they have ended. A completed execution cannot
// be cancelled (FailedPrecondition).
func (e *executions) CancelExecution(_ context.Context, req *runpb.CancelExecutionRequest) (*longrunningpb.Operation, error) {
	e.s.mu.Lock()
	x, err := e.get(req.GetName())
	if err != nil {
		e.s.mu.Unlock()
		return nil, err
	}
	if x.pb.CompletionTime != nil {
		e.s.mu.Unlock()
		return nil, status.Errorf(codes.FailedPrecondition, "execution %s has already completed", req.GetName())
	}
	if e.s.dir != "" {
		// Journalled, so that a restart before the tasks have been
		// killed still ends the execution cancelled.
		if err := writeFile(filepath.Join(e.s.execDir(x.pb.GetName()), "cancelled"), nil); err != nil {
			e.s.mu.Unlock()
			return nil, status.Errorf(codes.Internal, "runjobs: cancel %s: %v", req.GetName(), err)
		}
	}
	x.cancel()
	snap := proto.CloneOf(x.pb)
	e.s.mu.Unlock()
	return operation(req.GetName()+"/cancel", snap, false)
}

type operations struct {
	longrunningpb.UnimplementedOperationsServer
	s *Server
}

// GetOperation answers RunJob's operation: done once its execution has
// completed, with the execution as both metadata and response.
func (o *operations) GetOperation(_ context.Context, req *longrunningpb.GetOperationRequest) (*longrunningpb.Operation, error) {
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	name, ok := s.ops[req.GetName()]
	if !ok {
		return nil, notFound("OPERATION", req.GetName())
	}
	x := s.execs[name]
	return operation(req.GetName(), proto.CloneOf(x.pb), x.pb.CompletionTime != nil)
}
