package mongo

import (
	"context"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	mdriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// benchDB connects to uri and fills a fresh collection with n documents.
func benchDB(b *testing.B, uri string, n int) *mdriver.Collection {
	b.Helper()
	ctx := context.Background()
	c, err := mdriver.Connect(options.Client().ApplyURI(uri).SetRetryWrites(false))
	if err != nil {
		b.Fatal(err)
	}
	db := c.Database(fmt.Sprintf("bench_%d", n))
	b.Cleanup(func() {
		_ = db.Drop(ctx)
		_ = c.Disconnect(ctx)
	})
	coll := db.Collection("docs")
	_ = coll.Drop(ctx)
	docs := make([]any, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: fmt.Sprintf("d%05d", i)}, {Key: "k", Value: i}, {Key: "owner", Value: nil}}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		b.Fatal(err)
	}
	return coll
}

// BenchmarkQuery compares a lone _id filter (pushed down to SQLite) with a
// filter on another field (a full scan in Go), at 300 documents, through
// the front. Compare the two ns/op: the ratio is the cost of the scan.
func BenchmarkQuery(b *testing.B) {
	coll := benchDB(b, testServer.URI(), 300)
	ctx := context.Background()
	for _, bc := range []struct {
		name   string
		filter func(i int) bson.D
	}{
		{"byID", func(i int) bson.D { return bson.D{{Key: "_id", Value: fmt.Sprintf("d%05d", i%300)}} }},
		{"byField", func(i int) bson.D { return bson.D{{Key: "k", Value: i % 300}} }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if err := coll.FindOne(ctx, bc.filter(i)).Err(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFront compares one conditional findOneAndUpdate by _id through
// the front with the same straight to FerretDB: the ratio is the front's
// overhead on a single client.
func BenchmarkFront(b *testing.B) {
	ctx := context.Background()
	for _, bc := range []struct{ name, uri string }{
		{"front", testServer.URI()},
		{"raw", testServer.backend},
	} {
		b.Run(bc.name, func(b *testing.B) {
			coll := benchDB(b, bc.uri, 300)
			for i := 0; b.Loop(); i++ {
				err := coll.FindOneAndUpdate(ctx,
					bson.D{{Key: "_id", Value: fmt.Sprintf("d%05d", i%300)}},
					bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}).Err()
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkIDLookup reads documents by _id from a collection of 5,000
// documents, with and without the index idIndexer adds (the collection
// written through the front gets it; the one written straight to FerretDB
// does not), both read straight from FerretDB so that only the index
// differs. Compare the two ns/op: without it, each lookup parses every
// row's JSON.
func BenchmarkIDLookup(b *testing.B) {
	const n = 5000
	ctx := context.Background()
	for _, bc := range []struct{ name, fill string }{
		{"indexed", testServer.URI()},
		{"unindexed", testServer.backend},
	} {
		b.Run(bc.name, func(b *testing.B) {
			filled := benchDB(b, bc.fill, n)
			c, err := mdriver.Connect(options.Client().ApplyURI(testServer.backend).SetRetryWrites(false))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = c.Disconnect(ctx) })
			coll := c.Database(filled.Database().Name()).Collection(filled.Name())
			for i := 0; b.Loop(); i++ {
				if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprintf("d%05d", i%n)}}).Err(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkConditionalUpdate runs the compare-and-set shape baton sends,
// updateOne({_id, k}), on a collection of 5,000 documents: through the
// front, which narrows it to its _id (pushdown.go), and straight to
// FerretDB, which decodes every document to find it. Compare the ns/op.
func BenchmarkConditionalUpdate(b *testing.B) {
	const n = 5000
	ctx := context.Background()
	for _, bc := range []struct{ name, uri string }{
		{"front", testServer.URI()},
		{"raw", testServer.backend},
	} {
		b.Run(bc.name, func(b *testing.B) {
			coll := benchDB(b, bc.uri, n)
			for i := 0; b.Loop(); i++ {
				res, err := coll.UpdateOne(ctx,
					bson.D{{Key: "_id", Value: fmt.Sprintf("d%05d", i%n)}, {Key: "k", Value: i % n}},
					bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
				if err != nil || res.MatchedCount != 1 {
					b.Fatal(res, err)
				}
			}
		})
	}
}
