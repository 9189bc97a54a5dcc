package schedule

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParse checks each feature of the grammar by the fire times it yields.
// 2026-01-03 is a Saturday.
func TestParse(t *testing.T) {
	t.Parallel()
	const from = "2026-01-03T00:00:00Z"
	for _, tc := range []struct {
		name, expr string
		want       []string
	}{
		{"five fields", "5 4 * * *", []string{"2026-01-03T04:05:00Z", "2026-01-04T04:05:00Z"}},
		{"surrounding space", "  5 4 * * *\t", []string{"2026-01-03T04:05:00Z"}},
		{"seconds field", "*/20 * * * * *", []string{"2026-01-03T00:00:20Z", "2026-01-03T00:00:40Z", "2026-01-03T00:01:00Z"}},
		{"seconds and minutes", "30 */2 * * * *", []string{"2026-01-03T00:00:30Z", "2026-01-03T00:02:30Z"}},
		{"list", "0 8,12,18 * * *", []string{"2026-01-03T08:00:00Z", "2026-01-03T12:00:00Z", "2026-01-03T18:00:00Z"}},
		{"range with step", "10-30/10 0 * * *", []string{"2026-01-03T00:10:00Z", "2026-01-03T00:20:00Z", "2026-01-03T00:30:00Z", "2026-01-04T00:10:00Z"}},
		{"start with step", "50/5 0 * * *", []string{"2026-01-03T00:50:00Z", "2026-01-03T00:55:00Z", "2026-01-04T00:50:00Z"}},
		{"weekday names", "0 9 * * MON-FRI", []string{"2026-01-05T09:00:00Z", "2026-01-06T09:00:00Z", "2026-01-07T09:00:00Z", "2026-01-08T09:00:00Z", "2026-01-09T09:00:00Z", "2026-01-12T09:00:00Z"}},
		{"month names, any case", "0 0 1 jan,Jul *", []string{"2026-07-01T00:00:00Z", "2027-01-01T00:00:00Z"}},
		{"question mark", "0 0 ? * SAT", []string{"2026-01-10T00:00:00Z"}},
		{"dow 7 is sunday", "0 0 * * 7", []string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"dow 0 is sunday", "0 0 * * 0", []string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"dow SUN", "0 0 * * sun", []string{"2026-01-04T00:00:00Z"}},
		{"dow range to 7", "0 0 * * 5-7", []string{"2026-01-04T00:00:00Z", "2026-01-09T00:00:00Z", "2026-01-10T00:00:00Z"}},
		{"dow name range to 7", "0 0 * * FRI-7", []string{"2026-01-04T00:00:00Z", "2026-01-09T00:00:00Z", "2026-01-10T00:00:00Z"}},
		{"dow step reaching 7", "0 0 * * 1/2", []string{"2026-01-04T00:00:00Z", "2026-01-05T00:00:00Z", "2026-01-07T00:00:00Z", "2026-01-09T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"dow step over 7", "0 0 * * 1-7/3", []string{"2026-01-04T00:00:00Z", "2026-01-05T00:00:00Z", "2026-01-08T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"dow 7-7", "0 0 * * 7-7", []string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"dow list with 7", "0 0 * * 1,7", []string{"2026-01-04T00:00:00Z", "2026-01-05T00:00:00Z", "2026-01-11T00:00:00Z"}},
		// Vixie: both restricted → either matches. Fridays and the 13th.
		{"vixie or", "0 0 13 * 5", []string{"2026-01-09T00:00:00Z", "2026-01-13T00:00:00Z", "2026-01-16T00:00:00Z", "2026-01-23T00:00:00Z"}},
		{"dom only", "0 0 13 * *", []string{"2026-01-13T00:00:00Z", "2026-02-13T00:00:00Z"}},
		{"dow only", "0 0 * * 5", []string{"2026-01-09T00:00:00Z", "2026-01-16T00:00:00Z"}},
		// A stepped field is restricted, so the OR rule applies.
		{"vixie or with step", "0 0 */10 * 1", []string{"2026-01-05T00:00:00Z", "2026-01-11T00:00:00Z", "2026-01-12T00:00:00Z", "2026-01-19T00:00:00Z", "2026-01-21T00:00:00Z"}},
		{"leap day", "0 0 29 2 *", []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"@yearly", "@yearly", []string{"2027-01-01T00:00:00Z"}},
		{"@annually", "@annually", []string{"2027-01-01T00:00:00Z"}},
		{"@monthly", "@monthly", []string{"2026-02-01T00:00:00Z"}},
		{"@weekly", "@weekly", []string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"@daily", "@daily", []string{"2026-01-04T00:00:00Z"}},
		{"@midnight", "@midnight", []string{"2026-01-04T00:00:00Z"}},
		{"@hourly", "@hourly", []string{"2026-01-03T01:00:00Z", "2026-01-03T02:00:00Z"}},
		{"descriptor case", "@Hourly", []string{"2026-01-03T01:00:00Z"}},
		{"@every", "@every 90s", []string{"2026-01-03T00:01:30Z", "2026-01-03T00:03:00Z"}},
		{"@every compound", "@every 1h30m", []string{"2026-01-03T01:30:00Z", "2026-01-03T03:00:00Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := nextN(t, tc.expr, "", from, len(tc.want))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse(%q) fire times (-want,+got):\n%s", tc.expr, diff)
			}
		})
	}
}

