package tasks

import (
	"container/heap"
	"context"
	"encoding/base64"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"golang.org/x/net/http/httpguts"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// service implements the CloudTasks gRPC service over Server's state. It
// is a separate type so that Server's own methods (CreateQueue taking a
// Queue) do not collide with the RPCs'.
type service struct {
	cloudtaskspb.UnimplementedCloudTasksServer
	s *Server
}

// The real service's messages, where callers might recognise them.
const (
	msgQueueNotFound = "Queue does not exist. If you just created the queue, wait at least a minute for the queue to initialize."
	msgTaskNotFound  = "Requested entity was not found."
	msgTaskRecent    = "The task no longer exists, though a task with this name existed recently. The task either successfully completed or was deleted."
)

// Page size limits of ListQueues and ListTasks.
const (
	maxQueuePage = 9800
	maxTaskPage  = 1000
)

// queueLocked finds a live queue by name.
func (s *Server) queueLocked(field, name string) (*queue, error) {
	if _, _, err := parseQueue(field, name); err != nil {
		return nil, err
	}
	q, ok := s.queues[name]
	if !ok {
		return nil, status.Error(codes.NotFound, msgQueueNotFound)
	}
	return q, nil
}

// queueFreeLocked refuses a name whose queue was deleted too recently, as
// the real service does (for 7 days there; Options.Tombstone here).
func (s *Server) queueFreeLocked(name string, now time.Time) error {
	until, ok := s.queueTombs[name]
	if !ok {
		return nil
	}
	if !until.After(now) {
		delete(s.queueTombs, name)
		return nil
	}
	return status.Errorf(codes.FailedPrecondition,
		"the queue cannot be created because a queue with this name existed too recently (free again at %s)", until.UTC().Format(time.RFC3339))
}

// addQueueLocked installs a validated queue and starts its dispatch loop.
func (s *Server) addQueueLocked(pb *cloudtaskspb.Queue, id string) error {
	q := newQueue(pb, id)
	if err := s.saveQueueLocked(q); err != nil {
		return status.Errorf(codes.Unavailable, "queue not created: %v", err)
	}
	s.queues[pb.Name] = q
	if s.stopping {
		return nil // created while shutting down: nothing will dispatch it
	}
	s.wg.Add(1)
	go s.loop(q)
	return nil
}

func (v *service) CreateQueue(_ context.Context, req *cloudtaskspb.CreateQueueRequest) (*cloudtaskspb.Queue, error) {
	if err := parseLocation("parent", req.GetParent()); err != nil {
		return nil, err
	}
	if req.GetQueue() == nil {
		return nil, invalid("queue", "is required")
	}
	parent, id, err := parseQueue("queue.name", req.GetQueue().GetName())
	if err != nil {
		return nil, err
	}
	if parent != req.GetParent() {
		return nil, invalid("queue.name", "%q is not in parent %q", req.GetQueue().GetName(), req.GetParent())
	}
	pb := withDefaults(req.GetQueue())
	// Output-only fields are ignored on input.
	pb.State, pb.PurgeTime = cloudtaskspb.Queue_RUNNING, nil
	if err := validateQueue(pb); err != nil {
		return nil, err
	}
	s := v.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.queues[pb.Name]; ok {
		return nil, status.Error(codes.AlreadyExists, "Queue already exists")
	}
	if err := s.queueFreeLocked(pb.Name, time.Now()); err != nil {
		return nil, err
	}
	if err := s.addQueueLocked(pb, id); err != nil { //nolint:contextcheck // the queue's dispatch loop outlives this RPC; Close stops it through hardCtx
		return nil, err
	}
	return proto.Clone(pb).(*cloudtaskspb.Queue), nil
}

func (v *service) GetQueue(_ context.Context, req *cloudtaskspb.GetQueueRequest) (*cloudtaskspb.Queue, error) {
	s := v.s
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueLocked("name", req.GetName())
	if err != nil {
		return nil, err
	}
	return proto.Clone(q.pb).(*cloudtaskspb.Queue), nil
}

func (v *service) ListQueues(_ context.Context, req *cloudtaskspb.ListQueuesRequest) (*cloudtaskspb.ListQueuesResponse, error) {
	if err := parseLocation("parent", req.GetParent()); err != nil {
		return nil, err
	}
	want, err := stateFilter(req.GetFilter())
	if err != nil {
		return nil, err
	}
	size, after, err := page(req.GetPageSize(), req.GetPageToken(), maxQueuePage)
	if err != nil {
		return nil, err
	}
	s := v.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for name, q := range s.queues {
		if strings.HasPrefix(name, req.GetParent()+"/queues/") && name > after &&
			(want == cloudtaskspb.Queue_STATE_UNSPECIFIED || q.pb.State == want) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	resp := &cloudtaskspb.ListQueuesResponse{}
	for i, name := range names {
		if i == size {
			resp.NextPageToken = pageToken(names[i-1])
			break
		}
		resp.Queues = append(resp.Queues, proto.Clone(s.queues[name].pb).(*cloudtaskspb.Queue))
	}
	return resp, nil
}

// stateFilter understands the one ListQueues filter the docs show,
// "state: PAUSED" (also "state = PAUSED"); anything else is refused rather
// than ignored, so a caller never takes an unfiltered list for a filtered one.
func stateFilter(f string) (cloudtaskspb.Queue_State, error) {
	f = strings.TrimSpace(f)
	if f == "" {
		return cloudtaskspb.Queue_STATE_UNSPECIFIED, nil
	}
	k, val, ok := strings.Cut(f, ":")
	if !ok {
		k, val, ok = strings.Cut(f, "=")
	}
	st, known := cloudtaskspb.Queue_State_value[strings.TrimSpace(val)]
	if !ok || strings.TrimSpace(k) != "state" || !known {
		return 0, invalid("filter", "%q is not supported by the emulator; only \"state: RUNNING|PAUSED|DISABLED\"", f)
	}
	return cloudtaskspb.Queue_State(st), nil
}

// page validates a page size and token; the token is the last name of the
// previous page, so pages are a keyset walk in name order.
func page(size int32, token string, maxSize int) (int, string, error) {
	if size < 0 {
		return 0, "", invalid("page_size", "%d cannot be negative", size)
	}
	n := int(size)
	if n == 0 || n > maxSize {
		n = maxSize
	}
	if token == "" {
		return n, "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) == 0 {
		return 0, "", invalid("page_token", "%q is not a token this server returned", token)
	}
	return n, string(b), nil
}

func pageToken(last string) string { return base64.RawURLEncoding.EncodeToString([]byte(last)) }

func (v *service) UpdateQueue(_ context.Context, req *cloudtaskspb.UpdateQueueRequest) (*cloudtaskspb.Queue, error) {
	in := req.GetQueue()
	if in == nil {
		return nil, invalid("queue", "is required")
	}
	_, id, err := parseQueue("queue.name", in.GetName())
	if err != nil {
		return nil, err
	}
	s := v.s
	s.mu.Lock()
	defer s.mu.Unlock()
	q, exists := s.queues[in.GetName()]
	base := &cloudtaskspb.Queue{Name: in.GetName()}
	if exists {
		base = proto.Clone(q.pb).(*cloudtaskspb.Queue)
	}
	merged, err := applyMask(base, in, req.GetUpdateMask().GetPaths())
	if err != nil {
		return nil, err
	}
	// A rate change without a burst re-derives the burst, as the real
	// service does.
	if exists && merged.GetRateLimits().GetMaxDispatchesPerSecond() != q.pb.RateLimits.MaxDispatchesPerSecond &&
		in.GetRateLimits().GetMaxBurstSize() == 0 && merged.RateLimits != nil {
		merged.RateLimits.MaxBurstSize = 0
	}
	pb := withDefaults(merged)
	if exists {
		pb.State, pb.PurgeTime = q.pb.State, q.pb.PurgeTime
	} else {
		pb.State, pb.PurgeTime = cloudtaskspb.Queue_RUNNING, nil
	}
	if err := validateQueue(pb); err != nil {
		return nil, err
	}
	if !exists {
		// UpdateQueue creates a missing queue, as the real method does.
		if err := s.queueFreeLocked(pb.Name, time.Now()); err != nil {
			return nil, err
		}
		if err := s.addQueueLocked(pb, id); err != nil { //nolint:contextcheck // the queue's dispatch loop outlives this RPC; Close stops it through hardCtx
			return nil, err
		}
	} else {
		old := q.pb
		q.pb = pb
		if err := s.saveQueueLocked(q); err != nil {
			q.pb = old
			return nil, status.Errorf(codes.Unavailable, "queue not updated: %v", err)
		}
		q.poke()
	}
	return proto.Clone(pb).(*cloudtaskspb.Queue), nil
}

// applyMask copies the masked fields of in onto base; no paths means every
// settable field. Paths may be snake_case or lowerCamelCase, at the top
// level or one level into rate_limits and retry_config. Output-only fields
// are ignored, as the API documents.
func applyMask(base, in *cloudtaskspb.Queue, paths []string) (*cloudtaskspb.Queue, error) {
	out := proto.Clone(base).(*cloudtaskspb.Queue)
	if len(paths) == 0 {
		paths = []string{"rate_limits", "retry_config", "app_engine_routing_override", "stackdriver_logging_config"}
	}
	sub := func(dst, src proto.Message, field string) error {
		fd := dst.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(field))
		if fd == nil {
			return invalid("update_mask", "unknown field %q", field)
		}
		if src.ProtoReflect().Has(fd) {
			dst.ProtoReflect().Set(fd, src.ProtoReflect().Get(fd))
		} else {
			dst.ProtoReflect().Clear(fd)
		}
		return nil
	}
	for _, p := range paths {
		head, rest, nested := strings.Cut(snake(p), ".")
		switch head {
		case "name":
			// The name cannot change; it is the key.
		case "state", "purge_time":
			// Output only: ignored.
		case "rate_limits", "retry_config":
			if !nested {
				if err := sub(out, in, head); err != nil {
					return nil, err
				}
				continue
			}
			var dst, src proto.Message
			if head == "rate_limits" {
				if out.RateLimits == nil {
					out.RateLimits = &cloudtaskspb.RateLimits{}
				}
				dst, src = out.RateLimits, in.GetRateLimits()
				if in.RateLimits == nil {
					src = &cloudtaskspb.RateLimits{}
				}
			} else {
				if out.RetryConfig == nil {
					out.RetryConfig = &cloudtaskspb.RetryConfig{}
				}
				dst, src = out.RetryConfig, in.GetRetryConfig()
				if in.RetryConfig == nil {
					src = &cloudtaskspb.RetryConfig{}
				}
			}
			if err := sub(dst, src, rest); err != nil {
				return nil, invalid("update_mask", "unknown field %q", p)
			}
		case "app_engine_routing_override", "stackdriver_logging_config":
			if err := sub(out, in, head); err != nil {
				return nil, err
			}
		default:
			return nil, invalid("update_mask", "unknown field %q", p)
		}
	}
	return out, nil
}

// snake turns lowerCamelCase into snake_case, per path segment.
func snake(p string) string {
	var b strings.Builder
	for _, r := range p {
		if unicode.IsUpper(r) {
			b.WriteByte('_')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (v *service) DeleteQueue(_ context.Context, req *cloudtaskspb.DeleteQueueRequest) (*emptypb.Empty, error) {
	s := v.s
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueLocked("name", req.GetName())
	if err != nil {
		return nil, err
	}
	now := time.Now()
	for _, t := range q.tasks {
		s.removeLocked(q, t, now)
	}
	delete(s.queues, q.name)
	s.queueTombs[q.name] = now.Add(s.tombstone)
	close(q.gone)
	s.logJournal(s.appendLocked(record{Op: "dq", Name: q.name, Until: now.Add(s.tombstone)}))
	return &emptypb.Empty{}, nil
}

func (v *service) PurgeQueue(_ context.Context, req *cloudtaskspb.PurgeQueueRequest) (*cloudtaskspb.Queue, error) {
	s := v.s
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueLocked("name", req.GetName())
	if err != nil {
		return nil, err
	}
	now := time.Now()
	for _, t := range q.tasks {
		s.removeLocked(q, t, now)
	}
	q.pb.PurgeTime = timestamppb.New(now.Truncate(time.Microsecond))
	s.logJournal(s.saveQueueLocked(q))
	return proto.Clone(q.pb).(*cloudtaskspb.Queue), nil
}

func (v *service) PauseQueue(_ context.Context, req *cloudtaskspb.PauseQueueRequest) (*cloudtaskspb.Queue, error) {
	return v.setState(req.GetName(), cloudtaskspb.Queue_PAUSED)
}

func (v *service) ResumeQueue(_ context.Context, req *cloudtaskspb.ResumeQueueRequest) (*cloudtaskspb.Queue, error) {
	return v.setState(req.GetName(), cloudtaskspb.Queue_RUNNING)
}

func (v *service) setState(name string, st cloudtaskspb.Queue_State) (*cloudtaskspb.Queue, error) {
	s := v.s
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueLocked("name", name)
	if err != nil {
		return nil, err
	}
	old := q.pb.State
	q.pb.State = st
	if err := s.saveQueueLocked(q); err != nil {
		q.pb.State = old
		return nil, status.Errorf(codes.Unavailable, "queue state not changed: %v", err)
	}
	q.poke()
	return proto.Clone(q.pb).(*cloudtaskspb.Queue), nil
}

func (v *service) CreateTask(_ context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
	v.s.creates.Add(1) // an API call is an operation, whatever it answers
	if _, _, err := parseQueue("parent", req.GetParent()); err != nil {
		return nil, err
	}
	now := time.Now()
	pb, err := validateTask(req.GetParent(), req.GetTask(), now)
	if err != nil {
		return nil, err
	}
	s := v.s
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueLocked("parent", req.GetParent())
	if err != nil {
		return nil, err
	}
	if pb.Name == "" {
		for pb.Name == "" || q.taken(pb.Name, now) {
			// The real service's generated ids are long decimal numbers.
			pb.Name = req.GetParent() + "/tasks/" + strconv.FormatUint(rand.Uint64(), 10) //nolint:gosec // G404: a task id, unique not secret (the name is visible to anyone who lists the queue)
		}
	} else if q.taken(pb.Name, now) {
		// Dedupe: a live task, or one that finished or was deleted within
		// the tombstone, holds its name.
		return nil, status.Error(codes.AlreadyExists, "Requested entity already exists")
	}
	s.taskSeq++
	t := &task{pb: pb, id: pb.Name[strings.LastIndex(pb.Name, "/")+1:], seq: s.taskSeq,
		schedule: pb.ScheduleTime.AsTime(), index: -1}
	// Durable before the answer: an OK means the task will be delivered.
	if err := s.saveTaskLocked(t); err != nil {
		return nil, status.Errorf(codes.Unavailable, "task not created: %v", err)
	}
	q.tasks[pb.Name] = t
	heap.Push(&q.ready, t)
	q.poke()
	return view(pb, req.GetResponseView()), nil
}

// validateTask checks a task for CreateTask and returns the copy to store,
// with its defaults (method, deadline, schedule and create times) set.
func validateTask(parent string, in *cloudtaskspb.Task, now time.Time) (*cloudtaskspb.Task, error) {
	if in == nil {
		return nil, invalid("task", "is required")
	}
	if in.GetName() != "" {
		q, _, err := parseTask("task.name", in.GetName())
		if err != nil {
			return nil, err
		}
		if q != parent {
			return nil, invalid("task.name", "the queue name from request (%q) must be the same as the queue name in the named task (%q)", parent, q)
		}
	}
	if in.GetAppEngineHttpRequest() != nil {
		return nil, status.Error(codes.Unimplemented,
			"task.app_engine_http_request: App Engine tasks are not supported by the emulator; use task.http_request")
	}
	hr := in.GetHttpRequest()
	if hr == nil {
		return nil, invalid("task.http_request", "is required (the emulator supports HTTP tasks only)")
	}
	if hr.GetUrl() == "" {
		return nil, invalid("task.http_request.url", "is required")
	}
	u, err := url.Parse(hr.GetUrl())
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, invalid("task.http_request.url", "%q must start with 'http://' or 'https://' and name a host", hr.GetUrl())
	}
	if len(hr.GetUrl()) > 2083 {
		return nil, invalid("task.http_request.url", "is longer than 2083 characters")
	}
	if _, ok := cloudtaskspb.HttpMethod_name[int32(hr.GetHttpMethod())]; !ok {
		return nil, invalid("task.http_request.http_method", "unknown method %d", hr.GetHttpMethod())
	}
	method := methodName(hr.GetHttpMethod())
	if len(hr.GetBody()) > 0 && method != http.MethodPost && method != http.MethodPut && method != http.MethodPatch {
		return nil, invalid("task.http_request.body", "a body is allowed only with POST, PUT or PATCH, not %s", method)
	}
	headerSize := 0
	for k, val := range hr.GetHeaders() {
		if !httpguts.ValidHeaderFieldName(k) || !httpguts.ValidHeaderFieldValue(val) {
			return nil, invalid("task.http_request.headers", "%q: %q is not a valid HTTP header", k, val)
		}
		headerSize += len(k) + len(val)
	}
	if headerSize >= 80*1024 {
		return nil, invalid("task.http_request.headers", "the headers must be smaller than 80KB")
	}
	if o := hr.GetOidcToken(); o != nil && o.GetServiceAccountEmail() == "" {
		return nil, invalid("task.http_request.oidc_token.service_account_email", "is required")
	}
	if o := hr.GetOauthToken(); o != nil && o.GetServiceAccountEmail() == "" {
		return nil, invalid("task.http_request.oauth_token.service_account_email", "is required")
	}

	pb := proto.Clone(in).(*cloudtaskspb.Task)
	pb.GetHttpRequest().HttpMethod = cloudtaskspb.HttpMethod(cloudtaskspb.HttpMethod_value[method])

	deadline := DefaultDispatchDeadline
	if d := in.GetDispatchDeadline(); d != nil {
		if err := d.CheckValid(); err != nil {
			return nil, invalid("task.dispatch_deadline", "%v", err)
		}
		deadline = d.AsDuration().Truncate(time.Millisecond)
		if deadline < MinDispatchDeadline || deadline > MaxDispatchDeadline {
			return nil, invalid("task.dispatch_deadline", "%s must be in the interval [15s, 30m] for HTTP tasks", d.AsDuration())
		}
	}
	pb.DispatchDeadline = durationpb.New(deadline)

	// A schedule_time unset or in the past means now; the real service
	// truncates it to the microsecond.
	schedule := now
	if st := in.GetScheduleTime(); st != nil {
		if err := st.CheckValid(); err != nil {
			return nil, invalid("task.schedule_time", "%v", err)
		}
		if t := st.AsTime(); t.After(now) {
			if t.Sub(now) > MaxScheduleAhead {
				return nil, invalid("task.schedule_time", "%s is more than 30 days ahead", t.UTC().Format(time.RFC3339))
			}
			schedule = t
		}
	}
	pb.ScheduleTime = timestamppb.New(schedule.Truncate(time.Microsecond))
	pb.CreateTime = timestamppb.New(now.Truncate(time.Second))
	// Output-only fields are the server's.
	pb.DispatchCount, pb.ResponseCount, pb.FirstAttempt, pb.LastAttempt = 0, 0, nil, nil
	pb.View = cloudtaskspb.Task_FULL
	if n := proto.Size(pb); n > MaxTaskSize {
		return nil, invalid("task", "is %d bytes; the maximum task size is 100KB", n)
	}
	return pb, nil
}

// view is the task as a response shows it: BASIC (the default) leaves out
// the body, FULL has everything.
func view(pb *cloudtaskspb.Task, v cloudtaskspb.Task_View) *cloudtaskspb.Task {
	out := proto.Clone(pb).(*cloudtaskspb.Task)
	if v == cloudtaskspb.Task_FULL {
		out.View = cloudtaskspb.Task_FULL
		return out
	}
	out.View = cloudtaskspb.Task_BASIC
	if hr := out.GetHttpRequest(); hr != nil {
		hr.Body = nil
	}
	return out
}

func (v *service) GetTask(_ context.Context, req *cloudtaskspb.GetTaskRequest) (*cloudtaskspb.Task, error) {
	qname, _, err := parseTask("name", req.GetName())
	if err != nil {
		return nil, err
	}
	s := v.s
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueLocked("name", qname)
	if err != nil {
		return nil, err
	}
	t, ok := q.tasks[req.GetName()]
	if !ok {
		if q.taken(req.GetName(), time.Now()) {
			return nil, status.Error(codes.NotFound, msgTaskRecent)
		}
		return nil, status.Error(codes.NotFound, msgTaskNotFound)
	}
	return view(t.pb, req.GetResponseView()), nil
}

func (v *service) ListTasks(_ context.Context, req *cloudtaskspb.ListTasksRequest) (*cloudtaskspb.ListTasksResponse, error) {
	size, after, err := page(req.GetPageSize(), req.GetPageToken(), maxTaskPage)
	if err != nil {
		return nil, err
	}
	s := v.s
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueLocked("parent", req.GetParent())
	if err != nil {
		return nil, err
	}
	var names []string
	for name := range q.tasks {
		if name > after {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	resp := &cloudtaskspb.ListTasksResponse{}
	for i, name := range names {
		if i == size {
			resp.NextPageToken = pageToken(names[i-1])
			break
		}
		resp.Tasks = append(resp.Tasks, view(q.tasks[name].pb, req.GetResponseView()))
	}
	return resp, nil
}

func (v *service) DeleteTask(_ context.Context, req *cloudtaskspb.DeleteTaskRequest) (*emptypb.Empty, error) {
	qname, _, err := parseTask("name", req.GetName())
	if err != nil {
		return nil, err
	}
	s := v.s
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueLocked("name", qname)
	if err != nil {
		return nil, err
	}
	t, ok := q.tasks[req.GetName()]
	if !ok {
		// Finished, dropped and deleted tasks are gone: the real service
		// cannot delete a task that executed or permanently failed either.
		return nil, status.Error(codes.NotFound, msgTaskNotFound)
	}
	s.removeLocked(q, t, time.Now())
	return &emptypb.Empty{}, nil
}
