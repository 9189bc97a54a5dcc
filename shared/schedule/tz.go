package schedule

import (
	"sync"
	"time"

	"github.com/baton-cron/baton/shared/httpapi"

	// Embed the IANA database, so zones resolve on a bare runtime image
	// (distroless, scratch) that has no /usr/share/zoneinfo.
	_ "time/tzdata"
)

// LoadLocation loads an IANA time zone such as "Europe/Berlin". The empty
// string and "UTC" mean UTC. "Local" is refused: the server's own zone is
// not something a schedule should depend on. Errors are *FieldError naming
// "timeZone".
func LoadLocation(tz string) (*time.Location, error) {
	switch tz {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return nil, &FieldError{Field: "timeZone", Reason: `"Local" is not allowed; name an IANA zone such as "Europe/Berlin"`}
	}
	if len(tz) > 64 {
		return nil, &FieldError{Field: "timeZone", Reason: "is longer than 64 characters; want an IANA zone such as \"Europe/Berlin\""}
	}
	if loc, ok := locations.Load(tz); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, &FieldError{Field: "timeZone", Reason: httpapi.Sprintf("unknown time zone %q; want an IANA zone such as \"Europe/Berlin\" or \"America/New_York\"", tz)}
	}
	locations.Store(tz, loc)
	return loc, nil
}

// locations caches loaded zones: time.LoadLocation reads and parses the
// embedded database on every call (~30 µs), and the tick loads the zone of
// every due schedule. Only valid names are stored, so the cache is bounded by
// the size of the IANA database; a *time.Location is safe to share.
var locations sync.Map
