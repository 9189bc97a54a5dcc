package skipscan

import (
	"context"
	"fmt"
	"reflect"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Page reads page index (from 0) of coll with skip/limit: limit documents
// in (sortField, _id) order, sortField empty meaning _id alone, decoded
// into out (a pointer to a slice). It returns the documents Firestore bills
// for the page, the skipped ones and the ones returned, which is the
// number the benchmarks compare keyset paging with.
func Page(ctx context.Context, coll *mongo.Collection, sortField string, limit, index int, out any) (billed int64, err error) {
	sort := bson.D{}
	if sortField != "" && sortField != "_id" {
		sort = append(sort, bson.E{Key: sortField, Value: 1})
	}
	sort = append(sort, bson.E{Key: "_id", Value: 1})
	skip := int64(index) * int64(limit)
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetSort(sort).SetSkip(skip).SetLimit(int64(limit)))
	if err != nil {
		return 0, fmt.Errorf("skip scan %s: page %d: %w", coll.Name(), index, err)
	}
	if err := cur.All(ctx, out); err != nil {
		return 0, fmt.Errorf("skip scan %s: page %d: %w", coll.Name(), index, err)
	}
	return skip + int64(reflect.ValueOf(out).Elem().Len()), nil
}

// Scan reads every page of coll with Page, limit documents at a time, and
// returns the documents seen and the documents billed in all.
func Scan(ctx context.Context, coll *mongo.Collection, sortField string, limit int) (seen int, billed int64, err error) {
	for index := 0; ; index++ {
		var docs []bson.Raw
		n, err := Page(ctx, coll, sortField, limit, index, &docs)
		if err != nil {
			return seen, billed, err
		}
		seen, billed = seen+len(docs), billed+n
		if len(docs) < limit {
			return seen, billed, nil
		}
	}
}
