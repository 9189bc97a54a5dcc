package taskqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/url"
	"regexp"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// Config says where tasks go and how they authenticate.
type Config struct {
	// Queue is the queue's full name, projects/P/locations/L/queues/Q
	// (BATON_TASKS_QUEUE), when there is one queue.
	Queue string
	// Queues, when set, replaces Queue with several queues' full names
	// (BATON_TASKS_QUEUE's comma-separated list): one queue dispatches at
	// most 500 tasks a second (https://cloud.google.com/tasks/docs/quotas),
	// and more queues multiply that. A schedule's tasks go to
	// Queues[QueueIndex(scheduleID, len(Queues))], so the order is part of
	// the deployment (Terraform lists them by index).
	Queues []string
	// URL is the Run function's URL: every task's target, and the audience
	// of its OIDC token (BATON_RUN_URL).
	URL string
	// ServiceAccount is the account whose OIDC token each task carries
	// (BATON_TASKS_SERVICE_ACCOUNT). Empty sends no token (local use).
	ServiceAccount string
	// Token, when set, is sent as "Authorization: Bearer Token": the local
	// stack's API token, where there is no OIDC. Never set in the cloud.
	Token string
	// DispatchDeadline bounds each delivery; 0 means Cloud Tasks' longest,
	// schedule.MaxDispatchDeadline, which http target timeouts are bounded
	// to fit in.
	DispatchDeadline time.Duration
}

// queuePattern is Cloud Tasks' queue name.
var queuePattern = regexp.MustCompile(`^projects/[^/]+/locations/[^/]+/queues/[A-Za-z0-9-]{1,100}$`)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errcode.New(errcode.InvalidArgument, "taskqueue: bad configuration")

// queues is Queues, or Queue alone.
func (cfg Config) queues() []string {
	if len(cfg.Queues) > 0 {
		return cfg.Queues
	}
	return []string{cfg.Queue}
}

// Check validates cfg, naming the variable at fault.
func (cfg Config) Check() error {
	seen := map[string]bool{}
	for _, q := range cfg.queues() {
		if !queuePattern.MatchString(q) {
			return fmt.Errorf("%w: BATON_TASKS_QUEUE %q: want projects/PROJECT/locations/LOCATION/queues/QUEUE, or several of them separated by commas", ErrConfig, q)
		}
		// A queue listed twice would take two shares of the hash and
		// double its own rate for no reason: a typo.
		if seen[q] {
			return fmt.Errorf("%w: BATON_TASKS_QUEUE lists %q twice", ErrConfig, q)
		}
		seen[q] = true
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%w: BATON_RUN_URL %q: want the Run function's http(s) URL", ErrConfig, cfg.URL)
	}
	if d := cfg.DispatchDeadline; d != 0 && (d < 15*time.Second || d > schedule.MaxDispatchDeadline) {
		return fmt.Errorf("%w: dispatch deadline %s: Cloud Tasks allows 15s to %s", ErrConfig, d, schedule.MaxDispatchDeadline)
	}
	return nil
}

// Queue creates Run tasks on Cloud Tasks: on one queue, or spread over
// several by schedule (Config.Queues). It implements scheduler.Dispatcher
// and is safe for concurrent use.
type Queue struct {
	client *cloudtasks.Client
	cfg    Config
	queues []string
	owned  bool // Close closes the client
}

// QueueIndex is the queue, of n, that schedule scheduleID's tasks go to:
// FNV-1a of the id, mod n. Every task of one schedule (its decided runs,
// the chunks of a catch-up batch, its retries, the sweep's recoveries)
// lands in one queue, so what one queue guarantees to a schedule today
// holds with many: a task name is deduplicated within its queue only, and
// the chunks chained with After wait on each other in one queue's order.
// The hash is fixed: a different one would move every schedule at an
// upgrade, as changing n does (docs/deploy.md, "Sizing").
func QueueIndex(scheduleID string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(scheduleID)) // a hash's Write never fails
	return int(h.Sum32() % uint32(n))  //nolint:gosec // n > 1, a queue count
}

// QueueFor is the full name of the queue schedule scheduleID's tasks go to.
func (q *Queue) QueueFor(scheduleID string) string {
	return q.queues[QueueIndex(scheduleID, len(q.queues))]
}

var _ scheduler.Dispatcher = (*Queue)(nil)

// New returns a Queue over client, which the caller keeps and closes.
func New(client *cloudtasks.Client, cfg Config) (*Queue, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if cfg.DispatchDeadline == 0 {
		cfg.DispatchDeadline = schedule.MaxDispatchDeadline
	}
	return &Queue{client: client, cfg: cfg, queues: cfg.queues()}, nil
}

