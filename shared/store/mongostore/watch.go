package mongostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/baton-cron/baton/shared/store"
)

// The schedules view watches with a change stream where the server has
// them (MongoDB); FerretDB (the emulator) and, so far, Firestore answer the
// $changeStream stage with a command error, which is ErrCannotWatch.
var _ store.ScheduleWatcher = schedules{}

// WatchSchedules implements store.ScheduleWatcher over a change stream on
// the schedules collection, with the full document looked up on updates,
// so each edit carries the schedule's nextRunAt. Reading a change stream is
// not metered: it reads no documents of the collection's queries.
func (v schedules) WatchSchedules(ctx context.Context) (store.ScheduleStream, error) {
	c := v.c()
	cs, err := c.c.Watch(ctx, bson.A{}, options.ChangeStream().SetFullDocument(options.UpdateLookup))
	if err != nil {
		var se mongo.ServerError
		if errors.As(err, &se) {
			// The server answered, and refused the stream: it has none.
			return nil, fmt.Errorf("store: watch %s: %w: %w", c.name, store.ErrCannotWatch, err)
		}
		return nil, fmt.Errorf("store: watch %s: %w", c.name, err)
	}
	return &scheduleStream{cs: cs}, nil
}

// scheduleStream is a store.ScheduleStream over a change stream.
type scheduleStream struct{ cs *mongo.ChangeStream }

// Next implements store.ScheduleStream.
func (s *scheduleStream) Next(ctx context.Context) (store.ScheduleEdit, bool) {
	if !s.cs.Next(ctx) {
		return store.ScheduleEdit{}, false
	}
	var ev struct {
		DocumentKey struct {
			ID string `bson:"_id"`
		} `bson:"documentKey"`
		FullDocument *struct {
			NextRunAt time.Time `bson:"nextRunAt"`
		} `bson:"fullDocument"`
	}
	var e store.ScheduleEdit
	if s.cs.Decode(&ev) == nil && ev.FullDocument != nil {
		e.NextRunAt = ev.FullDocument.NextRunAt
	}
	e.ID = ev.DocumentKey.ID
	return e, true
}

// Err implements store.ScheduleStream.
func (s *scheduleStream) Err() error { return s.cs.Err() }

// Close implements store.ScheduleStream.
func (s *scheduleStream) Close(ctx context.Context) error { return s.cs.Close(ctx) }
