package gpu

import (
	"context"
	"errors"

	"github.com/baton-cron/baton/shared/schedule"
)

// RunJob reports the state of a schedule run's job, for the scheduler's
// sweep, which finishes a gpu-target run from its job's outcome. found is
// false when no job has that id: the run's enqueue never landed. It
// implements scheduler.GPU.
func (d *Dispatcher) RunJob(ctx context.Context, id string) (st schedule.GPUJobState, found bool, err error) {
	job, err := d.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return schedule.GPUJobState{}, false, nil
	}
	if err != nil {
		return schedule.GPUJobState{}, false, err
	}
	return schedule.GPUJobState{Status: string(job.Status), ExitCode: job.ExitCode, Error: job.Error, Attempts: job.Attempts, Output: job.Output}, true, nil
}
