package tasks

import (
	"math"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
)

// The real service's defaults for a queue created through the Cloud Tasks
// API with its RateLimits and RetryConfig left unset, and its bounds.
const (
	DefaultMaxDispatchesPerSecond  = 500
	DefaultMaxConcurrentDispatches = 1000
	DefaultMaxAttempts             = 100
	DefaultMinBackoff              = 100 * time.Millisecond
	DefaultMaxBackoff              = time.Hour
	DefaultMaxDoublings            = 16

	MaxDispatchesPerSecond  = 500
	MaxConcurrentDispatches = 5000
	MaxBurstSize            = 500
)

// Dispatch deadline bounds and default for HTTP tasks, as documented for
// Task.dispatch_deadline.
const (
	DefaultDispatchDeadline = 10 * time.Minute
	MinDispatchDeadline     = 15 * time.Second
	MaxDispatchDeadline     = 30 * time.Minute
)

// Other documented limits CreateTask enforces.
const (
	// MaxTaskSize is the largest task, as its encoded proto (100KB).
	MaxTaskSize = 100 * 1024
	// MaxScheduleAhead is how far in the future schedule_time may be.
	MaxScheduleAhead = 30 * 24 * time.Hour
	// DefaultTombstone is how long a task name stays taken after the task
	// finished or was deleted (the real service's "~1 hour").
	DefaultTombstone = time.Hour
)

// defaultBurst picks max_burst_size for a rate, which the real service
// does by a rule it does not document (it reports 100 for the default 500/s).
// Rate/5, at least 1 and at most MaxBurstSize, reproduces that default.
func defaultBurst(rate float64) int32 {
	b := int32(math.Ceil(rate / 5))
	return max(1, min(b, MaxBurstSize))
}

// withDefaults returns a copy of q with every unset rate limit and retry
// field set to the real default, as GetQueue shows them. A zero or unset
// value means "unset" (proto3 cannot tell them apart), as in the real API:
// 0 max_doublings cannot be asked for, and neither can a zero backoff.
func withDefaults(q *cloudtaskspb.Queue) *cloudtaskspb.Queue {
	q = proto.Clone(q).(*cloudtaskspb.Queue)
	if q.RateLimits == nil {
		q.RateLimits = &cloudtaskspb.RateLimits{}
	}
	rl := q.RateLimits
	if rl.MaxDispatchesPerSecond == 0 {
		rl.MaxDispatchesPerSecond = DefaultMaxDispatchesPerSecond
	}
	if rl.MaxConcurrentDispatches == 0 {
		rl.MaxConcurrentDispatches = DefaultMaxConcurrentDispatches
	}
	if rl.MaxBurstSize <= 0 {
		rl.MaxBurstSize = defaultBurst(rl.MaxDispatchesPerSecond)
	}
	if q.RetryConfig == nil {
		q.RetryConfig = &cloudtaskspb.RetryConfig{}
	}
	rc := q.RetryConfig
	if rc.MaxAttempts == 0 {
		rc.MaxAttempts = DefaultMaxAttempts
	}
	if rc.MaxRetryDuration == nil {
		rc.MaxRetryDuration = durationpb.New(0)
	}
	if rc.MinBackoff.AsDuration() == 0 {
		rc.MinBackoff = durationpb.New(DefaultMinBackoff)
	}
	if rc.MaxBackoff.AsDuration() == 0 {
		rc.MaxBackoff = durationpb.New(DefaultMaxBackoff)
	}
	if rc.MaxDoublings == 0 {
		rc.MaxDoublings = DefaultMaxDoublings
	}
	if q.State == cloudtaskspb.Queue_STATE_UNSPECIFIED {
		q.State = cloudtaskspb.Queue_RUNNING
	}
	return q
}

