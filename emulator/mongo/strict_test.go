package mongo

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	mdriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// startOwn starts an emulator of the test's own (for a hook, lax mode or
// counters no other test touches).
func startOwn(t *testing.T, opts Options) *Server {
	t.Helper()
	s, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestURICarriesLoadBalanced(t *testing.T) {
	t.Parallel()
	if !strings.HasSuffix(testServer.URI(), "/?loadBalanced=true") {
		t.Errorf("URI() = %q, want it to end in /?loadBalanced=true as Firestore's connection strings do", testServer.URI())
	}
}

// TestLoadBalancedMode: the driver connects in load balanced mode (its
// command events carry the front's serviceId, which it only records from a
// load balanced handshake), hello answers serviceId, and a cursor's
// getMores run on its pinned connection.
func TestLoadBalancedMode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type started struct {
		name    string
		conn    string
		service *bson.ObjectID
	}
	var mu sync.Mutex
	var events []started
	cm := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		mu.Lock()
		events = append(events, started{e.CommandName, e.ConnectionID, e.ServiceID})
		mu.Unlock()
	}}
	var cleared []*bson.ObjectID
	pm := &event.PoolMonitor{Event: func(e *event.PoolEvent) {
		if e.Type == event.ConnectionPoolCleared {
			mu.Lock()
			cleared = append(cleared, e.ServiceID)
			mu.Unlock()
		}
	}}
	c, err := mdriver.Connect(options.Client().ApplyURI(testServer.URI()).SetRetryWrites(false).SetMonitor(cm).SetPoolMonitor(pm))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(ctx) })
	db := c.Database("lbmode")
	t.Cleanup(func() { _ = db.Drop(ctx) })

	var hello bson.M
	if err := db.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		t.Fatalf("hello: %v", err)
	}
	id, ok := hello["serviceId"].(bson.ObjectID)
	if !ok {
		t.Fatalf("hello reply %v has no serviceId", hello)
	}

	coll := db.Collection("pages")
	var docs []any
	for i := 1; i <= 45; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetBatchSize(10))
	if err != nil {
		t.Fatal(err)
	}
	var got []struct {
		ID int `bson:"_id"`
	}
	if err := cur.All(ctx, &got); err != nil {
		t.Fatalf("sorted find over five batches: %v", err)
	}
	for i, d := range got {
		if d.ID != i+1 {
			t.Fatalf("sorted find: document %d is _id %d, want %d (got %d documents)", i, d.ID, i+1, len(got))
		}
	}
	if len(got) != 45 {
		t.Errorf("sorted find returned %d documents, want 45", len(got))
	}
	mu.Lock()
	defer mu.Unlock()
	findConn, getMores := "", 0
	for _, e := range events {
		if e.service == nil || *e.service != id {
			t.Errorf("%s: serviceId %v, want %v: the driver is not in load balanced mode", e.name, e.service, id)
		}
		switch e.name {
		case "find":
			findConn = e.conn
		case "getMore":
			getMores++
			if e.conn != findConn {
				t.Errorf("getMore on connection %s, the find on %s: the cursor is not pinned", e.conn, findConn)
			}
		}
	}
	if getMores != 4 {
		t.Errorf("%d getMores, want 4 (45 documents in batches of 10)", getMores)
	}
	mu.Unlock()

	// A dropped connection (the fail point's closeConnection) clears the
	// pool of that service only, as in production, and the next write
	// gets a new connection.
	failCommand(t, db, bson.D{{Key: "times", Value: 1}}, bson.D{{Key: "failCommands", Value: bson.A{"insert"}},
		{Key: "closeConnection", Value: true}, {Key: "namespace", Value: db.Name() + ".drop"}})
	if _, err := db.Collection("drop").InsertOne(ctx, bson.D{{Key: "_id", Value: "x"}}); !mdriver.IsNetworkError(err) {
		t.Errorf("insert on a cut connection = %v, want a network error", err)
	}
	if _, err := db.Collection("drop").InsertOne(ctx, bson.D{{Key: "_id", Value: "y"}}); err != nil {
		t.Errorf("insert after the cut: %v", err)
	}
	mu.Lock()
	if len(cleared) != 1 || cleared[0] == nil || *cleared[0] != id {
		t.Errorf("pool cleared for services %v, want once, for %v", cleared, id)
	}
}

