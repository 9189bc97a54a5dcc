package tasks

import (
	"fmt"
	"regexp"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The resource-name grammar of the real API (Queue.name and Task.name in
// google/cloud/tasks/v2): PROJECT_ID is letters, digits, hyphens, colons
// and periods; QUEUE_ID letters, digits and hyphens, at most 100; TASK_ID
// letters, digits, hyphens and underscores, 1 to 500.
var (
	projectRE  = regexp.MustCompile(`^[A-Za-z0-9\-:.]+$`)
	locationRE = regexp.MustCompile(`^[A-Za-z0-9\-]+$`)
	queueIDRE  = regexp.MustCompile(`^[A-Za-z0-9\-]{1,100}$`)
	taskIDRE   = regexp.MustCompile(`^[A-Za-z0-9_\-]{1,500}$`)
)

// invalid is an InvalidArgument status whose message starts with the field
// it is about, so a caller (or a test) can tell which input was wrong.
func invalid(field, format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "%s: %s", field, fmt.Sprintf(format, args...))
}

// parseLocation checks "projects/P/locations/L".
func parseLocation(field, name string) error {
	p := strings.Split(name, "/")
	if len(p) != 4 || p[0] != "projects" || p[2] != "locations" ||
		!projectRE.MatchString(p[1]) || !locationRE.MatchString(p[3]) {
		return invalid(field, "%q must be formatted \"projects/<PROJECT_ID>/locations/<LOCATION_ID>\"", name)
	}
	return nil
}

// parseQueue checks "projects/P/locations/L/queues/Q" and returns the
// parent location and the short queue id.
func parseQueue(field, name string) (parent, id string, err error) {
	p := strings.Split(name, "/")
	if len(p) != 6 || p[4] != "queues" || !queueIDRE.MatchString(p[5]) ||
		parseLocation(field, strings.Join(p[:4], "/")) != nil {
		return "", "", invalid(field, "%q must be formatted \"projects/<PROJECT_ID>/locations/<LOCATION_ID>/queues/<QUEUE_ID>\" (QUEUE_ID: letters, digits and hyphens, at most 100)", name)
	}
	return strings.Join(p[:4], "/"), p[5], nil
}

// parseTask checks ".../queues/Q/tasks/T" and returns the queue's full name
// and the short task id.
func parseTask(field, name string) (queue, id string, err error) {
	i := strings.LastIndex(name, "/tasks/")
	if i < 0 {
		return "", "", invalid(field, "%q must be formatted \"projects/<PROJECT_ID>/locations/<LOCATION_ID>/queues/<QUEUE_ID>/tasks/<TASK_ID>\"", name)
	}
	queue, id = name[:i], name[i+len("/tasks/"):]
	if _, _, err := parseQueue(field, queue); err != nil {
		return "", "", err
	}
	if !taskIDRE.MatchString(id) {
		return "", "", invalid(field, "task ID %q can contain only letters ([A-Za-z]), numbers ([0-9]), hyphens (-), or underscores (_), and must be between 1 and 500 characters", id)
	}
	return queue, id, nil
}
