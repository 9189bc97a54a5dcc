package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store"
)

// TestStrandedMisfiresAllServedAcrossSweeps: more schedules carry a
// stranded misfire flag than one sweep reads, and the first ones the
// database returns are paused, which the sweep must leave flagged. Read
// with a limit and no order, the same paused ones came back first on every
// sweep (the emulator, like Firestore at worst, returns an unsorted find in
// the same order every time), and the others were never served. Paged by
// _id with a cursor that advances across sweeps, every servable one is
// served within flagged/PageSize+1 sweeps.
func TestStrandedMisfiresAllServedAcrossSweeps(t *testing.T) {
	t.Parallel()
	const pageSize = 2
	b := setup(t, func(c *scheduler.Config) { c.PageSize = pageSize })
	ctx := context.Background()
	var be store.Backend = b.store
	noop := schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}
	// Paused first: first in insertion order and in _id order alike.
	paused := []string{"a1", "a2", "a3"}
	servable := []string{"b1", "b2", "b3"}
	for _, id := range append(append([]string(nil), paused...), servable...) {
		b.addSchedule(t, schedule.Schedule{ID: id, Cron: "0 * * * *", Overlap: schedule.OverlapBufferOne, Target: noop})
		if err := be.Schedules().SetMisfire(ctx, id, t0, false); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range paused {
		if err := b.store.Collection(schedule.SchedulesCollection).UpdateOne(ctx, bson.D{{Key: "_id", Value: id}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "enabled", Value: false}}}}); err != nil {
			t.Fatal(err)
		}
	}
	sweeps := (len(paused)+len(servable))/pageSize + 1
	for i := range sweeps {
		b.clock.Set(t0.Add(time.Duration(i+1) * time.Minute)) // no fire due until the hour
		b.tick(t)
	}
	for _, id := range servable {
		if s := b.getSchedule(t, id); s.Misfire {
			t.Errorf("%s: misfire flag still set after %d sweeps; want its misfire run recorded", id, sweeps)
		}
		var misfires []string
		for _, r := range b.runs(t, id) {
			if r.Source == schedule.SourceMisfire {
				misfires = append(misfires, fmt.Sprint(r.Status))
			}
		}
		if len(misfires) != 1 {
			t.Errorf("%s: misfire runs %v; want one", id, misfires)
		}
	}
	for _, id := range paused {
		if s := b.getSchedule(t, id); !s.Misfire {
			t.Errorf("%s: paused, yet its flag was cleared", id)
		}
	}
}
