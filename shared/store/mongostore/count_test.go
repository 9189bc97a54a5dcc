package mongostore_test

import (
	"context"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestCountSendsTheCountCommand: counts go out as the count command, which
// Google lists among Firestore's supported commands, not as the driver's
// CountDocuments aggregate ($match, $group with $sum, $skip/$limit), a
// pipeline shape Google does not state it serves. The counts stay right
// and are metered as before: one read per document counted, at most limit.
func TestCountSendsTheCountCommand(t *testing.T) {
	ctx := context.Background()
	st, log := openRecorded(t)
	c := st.Collection("jobs")
	for i := range 5 {
		if _, err := c.InsertIdempotent(ctx, job{ID: fmt.Sprintf("j%d", i), N: i % 2}); err != nil {
			t.Fatal(err)
		}
	}
	log.reset()
	before := st.Meter().Total()
	for _, tc := range []struct {
		filter bson.D
		limit  int64
		want   int64
	}{
		{bson.D{}, 0, 5},
		{bson.D{{Key: "n", Value: 1}}, 0, 2},
		{bson.D{}, 3, 3},
		{bson.D{{Key: "n", Value: 0}}, 10, 3},
	} {
		n, err := c.CountLimit(ctx, tc.filter, tc.limit)
		if err != nil || n != tc.want {
			t.Errorf("CountLimit(%v, %d) = %d, %v; want %d", tc.filter, tc.limit, n, err, tc.want)
		}
	}
	if n, err := c.Count(ctx, bson.D{{Key: "n", Value: 1}}); err != nil || n != 2 {
		t.Errorf("Count(n=1) = %d, %v; want 2", n, err)
	}
	if read := st.Meter().Total() - before; read != 5+2+3+3+2 {
		t.Errorf("the counts metered %d reads; want %d (one per document counted)", read, 5+2+3+3+2)
	}
	sent := log.commands()
	if len(sent) != 5 {
		t.Errorf("%d commands for 5 counts; want one each", len(sent))
	}
	for _, cmd := range sent {
		if got := cmd.Index(0).Key(); got != "count" {
			t.Errorf("a count sent %s (%v); want the count command", got, cmd)
		}
		if _, err := cmd.LookupErr("pipeline"); err == nil {
			t.Errorf("a count sent a pipeline: %v", cmd)
		}
	}
}
