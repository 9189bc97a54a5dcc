package schedule_test

import (
	"testing"

	"github.com/baton-cron/baton/shared/schedule"
)

// TestExecutionURL: a cloud execution links to its console page in its
// project and region; the local emulator's and a run without one link
// nowhere.
func TestExecutionURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ job, exec, want string }{
		{"projects/p1/locations/europe-west1/jobs/export", "projects/p1/locations/europe-west1/jobs/export/executions/export-abc12", "https://console.cloud.google.com/run/jobs/executions/details/europe-west1/export-abc12/tasks?project=p1"},
		{"projects/local/locations/local/jobs/export", "projects/local/locations/local/jobs/export/executions/export-00001", ""},
		{"", "", ""},
	} {
		r := schedule.Run{RunJob: tc.job, Execution: tc.exec}
		if got := r.ExecutionURL(); got != tc.want {
			t.Errorf("ExecutionURL(%q) = %q; want %q", tc.exec, got, tc.want)
		}
	}
}
