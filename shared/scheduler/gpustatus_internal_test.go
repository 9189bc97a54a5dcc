package scheduler

import (
	"testing"

	"github.com/baton-cron/baton/shared/gpu"
)

// TestGPUTerminalMirrorsGPU: this package keeps its own copy of the GPU job
// statuses a job ends in (it must not import shared/gpu, which implements
// its GPU interface), and that copy must answer as gpu.Terminal does for
// every status shared/gpu has, or a gpu-target run would be finished while
// its job still runs, or never. The test alone may import shared/gpu.
func TestGPUTerminalMirrorsGPU(t *testing.T) {
	t.Parallel()
	for _, s := range append(gpu.AllJobStatuses(), "", "Succeeded", "unknown") {
		if got, want := gpuTerminal(gpuStatus(s)), gpu.Terminal(s); got != want {
			t.Errorf("gpuTerminal(%q) = %v, gpu.Terminal = %v", s, got, want)
		}
	}
	for _, s := range []gpuStatus{gpuSucceeded, gpuFailed, gpuDead, gpuCancelled} {
		if !gpu.JobStatus(s).Valid() {
			t.Errorf("mirrored status %q is not a gpu.JobStatus", s)
		}
	}
}