// TestHandshakeWithoutLoadBalancedRefused: a driver that is not in load
// balanced mode gets an error naming Firestore's Connect page, strict;
// lax, it connects.
func TestHandshakeWithoutLoadBalancedRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	plain := strings.TrimSuffix(testServer.URI(), "?loadBalanced=true")
	c, err := mdriver.Connect(options.Client().ApplyURI(plain).SetRetryWrites(false).SetServerSelectionTimeout(2 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Disconnect(context.Background()) }()
	err = c.Ping(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "loadBalanced") || !strings.Contains(err.Error(), urlConnect) {
		t.Errorf("ping without loadBalanced = %v, want a refusal naming loadBalanced and %s", err, urlConnect)
	}

	lax := startOwn(t, Options{Lax: true})
	plain = strings.TrimSuffix(lax.URI(), "?loadBalanced=true")
	lc, err := mdriver.Connect(options.Client().ApplyURI(plain).SetRetryWrites(false))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lc.Disconnect(context.Background()) }()
	if err := lc.Ping(ctx, nil); err != nil {
		t.Errorf("lax: ping without loadBalanced: %v", err)
	}
}

// TestWritesToDifferentDocumentsOverlap proves, by observation, that
// writes to different documents run at once: a write to "a" is held
// inside the front (its locks taken, not yet forwarded) until a write to
// "b" has been answered. With every write serialised, "b" would wait for
// "a" forever and the test would fail at its deadline.
func TestWritesToDifferentDocumentsOverlap(t *testing.T) {
	t.Parallel()
	s := startOwn(t, Options{})
	release := make(chan struct{})
	var releaseOnce sync.Once
	unhold := func() { releaseOnce.Do(func() { close(release) }) }
	defer unhold() // on failure too, or Close would wait for the held write
	held := make(chan struct{})
	var once sync.Once
	s.front.hook = func(cmd command) {
		if cmd.name != "update" {
			return
		}
		if ids, _ := writeTargets(cmd); len(ids) == 1 && ids[0].show == `"a"` {
			once.Do(func() { close(held) })
			<-release
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	coll := connect(t, s.URI()).Collection("docs")
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: "a"}}, bson.D{{Key: "_id", Value: "b"}}}); err != nil {
		t.Fatal(err)
	}
	set := bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}
	aDone := make(chan error, 1)
	go func() {
		_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "a"}}, set)
		aDone <- err
	}()
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the write to a never reached the front")
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "b"}}, set); err != nil {
		t.Fatalf("write to b while a write to a is in flight: %v (serialised writes would time out here)", err)
	}
	// A second write to "a" while the first is in flight is answered 112.
	_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "a"}}, set)
	if !isWriteConflict(err) || !strings.Contains(err.Error(), urlErrors) {
		t.Errorf("second write to a while the first is in flight = %v, want 112 naming %s", err, urlErrors)
	}
	unhold()
	if err := <-aDone; err != nil {
		t.Errorf("held write to a: %v", err)
	}
	st := s.Stats()
	if st.MaxWritesInFlight < 2 || st.Conflicts != 1 {
		t.Errorf("Stats = %+v, want MaxWritesInFlight >= 2 and Conflicts = 1", st)
	}
}

// TestUnpinnedWriteIsExclusive: a findAndModify that does not name its
// document (a sort picks it) runs alone in its collection, so racing
// claims of "the best queued job" each get a different job, none twice.
func TestUnpinnedWriteIsExclusive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	coll := connect(t, testServer.URI()).Collection("queue")
	var docs []any
	for i := 1; i <= 20; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "state", Value: "queued"}, {Key: "prio", Value: i}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	claimed := map[int]int{}
	var wg sync.WaitGroup
	for g := 0; g < 20; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var d struct {
				ID int `bson:"_id"`
			}
			err := coll.FindOneAndUpdate(ctx, bson.D{{Key: "state", Value: "queued"}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "state", Value: "claimed"}}}},
				options.FindOneAndUpdate().SetSort(bson.D{{Key: "prio", Value: -1}})).Decode(&d)
			if err != nil {
				t.Errorf("claim %d: %v", g, err)
				return
			}
			mu.Lock()
			claimed[d.ID]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(claimed) != 20 {
		t.Errorf("20 claims took %d distinct jobs (%v), want 20: a job was claimed twice", len(claimed), claimed)
	}
}