// TestParseErrors: every refusal is a *FieldError on "cron" whose reason
// says what is wrong (checked by a telling fragment).
func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ expr, reason string }{
		{"", "is empty"},
		{"   ", "is empty"},
		{"* * * *", "has 4 fields; want 5"},
		{"* * * * * * *", "has 7 fields"},
		{"60 * * * *", `minute field "60"`},
		{"* 24 * * *", `hour field "24"`},
		{"* * 0 * *", `day-of-month field "0"`},
		{"* * 32 * *", `day-of-month field "32"`},
		{"* * * 13 *", `month field "13"`},
		{"* * * FOO *", `month field "FOO": "FOO" is not a number or a month name (JAN-DEC)`},
		{"x * * * *", `minute field "x": "x" is not a number`},
		{"* * * * 8", `day-of-week field "8"`},
		{"* * * * 5-8", "out of range 0-7"},
		{"* * * * 7-3", `day-of-week field "7-3"`},
		{"* * * * MON-FOO", `day-of-week field "MON-FOO"`},
		{"60 * * * * *", `second field "60"`},
		{"*/0 * * * *", "step"},
		{"5-1 * * * *", "beyond end"},
		{"1-2-3 * * * *", "hyphens"},
		{"*/2/2 * * * *", "slashes"},
		{"-1 * * * *", `minute field "-1"`},
		{"a * * * *", `minute field "a"`},
		{"0 0 30 2 *", "never fires"},
		{"0 0 31 4,6,9,11 *", "never fires"},
		{"@every", "needs a duration"},
		{"@every   ", "needs a duration"},
		{"@every 500ms", "shorter than the minimum"},
		{"@every 0s", "shorter than the minimum"},
		{"@every -1m", "shorter than the minimum"},
		{"@every 1.5s", "whole number of seconds"},
		{"@every soon", "invalid duration"},
		{"@daily 5", "takes no argument"},
		{"@reboot", "unknown descriptor"},
		{"@", "unknown descriptor"},
		{"TZ=Europe/Berlin 0 0 * * *", "time zone prefix"},
		{"CRON_TZ=UTC 0 0 * * *", "time zone prefix"},
		{"TZ=x", "time zone prefix"},
	} {
		_, err := Parse(tc.expr)
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Errorf("Parse(%q): got %v, want a *FieldError", tc.expr, err)
			continue
		}
		if fe.Field != "cron" || !strings.Contains(fe.Reason, tc.reason) {
			t.Errorf("Parse(%q) error (-want,+got):\n-cron: …%s…\n+%s", tc.expr, tc.reason, fe.Error())
		}
	}
}

func TestSpecString(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{"*/15 * * * *", "@every 90s", "@daily"} {
		spec, err := Parse(expr)
		if err != nil {
			t.Fatal(err)
		}
		if got := spec.String(); got != expr {
			t.Errorf("String() (-want,+got):\n-%s\n+%s", expr, got)
		}
	}
}

// TestParseCache: a cached Spec is the same Spec, the cache stays bounded,
// and concurrent use is safe (run with -race).
func TestParseCache(t *testing.T) {
	t.Parallel()
	a, err := Parse("7 7 * * *")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Parse("7 7 * * *")
	if a != b {
		t.Errorf("Parse of the same expression twice: got two Specs, want the cached one")
	}
	if _, err := Parse("7 7 * * * * *"); err == nil {
		t.Fatal("an invalid expression parsed")
	}
	done := make(chan struct{})
	for g := 0; g < 4; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < specCacheSize/2+10; i++ {
				if _, err := Parse(fmt.Sprintf("%d %d * * %d", i%60, (i/60)%24, g)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for g := 0; g < 4; g++ {
		<-done
	}
	specs.mu.Lock()
	n := len(specs.m)
	specs.mu.Unlock()
	if n > specCacheSize {
		t.Errorf("spec cache holds %d entries, want at most %d", n, specCacheSize)
	}
}
