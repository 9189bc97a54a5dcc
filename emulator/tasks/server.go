package tasks

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Options configures Start.
type Options struct {
	// Addr is the listen address; "" means 127.0.0.1:0 (a free port).
	Addr string
	// Logger gets one line per dispatch attempt, failures (and dropped
	// tasks) at WARN; nil discards.
	Logger *slog.Logger
	// Client sends the task requests; nil means a plain http.Client. The
	// task's dispatch deadline, not a client timeout, bounds each attempt.
	Client *http.Client
	// Token, when set, is sent as "Authorization: Bearer <Token>" on tasks
	// that carry an OidcToken (or an OauthToken). There are no Google
	// credentials locally to sign a real token, so the local functions
	// check this bearer token instead.
	Token string
	// Tombstone is how long a task name stays taken after its task
	// succeeded, was dropped or was deleted (and a queue name after
	// DeleteQueue); 0 means 1h, like the real service's task names.
	Tombstone time.Duration
	// Dir, when set, keeps queues, tasks and tombstones in a journal
	// under it (tasks.jsonl), as Cloud Tasks keeps them durably: a server
	// started on the same Dir delivers every task the last one accepted
	// and did not finish. A task whose attempt was in flight when the
	// process died is delivered again (at least once). "" keeps
	// everything in memory.
	Dir string
}

// Server is a running Cloud Tasks v2 emulator: a gRPC server that the
// official client talks to, and a dispatcher that sends each task's HTTP
// request when it is due. It is safe for concurrent use.
type Server struct {
	lis       net.Listener
	grpc      *grpc.Server
	serveDone chan struct{}
	client    *http.Client
	ownClient bool // client is ours: its idle connections close with the server
	log       *slog.Logger
	token     string
	tombstone time.Duration
	svc       *service

	// stopCtx ends the queue loops (Shutdown, Close): nothing new is
	// dispatched. hardCtx also cancels requests in flight (Close, or
	// Shutdown's ctx ending).
	stopCtx, hardCtx context.Context
	stop, hard       context.CancelFunc
	// wg counts queue loops and attempts in flight.
	wg sync.WaitGroup

	mu         sync.Mutex
	queues     map[string]*queue    // by full name
	queueTombs map[string]time.Time // deleted queue name → when it is free again
	attempts   []Attempt
	changed    chan struct{} // closed and replaced when an attempt ends
	taskSeq    uint64        // creation order, the tie-breaker of "oldest first"
	stopping   bool
	journal    *journal // nil: in memory

	// creates counts CreateTask calls (CreateTasks).
	creates atomic.Int64
}

// CreateTasks is the number of CreateTask calls served, answered or
// refused: with the delivery attempts (Attempts), the operations Cloud
// Tasks bills (https://cloud.google.com/tasks/pricing: API calls and push
// deliveries). Benchmarks price runs with it.
func (s *Server) CreateTasks() int64 { return s.creates.Load() }

// Attempt is one dispatch of a task, as recorded for tests and logs.
type Attempt struct {
	// Queue and Task are full resource names.
	Queue, Task string
	// Number counts the task's dispatches from 1.
	Number int
	// ScheduleTime is when this attempt was due: the task's schedule_time
	// for attempt 1, then the end of the failed attempt before it plus the
	// retry backoff.
	ScheduleTime time.Time
	// Start is when the attempt was dispatched, End when it ended.
	Start, End time.Time
	// Status is the HTTP status, 0 when no answer arrived.
	Status int
	// Error is "" on a 2xx; otherwise "HTTP 503", "DEADLINE_EXCEEDED", or
	// the transport error.
	Error string
}

// OK reports whether the attempt got a 2xx.
func (a Attempt) OK() bool { return a.Error == "" }

// Start listens on o.Addr and serves the Cloud Tasks v2 API until Shutdown
// or Close. ctx bounds only the start-up (the listen).
func Start(ctx context.Context, o Options) (*Server, error) {
	addr := o.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	lis, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tasks: start: listen %s: %w", addr, err)
	}
	s := &Server{
		lis: lis, grpc: grpc.NewServer(), serveDone: make(chan struct{}),
		client: o.Client, log: o.Logger, token: o.Token, tombstone: o.Tombstone,
		queues: map[string]*queue{}, queueTombs: map[string]time.Time{},
		changed: make(chan struct{}),
	}
	if s.client == nil {
		s.client, s.ownClient = &http.Client{}, true
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.tombstone <= 0 {
		s.tombstone = DefaultTombstone
	}
	s.hardCtx, s.hard = context.WithCancel(context.Background())
	s.stopCtx, s.stop = context.WithCancel(s.hardCtx)
	if o.Dir != "" {
		if err := s.openJournal(o.Dir); err != nil {
			_ = lis.Close()
			return nil, err
		}
		s.mu.Lock()
		s.rebuildLocked()
		for _, q := range s.queues {
			s.wg.Add(1)
			go s.loop(q) //nolint:contextcheck // a kept queue's loop runs on the server's own contexts (stopCtx, hardCtx), as a created queue's does, not on Start's
		}
		s.mu.Unlock()
	}
	s.svc = &service{s: s}
	cloudtaskspb.RegisterCloudTasksServer(s.grpc, s.svc)
	go func() {
		defer close(s.serveDone)
		// Serve returns nil after Stop/GracefulStop; any other error means
		// the listener broke, and RPCs fail from then on.
		if err := s.grpc.Serve(lis); err != nil {
			s.log.Error("tasks: grpc serve", "error", err)
		}
	}()
	return s, nil
}