// TestUnsortedFindIsNotInsertionOrder: two pages of a find without a sort
// come back in an order that is neither insertion nor _id order, every
// document exactly once; with a sort, the order is the sort's.
func TestUnsortedFindIsNotInsertionOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	coll := connect(t, testServer.URI()).Collection("order")
	var docs []any
	for i := 1; i <= 60; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	ids := func(opts *options.FindOptionsBuilder) []int {
		t.Helper()
		cur, err := coll.Find(ctx, bson.D{}, opts)
		return intIDs(t, cur, err)
	}
	inserted := make([]int, 60)
	for i := range inserted {
		inserted[i] = i + 1
	}
	// Two pages of 30 (a firstBatch and a getMore's nextBatch).
	got := ids(options.Find().SetBatchSize(30))
	if slices.Equal(got[:30], inserted[:30]) || slices.Equal(got[30:], inserted[30:]) {
		t.Errorf("unsorted find: a page came back in insertion order: %v", got)
	}
	if sorted := slices.Sorted(slices.Values(got)); !slices.Equal(sorted, inserted) {
		t.Errorf("unsorted find returned %v, want each of 1..60 once", got)
	}
	if got := ids(options.Find().SetBatchSize(30).SetSort(bson.D{{Key: "_id", Value: 1}})); !slices.Equal(got, inserted) {
		t.Errorf("sorted find = %v, want 1..60 in order", got)
	}
	// An aggregate without $sort is shuffled too; with one, it is sorted.
	agg := func(pipeline bson.A) []int {
		t.Helper()
		cur, err := coll.Aggregate(ctx, pipeline, options.Aggregate().SetBatchSize(30))
		return intIDs(t, cur, err)
	}
	if got := agg(bson.A{bson.D{{Key: "$match", Value: bson.D{}}}}); slices.Equal(got, inserted) || len(got) != 60 {
		t.Errorf("aggregate without $sort = %v, want all 60 in another order than insertion", got)
	}
	if got := agg(bson.A{bson.D{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}}}); !slices.Equal(got, inserted) {
		t.Errorf("aggregate with $sort = %v, want 1..60 in order", got)
	}
	// A limit without a sort is a random few of the matches, not the
	// first inserted: over ten tries, something beyond the first five.
	beyond := false
	for range 10 {
		got := ids(options.Find().SetLimit(5))
		if len(got) != 5 {
			t.Fatalf("find limit 5 returned %d documents", len(got))
		}
		if slices.Max(got) > 5 {
			beyond = true
		}
	}
	if !beyond {
		t.Error("find with limit 5 and no sort returned only the first five inserted, ten times")
	}
}

