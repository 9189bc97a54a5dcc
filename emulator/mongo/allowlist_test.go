package mongo

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	mdriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/baton-cron/baton/shared/store/wire"
)

// TestAllowlistRefusals drives the real driver at features that Google's
// pages do not list: each is refused by the front, with the code a
// MongoDB server gives for it, naming the feature and the page, and
// nothing is written.
func TestAllowlistRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := connect(t, testServer.URI())
	coll := db.Collection("strict")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}, {Key: "n", Value: 1}}); err != nil {
		t.Fatalf("a listed insert: %v", err)
	}

	tests := []struct {
		name    string
		run     func() error
		code    int32
		feature string
	}{
		{"$where", func() error {
			_, err := coll.Find(ctx, bson.D{{Key: "$where", Value: "this.n == 1"}})
			return err
		}, 2, "query $where"},
		{"$where nested in $or", func() error {
			return coll.FindOne(ctx, bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "n", Value: 1}}, bson.D{{Key: "$where", Value: "true"}}}}}).Err()
		}, 2, "query $where"},
		{"unlisted command (collStats)", func() error {
			return db.RunCommand(ctx, bson.D{{Key: "collStats", Value: "strict"}}).Err()
		}, 59, "command collStats"},
		{"unlisted stage ($graphLookup)", func() error {
			_, err := coll.Aggregate(ctx, mdriver.Pipeline{{{Key: "$graphLookup", Value: bson.D{
				{Key: "from", Value: "strict"}, {Key: "startWith", Value: "$n"}, {Key: "connectFromField", Value: "n"},
				{Key: "connectToField", Value: "n"}, {Key: "as", Value: "g"}}}}})
			return err
		}, 40324, "stage $graphLookup"},
		{"unlisted update operator, in an update statement's document sequence", func() error {
			_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "a"}}, bson.D{{Key: "$isolated", Value: bson.D{{Key: "n", Value: 2}}}})
			return err
		}, 9, "update $isolated"},
		{"unlisted index option (partialFilterExpression)", func() error {
			_, err := coll.Indexes().CreateOne(ctx, mdriver.IndexModel{Keys: bson.D{{Key: "n", Value: 1}},
				Options: options.Index().SetPartialFilterExpression(bson.D{{Key: "n", Value: bson.D{{Key: "$gt", Value: 0}}}})})
			return err
		}, 197, "index option partialFilterExpression"},
		{"unlisted option (collation: case-insensitive)", func() error {
			_, err := coll.Find(ctx, bson.D{}, options.Find().SetCollation(&options.Collation{Locale: "en", Strength: 2}))
			return err
		}, 40415, "option find.collation"},
		{"unlisted accumulator ($stdDevPop)", func() error {
			_, err := coll.Aggregate(ctx, mdriver.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "s", Value: bson.D{{Key: "$stdDevPop", Value: "$n"}}}}}}})
			return err
		}, 15952, "accumulator $stdDevPop"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			var se mdriver.ServerError
			if !errors.As(err, &se) || !se.HasErrorCode(int(tc.code)) {
				t.Fatalf("err = %v, want server error code %d", err, tc.code)
			}
			msg := err.Error()
			for _, want := range []string{tc.feature, "allowlist", urlFeatures} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q does not mention %q", msg, want)
				}
			}
		})
	}

	var got bson.M
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "a"}}).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if n, _ := got["n"].(int32); n != 1 {
		t.Errorf("n = %v after refused writes, want 1", got["n"])
	}
	if _, err := coll.Indexes().ListSpecifications(ctx); err != nil {
		t.Errorf("listIndexes after refusals: %v", err)
	}
}

// TestAllowlistAcceptsListedShapes sends, through the driver, a listed
// shape of each kind, including those only the document sequences carry
// and the test-only ones.
func TestAllowlistAcceptsListedShapes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := connect(t, testServer.URI())
	coll := db.Collection("listed")
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: "a"}, {Key: "n", Value: 1}, {Key: "tags", Value: bson.A{"x"}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "n", Value: bson.D{{Key: "$in", Value: bson.A{1}}}}, {Key: "tags", Value: bson.D{{Key: "$elemMatch", Value: bson.D{{Key: "$eq", Value: "x"}}}}}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}, {Key: "$push", Value: bson.D{{Key: "tags", Value: bson.D{{Key: "$each", Value: bson.A{"y"}}}}}}}); err != nil {
		t.Errorf("listed update: %v", err)
	}
	if _, err := coll.CountDocuments(ctx, bson.D{{Key: "n", Value: bson.D{{Key: "$gte", Value: 2}}}}, options.Count().SetLimit(5)); err != nil {
		t.Errorf("CountDocuments ($match, $limit, $group, $sum): %v", err)
	}
	if err := coll.FindOne(ctx, bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "n", Value: bson.D{{Key: "$exists", Value: true}}}}}}},
		options.FindOne().SetProjection(bson.D{{Key: "n", Value: 1}}).SetSort(bson.D{{Key: "n", Value: 1}})).Err(); err != nil {
		t.Errorf("find with projection and sort: %v", err)
	}
	if _, err := coll.Indexes().CreateOne(ctx, mdriver.IndexModel{Keys: bson.D{{Key: "n", Value: 1}}, Options: options.Index().SetName("by_n").SetUnique(true)}); err != nil {
		t.Errorf("createIndexes {key, name, unique}: %v", err)
	}
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$ne", Value: "b"}}}}); err != nil {
		t.Errorf("delete: %v", err)
	}
	if err := coll.Drop(ctx); err != nil {
		t.Errorf("drop (test-only): %v", err)
	}
}

// TestAllowlistOnlyWhenStrict: the hook in refusal applies the allowlist
// only in strict mode, so lax mode forwards what strict mode refuses.
func TestAllowlistOnlyWhenStrict(t *testing.T) {
	body, err := bson.Marshal(bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "$where", Value: "true"}}}, {Key: "$db", Value: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	c := command{opCode: opMsg, name: "find", body: body}
	if r := c.refusal(); r != nil {
		t.Errorf("lax: refusal = %+v, want nil", r)
	}
	c.strict = true
	if r := c.refusal(); r == nil || r.code != 2 {
		t.Errorf("strict: refusal = %+v, want code 2", r)
	}
}

// TestAllowlistEntries: every entry names a Google page and says why, and
// nothing is both allowed and an expected refusal.
func TestAllowlistEntries(t *testing.T) {
	seen := map[wire.Feature]bool{}
	for _, e := range Allowlist {
		f := wire.Feature{Kind: e.Kind, Name: e.Name}
		if seen[f] {
			t.Errorf("%s listed twice", f)
		}
		seen[f] = true
		if !strings.HasPrefix(e.URL, "https://") || !strings.Contains(e.URL, "google.com/firestore/") {
			t.Errorf("%s: URL %q is not a Firestore page", f, e.URL)
		}
		if e.Note == "" && e.TestOnly == "" {
			t.Errorf("%s: no note saying what the page says", f)
		}
		if _, ok := refusalCodes[e.Kind]; !ok {
			t.Errorf("%s: kind %q has no refusal code", f, e.Kind)
		}
	}
	for _, r := range ExpectedRefusals {
		if Lookup(wire.Feature{Kind: r.Kind, Name: r.Name}) != nil {
			t.Errorf("%s %s is both allowed and an expected refusal", r.Kind, r.Name)
		}
	}
}
