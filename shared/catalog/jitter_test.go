package catalog_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
)

// TestJitterThroughTheAPI is #16's jitter acceptance: jitter "30s" gives the
// same offset on two creates of the same id, and offsets that differ across
// ids; nextRunAt carries it, and a bad jitter is a 400 naming the field
// with nothing written.
func TestJitterThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	create := func(id string) schedule.Schedule {
		t.Helper()
		res := b.do(t, http.MethodPost, "/schedules", `{"id":"`+id+`","cron":"0 * * * *","jitter":"30s","target":{"type":"builtin","builtin":{"name":"noop"}}}`)
		if res.Status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", id, res.Status, res.Body)
		}
		var s schedule.Schedule
		res.json(t, &s)
		return s
	}
	// t0 is before the next hour: nextRunAt is that hour plus the offset.
	hour := t0.Truncate(time.Hour).Add(time.Hour)
	first := create("spread-a")
	if first.Jitter.D() != 30*time.Second || !strings.Contains(string(b.do(t, http.MethodGet, "/schedules/spread-a", "").Body), `"jitter":"30s"`) {
		t.Errorf("jitter not kept: %+v", first.Jitter)
	}
	offA := first.NextRunAt.Sub(hour)
	if offA < 0 || offA >= 30*time.Second {
		t.Fatalf("nextRunAt %s is not within 30s after %s", first.NextRunAt, hour)
	}
	if res := b.do(t, http.MethodDelete, "/schedules/spread-a", ""); res.Status != http.StatusNoContent {
		t.Fatalf("delete: %d", res.Status)
	}
	if again := create("spread-a"); !again.NextRunAt.Equal(first.NextRunAt) {
		t.Errorf("second create of spread-a: nextRunAt %s; the first had %s", again.NextRunAt, first.NextRunAt)
	}
	offsets := map[time.Duration]bool{offA: true}
	for _, id := range []string{"spread-b", "spread-c", "spread-d", "spread-e"} {
		offsets[create(id).NextRunAt.Sub(hour)] = true
	}
	if len(offsets) < 3 {
		t.Errorf("5 ids gave %d distinct offsets", len(offsets))
	}

	res := b.do(t, http.MethodPost, "/schedules", `{"id":"bad-jitter","cron":"0 * * * *","jitter":"48h","target":{"type":"builtin","builtin":{"name":"noop"}}}`)
	if res.Status != http.StatusBadRequest || !strings.Contains(string(res.Body), `"field":"jitter"`) {
		t.Errorf("jitter 48h: %d %s; want 400 naming jitter", res.Status, res.Body)
	}
	if res := b.do(t, http.MethodGet, "/schedules/bad-jitter", ""); res.Status != http.StatusNotFound {
		t.Errorf("a refused schedule was written: GET answered %d", res.Status)
	}
	// H in the cron is resolved from the id, and kept as written.
	res = b.do(t, http.MethodPost, "/schedules", `{"id":"hashed","cron":"H 3 * * *","target":{"type":"builtin","builtin":{"name":"noop"}}}`)
	if res.Status != http.StatusCreated || !strings.Contains(string(res.Body), `"cron":"H 3 * * *"`) {
		t.Fatalf("create H: %d %s", res.Status, res.Body)
	}
	var h schedule.Schedule
	res.json(t, &h)
	if h.NextRunAt.UTC().Hour() != 3 || h.NextRunAt.Second() != 0 {
		t.Errorf("H 3 * * *: nextRunAt %s; want 03:MM:00 UTC", h.NextRunAt)
	}
}
