package tasks

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestBackoffDocumentedExample checks the formula against the example in
// the RetryConfig.max_doublings documentation: min 10s, max 300s, 3
// doublings retry at 10s, 20s, 40s, 80s, 160s, 240s, 300s, 300s.
func TestBackoffDocumentedExample(t *testing.T) {
	t.Parallel()
	p := retryPolicy{minBackoff: 10 * time.Second, maxBackoff: 300 * time.Second, maxDoublings: 3}
	var got []time.Duration
	for n := range 8 {
		got = append(got, p.backoff(n))
	}
	want := []time.Duration{10, 20, 40, 80, 160, 240, 300, 300}
	for i := range want {
		want[i] *= time.Second
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backoffs (-want,+got):\n%s", diff)
	}
	// The real defaults never overflow: 0.1s doubled 16 times passes 1h.
	d := retryPolicy{minBackoff: DefaultMinBackoff, maxBackoff: DefaultMaxBackoff, maxDoublings: DefaultMaxDoublings}
	for _, n := range []int{15, 16, 17, 99, 1 << 20} {
		if b := d.backoff(n); b <= 0 || b > DefaultMaxBackoff {
			t.Errorf("default backoff(%d) = %s, want in (0, 1h]", n, b)
		}
	}
}

// TestExhausted pins the documented stopping rule: both max_attempts and
// max_retry_duration must be reached; -1 and 0 mean unlimited.
func TestExhausted(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		p        retryPolicy
		attempts int
		after    time.Duration
		want     bool
	}{
		{"count reached", retryPolicy{maxAttempts: 3}, 3, 0, true},
		{"count not reached", retryPolicy{maxAttempts: 3}, 2, time.Hour, false},
		{"count reached, duration not", retryPolicy{maxAttempts: 3, maxRetryDuration: time.Minute}, 5, time.Second, false},
		{"both reached", retryPolicy{maxAttempts: 3, maxRetryDuration: time.Minute}, 3, time.Minute, true},
		{"unlimited count, duration reached", retryPolicy{maxAttempts: -1, maxRetryDuration: time.Minute}, 50, time.Minute, true},
		{"unlimited both", retryPolicy{maxAttempts: -1}, 1 << 20, 1000 * time.Hour, false},
	}
	for _, c := range cases {
		if got := c.p.exhausted(c.attempts, t0, t0.Add(c.after)); got != c.want {
			t.Errorf("%s: exhausted = %v, want %v", c.name, got, c.want)
		}
	}
}
