package mongo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	mdriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestBillingUnits: the front prices what passes it in Firestore's units.
// A small document with no index is one write unit; the same document in
// a collection with three dense indexes grows by their entries; one over
// 1 KiB is two; a read of n small documents is n read units and one for
// the index it scanned; a query that finds nothing is still one; a sparse
// index leaves out a document without its field.
func TestBillingUnits(t *testing.T) {
	ctx := context.Background()
	db := connect(t, testServer.URI())
	name := db.Name()
	bill := func() Billing { return testServer.Billing(name) }
	delta := func(coll string, do func()) CollectionBilling {
		t.Helper()
		before := bill().Collections[coll]
		do()
		after := bill().Collections[coll]
		return CollectionBilling{ReadUnits: after.ReadUnits - before.ReadUnits, WriteUnits: after.WriteUnits - before.WriteUnits,
			Writes: after.Writes - before.Writes, IndexEntries: after.IndexEntries - before.IndexEntries}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	plain, indexed := db.Collection("plain"), db.Collection("indexed")
	if d := delta("plain", func() {
		_, err := plain.InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}, {Key: "v", Value: 1}})
		must(err)
	}); d.WriteUnits != 1 || d.IndexEntries != 0 {
		t.Errorf("small insert, no index: %+v; want 1 write unit, no entries", d)
	}
	_, err := indexed.Indexes().CreateMany(ctx, []mdriver.IndexModel{
		{Keys: bson.D{{Key: "a", Value: 1}, {Key: "_id", Value: 1}}},
		{Keys: bson.D{{Key: "b", Value: 1}}},
		{Keys: bson.D{{Key: "note", Value: 1}}},
	})
	must(err)
	_, err = indexed.Indexes().CreateOne(ctx, mdriver.IndexModel{Keys: bson.D{{Key: "rare", Value: 1}}, Options: optsSparse()})
	must(err)
	if d := delta("indexed", func() {
		_, err := indexed.InsertOne(ctx, bson.D{{Key: "_id", Value: "x1"}, {Key: "a", Value: 1}, {Key: "b", Value: 2}})
		must(err)
	}); d.WriteUnits != 1 || d.IndexEntries != 3 {
		t.Errorf("small insert, 3 dense indexes and a sparse one it lacks: %+v; want 1 write unit, 3 entries", d)
	}
	big := strings.Repeat("x", 1100)
	if d := delta("indexed", func() {
		_, err := indexed.InsertOne(ctx, bson.D{{Key: "_id", Value: "x2"}, {Key: "a", Value: 2}, {Key: "note", Value: big}, {Key: "rare", Value: true}})
		must(err)
	}); d.WriteUnits != 3 || d.IndexEntries != 4 {
		// 1.1 KiB of document and 1.1 KiB more in the note's entry.
		t.Errorf("a 1.1 KiB document with its value indexed: %+v; want 3 write units, 4 entries", d)
	}
	if d := delta("indexed", func() {
		cur, err := indexed.Find(ctx, bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 1}}}})
		must(err)
		var out []bson.M
		must(cur.All(ctx, &out))
	}); d.ReadUnits != 3 {
		t.Errorf("a query returning 2 small documents over an index: %+v; want 3 read units (2 documents, 1 index)", d)
	}
	if d := delta("indexed", func() {
		err := indexed.FindOne(ctx, bson.D{{Key: "_id", Value: "none"}}).Err()
		if !errors.Is(err, mdriver.ErrNoDocuments) {
			t.Fatal(err)
		}
	}); d.ReadUnits != 1 {
		t.Errorf("a lookup by _id that finds nothing: %+v; want 1 read unit", d)
	}
	if d := delta("indexed", func() {
		_, err := indexed.UpdateOne(ctx, bson.D{{Key: "_id", Value: "x1"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 3}}}})
		must(err)
	}); d.Writes != 1 || d.IndexEntries != 2 {
		t.Errorf("an update of one indexed field: %+v; want 1 write, its index's entry removed and written (2)", d)
	}
}

func optsSparse() *options.IndexOptionsBuilder { return options.Index().SetSparse(true) }

// TestBillingDocSizeIsTheLatest: a document that grows by updates is kept,
// updated again and deleted at its latest size, so the collection's
// average document size is each document's latest whole size, not the
// average of every version that crossed the wire: here a small insert
// read twice, then grown past 1 KiB and read once. A projected read does
// not count as the document's size.
func TestBillingDocSizeIsTheLatest(t *testing.T) {
	ctx := context.Background()
	db := connect(t, testServer.URI())
	c := db.Collection("grows")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "g"}, {Key: "v", Value: 1}})
	must(err)
	for range 2 {
		must(c.FindOne(ctx, bson.D{{Key: "_id", Value: "g"}}).Err())
	}
	_, err = c.UpdateOne(ctx, bson.D{{Key: "_id", Value: "g"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "out", Value: strings.Repeat("x", 1200)}}}})
	must(err)
	var whole bson.Raw
	must(c.FindOne(ctx, bson.D{{Key: "_id", Value: "g"}}).Decode(&whole))
	must(c.FindOne(ctx, bson.D{{Key: "_id", Value: "g"}}, options.FindOne().SetProjection(bson.D{{Key: "v", Value: 1}})).Err())
	got := testServer.Billing(db.Name()).Collections["grows"].AvgDocBytes
	if want := docSize("grows", whole); got != want {
		t.Errorf("average document size %d bytes; want the latest whole size, %d", got, want)
	}
	before := testServer.Billing(db.Name()).Collections["grows"].WriteUnits
	_, err = c.DeleteOne(ctx, bson.D{{Key: "_id", Value: "g"}})
	must(err)
	if d := testServer.Billing(db.Name()).Collections["grows"].WriteUnits - before; d != 2 {
		t.Errorf("deleting the 1.2 KiB document: %d write units; want 2", d)
	}
}

