package mongo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	mdriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestNarrowedWritesKeepTheirFilter: conditional writes by _id plus a
// condition (the shape of every compare-and-set baton sends) are narrowed
// to their _id (pushdown.go) and still apply exactly when the whole filter
// matches, with the replies FerretDB gives: updateOne, findOneAndUpdate,
// findOneAndDelete and deleteOne, matching and not, and an upsert (never
// narrowed) that must insert.
func TestNarrowedWritesKeepTheirFilter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Its own emulator, so that Stats counts this test's writes alone.
	srv, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	coll := connect(t, srv.URI()).Collection("narrow")
	docs := make([]any, 50)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: fmt.Sprintf("d%02d", i)}, {Key: "status", Value: "pending"}, {Key: "n", Value: i}}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	before := srv.Stats().Narrowed
	claim := bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: "running"}}}}
	pending := func(id string) bson.D {
		return bson.D{{Key: "_id", Value: id}, {Key: "status", Value: "pending"}}
	}

	// updateOne: matched once, then the same condition matches nothing.
	var res *mdriver.UpdateResult
	for i, want := range []int64{1, 0} {
		res, err = coll.UpdateOne(ctx, pending("d01"), claim)
		if err != nil {
			t.Fatal(err)
		}
		if res.MatchedCount != want || res.ModifiedCount != want {
			t.Errorf("updateOne #%d: matched %d modified %d; want %d", i+1, res.MatchedCount, res.ModifiedCount, want)
		}
	}
	// A condition on a field with an operator, as the fenced advance has.
	res, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "d02"}, {Key: "n", Value: bson.D{{Key: "$gt", Value: 2}}}}, claim)
	if err != nil || res.MatchedCount != 0 {
		t.Errorf("updateOne with n 2 > 2: matched %v, %v; want 0", res, err)
	}
	res, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "d02"}, {Key: "n", Value: bson.D{{Key: "$lte", Value: 2}}}}, claim)
	if err != nil || res.MatchedCount != 1 {
		t.Errorf("updateOne with n 2 <= 2: matched %v, %v; want 1", res, err)
	}
	// The store's fenced shape: {$and: [{_id, …}, {$or: [fence]}]}.
	fenced := func(id string, epoch int) bson.D {
		return bson.D{{Key: "$and", Value: bson.A{pending(id), bson.D{{Key: "$or", Value: bson.A{
			bson.D{{Key: "fence", Value: bson.D{{Key: "$lte", Value: epoch}}}},
			bson.D{{Key: "fence", Value: bson.D{{Key: "$exists", Value: false}}}},
		}}}}}}
	}
	fence := func(epoch int) bson.D { return bson.D{{Key: "$set", Value: bson.D{{Key: "fence", Value: epoch}}}} }
	for i, c := range []struct {
		epoch int
		want  int64
	}{{5, 1}, {4, 0}, {5, 1}, {6, 1}} {
		res, err := coll.UpdateOne(ctx, fenced("d06", c.epoch), fence(c.epoch))
		if err != nil || res.MatchedCount != c.want {
			t.Errorf("fenced update #%d at epoch %d: %v, %v; want %d matched", i+1, c.epoch, res, err, c.want)
		}
	}
	// findOneAndUpdate: the document after, then nothing.
	var after struct {
		Status string `bson:"status"`
		N      int    `bson:"n"`
	}
	if err := coll.FindOneAndUpdate(ctx, pending("d03"), claim, options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&after); err != nil || after.Status != "running" || after.N != 3 {
		t.Errorf("findOneAndUpdate: %+v, %v; want d03 running", after, err)
	}
	if err := coll.FindOneAndUpdate(ctx, pending("d03"), claim).Err(); !errors.Is(err, mdriver.ErrNoDocuments) {
		t.Errorf("findOneAndUpdate of a claimed document: %v; want no documents", err)
	}
	// A missing document matches nothing either.
	if res, err := coll.UpdateOne(ctx, pending("absent"), claim); err != nil || res.MatchedCount != 0 {
		t.Errorf("updateOne of a missing document: %v, %v; want 0 matched", res, err)
	}
	// deleteOne and findOneAndDelete, not matching, then matching.
	if res, err := coll.DeleteOne(ctx, pending("d01")); err != nil || res.DeletedCount != 0 {
		t.Errorf("deleteOne of a claimed document: %v, %v; want 0 deleted", res, err)
	}
	if res, err := coll.DeleteOne(ctx, pending("d04")); err != nil || res.DeletedCount != 1 {
		t.Errorf("deleteOne: %v, %v; want 1 deleted", res, err)
	}
	if err := coll.FindOneAndDelete(ctx, pending("d01")).Err(); !errors.Is(err, mdriver.ErrNoDocuments) {
		t.Errorf("findOneAndDelete of a claimed document: %v; want no documents", err)
	}
	if err := coll.FindOneAndDelete(ctx, pending("d05")).Decode(&after); err != nil || after.N != 5 {
		t.Errorf("findOneAndDelete: %+v, %v; want d05", after, err)
	}
	narrowed := srv.Stats().Narrowed - before
	// An upsert whose filter does not match inserts: it is never narrowed.
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "new"}, {Key: "status", Value: "pending"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 99}}}}, options.UpdateOne().SetUpsert(true)); err != nil {
		t.Fatal(err)
	}
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "new"}}).Decode(&after); err != nil || after.N != 99 || after.Status != "pending" {
		t.Errorf("upserted: %+v, %v; want n 99, status pending", after, err)
	}

	// The collection as the writes above leave it.
	want := map[string]string{"d00": "pending", "d06": "pending", "d01": "running", "d02": "running", "d03": "running", "new": "pending"}
	for id, status := range want {
		var got struct {
			Status string `bson:"status"`
		}
		if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&got); err != nil || got.Status != status {
			t.Errorf("%s: %q, %v; want %q", id, got.Status, err, status)
		}
	}
	for _, id := range []string{"d04", "d05"} {
		if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Err(); !errors.Is(err, mdriver.ErrNoDocuments) {
			t.Errorf("%s: %v; want deleted", id, err)
		}
	}
	var d06 struct {
		Fence int `bson:"fence"`
	}
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "d06"}}).Decode(&d06); err != nil || d06.Fence != 6 {
		t.Errorf("d06: fence %d, %v; want 6", d06.Fence, err)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 49 {
		t.Errorf("%d documents, %v; want 49", n, err)
	}
	// Every conditional write above but the upsert went by its _id.
	if narrowed != 15 {
		t.Errorf("%d writes narrowed; want the 15 conditional writes", narrowed)
	}
}

