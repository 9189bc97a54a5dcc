package mongostore

import (
	"bytes"
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// calendars implements store.Calendars.
type calendars struct{ s *Store }

var _ store.Calendars = calendars{}

func (v calendars) coll() *Collection { return v.s.named(schedule.CalendarsCollection) }

// CreateCalendar implements store.Calendars.
func (v calendars) CreateCalendar(ctx context.Context, c *schedule.Calendar) error {
	coll := v.coll()
	inserted, err := coll.InsertIdempotent(ctx, c)
	if err != nil {
		return err
	}
	if inserted {
		return nil
	}
	// "It is there": ours, whose answer was lost, when the stored one is
	// c byte for byte (down to createdAt, the caller's clock).
	want, err := bson.Marshal(c)
	if err == nil {
		var stored schedule.Calendar
		if gerr := coll.Get(ctx, c.ID, &stored); gerr == nil {
			if got, merr := bson.Marshal(&stored); merr == nil && bytes.Equal(want, got) {
				return nil
			}
		}
	}
	return fmt.Errorf("store: insert into %s: _id %s is taken: %w", coll.name, c.ID, store.ErrConflict)
}

// calendarOptional are the calendar fields that omitempty leaves out, and
// a replace must therefore remove when next has none.
var calendarOptional = []string{"description", "dates", "ranges", "rules", "weekdays"}

// ReplaceCalendar implements store.Calendars.
func (v calendars) ReplaceCalendar(ctx context.Context, next *schedule.Calendar, version int64) error {
	raw, err := bson.Marshal(next)
	if err != nil {
		return fmt.Errorf("store: replace in %s: %w", v.coll().name, err)
	}
	els, err := bson.Raw(raw).Elements()
	if err != nil {
		return fmt.Errorf("store: replace in %s: %w", v.coll().name, err)
	}
	var set, unset bson.D
	present := map[string]bool{}
	for _, e := range els {
		k := e.Key()
		present[k] = true
		if k != "_id" && k != "createdAt" {
			set = append(set, bson.E{Key: k, Value: e.Value()})
		}
	}
	for _, k := range calendarOptional {
		if !present[k] {
			unset = append(unset, bson.E{Key: k, Value: ""})
		}
	}
	update := bson.D{{Key: "$set", Value: set}}
	if len(unset) > 0 {
		update = append(update, bson.E{Key: "$unset", Value: unset})
	}
	return v.coll().UpdateOne(ctx, bson.D{{Key: "_id", Value: next.ID}, {Key: "version", Value: version}}, update)
}

// GetCalendar implements store.Calendars.
func (v calendars) GetCalendar(ctx context.Context, id string) (schedule.Calendar, error) {
	var c schedule.Calendar
	if err := v.coll().Get(ctx, id, &c); err != nil {
		return schedule.Calendar{}, err
	}
	return c, nil
}

// GetCalendars implements store.Calendars: one $in query on _id, so its
// reads are the calendars found.
func (v calendars) GetCalendars(ctx context.Context, ids []string) (map[string]*schedule.Calendar, error) {
	out := map[string]*schedule.Calendar{}
	if len(ids) == 0 {
		return out, nil
	}
	var found []schedule.Calendar
	if err := v.coll().Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}, &found); err != nil {
		return nil, err
	}
	for i := range found {
		out[found[i].ID] = &found[i]
	}
	return out, nil
}

// ListCalendars implements store.Calendars.
func (v calendars) ListCalendars(ctx context.Context, limit int, token string, sel ...schedule.LabelTerm) ([]schedule.Calendar, string, error) {
	q := PageQuery{Limit: limit, Token: token, IDType: bson.TypeString, Filter: labelFilter(sel)}
	out := []schedule.Calendar{}
	p, err := v.coll().Page(ctx, q, &out)
	if err != nil {
		return nil, "", err
	}
	return out, p.NextToken, nil
}

// DeleteCalendar implements store.Calendars.
func (v calendars) DeleteCalendar(ctx context.Context, id string, version int64) error {
	filter := bson.D{{Key: "_id", Value: id}}
	if version != 0 {
		filter = append(filter, bson.E{Key: "version", Value: version})
	}
	return v.coll().DeleteOne(ctx, filter)
}
