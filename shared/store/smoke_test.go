package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/store"
	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestSmokePage(t *testing.T) {
	s := emutest.Store(t)
	ctx := context.Background()
	c := s.Collection("docs")
	for i := 0; i < 25; i++ {
		ok, err := c.InsertIdempotent(ctx, bson.D{{Key: "_id", Value: fmt.Sprintf("d%03d", i)}, {Key: "k", Value: i % 3}})
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	ok, err := c.InsertIdempotent(ctx, bson.D{{Key: "_id", Value: "d000"}})
	if err != nil || ok {
		t.Fatalf("dup: %v %v", ok, err)
	}
	seen := map[string]bool{}
	q := store.PageQuery{SortField: "k", Limit: 10}
	for {
		var docs []struct {
			ID string `bson:"_id"`
			K  int    `bson:"k"`
		}
		p, err := c.Page(ctx, q, &docs)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			if seen[d.ID] {
				t.Fatalf("dup %s", d.ID)
			}
			seen[d.ID] = true
		}
		if p.NextToken == "" {
			break
		}
		q.Token = p.NextToken
	}
	if len(seen) != 25 {
		t.Fatalf("saw %d", len(seen))
	}
	t.Log(s.Meter().Snapshot())
	err = c.FencedUpdate(ctx, bson.D{{Key: "_id", Value: "d001"}}, store.Fence{Epoch: 5}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	err = c.FencedUpdate(ctx, bson.D{{Key: "_id", Value: "d001"}}, store.Fence{Epoch: 4}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 2}}}})
	t.Log(err)
}
