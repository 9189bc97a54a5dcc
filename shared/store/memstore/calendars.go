package memstore

import (
	"bytes"
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// calendars implements store.Calendars, as mongostore's does.
type calendars struct{ s *Store }

var _ store.Calendars = calendars{}

const calColl = schedule.CalendarsCollection

func (v calendars) CreateCalendar(ctx context.Context, c *schedule.Calendar) error {
	inserted, err := v.s.insert(ctx, calColl, c)
	if err != nil || inserted {
		return err
	}
	if want, merr := bson.Marshal(c); merr == nil {
		var stored schedule.Calendar
		if gerr := v.s.getInto(ctx, calColl, c.ID, &stored); gerr == nil {
			if got, merr := bson.Marshal(&stored); merr == nil && bytes.Equal(want, got) {
				return nil
			}
		}
	}
	return fmt.Errorf("store: insert into %s: _id %s is taken: %w", calColl, c.ID, store.ErrConflict)
}

// calendarOptional are the omitempty fields a replacement removes when
// the new calendar lacks them (mongostore's).
var calendarOptional = []string{"description", "dates", "ranges", "rules", "weekdays"}

func (v calendars) ReplaceCalendar(ctx context.Context, next *schedule.Calendar, version int64) error {
	nd, err := toDoc(next)
	if err != nil {
		return fmt.Errorf("store: replace in %s: %w", calColl, err)
	}
	_, err = v.s.update(ctx, calColl, "update", next.ID,
		func(m bson.M) bool { n, ok := intOf(m["version"]); return ok && n == version },
		func(m bson.M) bson.M {
			for k, val := range nd {
				if k != "_id" && k != "createdAt" {
					m[k] = val
				}
			}
			for _, k := range calendarOptional {
				if _, ok := nd[k]; !ok {
					delete(m, k)
				}
			}
			return m
		})
	return err
}

func (v calendars) GetCalendar(ctx context.Context, id string) (schedule.Calendar, error) {
	var c schedule.Calendar
	if err := v.s.getInto(ctx, calColl, id, &c); err != nil {
		return schedule.Calendar{}, err
	}
	return c, nil
}

func (v calendars) GetCalendars(ctx context.Context, ids []string) (map[string]*schedule.Calendar, error) {
	out := map[string]*schedule.Calendar{}
	if len(ids) == 0 {
		return out, nil
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	got, err := v.s.find(ctx, calColl, "find", func(m bson.M) bool { return want[idOf(m)] }, nil, 0)
	if err != nil {
		return nil, err
	}
	found, err := decodeAll[schedule.Calendar](calColl, got)
	if err != nil {
		return nil, err
	}
	for i := range found {
		out[found[i].ID] = &found[i]
	}
	return out, nil
}

func (v calendars) ListCalendars(ctx context.Context, limit int, token string, sel ...schedule.LabelTerm) ([]schedule.Calendar, string, error) {
	got, next, err := v.s.page(ctx, pageQuery{coll: calColl, binding: labelBinding(sel), match: hasLabels(sel), limit: limit, token: token})
	if err != nil {
		return nil, "", err
	}
	out, err := decodeAll[schedule.Calendar](calColl, got)
	return out, next, err
}

func (v calendars) DeleteCalendar(ctx context.Context, id string, version int64) error {
	return v.s.deleteOne(ctx, calColl, id, func(m bson.M) bool {
		n, ok := intOf(m["version"])
		return version == 0 || (ok && n == version)
	})
}