// Addr is the host:port the server listens on: the value for
// CLOUD_TASKS_EMULATOR_HOST.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// ClientOptions are the options that point the official client here,
// without credentials, over plaintext gRPC.
func (s *Server) ClientOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(s.Addr()),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

// Client returns the official Cloud Tasks client pointed at this server.
// The caller closes it.
func (s *Server) Client(ctx context.Context) (*cloudtasks.Client, error) {
	c, err := cloudtasks.NewClient(ctx, s.ClientOptions()...)
	if err != nil {
		return nil, fmt.Errorf("tasks: client: %w", err)
	}
	return c, nil
}

// CreateQueue creates q as the CreateQueue RPC does (q.Name is the full
// name; unset rate limits and retry fields take the real defaults) and
// returns it with the defaults filled in. Errors are gRPC statuses.
func (s *Server) CreateQueue(ctx context.Context, q *cloudtaskspb.Queue) (*cloudtaskspb.Queue, error) {
	parent, _, err := parseQueue("queue.name", q.GetName())
	if err != nil {
		return nil, err
	}
	return s.svc.CreateQueue(ctx, &cloudtaskspb.CreateQueueRequest{Parent: parent, Queue: q})
}

// EnsureQueue creates q, or, when a queue of that name exists (replayed
// from Options.Dir), sets its configuration to q's, as UpdateQueue without
// an update_mask does; a paused queue stays paused. Errors are gRPC
// statuses.
func (s *Server) EnsureQueue(ctx context.Context, q *cloudtaskspb.Queue) (*cloudtaskspb.Queue, error) {
	return s.svc.UpdateQueue(ctx, &cloudtaskspb.UpdateQueueRequest{Queue: q})
}

// Attempts returns a copy of every dispatch attempt that has ended so far,
// in the order they ended.
func (s *Server) Attempts() []Attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Attempt(nil), s.attempts...)
}

// WaitAttempts blocks until at least n attempts have ended and returns
// them all; it fails when ctx ends first.
func (s *Server) WaitAttempts(ctx context.Context, n int) ([]Attempt, error) {
	for {
		s.mu.Lock()
		got, ch := append([]Attempt(nil), s.attempts...), s.changed
		s.mu.Unlock()
		if len(got) >= n {
			return got, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return got, fmt.Errorf("tasks: waiting for %d attempts (have %d): %w", n, len(got), ctx.Err())
		}
	}
}

// Shutdown stops dispatching (no new attempt starts, no retry is
// scheduled), waits for the attempts in flight to end (so a Run being
// served is not cut off), cancelling them only if ctx ends first, then
// stops the gRPC server, letting RPCs in progress finish unless ctx has
// ended. Tasks still queued are lost with the server, unless Options.Dir
// keeps them for the next one.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopDispatch()
	s.log.Info("tasks: shutdown: dispatching stopped, waiting for attempts in flight")
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		s.hard()
		<-done
		err = fmt.Errorf("tasks: shutdown: attempts in flight cancelled: %w", ctx.Err())
	}
	stopped := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		s.grpc.Stop()
		<-stopped
		if err == nil {
			err = fmt.Errorf("tasks: shutdown: rpcs cancelled: %w", ctx.Err())
		}
	}
	s.hard()
	<-s.serveDone
	s.closeIdle()
	s.closeJournal()
	return err
}

// Close stops at once: it cancels the attempts in flight, closes every
// connection, and waits for the server's goroutines to end.
func (s *Server) Close() error {
	s.stopDispatch()
	s.hard()
	s.grpc.Stop()
	s.wg.Wait()
	<-s.serveDone
	s.closeIdle()
	s.closeJournal()
	return nil
}

// closeIdle drops the keep-alive connections of the client the server
// made, so that their goroutines end with it. A caller's client is left
// alone.
func (s *Server) closeIdle() {
	if s.ownClient {
		s.client.CloseIdleConnections()
	}
}

// stopDispatch ends the queue loops; attempts in flight go on.
func (s *Server) stopDispatch() {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	s.stop()
}

// record appends an ended attempt and wakes WaitAttempts. s.mu is held.
func (s *Server) recordLocked(a Attempt) {
	s.attempts = append(s.attempts, a)
	close(s.changed)
	s.changed = make(chan struct{})
}