// TestIDLookupUsesAnIndex: once a collection exists, SQLite plans
// FerretDB's lookup by _id (its expression, idIndexColumn) on the index
// idIndexer adds, rather than a scan of the table; and a collection
// dropped and created again gets it again.
func TestIDLookupUsesAnIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	srv, err := Start(ctx, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	db := connect(t, srv.URI())
	plan := func() string {
		t.Helper()
		conn, err := sql.Open("sqlite", "file:"+filepath.Join(dir, db.Name()+".sqlite")+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		var table string
		if err := conn.QueryRowContext(ctx, `SELECT table_name FROM _ferretdb_collections WHERE name = 'docs'`).Scan(&table); err != nil {
			t.Fatal(err)
		}
		rows, err := conn.QueryContext(ctx, fmt.Sprintf(`EXPLAIN QUERY PLAN SELECT _ferretdb_sjson FROM %q WHERE %s = ?`, table, idIndexColumn), `"d1"`)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = rows.Close() }()
		var out []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			out = append(out, detail)
		}
		return strings.Join(out, "; ")
	}
	for round := range 2 {
		if _, err := db.Collection("docs").InsertOne(ctx, bson.D{{Key: "_id", Value: "d1"}}); err != nil {
			t.Fatal(err)
		}
		if p := plan(); !strings.Contains(p, "USING INDEX") || !strings.Contains(p, "_baton_id_lookup") {
			t.Errorf("round %d: the lookup by _id is planned as %q; want it on the _baton_id_lookup index", round+1, p)
		}
		if err := db.Collection("docs").Drop(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
