package catalog_test

import (
	"net/http"
	"testing"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/schedule"
)

// TestIfMatchUnderContentionIsNotAVersionMismatch: an edit with a current
// If-Match whose write meets Firestore's Aborted (112) on every attempt was
// not applied, and the caller's version is still the stored one. It must
// hear 503 (retry), not 412: a client told its version is stale would
// re-read and re-apply its edit on top of nothing new, or give up. The
// same for a calendar's replace and delete. After the contention the same
// request lands.
func TestIfMatchUnderContentionIsNotAVersionMismatch(t *testing.T) {
	b := setup(t)
	if res := b.do(t, http.MethodPost, "/schedules", `{"id":"f","description":"d1","cron":"*/5 * * * *","target":{"type":"builtin","builtin":{"name":"noop"}}}`); res.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	if res := b.do(t, http.MethodPut, "/calendars/hol", `{"dates":["2026-12-24"]}`); res.Status >= 300 {
		t.Fatalf("create calendar: %d %s", res.Status, res.Body)
	}
	// ifMatch is each one's current version: the patch and the replace
	// move theirs to 2 when they land.
	edits := []struct{ name, coll, method, path, body, ifMatch string }{
		{"patch schedule", schedule.SchedulesCollection, http.MethodPatch, "/schedules/f", `{"description":"d2"}`, `"1"`},
		{"replace calendar", schedule.CalendarsCollection, http.MethodPut, "/calendars/hol", `{"dates":["2026-12-25"]}`, `"1"`},
		{"delete calendar", schedule.CalendarsCollection, http.MethodDelete, "/calendars/hol", ``, `"2"`},
		{"delete schedule", schedule.SchedulesCollection, http.MethodDelete, "/schedules/f", ``, `"2"`},
	}
	for _, e := range edits {
		emutest.FailCommandCode(t, b.st, e.coll, "alwaysOn", 112, "update", "delete")
		if res := b.do(t, e.method, e.path, e.body, "If-Match", e.ifMatch); res.Status != http.StatusServiceUnavailable {
			t.Errorf("%s with a current If-Match under endless 112s: %d %s; want 503 (retry), not a version mismatch", e.name, res.Status, res.Body)
		}
		emutest.FailCommandOff(t, b.st)
		want := http.StatusOK
		if e.method == http.MethodDelete {
			want = http.StatusNoContent
		}
		if res := b.do(t, e.method, e.path, e.body, "If-Match", e.ifMatch); res.Status != want {
			t.Errorf("%s after the contention: %d %s; want %d", e.name, res.Status, res.Body, want)
		}
	}
}
