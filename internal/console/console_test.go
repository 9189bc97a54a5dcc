package console

import (
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
)

// TestIsLoopbackHost: the names a rebinding attacker cannot present pass,
// every other Host is refused.
func TestIsLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:8090": true, "LOCALHOST": true, "[::1]:8090": true, "::1": true,
		"127.9.9.9": true, "app.localhost:1": true, "localhost.": true,
		"0.0.0.0:8090": false, "example.com": false, "localhost.evil.example": false, "10.0.0.1:80": false, "": false, ":8090": false,
	} {
		if got := IsLoopbackHost(host); got != want {
			t.Errorf("IsLoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

// TestUpcomingMarksDST: the schedule page's fire times mark the one whose
// UTC offset differs from the previous one's, and only that one.
func TestUpcomingMarksDST(t *testing.T) {
	sc := &schedule.Schedule{Cron: "30 1 * * *", TimeZone: "America/New_York"}
	times, err := upcoming(sc, time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(times) != 10 {
		t.Fatalf("%d times, want 10", len(times))
	}
	for i, ft := range times {
		if ft.DST != "" {
			t.Errorf("time %d (%s) marked %q; no offset change in December", i, ft.T, ft.DST)
		}
	}
	times, _ = upcoming(sc, time.Date(2026, 10, 30, 12, 0, 0, 0, time.UTC), 4)
	marked := 0
	for _, ft := range times {
		if ft.DST != "" {
			marked++
			if ft.DST != "DST: UTC offset -04:00 → -05:00" {
				t.Errorf("mark = %q", ft.DST)
			}
		}
	}
	if marked != 1 {
		t.Errorf("%d marks across 1 November 2026, want 1: %+v", marked, times)
	}
	if _, err := upcoming(&schedule.Schedule{Cron: "not a cron"}, time.Now(), 3); err == nil {
		t.Error("a bad cron gave no error")
	}
}

// TestSparkline: one bar per run, oldest first, and a text alternative
// that counts the outcomes.
func TestSparkline(t *testing.T) {
	runs := []schedule.Run{{Status: schedule.RunFailed}, {Status: schedule.RunSucceeded}, {Status: schedule.RunSucceeded}} // newest first
	sp := sparkline(runs)
	if len(sp.Bars) != 3 || sp.Bars[2].Class != "s-failed" || sp.Bars[0].Class != "s-succeeded" {
		t.Errorf("bars = %+v; want the newest (failed) on the right", sp.Bars)
	}
	if sp.Label != "last 3 runs: 2 succeeded 1 failed" {
		t.Errorf("label = %q", sp.Label)
	}
	if sparkline(nil).Label != "no runs yet" {
		t.Error("empty sparkline has no text")
	}
}
