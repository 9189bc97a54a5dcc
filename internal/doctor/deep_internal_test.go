package doctor

import (
	"reflect"
	"strings"
	"testing"

	"github.com/baton-cron/baton/shared/store"
)

// sameShape names, for each store method without a probe of its own, the
// probed method that sends the same command shape (the same command, the
// same operators and options; only the field names and values differ).
var sameShape = map[string]string{
	"Catalog.GetRun":        "Catalog.Get",
	"Calendars.GetCalendar": "Catalog.Get",
	"GPU.Get":               "Catalog.Get",
	"Schedules.Get":         "Catalog.Get",
	"Runs.Get":              "Catalog.Get",
	"Runs.RunningRunJob":    "Runs.RunningGPU",
	// The due page of one decider shard: Due's find, sort and $lte with
	// an equality on vshard beside enabled.
	"Schedules.DueInShard": "Schedules.Due",
	"Schedules.Unpause":    "Catalog.Update",
}

// TestProbeSetCoversTheStore: every method of the store's views is probed,
// or names in sameShape the probed method that sends its shape, so a new
// method with a new shape cannot go unproved by baton doctor --deep.
func TestProbeSetCoversTheStore(t *testing.T) {
	probed := map[string]bool{}
	for _, p := range probeSet() {
		n, _, _ := strings.Cut(p.name, " ")
		probed[n] = true
	}
	for view, typ := range map[string]reflect.Type{
		"Schedules": reflect.TypeFor[store.Schedules](),
		"Runs":      reflect.TypeFor[store.Runs](),
		"Catalog":   reflect.TypeFor[store.Catalog](),
		"Calendars": reflect.TypeFor[store.Calendars](),
		"GPU":       reflect.TypeFor[store.GPU](),
	} {
		for i := range typ.NumMethod() {
			m := view + "." + typ.Method(i).Name
			like, listed := sameShape[m]
			switch {
			case probed[m] && listed:
				t.Errorf("%s is probed and listed in sameShape: drop the entry", m)
			case listed && !probed[like]:
				t.Errorf("%s: sameShape names %s, which no probe runs", m, like)
			case !probed[m] && !listed:
				t.Errorf("%s has no probe: add one to probeSet (or, if it sends the shape of a probed method, name that method in sameShape)", m)
			}
		}
	}
}
