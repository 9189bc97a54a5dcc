package mongostore

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

func (v catalog) versions() *Collection { return v.s.named(schedule.VersionsCollection) }

// PutVersion implements store.Catalog.
func (v catalog) PutVersion(ctx context.Context, rec *schedule.VersionRecord) error {
	c := v.versions()
	filter := bson.D{{Key: "_id", Value: rec.ID}}
	if !rec.Final {
		filter = append(filter, bson.E{Key: "final", Value: bson.D{{Key: "$ne", Value: true}}})
	}
	// A whole-document replace of a deterministic _id is idempotent, so a
	// timeout is retried too.
	err := retryWrite(ctx, true, func() error {
		_, err := c.c.ReplaceOne(ctx, filter, rec, options.Replace().SetUpsert(true))
		return err
	})
	switch {
	case err == nil:
		c.meter.AddWrite(c.op("upsert"), 1)
		return nil
	case mongo.IsDuplicateKeyError(err):
		// Not final, and the _id holds a final record: the upsert found
		// no match and its insert collided.
		return fmt.Errorf("store: put %s into %s: a final record is there: %w", rec.ID, c.name, store.ErrConflict)
	}
	return c.writeError("upsert into", err)
}

// ListVersions implements store.Catalog.
func (v catalog) ListVersions(ctx context.Context, scheduleID string, limit int, token string) ([]schedule.VersionRecord, string, error) {
	q := PageQuery{
		Filter: bson.D{{Key: "scheduleId", Value: scheduleID}},
		IDType: bson.TypeString, Desc: true,
		Limit: limit, Token: token,
	}
	out := []schedule.VersionRecord{}
	p, err := v.versions().Page(ctx, q, &out)
	if err != nil {
		return nil, "", err
	}
	return out, p.NextToken, nil
}

// PruneVersions implements store.Catalog.
func (v catalog) PruneVersions(ctx context.Context, scheduleID, belowID string, limit int) (int, error) {
	return deleteBatch(ctx, v.versions(),
		bson.D{{Key: "scheduleId", Value: scheduleID}, {Key: "_id", Value: bson.D{{Key: "$lt", Value: belowID}}}},
		bson.D{{Key: "scheduleId", Value: 1}, {Key: "_id", Value: -1}}, limit)
}

// DeleteExpiredVersions implements store.Catalog.
func (v catalog) DeleteExpiredVersions(ctx context.Context, now time.Time, limit int) (int, error) {
	return deleteExpired(ctx, v.versions(), now, limit)
}

// DeleteExpired implements store.Runs.
func (r runs) DeleteExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	return deleteExpired(ctx, r.c(), now, limit)
}

// deleteExpired deletes at most limit documents of c whose expireAt is at
// or before now, oldest first, on the "expire" index. Documents without
// expireAt (unfinished runs) never match.
func deleteExpired(ctx context.Context, c *Collection, now time.Time, limit int) (int, error) {
	return deleteBatch(ctx, c, bson.D{{Key: "expireAt", Value: bson.D{{Key: "$lte", Value: now.UTC()}}}},
		bson.D{{Key: "expireAt", Value: 1}}, limit)
}

// deleteBatch reads the _ids of at most limit documents matching filter in
// sort order, then deletes them with the filter repeated (so a document
// changed in between so as not to match stays): one bounded read and one
// bounded write.
func deleteBatch(ctx context.Context, c *Collection, filter, sort bson.D, limit int) (int, error) {
	if limit < 1 || limit > maxLimit {
		return 0, fmt.Errorf("store: delete from %s: batch %d out of range 1..%d", c.name, limit, maxLimit)
	}
	var ids []struct {
		ID string `bson:"_id"`
	}
	if err := c.Find(ctx, filter, &ids, options.Find().SetSort(sort).SetLimit(int64(limit)).SetProjection(bson.D{{Key: "_id", Value: 1}})); err != nil {
		return 0, fmt.Errorf("store: delete from %s: %w", c.name, err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	in := make(bson.A, len(ids))
	for i, d := range ids {
		in[i] = d.ID
	}
	del := bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: in}}}}, filter}}}
	var res *mongo.DeleteResult
	// A repeated delete of the same ids under the same filter deletes
	// nothing more, so a timeout is retried.
	err := retryWrite(ctx, true, func() (err error) {
		res, err = c.c.DeleteMany(ctx, del)
		return err
	})
	if err != nil {
		return 0, c.writeError("delete from", err)
	}
	c.meter.AddWrite(c.op("delete"), res.DeletedCount)
	return int(res.DeletedCount), nil
}
