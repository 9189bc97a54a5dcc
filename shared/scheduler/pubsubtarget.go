package scheduler

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/fence"
	"github.com/baton-cron/baton/shared/notify"
	"github.com/baton-cron/baton/shared/schedule"
)

// ErrTopicNotAllowed means a pubsub target's topic is not on
// BATON_ALLOWED_TOPICS at execution time (the list may have shrunk since
// the schedule was written).
var ErrTopicNotAllowed = errcode.New(errcode.PermissionDenied, "scheduler: topic is not on BATON_ALLOWED_TOPICS")

// callPubSub publishes r's message and succeeds only on the server's
// acknowledgement. A publish the server refused, or did not acknowledge
// within the target's timeout (the client retries what Pub/Sub answers as
// retryable until then), fails the run: the message may still have
// landed, so a retry can deliver it twice, and the run id attribute is
// what a subscriber deduplicates on.
func (e *Engine) callPubSub(ctx context.Context, r *schedule.Run, p *schedule.PubSubTarget) (string, error) {
	if !schedule.IsAllowedTopic(p.Topic, e.cfg.AllowedTopics) {
		return "", fmt.Errorf("pubsub target %s: %w", p.Topic, ErrTopicNotAllowed)
	}
	if e.cfg.Publisher == nil {
		return "", fmt.Errorf("pubsub target %s: no Pub/Sub publisher is configured in this process", p.Topic)
	}
	timeout := p.Timeout.D()
	if timeout <= 0 {
		timeout = schedule.DefaultPubSubTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	attrs := make(map[string]string, len(p.Attributes)+4)
	maps.Copy(attrs, p.Attributes)
	addRunIdentity(attrs, r, identityKeys{schedule.AttrRunID, schedule.AttrSchedule, schedule.AttrFireTime, schedule.AttrFence})
	id, err := e.cfg.Publisher.Publish(ctx, p.Topic, notify.Message{Data: []byte(p.Data), Attributes: attrs, OrderingKey: p.OrderingKey, Timeout: timeout})
	if err != nil {
		return "", fmt.Errorf("pubsub target: %w", err)
	}
	return "published message " + id, nil
}

// identityKeys are the names a target gives a run's identity: its id, its
// schedule, its fire time and its fencing token.
type identityKeys struct{ runID, schedule, fireTime, fence string }

// addRunIdentity adds run r's identity to m under k's names: the run id
// (the receiver's deduplication key), its schedule, its fire time (RFC
// 3339) and, for a run that holds a job lease, the lease's fencing token,
// as an http target's X-Baton-Fence header: a receiver that keeps the
// highest epoch per lease can refuse a holder that lost its lease.
func addRunIdentity(m map[string]string, r *schedule.Run, k identityKeys) {
	m[k.runID] = r.ID
	m[k.schedule] = r.ScheduleID
	m[k.fireTime] = r.FireTime.UTC().Format(time.RFC3339)
	if r.Epoch > 0 {
		m[k.fence] = fence.Token{Lease: runJobLease(r), Epoch: r.Epoch}.String()
	}
}
