package wire

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// doc parses relaxed extended JSON into a command document.
func doc(t *testing.T, js string) bson.Raw {
	t.Helper()
	var r bson.Raw
	if err := bson.UnmarshalExtJSON([]byte(js), false, &r); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return r
}

func TestOf(t *testing.T) {
	cases := []struct {
		name string
		cmd  string
		seqs map[string][]string
		want Shape
	}{
		{
			name: "find: nested filters, projection; plumbing and values ignored",
			cmd: `{"find": "c",
				"filter": {"a": 1, "sub": {"x": {"$where": "a literal, not an operator"}},
					"$and": [{"b": {"$gt": 1}}, {"$or": [{"c": {"$exists": false}}]}],
					"tags": {"$elemMatch": {"k": {"$in": [1]}}},
					"n": {"$not": {"$regex": "^x", "$options": "i"}}},
				"projection": {"a": 1, "b": 0, "arr": {"$slice": 2}, "p.$": 1},
				"sort": {"a": 1},
				"$db": "x", "lsid": {"id": 1}, "$clusterTime": {}}`,
			want: Shape{Command: "find",
				Options:    []string{"find.filter", "find.projection", "find.sort"},
				Query:      []string{"$and", "$elemMatch", "$exists", "$gt", "$in", "$not", "$or", "$regex"},
				Projection: []string{"$", "$slice", ProjectionExclude, ProjectionInclude}},
		},
		{
			name: "update statements from a document sequence, one a pipeline",
			cmd:  `{"update": "c", "ordered": true}`,
			seqs: map[string][]string{"updates": {
				`{"q": {"_id": "x", "v": {"$lte": 3}}, "u": {"$set": {"a.$[i].b": 1}, "$push": {"l": {"$each": [1], "$slice": -5}}}, "upsert": true}`,
				`{"q": {}, "u": [{"$set": {"a": 1}}]}`,
			}},
			want: Shape{Command: "update",
				Options: []string{"update.ordered", "update.statements.q", "update.statements.u", "update.statements.upsert", "update.updates"},
				Stages:  []string{"$set"},
				Query:   []string{"$lte"},
				Update:  []string{"$[<identifier>]", "$each", "$push", "$set", "$slice"}},
		},
		{
			name: "update statements in the body (the command monitor's copy)",
			cmd:  `{"update": "c", "updates": [{"q": {"a": {"$ne": 1}}, "u": {"$inc": {"n": 1}}}]}`,
			want: Shape{Command: "update", Options: []string{"update.statements.q", "update.statements.u", "update.updates"},
				Query: []string{"$ne"}, Update: []string{"$inc"}},
		},
		{
			name: "findAndModify",
			cmd:  `{"findAndModify": "c", "query": {"s": {"$in": ["a"]}}, "sort": {"p": 1}, "update": {"$min": {"t": 1}}, "fields": {"payload": 0}, "new": true}`,
			want: Shape{Command: "findAndModify", Options: []string{"findAndModify.fields", "findAndModify.new", "findAndModify.query", "findAndModify.sort", "findAndModify.update"},
				Query: []string{"$in"}, Update: []string{"$min"}, Projection: []string{ProjectionExclude}},
		},
		{
			name: "delete statements",
			cmd:  `{"delete": "c", "deletes": [{"q": {"$nor": [{"a": {"$type": "string"}}]}, "limit": 1}]}`,
			want: Shape{Command: "delete", Options: []string{"delete.deletes", "delete.statements.limit", "delete.statements.q"}, Query: []string{"$nor", "$type"}},
		},
		{
			name: "aggregate: CountDocuments' pipeline",
			cmd:  `{"aggregate": "c", "pipeline": [{"$match": {"x": {"$gte": 1}}}, {"$limit": 5}, {"$group": {"_id": 1, "n": {"$sum": 1}}}], "cursor": {}}`,
			want: Shape{Command: "aggregate", Options: []string{"aggregate.cursor", "aggregate.pipeline"}, Stages: []string{"$group", "$limit", "$match"}, Query: []string{"$gte"}, Accumulators: []string{"$sum"}},
		},
		{
			name: "count and distinct queries",
			cmd:  `{"distinct": "c", "key": "k", "query": {"$expr": {"$eq": ["$a", "$b"]}}}`,
			want: Shape{Command: "distinct", Options: []string{"distinct.key", "distinct.query"}, Query: []string{"$expr"}},
		},
		{
			name: "createIndexes options and types",
			cmd:  `{"createIndexes": "c", "indexes": [{"key": {"a": 1, "t": "text"}, "name": "n", "unique": true, "partialFilterExpression": {"a": 1}}]}`,
			want: Shape{Command: "createIndexes", Options: []string{"createIndexes.indexes"}, IndexOptions: []string{"name", "partialFilterExpression", "type text", "unique"}},
		},
		{
			name: "explain carries the explained command's features",
			cmd:  `{"explain": {"find": "c", "filter": {"a": {"$lt": 1}}}, "verbosity": "queryPlanner"}`,
			want: Shape{Command: "explain", Wrapped: []string{"find"}, Options: []string{"explain.verbosity", "find.filter"}, Query: []string{"$lt"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var seqs Sequences
			if tc.seqs != nil {
				seqs = Sequences{}
				for id, docs := range tc.seqs {
					for _, d := range docs {
						seqs[id] = append(seqs[id], doc(t, d))
					}
				}
			}
			got := Of(doc(t, tc.cmd), seqs)
			if !reflect.DeepEqual(got, tc.want) {
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(tc.want)
				t.Errorf("Of =\n%s\nwant\n%s", gj, wj)
			}
		})
	}
}

func TestRecorderWritesEachShapeOnce(t *testing.T) {
	dir := t.TempDir()
	r, err := NewRecorder(dir)
	if err != nil {
		t.Fatal(err)
	}
	find := Of(doc(t, `{"find": "c", "filter": {"secret": "value-never-written"}}`), nil)
	r.Record(find)
	r.Record(find)
	r.Record(Shape{Command: "ping"})
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("files = %v, want one", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines = %q, want 2 (find once, ping)", lines)
	}
	if strings.Contains(string(b), "value-never-written") || strings.Contains(string(b), "secret") {
		t.Errorf("the inventory holds a value: %s", b)
	}
}
