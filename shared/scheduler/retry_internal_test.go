package scheduler

import (
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
)

// TestRetryBackoffCapped: the retry delay doubles per attempt and never
// passes schedule.MaxRetryBackoff (it used to overshoot to twice the cap,
// because the cap was checked before the last doubling).
func TestRetryBackoffCapped(t *testing.T) {
	for _, tc := range []struct {
		base    time.Duration
		attempt int
		want    time.Duration
	}{
		{time.Minute, 1, time.Minute},
		{time.Minute, 2, 2 * time.Minute},
		{time.Minute, 4, 8 * time.Minute},
		{0, 1, schedule.DefaultRetryBackoff},
		{15 * time.Hour, 2, schedule.MaxRetryBackoff},
		{15 * time.Hour, 9, schedule.MaxRetryBackoff},
		{time.Second, 60, schedule.MaxRetryBackoff},
	} {
		if got := retryBackoff(tc.base, tc.attempt); got != tc.want {
			t.Errorf("retryBackoff(%s, %d) = %s, want %s", tc.base, tc.attempt, got, tc.want)
		}
	}
}