// validateQueue checks a queue with its defaults filled in; messages name
// the field as the real service's do.
func validateQueue(q *cloudtaskspb.Queue) error {
	rl, rc := q.RateLimits, q.RetryConfig
	switch {
	case rl.MaxDispatchesPerSecond < 0 || math.IsNaN(rl.MaxDispatchesPerSecond):
		return invalid("queue.rate_limits.max_dispatches_per_second", "cannot be negative")
	case rl.MaxDispatchesPerSecond > MaxDispatchesPerSecond:
		return invalid("queue.rate_limits.max_dispatches_per_second", "%g must be less than or equal to %d", rl.MaxDispatchesPerSecond, MaxDispatchesPerSecond)
	case rl.MaxConcurrentDispatches < 0:
		return invalid("queue.rate_limits.max_concurrent_dispatches", "cannot be negative")
	case rl.MaxConcurrentDispatches > MaxConcurrentDispatches:
		return invalid("queue.rate_limits.max_concurrent_dispatches", "%d must be less than or equal to %d", rl.MaxConcurrentDispatches, MaxConcurrentDispatches)
	case rl.MaxBurstSize > MaxBurstSize:
		return invalid("queue.rate_limits.max_burst_size", "%d must be less than or equal to %d", rl.MaxBurstSize, MaxBurstSize)
	case rc.MaxAttempts < -1:
		return invalid("queue.retry_config.max_attempts", "%d must be greater or equal to -1", rc.MaxAttempts)
	case rc.MaxDoublings < 0:
		return invalid("queue.retry_config.max_doublings", "cannot be negative")
	}
	for _, d := range []struct {
		field string
		v     *durationpb.Duration
	}{
		{"queue.retry_config.max_retry_duration", rc.MaxRetryDuration},
		{"queue.retry_config.min_backoff", rc.MinBackoff},
		{"queue.retry_config.max_backoff", rc.MaxBackoff},
	} {
		if err := d.v.CheckValid(); err != nil {
			return invalid(d.field, "%v", err)
		}
		if d.v.AsDuration() < 0 {
			return invalid(d.field, "cannot be negative")
		}
	}
	if rc.MinBackoff.AsDuration() > rc.MaxBackoff.AsDuration() {
		return invalid("queue.retry_config.min_backoff", "%s must be less than or equal to max_backoff %s",
			rc.MinBackoff.AsDuration(), rc.MaxBackoff.AsDuration())
	}
	return nil
}

// retryPolicy is a queue's RetryConfig in Go types.
type retryPolicy struct {
	maxAttempts      int // -1: unlimited
	maxRetryDuration time.Duration
	minBackoff       time.Duration
	maxBackoff       time.Duration
	maxDoublings     int
}

func policyOf(rc *cloudtaskspb.RetryConfig) retryPolicy {
	return retryPolicy{
		maxAttempts:      int(rc.GetMaxAttempts()),
		maxRetryDuration: rc.GetMaxRetryDuration().AsDuration(),
		minBackoff:       rc.GetMinBackoff().AsDuration(),
		maxBackoff:       rc.GetMaxBackoff().AsDuration(),
		maxDoublings:     int(rc.GetMaxDoublings()),
	}
}

// backoff is the wait before retry n (0 for the first retry), by the
// documented rule: the interval starts at min_backoff, doubles
// max_doublings times, then grows linearly by min_backoff×2^max_doublings,
// and never exceeds max_backoff. With min 10s, max 300s and 3 doublings the
// waits are 10, 20, 40, 80, 160, 240, 300, 300 … seconds.
func (p retryPolicy) backoff(n int) time.Duration {
	n = max(n, 0)
	d := p.maxDoublings
	var wait time.Duration
	if n <= d {
		if n >= 62 || p.minBackoff > p.maxBackoff>>n {
			return p.maxBackoff // the shift would pass max_backoff (or int64)
		}
		wait = p.minBackoff << n
	} else {
		if d >= 62 || p.minBackoff > p.maxBackoff>>d {
			return p.maxBackoff
		}
		step := p.minBackoff << d
		k := time.Duration(n - d + 1)
		if step > 0 && k > p.maxBackoff/step {
			return p.maxBackoff
		}
		wait = step * k
	}
	return min(wait, p.maxBackoff)
}

// exhausted reports whether a task that has had attempts attempts, the
// first at first, has no retry left at now. The real rule: retrying stops
// once the task has been attempted max_attempts times *and*
// max_retry_duration has passed since its first attempt; an unlimited
// limit (max_attempts -1, max_retry_duration 0) counts as reached unless
// both are unlimited, in which case retrying never stops.
func (p retryPolicy) exhausted(attempts int, first, now time.Time) bool {
	countLimited, durLimited := p.maxAttempts >= 0, p.maxRetryDuration > 0
	if !countLimited && !durLimited {
		return false
	}
	countDone := !countLimited || attempts >= p.maxAttempts
	durDone := !durLimited || now.Sub(first) >= p.maxRetryDuration
	return countDone && durDone
}
