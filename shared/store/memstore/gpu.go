package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/baton-cron/baton/shared/gpu/gpumodel"
	"github.com/baton-cron/baton/shared/store"
)

// gpuQueue is the GPU view. It is not modelled yet: the scale benchmark
// needs only the scheduler's views, and every method answers
// errGPUUnmodelled rather than pretend.
type gpuQueue struct{ s *Store }

var _ store.GPU = gpuQueue{}

// errGPUUnmodelled is every GPU method's answer.
var errGPUUnmodelled = fmt.Errorf("memstore: the GPU queue is not modelled in memory; use mongostore")

func (gpuQueue) EnsureSlots(context.Context, ...gpumodel.Slot) error { return errGPUUnmodelled }
func (gpuQueue) UpgradeQueued(context.Context, int) (int, error)     { return 0, errGPUUnmodelled }
func (gpuQueue) Enqueue(context.Context, gpumodel.Job) (bool, error) { return false, errGPUUnmodelled }
func (gpuQueue) Get(context.Context, string) (gpumodel.Job, error) {
	return gpumodel.Job{}, errGPUUnmodelled
}
func (gpuQueue) AnyQueued(context.Context) (bool, error)           { return false, errGPUUnmodelled }
func (gpuQueue) CountQueued(context.Context, int64) (int64, error) { return 0, errGPUUnmodelled }
func (gpuQueue) Slots(context.Context, []string) ([]gpumodel.Slot, error) {
	return nil, errGPUUnmodelled
}
func (gpuQueue) List(context.Context, gpumodel.JobStatus, string, string, int) ([]gpumodel.Job, string, error) {
	return nil, "", errGPUUnmodelled
}
func (gpuQueue) QueueHeads(context.Context, []string, int) ([]gpumodel.Job, error) {
	return nil, errGPUUnmodelled
}
func (gpuQueue) ClaimJob(context.Context, string, gpumodel.Slot, string, time.Time, time.Time) (gpumodel.Job, error) {
	return gpumodel.Job{}, errGPUUnmodelled
}
func (gpuQueue) ClaimTenantJob(context.Context, string, []string, gpumodel.Slot, string, time.Time, time.Time) (gpumodel.Job, error) {
	return gpumodel.Job{}, errGPUUnmodelled
}
func (gpuQueue) CountQueuedTenant(context.Context, string, int64) (int64, error) {
	return 0, errGPUUnmodelled
}
func (gpuQueue) ClaimSlot(context.Context, []string, time.Time, time.Time) (gpumodel.Slot, error) {
	return gpumodel.Slot{}, errGPUUnmodelled
}
func (gpuQueue) ReclaimSlot(context.Context, gpumodel.Hold, string, time.Time) (gpumodel.Slot, error) {
	return gpumodel.Slot{}, errGPUUnmodelled
}
func (gpuQueue) ClaimBestJob(context.Context, gpumodel.Slot, string, time.Time, time.Time) (gpumodel.Job, error) {
	return gpumodel.Job{}, errGPUUnmodelled
}
func (gpuQueue) LinkSlot(context.Context, string, int64, string, string, string, time.Time) error {
	return errGPUUnmodelled
}
func (gpuQueue) ExtendSlot(context.Context, string, int64, string, time.Time) error {
	return errGPUUnmodelled
}
func (gpuQueue) Release(context.Context, string, int64, time.Time) error { return errGPUUnmodelled }
func (gpuQueue) Heartbeat(context.Context, string, gpumodel.Hold, time.Time, time.Time) (gpumodel.Job, error) {
	return gpumodel.Job{}, errGPUUnmodelled
}
func (gpuQueue) Complete(context.Context, string, gpumodel.Hold, gpumodel.Outcome, time.Time) (gpumodel.Job, error) {
	return gpumodel.Job{}, errGPUUnmodelled
}
func (gpuQueue) RequeueInterrupted(context.Context, gpumodel.Job, gpumodel.Hold, string, time.Time) (gpumodel.Job, error) {
	return gpumodel.Job{}, errGPUUnmodelled
}
func (gpuQueue) RequeueRefused(context.Context, gpumodel.Job, string, time.Time) error {
	return errGPUUnmodelled
}
func (gpuQueue) Unclaim(context.Context, gpumodel.Job) error { return errGPUUnmodelled }
func (gpuQueue) Cancel(context.Context, string, gpumodel.JobStatus, int64, time.Time) error {
	return errGPUUnmodelled
}
func (gpuQueue) RunningPreemptible(context.Context, int) ([]gpumodel.Job, error) {
	return nil, errGPUUnmodelled
}
func (gpuQueue) MarkPreempting(context.Context, gpumodel.Job, time.Time, int) error {
	return errGPUUnmodelled
}
func (gpuQueue) RequeuePreempted(context.Context, gpumodel.Job, gpumodel.Hold, string) (gpumodel.Job, error) {
	return gpumodel.Job{}, errGPUUnmodelled
}
func (gpuQueue) Expired(context.Context, time.Time, int) ([]gpumodel.Job, error) {
	return nil, errGPUUnmodelled
}
func (gpuQueue) RequeueExpired(context.Context, gpumodel.Job, time.Time, string, time.Time) error {
	return errGPUUnmodelled
}
