package gpu_test

import (
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/schedule"
)

// TestScheduleGPULimitsFitTheQueue: every gpu target the Schedules API
// accepts must be enqueueable, or each of its runs fails at enqueue. The
// schedule package cannot import this one, so its limits are copies; this
// keeps them honest.
func TestScheduleGPULimitsFitTheQueue(t *testing.T) {
	type limits struct {
		Priority, Attempts, Payload int
		MinTimeout, MaxTimeout      time.Duration
	}
	sched := limits{schedule.MaxGPUPriority, schedule.MaxGPUAttempts, schedule.MaxHTTPBody, schedule.MinGPUTimeout, schedule.MaxGPUTimeout}
	queue := limits{gpu.MaxPriority, gpu.MaxMaxAttempts, gpu.MaxPayloadBytes, gpu.MinTimeout, gpu.MaxTimeout}
	if sched.Priority > queue.Priority || sched.Attempts > queue.Attempts || sched.Payload > queue.Payload ||
		sched.MinTimeout < queue.MinTimeout || sched.MaxTimeout > queue.MaxTimeout {
		t.Errorf("schedule gpu limits exceed the queue's (-queue,+schedule): -%+v +%+v", queue, sched)
	}
}