// Open builds the client too: against the emulator at emulatorHost
// (CLOUD_TASKS_EMULATOR_HOST) when it is set, without TLS or credentials,
// and otherwise against Cloud Tasks with the default credentials. Close
// closes it.
func Open(ctx context.Context, cfg Config, emulatorHost string) (*Queue, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	var opts []option.ClientOption
	if emulatorHost != "" {
		opts = append(opts, option.WithEndpoint(emulatorHost), option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	}
	c, err := cloudtasks.NewClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("taskqueue: open client: %w", err)
	}
	q, err := New(c, cfg)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	q.owned = true
	return q, nil
}

// Close closes the client if Open made it.
func (q *Queue) Close() error {
	if !q.owned {
		return nil
	}
	if err := q.client.Close(); err != nil {
		return fmt.Errorf("taskqueue: close: %w", err)
	}
	return nil
}

// dispatchTimeout bounds one Dispatch, its retries included: a tick's
// enqueue must not hang on the queue, and the sweep repairs what it leaves.
const dispatchTimeout = 15 * time.Second

// retryable are the codes after which CreateTask may have landed or may not:
// trying again is safe because the name makes the second create
// ALREADY_EXISTS.
var retryable = []codes.Code{codes.Unavailable, codes.DeadlineExceeded, codes.Internal, codes.Aborted}

// Dispatch creates the task. ALREADY_EXISTS is success: the same runs were
// handed off before.
func (q *Queue) Dispatch(ctx context.Context, t scheduler.Task) error {
	if t.Name == "" {
		t.Name = scheduler.TaskName(t.RunIDs(), "")
	}
	body, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("taskqueue: dispatch %s: encode: %w", t.Name, err)
	}
	// A schedule's tasks stay in one queue (QueueFor), so that its
	// dedup, chained chunks and retries meet there. A page of several
	// schedules' runs goes where its name says, as a partition task: a
	// repeat of the same page meets the first, and pages spread over
	// the queues.
	key := t.ScheduleID
	if len(t.Page) > 0 {
		key = t.Name
	}
	return q.create(ctx, q.QueueFor(key), t.Name, body, t.At)
}

var _ scheduler.PartitionDispatcher = (*Queue)(nil)

// DispatchPartition creates a partition task of a coordinating tick: a
// Queue whose URL is the Tick function's (BATON_TICK_QUEUE,
// BATON_TICK_URL) delivers it to Tick, which decides the partition.
// ALREADY_EXISTS is success: a duplicated tick's.
func (q *Queue) DispatchPartition(ctx context.Context, t scheduler.PartitionTask) error {
	if t.Name == "" {
		t.Name = scheduler.PartitionTaskName(t.ScheduleTime, t.Partition, t.Partitions)
	}
	body, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("taskqueue: dispatch partition %s: encode: %w", t.Name, err)
	}
	// A duplicated tick's partition task must meet the first in one
	// queue to be deduplicated: the queue is a function of the name.
	return q.create(ctx, q.QueueFor(t.Name), t.Name, body, time.Time{})
}

// create creates one task named name on queue that POSTs body to the
// queue's URL.
func (q *Queue) create(ctx context.Context, queue, name string, body []byte, at time.Time) error {
	req := &cloudtaskspb.HttpRequest{
		Url:        q.cfg.URL,
		HttpMethod: cloudtaskspb.HttpMethod_POST,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       body,
	}
	if q.cfg.ServiceAccount != "" {
		req.AuthorizationHeader = &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{
			ServiceAccountEmail: q.cfg.ServiceAccount, Audience: q.cfg.URL,
		}}
	} else if q.cfg.Token != "" {
		req.Headers["Authorization"] = "Bearer " + q.cfg.Token
	}
	task := &cloudtaskspb.Task{
		Name:             queue + "/tasks/" + name,
		DispatchDeadline: durationpb.New(q.cfg.DispatchDeadline),
		MessageType:      &cloudtaskspb.Task_HttpRequest{HttpRequest: req},
	}
	if !at.IsZero() {
		task.ScheduleTime = timestamppb.New(at)
	}
	ctx, cancel := context.WithTimeout(ctx, dispatchTimeout)
	defer cancel()
	_, err := q.client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queue, Task: task},
		gax.WithRetry(func() gax.Retryer {
			return gax.OnCodes(retryable, gax.Backoff{Initial: 100 * time.Millisecond, Max: 2 * time.Second, Multiplier: 2})
		}))
	if status.Code(err) == codes.AlreadyExists {
		return nil
	}
	if err != nil {
		return fmt.Errorf("taskqueue: dispatch %s: %w", name, err)
	}
	return nil
}
