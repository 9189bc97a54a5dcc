package schedule

import (
	"testing"
	"time"
)

// TestUpcomingMarksDST walks 01:30 daily across Berlin's spring-forward
// night: the times stay in order and exactly one offset change is found.
func TestUpcomingMarksDST(t *testing.T) {
	spec, err := Parse("30 1 * * *")
	if err != nil {
		t.Fatal(err)
	}
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 27, 12, 0, 0, 0, loc)
	times := Upcoming(spec, loc, start, 4)
	if len(times) != 4 {
		t.Fatalf("Upcoming: %d times, want 4: %v", len(times), times)
	}
	changes := 0
	for i := 1; i < len(times); i++ {
		if !times[i].After(times[i-1]) {
			t.Fatalf("times out of order: %v", times)
		}
		if OffsetChanged(times[i-1], times[i]) {
			changes++
		}
	}
	if changes != 1 {
		t.Fatalf("offset changes = %d, want 1 (29 March 2026): %v", changes, times)
	}
}
