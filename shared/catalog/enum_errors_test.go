package catalog_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEnumErrorBodies pins, byte for byte, the 400 answers for bad enum
// values in a schedule: typing schedule.Overlap and schedule.Catchup must
// not change a word of them (the wanted bodies were recorded from the code
// before the types were named), including the cut of a long echoed value.
func TestEnumErrorBodies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	schedule := func(field string) string {
		return `{"id":"e","cron":"@hourly","target":{"type":"builtin","builtin":{"name":"noop"}},` + field + `}`
	}
	long := strings.Repeat("q", 200)
	for _, tc := range []struct{ name, body, want string }{
		{"unknown overlap", schedule(`"overlap":"queue"`), `{"error":{"code":"invalid_argument","message":"unknown policy \"queue\"; want skip, buffer_one or allow","field":"overlap"}}` + "\n"},
		{"unknown catchup", schedule(`"catchup":"sometimes"`), `{"error":{"code":"invalid_argument","message":"unknown policy \"sometimes\"; want latest, all or none","field":"catchup"}}` + "\n"},
		{"upper-case overlap", schedule(`"overlap":"SKIP"`), `{"error":{"code":"invalid_argument","message":"unknown policy \"SKIP\"; want skip, buffer_one or allow","field":"overlap"}}` + "\n"},
		{"long overlap", schedule(`"overlap":"` + long + `"`), `{"error":{"code":"invalid_argument","message":"unknown policy \"qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq…\"; want skip, buffer_one or allow","field":"overlap"}}` + "\n"},
		{"overlap not a string", schedule(`"overlap":5`), `{"error":{"code":"invalid_argument","message":"must be a string, not a number","field":"overlap"}}` + "\n"},
		{"catchup not a string", schedule(`"catchup":["all"]`), `{"error":{"code":"invalid_argument","message":"must be a string, not an array","field":"catchup"}}` + "\n"},
	} {
		res := b.do(t, http.MethodPost, "/schedules", tc.body)
		if diff := cmp.Diff(tc.want, string(res.Body)); res.Status != http.StatusBadRequest || diff != "" {
			t.Errorf("%s: status %d, body (-want,+got):\n%s", tc.name, res.Status, diff)
		}
	}
}