// TestDocumentLimits: what Firestore documents it does not store is
// refused with code 2 (InvalidArgument) naming the page, on insert,
// update, replace, upsert and findAndModify; what it stores passes.
func TestDocumentLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	coll := connect(t, testServer.URI()).Collection("limits")
	nest := func(n int) any {
		var v any = 1
		for range n {
			v = bson.D{{Key: "x", Value: v}}
		}
		return v
	}
	big := strings.Repeat("x", 4<<20)
	refused := []struct {
		name string
		do   func() error
	}{
		{"document over 4 MiB", func() error {
			_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "big"}, {Key: "s", Value: big}})
			return err
		}},
		{"nesting 21", func() error {
			_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "deep"}, {Key: "d", Value: nest(21)}})
			return err
		}},
		{"array nesting 21", func() error {
			var v any = 1
			for range 21 {
				v = bson.A{v}
			}
			_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "deeparr"}, {Key: "d", Value: v}})
			return err
		}},
		{"field __x__", func() error {
			_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "n"}, {Key: "__x__", Value: 1}})
			return err
		}},
		{"nested field __x__", func() error {
			_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "n2"}, {Key: "a", Value: bson.D{{Key: "__name__", Value: 1}}}})
			return err
		}},
		{"_id empty string", func() error {
			_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: ""}})
			return err
		}},
		{"_id 0", func() error {
			_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: int64(0)}})
			return err
		}},
		{"_id a double", func() error {
			_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1.5}})
			return err
		}},
		{"_id a document", func() error {
			_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "a", Value: 1}}}})
			return err
		}},
		{"$set of field __x__", func() error {
			_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "ok"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a.__x__", Value: 1}}}})
			return err
		}},
		{"$set nesting past 20 through a dotted path", func() error {
			_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "ok"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a.b.c", Value: nest(19)}}}})
			return err
		}},
		{"upsert with field __x__", func() error {
			_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "up"}}, bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: "__x__", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
			return err
		}},
		{"replace with nesting 21", func() error {
			_, err := coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: "ok"}}, bson.D{{Key: "d", Value: nest(21)}})
			return err
		}},
		{"findAndModify $set of field __x__", func() error {
			return coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: "ok"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "__x__", Value: 1}}}}).Err()
		}},
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "ok"}, {Key: "d", Value: nest(20)}, {Key: "_x_", Value: 1}, {Key: "__", Value: 1}}); err != nil {
		t.Fatalf("insert at the limits (nesting 20, names _x_ and __): %v", err)
	}
	for _, id := range []any{"s", int64(7), int32(8), bson.NewObjectID()} {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}}); err != nil {
			t.Errorf("insert with _id %v (%T): %v", id, id, err)
		}
	}
	for _, tc := range refused {
		err := tc.do()
		var se mdriver.ServerError
		if !errors.As(err, &se) || !se.HasErrorCode(2) || !strings.Contains(err.Error(), urlBehaviour) {
			t.Errorf("%s: err = %v, want code 2 naming %s", tc.name, err, urlBehaviour)
		}
	}
	var d bson.M
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "ok"}}).Decode(&d); err != nil {
		t.Fatal(err)
	}
	if _, ok := d["__x__"]; ok {
		t.Errorf("a refused update was applied: %v", d)
	}
}

// TestLaxMode: Options.Lax turns strict mode off: writes wait their turn
// (no 112, one in flight at a time), unsorted finds come in insertion
// order, limits are not checked.
func TestLaxMode(t *testing.T) {
	t.Parallel()
	s := startOwn(t, Options{Lax: true})
	ctx := context.Background()
	coll := connect(t, s.URI()).Collection("lax")
	var docs []any
	for i := 1; i <= 30; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "n", Value: 0}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 10; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5; i++ {
				if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1 + (g+i)%2}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}); err != nil {
					t.Errorf("lax update: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if st := s.Stats(); st.Conflicts != 0 || st.MaxWritesInFlight != 1 {
		t.Errorf("lax Stats = %+v, want no conflicts and one write in flight at most", st)
	}
	cur, err := coll.Find(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var got []struct {
		ID int `bson:"_id"`
	}
	if err := cur.All(ctx, &got); err != nil {
		t.Fatal(err)
	}
	for i, d := range got {
		if d.ID != i+1 {
			t.Fatalf("lax unsorted find: %v, want insertion order", got)
		}
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "x"}, {Key: "__x__", Value: 1}}); err != nil {
		t.Errorf("lax insert of field __x__: %v", err)
	}
}

// intIDs drains a cursor of documents with integer _ids, in the order the
// server sent them: the order is what the shuffle tests look at.
func intIDs(t *testing.T, cur *mdriver.Cursor, err error) []int {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var out []struct {
		ID int `bson:"_id"`
	}
	if err := cur.All(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	r := make([]int, len(out))
	for i, d := range out {
		r[i] = d.ID
	}
	return r
}
