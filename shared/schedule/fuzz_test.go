package schedule

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var fuzzZones = []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Pacific/Apia", "America/Santiago", "Asia/Kolkata", "Europe/Dublin"}

// FuzzParse: Parse never panics; a refusal is a *FieldError on "cron"; and
// for what parses, Next is strictly after `after`, on a whole second,
// monotonic, and minimal (asking again from just before the answer gives the
// same answer).
//
// Run: go test ./shared/schedule -run '^$' -fuzz FuzzParse -fuzztime 60s
func FuzzParse(f *testing.F) {
	for _, expr := range []string{
		"*/15 * * * *", "30 2 * * *", "0 * * * *", "0 9 * * MON-FRI", "0 0 13 * 5", "0 0 * * 7",
		"0 0 * * 5-7", "0 0 * * 1/2", "*/20 * * * * *", "@hourly", "@every 90s", "@every 1h30m",
		"0 0 29 2 *", "0 0 1 jan,jul *", "? ? ? ? ?", "TZ=x", "@every", "* * * * 8", "1-7/3 * * * *",
	} {
		f.Add(expr, int64(1774746000), uint8(1)) // 2026-03-29T01:00:00Z, Berlin's spring forward
		f.Add(expr, int64(1792890000), uint8(2)) // 2026-10-25T01:00:00Z
	}
	const minUnix, maxUnix = 0, 4102444800 // 1970 to 2100
	f.Fuzz(func(t *testing.T, expr string, afterUnix int64, zone uint8) {
		spec, err := Parse(expr)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != "cron" || fe.Reason == "" {
				t.Fatalf("Parse(%q): got %#v, want a *FieldError on cron with a reason", expr, err)
			}
			return
		}
		loc, err := LoadLocation(fuzzZones[int(zone)%len(fuzzZones)])
		if err != nil {
			t.Fatal(err)
		}
		if afterUnix < minUnix || afterUnix > maxUnix {
			afterUnix = minUnix + (afterUnix%maxUnix+maxUnix)%maxUnix
		}
		after := time.Unix(afterUnix, int64(uint64(afterUnix)%1e9))
		prev := after
		for i := 0; i < 3; i++ {
			next := Next(spec, loc, prev)
			if next.IsZero() {
				t.Fatalf("Next(%q, %s, %s) = zero for a parsed expression", expr, loc, prev)
			}
			if !next.After(prev) {
				t.Fatalf("Next(%q, %s, %s) = %s, not strictly after", expr, loc, prev.Format(time.RFC3339Nano), next.Format(time.RFC3339Nano))
			}
			if next.Nanosecond() != 0 {
				t.Fatalf("Next(%q) = %s, not on a whole second", expr, next.Format(time.RFC3339Nano))
			}
			if again := Next(spec, loc, next.Add(-time.Nanosecond)); !again.Equal(next) {
				t.Fatalf("Next(%q, %s) from %s = %s, but from 1ns earlier = %s", expr, loc, prev, next, again)
			}
			prev = next
		}
	})
}

// FuzzDecodeSchedule: DecodeSchedule never panics; a refusal is a *FieldError
// (or *http.MaxBytesError); what it accepts survives Normalize without a
// panic and a JSON round trip unchanged.
//
// Run: go test ./shared/schedule -run '^$' -fuzz FuzzDecodeSchedule -fuzztime 60s
func FuzzDecodeSchedule(f *testing.F) {
	for _, body := range []string{
		goodJSON, ``, `{}`, `[]`, `null`, `{"id":"x"}{}`, `{"cron":5}`, `{"Cron":"x"}`, `{"cron":"a","cron":"b"}`,
		`{"target":{"type":"http","http":{"url":"http://169.254.169.254/","headers":{"A":"1"}}}}`,
		`{"target":{"type":"gpu","gpu":{"priority":-1,"timeout":"1h"}}}`, `{"target":{"type":"builtin","builtin":{"name":"sleep","args":{"d":"1s"}}}}`,
		`{"leaseTTL":"3s","catchupWindow":"-1h","nextRunAt":"2026-03-29T01:30:00+01:00","version":9}`, `{"maxCatchup":1e400}`,
	} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		s, err := DecodeSchedule(bytes.NewReader(body))
		if err != nil {
			var fe *FieldError
			var mbe *http.MaxBytesError
			if !errors.As(err, &fe) && !errors.As(err, &mbe) {
				t.Fatalf("DecodeSchedule(%q): got %T %v, want a *FieldError", body, err, err)
			}
			return
		}
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("Marshal of a decoded schedule: %v", err)
		}
		again, err := DecodeSchedule(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("DecodeSchedule refused its own output %s: %v", out, err)
		}
		// omitempty drops an empty map, so {} and absent are the same.
		if diff := cmp.Diff(s, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("JSON round trip changed the schedule (-first,+second):\n%s", diff)
		}
		if err := s.Normalize(testOpts); err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Reason == "" {
				t.Fatalf("Normalize: got %T %v, want a *FieldError", err, err)
			}
		}
	})
}

// FuzzNextOracle compares FireTimes with the brute-force oracle of
// TestNextMatchesOracle for fuzzed 5-field expressions near fuzzed DST
// transitions (the oracle scans whole minutes, so seconds fields and
// @every are out of its scope).
//
// Run: go test ./shared/schedule -run '^$' -fuzz FuzzNextOracle -fuzztime 60s
func FuzzNextOracle(f *testing.F) {
	for _, expr := range []string{"*/15 * * * *", "30 2 * * *", "0 * * * *", "30 1 * * *", "*/7 1-3 * * SUN", "0 0 * * *", "59 23 * * *"} {
		f.Add(expr, uint8(1), uint8(46), uint8(0), int16(-90))
		f.Add(expr, uint8(2), uint8(46), uint8(1), int16(-30))
	}
	f.Fuzz(func(t *testing.T, expr string, zone, year, which uint8, offsetMin int16) {
		spec, err := Parse(expr)
		if err != nil {
			return
		}
		c, ok := spec.(*cronSpec)
		if !ok || c.s.Second&^starBit != 1 {
			return
		}
		loc, err := LoadLocation(fuzzZones[int(zone)%len(fuzzZones)])
		if err != nil {
			t.Fatal(err)
		}
		y0 := time.Date(1980+int(year)%60, 1, 1, 0, 0, 0, 0, time.UTC)
		at := y0
		if trs := transitions(loc, y0, y0.AddDate(1, 0, 0)); len(trs) > 0 {
			at = trs[int(which)%len(trs)]
		}
		from := at.Add(time.Duration(offsetMin%(36*60)) * time.Minute)
		to := from.Add(8 * time.Hour)
		want := oracle(c, loc, from, to)
		got := fmtTimes(FireTimes(spec, loc, from, to, 0))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%q in %s from %s (-oracle,+FireTimes):\n%s", expr, loc, from.Format(time.RFC3339), diff)
		}
	})
}
