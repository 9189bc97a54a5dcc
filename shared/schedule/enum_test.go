package schedule_test

import (
	"testing"

	"github.com/baton-cron/baton/internal/enumtest"
	"github.com/baton-cron/baton/shared/schedule"
)

// TestEnums: each enum's All…() list holds exactly the constants declared
// in this package (read from the source, so a constant added without being
// listed fails here), Valid accepts those and nothing else, and each value
// is the plain string on the wire (JSON, BSON fields and filters).
func TestEnums(t *testing.T) {
	t.Parallel()
	t.Run("RunStatus", func(t *testing.T) {
		t.Parallel()
		enumtest.Check(t, ".", "RunStatus", schedule.AllRunStatuses(), schedule.RunStatus.Valid, "done", "queued", "cancelled")
	})
	t.Run("Source", func(t *testing.T) {
		t.Parallel()
		enumtest.Check(t, ".", "Source", schedule.AllSources(), schedule.Source.Valid, "api", "run:x", "backfill")
	})
	t.Run("Overlap", func(t *testing.T) {
		t.Parallel()
		enumtest.Check(t, ".", "Overlap", schedule.AllOverlaps(), schedule.Overlap.Valid, "buffer-one", "bufferOne", "queue")
	})
	t.Run("Catchup", func(t *testing.T) {
		t.Parallel()
		enumtest.Check(t, ".", "Catchup", schedule.AllCatchups(), schedule.Catchup.Valid, "every", "first", "latest,all")
	})
}

// TestAllListsAreCopies: an All…() list is the caller's to change; doing so
// must not change what the next caller gets.
func TestAllListsAreCopies(t *testing.T) {
	t.Parallel()
	a := schedule.AllRunStatuses()
	a[0] = "changed"
	if got := schedule.AllRunStatuses()[0]; got != schedule.RunPending {
		t.Errorf("AllRunStatuses()[0] = %q after a caller changed its copy, want %q", got, schedule.RunPending)
	}
}
