package mongostore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

func (v catalog) versions() *Collection { return v.s.named(schedule.VersionsCollection) }

// PutVersion implements store.Catalog.
//
// It does not rely on the duplicate-key code (11000), which Firestore does
// not document: a failed write is settled by reading the record back, as
// InsertIdempotent settles an insert. A non-final record's upsert finds no
// match when a final record holds its _id, and its insert then collides;
// whatever code that answers, the read-back finds the final record there
// and the guard's ErrConflict follows. Our own record there means the
// write landed and only its answer was lost: done.
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
	if err == nil {
		c.meter.AddWrite(c.op("upsert"), 1)
		return nil
	}
	return c.putVersionReadBack(ctx, rec, err)
}

// putVersionReadBack settles PutVersion's failed write err by reading
// rec's _id back.
func (c *Collection) putVersionReadBack(ctx context.Context, rec *schedule.VersionRecord, err error) error {
	// Not on ctx alone: a deadline that cut the write short would cut the
	// read-back too.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var stored bson.Raw
	rerr := c.c.FindOne(rctx, bson.D{{Key: "_id", Value: rec.ID}}).Decode(&stored)
	switch {
	case errors.Is(rerr, mongo.ErrNoDocuments):
		// Not there: the write did not land (reads are strongly
		// consistent).
		return c.writeError("upsert into", err)
	case rerr != nil:
		if mongo.IsDuplicateKeyError(err) {
			// MongoDB's answer for the guard's collision, when the
			// read that would confirm it failed.
			return fmt.Errorf("store: put %s into %s: a final record is there: %w", rec.ID, c.name, store.ErrConflict)
		}
		return fmt.Errorf("store: upsert into %s: %w: %w; reading _id %s back failed too: %v", c.name, store.ErrUnknownOutcome, err, rec.ID, rerr) //nolint:errorlint // the outcome is the write's
	}
	c.meter.Add(c.op("upsertCheck"), 1)
	var got schedule.VersionRecord
	if derr := bson.Unmarshal(stored, &got); derr != nil {
		return fmt.Errorf("store: upsert into %s: %w; _id %s holds something else: %v", c.name, err, rec.ID, derr) //nolint:errorlint // the outcome is the write's
	}
	switch {
	case sameVersionRecord(rec, &got):
		return nil // ours landed; its answer was lost
	case got.Final && !rec.Final:
		return fmt.Errorf("store: put %s into %s: a final record is there: %w", rec.ID, c.name, store.ErrConflict)
	}
	// Another record, not final: ours would have replaced it, so it did
	// not land.
	return c.writeError("upsert into", err)
}

// sameVersionRecord reports whether stored is rec as the database keeps it
// (times in milliseconds, UTC): rec is taken through BSON first.
func sameVersionRecord(rec, stored *schedule.VersionRecord) bool {
	raw, err := bson.Marshal(rec)
	if err != nil {
		return false
	}
	var ours schedule.VersionRecord
	if err := bson.Unmarshal(raw, &ours); err != nil {
		return false
	}
	return reflect.DeepEqual(&ours, stored)
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
