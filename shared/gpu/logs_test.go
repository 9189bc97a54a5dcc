package gpu_test

import (
	"testing"

	"github.com/baton-cron/baton/shared/gpu"
)

// TestLatestAttempt: the logs route's default attempt is the one whose
// output the completion recorded, else the attempt under the job's fence,
// else the last one taken back.
func TestLatestAttempt(t *testing.T) {
	for _, tc := range []struct {
		name string
		job  gpu.Job
		want int
	}{
		{"never ran", gpu.Job{ID: "j", Status: gpu.StatusQueued}, 1},
		{"running, first attempt", gpu.Job{ID: "j", Status: gpu.StatusRunning, Epoch: 4}, 1},
		{"running after two lost", gpu.Job{ID: "j", Status: gpu.StatusRunning, Attempts: 2, Epoch: 9}, 3},
		{"completed: from the output", gpu.Job{ID: "j", Status: gpu.StatusFailed, Attempts: 1, Epoch: 5, Output: "gs://b/outputs/j/2/"}, 2},
		{"output of another job is ignored", gpu.Job{ID: "j", Status: gpu.StatusFailed, Attempts: 1, Epoch: 5, Output: "gs://b/outputs/k/7/"}, 2},
		{"requeued after an interruption", gpu.Job{ID: "j", Status: gpu.StatusQueued, Attempts: 1}, 1},
		{"dead after three", gpu.Job{ID: "j", Status: gpu.StatusDead, Attempts: 3}, 3},
	} {
		if got := gpu.LatestAttempt(tc.job); got != tc.want {
			t.Errorf("%s: LatestAttempt = %d, want %d", tc.name, got, tc.want)
		}
	}
}
