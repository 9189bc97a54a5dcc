package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// EpochFloor is the lease.Options.EpochFloor of the scheduler's leases: the
// highest epoch that a holder of the lease has written as a fence into s.
// The tick lease fences schedules (field fence); a job lease fences its
// schedule's runs (fence) and the schedule's misfire bookkeeping
// (jobFence). Other leases (baton lease run's) fence nothing here: 0.
//
// It is asked only when a lease object is missing, so it costs nothing in
// steady state: one or two indexed reads (the "fence" indexes in Indexes)
// after a lease store forgot.
func EpochFloor(s *mongostore.Store) func(ctx context.Context, name string) (int64, error) {
	schedules := s.Collection(schedule.SchedulesCollection)
	runs := s.Collection(schedule.RunsCollection)
	highest := func(ctx context.Context, c *mongostore.Collection, filter bson.D, field string) (int64, error) {
		var doc bson.M
		err := c.FindOne(ctx, filter, &doc, options.FindOne().SetSort(bson.D{{Key: field, Value: -1}}).SetProjection(bson.D{{Key: field, Value: 1}}))
		if errors.Is(err, store.ErrNotFound) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		switch v := doc[field].(type) {
		case int64:
			return v, nil
		case int32:
			return int64(v), nil
		}
		return 0, nil
	}
	return func(ctx context.Context, name string) (int64, error) {
		switch {
		case name == TickLease:
			f, err := highest(ctx, schedules, bson.D{}, store.DefaultFenceField)
			if err != nil {
				return 0, fmt.Errorf("scheduler: epoch floor of %s: %w", name, err)
			}
			return f, nil
		case strings.HasPrefix(name, "job-"):
			id := strings.TrimPrefix(name, "job-")
			f, err := highest(ctx, runs, bson.D{{Key: "scheduleId", Value: id}}, store.DefaultFenceField)
			if err != nil {
				return 0, fmt.Errorf("scheduler: epoch floor of %s: %w", name, err)
			}
			g, err := highest(ctx, schedules, bson.D{{Key: "_id", Value: id}}, jobFenceField)
			if err != nil {
				return 0, fmt.Errorf("scheduler: epoch floor of %s: %w", name, err)
			}
			return max(f, g), nil
		}
		return 0, nil
	}
}
