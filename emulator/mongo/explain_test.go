package mongo

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	mdriver "go.mongodb.org/mongo-driver/v2/mongo"
)

// explainFind runs explain of a find on coll and returns the reply as
// extended JSON.
func explainFind(t *testing.T, db *mdriver.Database, coll string, filter, sort bson.D) string {
	t.Helper()
	find := bson.D{{Key: "find", Value: coll}, {Key: "filter", Value: filter}}
	if sort != nil {
		find = append(find, bson.E{Key: "sort", Value: sort})
	}
	var got bson.Raw
	if err := db.RunCommand(context.Background(), bson.D{{Key: "explain", Value: find}, {Key: "verbosity", Value: "queryPlanner"}}).Decode(&got); err != nil {
		t.Fatalf("explain find %s %v: %v", coll, filter, err)
	}
	return got.String()
}

// TestExplainPlansFromIndexes: the front answers explain from the
// collection's indexes, as Firestore's Query Explain names its nodes: the
// sweep's query (equality, then a range that is also the sort) is an
// IndexScan of the index whose leading keys are those fields; the same
// query on a collection without that index, and a sort the index cannot
// give, are TableScans; and an explain of findAndModify, which Google's
// page does not list, is refused.
func TestExplainPlansFromIndexes(t *testing.T) {
	db := connect(t, testServer.URI())
	ctx := context.Background()
	runs := db.Collection("runs")
	if _, err := runs.Indexes().CreateOne(ctx, mdriver.IndexModel{Keys: bson.D{{Key: "status", Value: 1}, {Key: "sweepAt", Value: 1}}}); err != nil {
		t.Fatalf("create index: %v", err)
	}
	if _, err := runs.Indexes().CreateOne(ctx, mdriver.IndexModel{Keys: bson.D{{Key: "scheduleId", Value: 1}, {Key: "fireTime", Value: -1}, {Key: "_id", Value: -1}}}); err != nil {
		t.Fatalf("create index: %v", err)
	}
	if _, err := db.Collection("abc").Indexes().CreateOne(ctx, mdriver.IndexModel{Keys: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}, {Key: "c", Value: 1}}}); err != nil {
		t.Fatalf("create index: %v", err)
	}
	sweep := bson.D{{Key: "status", Value: "running"}, {Key: "sweepAt", Value: bson.D{{Key: "$lte", Value: 5}}}}
	for _, c := range []struct {
		name, coll   string
		filter, sort bson.D
		want         string
	}{
		{"sweep", "runs", sweep, bson.D{{Key: "sweepAt", Value: 1}}, "IndexScan"},
		{"sweep, index keys named", "runs", sweep, nil, "keys=[status ASC, sweepAt ASC, __key__ ASC]"},
		{"history, reversed", "runs", bson.D{{Key: "scheduleId", Value: "s"}}, bson.D{{Key: "fireTime", Value: 1}, {Key: "_id", Value: 1}}, "IndexScan"},
		{"history, mixed directions", "runs", bson.D{{Key: "scheduleId", Value: "s"}}, bson.D{{Key: "fireTime", Value: 1}, {Key: "_id", Value: -1}, {Key: "x", Value: 1}}, "TableScan"},
		{"an equality outside the index", "runs", append(bson.D{{Key: "shard", Value: 1}}, sweep...), bson.D{{Key: "sweepAt", Value: 1}}, "TableScan"},
		{"sort in the index's order", "abc", bson.D{}, bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}, "IndexScan"},
		{"sort all reversed", "abc", bson.D{}, bson.D{{Key: "a", Value: -1}, {Key: "b", Value: -1}}, "IndexScan"},
		{"sort in mixed directions", "abc", bson.D{}, bson.D{{Key: "a", Value: 1}, {Key: "b", Value: -1}}, "TableScan"},
		{"no index for the field", "runs", bson.D{{Key: "notifyAt", Value: bson.D{{Key: "$lte", Value: 5}}}}, bson.D{{Key: "notifyAt", Value: 1}}, "TableScan"},
		{"no collection", "nothing", sweep, nil, "TableScan"},
		{"by _id", "runs", bson.D{{Key: "_id", Value: "r1"}}, nil, "TableAccess"},
	} {
		got := explainFind(t, db, c.coll, c.filter, c.sort)
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: explain = %s; want %s", c.name, got, c.want)
		}
	}

	err := db.RunCommand(ctx, bson.D{{Key: "explain", Value: bson.D{{Key: "findAndModify", Value: "runs"}, {Key: "query", Value: sweep}, {Key: "update", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}}}}}).Err()
	var ce mdriver.CommandError
	if !errors.As(err, &ce) || ce.Code != codeCommandNotSupported {
		t.Errorf("explain findAndModify = %v; want CommandNotSupported (%d)", err, codeCommandNotSupported)
	}
}
