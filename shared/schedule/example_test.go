package schedule_test

import (
	"fmt"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
)

// Berlin springs forward at 02:00 on 29 March 2026: 02:00–02:45 do not
// exist, and fire once, at 03:00 CEST.
func ExampleNext() {
	spec, _ := schedule.Parse("*/15 * * * *")
	loc, _ := schedule.LoadLocation("Europe/Berlin")
	t := time.Date(2026, 3, 29, 1, 30, 0, 0, loc)
	for i := 0; i < 4; i++ {
		t = schedule.Next(spec, loc, t)
		fmt.Println(t.Format(time.RFC3339))
	}
	// Output:
	// 2026-03-29T01:45:00+01:00
	// 2026-03-29T03:00:00+02:00
	// 2026-03-29T03:15:00+02:00
	// 2026-03-29T03:30:00+02:00
}

// Berlin falls back at 03:00 CEST on 25 October 2026: 02:30 happens twice
// and fires only the first time.
func ExampleFireTimes() {
	spec, _ := schedule.Parse("30 2 * * *")
	loc, _ := schedule.LoadLocation("Europe/Berlin")
	from := time.Date(2026, 10, 24, 12, 0, 0, 0, loc)
	for _, t := range schedule.FireTimes(spec, loc, from, from.Add(48*time.Hour), 0) {
		fmt.Println(t.Format(time.RFC3339))
	}
	// Output:
	// 2026-10-25T02:30:00+02:00
	// 2026-10-26T02:30:00+01:00
}

func ExampleParse_error() {
	_, err := schedule.Parse("0 9 * * MON-FRX")
	fmt.Println(err)
	// Output:
	// cron: day-of-week field "MON-FRX": "FRX" is not a number or a day name (SUN-SAT)
}
