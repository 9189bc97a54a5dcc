package mongostore

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// runs implements store.Runs.
type runs struct{ s *Store }

// HighestFence implements store.Runs.
func (v runs) HighestFence(ctx context.Context, scheduleID string) (int64, error) {
	return highestFence(ctx, v.s.named(schedule.RunsCollection), bson.D{{Key: "scheduleId", Value: scheduleID}}, store.DefaultFenceField)
}
