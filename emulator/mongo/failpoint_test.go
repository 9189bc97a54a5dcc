package mongo

import (
	"context"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	mdriver "go.mongodb.org/mongo-driver/v2/mongo"
)

// failCommand turns the fail point on through the driver, as a test of
// baton's would.
func failCommand(t *testing.T, db *mdriver.Database, mode any, data bson.D) bson.M {
	t.Helper()
	var res bson.M
	err := db.Client().Database("admin").RunCommand(context.Background(),
		bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: mode}, {Key: "data", Value: data}}).Decode(&res)
	if err != nil {
		t.Fatalf("configureFailPoint: %v", err)
	}
	return res
}

func TestFailCommand(t *testing.T) {
	ctx := context.Background()
	db := connect(t, testServer.URI())
	coll, other := db.Collection("target"), db.Collection("other")
	t.Cleanup(func() { failCommand(t, db, "off", nil) })

	t.Run("times, error code and namespace", func(t *testing.T) {
		failCommand(t, db, bson.D{{Key: "times", Value: 2}}, bson.D{
			{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "errorCode", Value: 112},
			{Key: "namespace", Value: db.Name() + ".target"}})
		// Another collection is not touched, and does not use up a time.
		if _, err := other.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
			t.Fatalf("insert into another collection: %v", err)
		}
		for i := range 2 {
			_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i + 1}})
			var ce mdriver.CommandError
			if !errors.As(err, &ce) || ce.Code != 112 {
				t.Fatalf("insert %d: err=%v, want command error 112 from the fail point", i, err)
			}
		}
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 9}}); err != nil {
			t.Fatalf("third insert, after times ran out: %v", err)
		}
		if n, _ := coll.CountDocuments(ctx, bson.D{}); n != 1 {
			t.Errorf("%d documents, want 1: a failed insert must write nothing", n)
		}
	})
	t.Run("skip then fail, and off", func(t *testing.T) {
		before := failCommand(t, db, bson.D{{Key: "skip", Value: 1}}, bson.D{{Key: "failCommands", Value: bson.A{"find"}}, {Key: "namespace", Value: db.Name() + ".target"}})
		if err := coll.FindOne(ctx, bson.D{}).Err(); err != nil {
			t.Fatalf("first find is skipped: %v", err)
		}
		if err := coll.FindOne(ctx, bson.D{}).Err(); err == nil {
			t.Fatal("second find succeeded, want the fail point's error")
		}
		// count is the times entered so far, over every configuration.
		res := failCommand(t, db, "off", nil)
		if got := res["count"].(int64) - before["count"].(int64); got != 1 {
			t.Errorf("entered %d times during this configuration, want 1", got)
		}
		if err := coll.FindOne(ctx, bson.D{}).Err(); err != nil {
			t.Fatalf("find after off: %v", err)
		}
	})
	t.Run("closeConnection", func(t *testing.T) {
		failCommand(t, db, bson.D{{Key: "times", Value: 1}}, bson.D{
			{Key: "failCommands", Value: bson.A{"update"}}, {Key: "closeConnection", Value: true}, {Key: "namespace", Value: db.Name() + ".target"}})
		_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 9}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}})
		if !mdriver.IsNetworkError(err) {
			t.Fatalf("update: err=%v, want a network error (the connection was cut)", err)
		}
		var doc bson.M
		if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 9}}).Decode(&doc); err != nil || doc["x"] != nil {
			t.Fatalf("after the cut: doc %v err %v, want it unchanged", doc, err)
		}
	})
	t.Run("writeConcernError: the write lands, the answer is an error", func(t *testing.T) {
		failCommand(t, db, bson.D{{Key: "times", Value: 1}}, bson.D{
			{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "namespace", Value: db.Name() + ".target"},
			{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 64}, {Key: "errmsg", Value: "waiting for replication timed out"}}}})
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "landed"}})
		var we mdriver.WriteException
		if !errors.As(err, &we) || we.WriteConcernError == nil || we.WriteConcernError.Code != 64 {
			t.Fatalf("insert: err=%v, want a write concern error 64", err)
		}
		if n, _ := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: "landed"}}); n != 1 {
			t.Errorf("%d documents, want 1: the write must land", n)
		}
	})
	t.Run("errorCodeAfterRun: the write lands, the answer is a top-level error", func(t *testing.T) {
		failCommand(t, db, bson.D{{Key: "times", Value: 1}}, bson.D{
			{Key: "failCommands", Value: bson.A{"update"}}, {Key: "namespace", Value: db.Name() + ".target"},
			{Key: "errorCodeAfterRun", Value: 262}})
		_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 9}}, bson.D{{Key: "$set", Value: bson.D{{Key: "after", Value: "ran"}}}})
		var ce mdriver.CommandError
		if !errors.As(err, &ce) || ce.Code != 262 {
			t.Fatalf("update: err=%v, want command error 262", err)
		}
		var doc bson.M
		if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 9}}).Decode(&doc); err != nil || doc["after"] != "ran" {
			t.Fatalf("after the error: doc %v err %v, want the update applied", doc, err)
		}
		// times: 1 is used up: the next update answers normally.
		if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 9}}, bson.D{{Key: "$set", Value: bson.D{{Key: "after", Value: "again"}}}}); err != nil {
			t.Fatalf("second update: %v", err)
		}
	})
	t.Run("bad configuration", func(t *testing.T) {
		err := db.Client().Database("admin").RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "sometimes"}}).Err()
		var ce mdriver.CommandError
		if !errors.As(err, &ce) || ce.Code != 2 {
			t.Fatalf("mode sometimes: err=%v, want BadValue", err)
		}
		// An error code past int32 is refused, not truncated into some
		// other code (1<<32 + 112 would otherwise fail commands with 112).
		for _, field := range []string{"errorCode", "errorCodeAfterRun"} {
			err := db.Client().Database("admin").RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: "failCommand"},
				{Key: "mode", Value: "alwaysOn"}, {Key: "data", Value: bson.D{
					{Key: "failCommands", Value: bson.A{"insert"}}, {Key: field, Value: int64(1<<32 + 112)}}}}).Err()
			if !errors.As(err, &ce) || ce.Code != 2 {
				t.Errorf("%s 1<<32+112: err=%v, want BadValue", field, err)
			}
		}
	})
}
