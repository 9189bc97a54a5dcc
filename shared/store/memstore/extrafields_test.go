package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/memstore"
)

// dueInSharder is the read the partitioned deciders add to store.Schedules.
type dueInSharder interface {
	DueInShard(ctx context.Context, vshard int, now time.Time, limit int, token string) ([]schedule.Schedule, string, error)
}

func sched(id string, vshard int) map[string]any {
	return map[string]any{"_id": id, "cron": "* * * * *", "timeZone": "UTC", "enabled": true, "nextRunAt": t0,
		"version": int64(1), "createdAt": t0, "updatedAt": t0, "target": map[string]any{"type": "builtin"}, "vshard": vshard}
}

// TestUnknownFieldsSurvive: a field the domain types do not know (the
// decider shard, added by another change) is kept by the advance and by
// an edit, as the database keeps it, and can be read by.
func TestUnknownFieldsSurvive(t *testing.T) {
	ctx := t.Context()
	st := memstore.New(memstore.Options{})
	if err := st.Load(schedule.SchedulesCollection, sched("a", 3), sched("b", 5), sched("c", 3)); err != nil {
		t.Fatal(err)
	}
	cur, err := st.Schedules().Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Schedules().Advance(ctx, &cur, t0.Add(time.Minute), nil, store.Fence{Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	cur, _ = st.Schedules().Get(ctx, "a")
	next := cur
	next.Version++
	next.Description = "edited"
	if err := st.Catalog().Update(ctx, &cur, &next); err != nil {
		t.Fatal(err)
	}
	d, ok := st.Schedules().(dueInSharder)
	if !ok {
		t.Fatal("memstore's Schedules has no DueInShard")
	}
	for _, tc := range []struct {
		vshard int
		now    time.Time
		want   []string
	}{{3, t0.Add(time.Minute), []string{"c", "a"}}, {5, t0, []string{"b"}}, {4, t0, nil}} {
		page, _, err := d.DueInShard(ctx, tc.vshard, tc.now, 10, "")
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, s := range page {
			ids = append(ids, s.ID)
		}
		if len(ids) != len(tc.want) || (len(ids) > 0 && (ids[0] != tc.want[0] || ids[len(ids)-1] != tc.want[len(tc.want)-1])) {
			t.Errorf("DueInShard(%d) = %v; want %v (a's vshard must survive its advance and its edit)", tc.vshard, ids, tc.want)
		}
	}
	// A token is bound to its shard.
	_, tok, err := d.DueInShard(ctx, 3, t0.Add(time.Minute), 1, "")
	if err != nil || tok == "" {
		t.Fatalf("first page of shard 3 = %q, %v", tok, err)
	}
	if _, _, err := d.DueInShard(ctx, 5, t0.Add(time.Minute), 1, tok); !errors.Is(err, store.ErrBadPageToken) {
		t.Errorf("shard 3's token on shard 5 = %v; want ErrBadPageToken", err)
	}
}

// TestDueAtNow: a schedule whose nextRunAt is now is due ($lte), on the
// typed due index as on the BSON; one a millisecond later is not.
func TestDueAtNow(t *testing.T) {
	st := memstore.New(memstore.Options{})
	late := sched("late", 0)
	late["nextRunAt"] = t0.Add(time.Millisecond)
	if err := st.Load(schedule.SchedulesCollection, sched("now", 0), late); err != nil {
		t.Fatal(err)
	}
	page, _, err := st.Schedules().Due(t.Context(), t0, 10, "")
	if err != nil || len(page) != 1 || page[0].ID != "now" {
		t.Fatalf("Due(t0) = %v, %v; want [now]", page, err)
	}
}