// TestUnbilledClientIsNotBilled: a client whose handshake names
// UnbilledApp (a meter's own polling) adds nothing to the bill, whatever it
// reads or writes, while the same commands from any other client are
// billed as before.
func TestUnbilledClientIsNotBilled(t *testing.T) {
	ctx := context.Background()
	billed := connect(t, testServer.URI())
	unbilled := connect(t, testServer.URI()+"&appName="+UnbilledApp)
	if billed.Name() != unbilled.Name() {
		t.Fatalf("databases %q and %q; want one", billed.Name(), unbilled.Name())
	}
	if _, err := billed.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}, {Key: "k", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	bill := func() Billing { return testServer.Billing(billed.Name()) }
	work := func(db *mdriver.Database, id string) {
		t.Helper()
		c := db.Collection("c")
		if err := c.FindOne(ctx, bson.D{{Key: "k", Value: 1}}).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CountDocuments(ctx, bson.D{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: id}}); err != nil {
			t.Fatal(err)
		}
	}
	before := bill()
	work(unbilled, "u")
	if got := bill(); got.ReadUnits != before.ReadUnits || got.WriteUnits != before.WriteUnits {
		t.Errorf("the unbilled client's find, count and insert: read units %d → %d, write units %d → %d; want no change",
			before.ReadUnits, got.ReadUnits, before.WriteUnits, got.WriteUnits)
	}
	before = bill()
	work(billed, "b")
	if got := bill(); got.ReadUnits <= before.ReadUnits || got.WriteUnits <= before.WriteUnits {
		t.Errorf("the same from a billed client: read units %d → %d, write units %d → %d; want both up",
			before.ReadUnits, got.ReadUnits, before.WriteUnits, got.WriteUnits)
	}
}

// TestStorageSizesFollowTheDocsExample prices the storage-size page's own
// example (https://cloud.google.com/firestore/mongodb-compatibility/docs/storage-size):
// the tasks document is 132 bytes (6 for the collection's name, 78 for its
// fields, 48 more), its entry in an index on done and priority 70 (6, 11
// for the _id, 1 and 4 for the values, 48). An index that ends in _id
// counts the _id once, as the document name it is.
func TestStorageSizesFollowTheDocsExample(t *testing.T) {
	doc, err := bson.Marshal(bson.D{{Key: "_id", Value: "my_task_id"}, {Key: "type", Value: "Personal"}, {Key: "done", Value: false},
		{Key: "priority", Value: int32(1)}, {Key: "description", Value: "Learn Cloud Firestore"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := docSize("tasks", doc); got != 132 {
		t.Errorf("document size %d bytes; the page says 132", got)
	}
	if got := entryBytes("tasks", doc, indexDef{fields: []string{"done", "priority"}}); got != 70 {
		t.Errorf("index entry size %d bytes; the page says 70", got)
	}
	if got := entryBytes("tasks", doc, indexDef{fields: []string{"done", "priority", "_id"}}); got != 70 {
		t.Errorf("index entry ending in _id: %d bytes; want 70, the _id counted once", got)
	}
	if got := entryBytes("tasks", doc, indexDef{fields: []string{"done", "missing"}}); got != 6+11+1+1+48 {
		t.Errorf("index entry with an absent field: %d bytes; want %d (the field null, 1 byte)", got, 6+11+1+1+48)
	}
}

// TestBillingScanAtEntrySize bills a query's index scan at the
// collection's entries' size, not a fixed guess: 60 entries of 158 bytes
// (5 for the collection's name, 4 for the _id, 101 for k, 48) are 3 read
// units of 4 KiB, besides one for each document returned.
func TestBillingScanAtEntrySize(t *testing.T) {
	ctx := context.Background()
	db := connect(t, testServer.URI())
	c := db.Collection("scan")
	if _, err := c.Indexes().CreateOne(ctx, mdriver.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	k := strings.Repeat("x", 100)
	for i := range 60 {
		if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprintf("d%02d", i)}, {Key: "k", Value: k}}); err != nil {
			t.Fatal(err)
		}
	}
	before := testServer.Billing(db.Name()).Collections["scan"].ReadUnits
	cur, err := c.Find(ctx, bson.D{{Key: "k", Value: k}})
	if err != nil {
		t.Fatal(err)
	}
	var got []bson.Raw
	if err := cur.All(ctx, &got); err != nil || len(got) != 60 {
		t.Fatalf("find: %d documents, %v", len(got), err)
	}
	if d := testServer.Billing(db.Name()).Collections["scan"].ReadUnits - before; d != 60+3 {
		t.Errorf("60 documents through 60 entries of 158 bytes: %d read units; want 63", d)
	}
}
