package mongostore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// TestRunIndexesServeTheKeyset holds runIndexes to SchedulerIndexes: each
// filter combination ListAllRuns serves names an index of the runs
// collection whose keys are that combination's equality fields, in order,
// then fireTime and _id descending (the keyset's sort), so no page of the
// list is a scan. And every combination store.RunFilter.Indexed admits has
// an entry, while the ones it refuses have none.
func TestRunIndexesServeTheKeyset(t *testing.T) {
	byName := map[string]bson.D{}
	for _, ix := range SchedulerIndexes {
		if ix.Collection == schedule.RunsCollection {
			byName[ix.Name] = ix.Keys
		}
	}
	for combo, ix := range runIndexes {
		name := ix.name
		keys, ok := byName[name]
		if !ok {
			t.Errorf("filter %q: index runs.%s is not in SchedulerIndexes", combo, name)
			continue
		}
		var want bson.D
		if ix.merged {
			want = append(want, bson.E{Key: DeciderShardField, Value: 1})
		}
		if combo != "" {
			for _, f := range strings.Split(combo, ",") {
				want = append(want, bson.E{Key: f, Value: 1})
			}
		}
		want = append(want, bson.E{Key: "fireTime", Value: -1}, bson.E{Key: "_id", Value: -1})
		if fmt.Sprint(keys) != fmt.Sprint(want) {
			t.Errorf("filter %q: index runs.%s has keys %v; want %v", combo, name, keys, want)
		}
	}
	for _, st := range []schedule.RunStatus{"", schedule.RunFailed} {
		for _, src := range []schedule.Source{"", schedule.SourceManual} {
			for _, id := range []string{"", "s"} {
				for _, since := range []time.Time{{}, time.Unix(1, 0)} {
					f := store.RunFilter{Status: st, Source: src, ScheduleID: id, Since: since}
					_, key := runFilter(f)
					_, has := runIndexes[key]
					if has != f.Indexed() {
						t.Errorf("%+v: Indexed() = %v, but an index for %q: %v", f, f.Indexed(), key, has)
					}
				}
			}
		}
	}
}
