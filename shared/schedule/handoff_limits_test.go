package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestSubMinute pins which expressions need a ticker at second
// granularity: exactly those that can fire twice within one minute.
func TestSubMinute(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string]bool{
		"* * * * *":         false,
		"*/5 * * * *":       false,
		"0 * * * * *":       false, // seconds field, but one second a minute
		"30 */2 * * * *":    false,
		"*/10 * * * * *":    true,
		"0,30 * * * * *":    true,
		"* * * * * *":       true,
		"@every 30s":        true,
		"@every 59s":        true,
		"@every 1m":         false,
		"@every 90s":        false,
		"@hourly":           false,
		"0-1 * * * * *":     true,
		"15 30 2 * * *":     false,
		"5-5 * * * * *":     false,
		"@every 1m30s":      false,
		"*/59 * * * * *":    true, // 0 and 59
		"0 0 1 1 *":         false,
		"@midnight":         false,
		"30,45 15 * * * * ": true,
	} {
		sp, err := Parse(expr)
		if err != nil {
			t.Errorf("Parse(%q): %v", expr, err)
			continue
		}
		if got := SubMinute(sp); got != want {
			t.Errorf("SubMinute(%q) = %v, want %v", expr, got, want)
		}
	}
}

// TestRefuseSubMinute: a deployment that ticks once a minute refuses a
// seconds-level cron with a 400-shaped error naming cron and saying how to
// enable the daemon, rather than firing it once a minute in silence.
func TestRefuseSubMinute(t *testing.T) {
	t.Parallel()
	o := testOpts
	o.RefuseSubMinute = true
	s := validHTTP()
	s.Cron = "*/10 * * * * *"
	err := s.Normalize(o)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "cron" || !strings.Contains(fe.Reason, "baton daemon") || !strings.Contains(fe.Reason, "daemon_image") {
		t.Fatalf("Normalize = %v, want a cron FieldError that says how to enable baton daemon", err)
	}
	s = validHTTP()
	s.Cron = "0 * * * * *"
	if err := s.Normalize(o); err != nil {
		t.Errorf("a once-a-minute seconds cron is refused: %v", err)
	}
	s = validHTTP()
	s.Cron = "*/10 * * * * *"
	if err := s.Normalize(testOpts); err != nil {
		t.Errorf("with a second-granularity ticker, a seconds cron is refused: %v", err)
	}
}

// TestHTTPTimeoutFitsDispatchDeadline: an http target executes within one
// Cloud Tasks dispatch, so its timeout must leave Run its overhead of the
// longest deadline; the error names the field and says what to do instead.
func TestHTTPTimeoutFitsDispatchDeadline(t *testing.T) {
	t.Parallel()
	if MaxHTTPTimeout+RunOverhead != MaxDispatchDeadline || MaxDispatchDeadline != 30*time.Minute {
		t.Fatalf("MaxHTTPTimeout %s + RunOverhead %s must equal Cloud Tasks' 30m deadline", MaxHTTPTimeout, RunOverhead)
	}
	s := validHTTP()
	s.Target.HTTP.Timeout = Duration(MaxHTTPTimeout)
	if err := s.Normalize(testOpts); err != nil {
		t.Errorf("timeout %s refused: %v", MaxHTTPTimeout, err)
	}
	for _, d := range []time.Duration{MaxHTTPTimeout + time.Second, 30 * time.Minute, 2 * time.Hour} {
		s := validHTTP()
		s.Target.HTTP.Timeout = Duration(d)
		err := s.Normalize(testOpts)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "target.http.timeout" || !strings.Contains(fe.Reason, "dispatch") || !strings.Contains(fe.Reason, "gpu target") {
			t.Errorf("timeout %s: %v, want a target.http.timeout error about the dispatch deadline", d, err)
		}
	}
}
