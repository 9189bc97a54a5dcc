package catalog_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/baton-cron/baton/shared/schedule"
)

// TestDSTPolicyThroughTheAPI: the dst block is kept and read back, and a
// bad value is a 400 naming dst.gap or dst.repeat, writing nothing.
func TestDSTPolicyThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.do(t, http.MethodPost, "/schedules", `{"id":"berlin","cron":"30 2 * * *","timeZone":"Europe/Berlin","dst":{"gap":"skip","repeat":"both"},"target":{"type":"builtin","builtin":{"name":"noop"}}}`)
	if res.Status != http.StatusCreated || !strings.Contains(string(res.Body), `"dst":{"gap":"skip","repeat":"both"}`) {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	for body, field := range map[string]string{
		`{"id":"bad1","cron":"30 2 * * *","dst":{"gap":"jump"},"target":{"type":"builtin","builtin":{"name":"noop"}}}`:   "dst.gap",
		`{"id":"bad2","cron":"30 2 * * *","dst":{"repeat":"all"},"target":{"type":"builtin","builtin":{"name":"noop"}}}`: "dst.repeat",
		`{"id":"bad3","cron":"@every 1h","dst":{"gap":"skip"},"target":{"type":"builtin","builtin":{"name":"noop"}}}`:     "dst",
	} {
		res := b.do(t, http.MethodPost, "/schedules", body)
		if res.Status != http.StatusBadRequest || !strings.Contains(string(res.Body), `"field":"`+field+`"`) {
			t.Errorf("%s: %d %s; want 400 naming %s", body, res.Status, res.Body, field)
		}
	}
	if n := b.count(t, schedule.SchedulesCollection); n != 1 {
		t.Errorf("%d schedules stored; the refused ones were written", n)
	}
}
