package mongo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	mdriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// One emulator for the package's tests; each test uses its own database.
// (emutest cannot be used here: it imports this package.)
var testServer *Server

func TestMain(m *testing.M) {
	s, err := Start(context.Background(), Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start emulator:", err)
		os.Exit(1)
	}
	testServer = s
	code := m.Run()
	_ = s.Close()
	os.Exit(code)
}

// connect opens a driver client on uri with retryable writes off, as
// store.Open does, and returns a fresh database.
func connect(t *testing.T, uri string) *mdriver.Database {
	t.Helper()
	c, err := mdriver.Connect(options.Client().ApplyURI(uri).SetRetryWrites(false))
	if err != nil {
		t.Fatalf("connect %s: %v", uri, err)
	}
	db := c.Database(strings.ToLower(strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())))
	t.Cleanup(func() {
		_ = db.Drop(context.Background())
		_ = c.Disconnect(context.Background())
	})
	return db
}

// isWriteConflict reports whether err is a 112 (WriteConflict): Firestore's
// Aborted, which strict mode answers to overlapping writes to one
// document. It means "not applied".
func isWriteConflict(err error) bool {
	var se mdriver.ServerError
	return errors.As(err, &se) && se.HasErrorCode(112)
}

// raceClaims runs rounds of n goroutines that each try to claim one fresh
// document with the conditional findOneAndUpdate({_id, owner: null}). It
// returns, per round, the number of goroutines told they won, and the
// number of 112s (a loss: the write did not apply) over all rounds, and
// fails the test if a winner is not the recorded owner.
func raceClaims(t *testing.T, coll *mdriver.Collection, rounds, n int) ([]int, int) {
	t.Helper()
	ctx := context.Background()
	wins := make([]int, rounds)
	var conflicts atomic.Int64
	for r := 0; r < rounds; r++ {
		id := fmt.Sprintf("job-%03d", r)
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "owner", Value: nil}}); err != nil {
			t.Fatalf("round %d: insert: %v", r, err)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var winners []int
		for g := 0; g < n; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var after bson.M
				err := coll.FindOneAndUpdate(ctx,
					bson.D{{Key: "_id", Value: id}, {Key: "owner", Value: nil}},
					bson.D{{Key: "$set", Value: bson.D{{Key: "owner", Value: g}}}},
					options.FindOneAndUpdate().SetReturnDocument(options.After),
				).Decode(&after)
				switch {
				case err == nil:
					mu.Lock()
					winners = append(winners, g)
					mu.Unlock()
				case errors.Is(err, mdriver.ErrNoDocuments):
				case isWriteConflict(err):
					conflicts.Add(1)
				default:
					t.Errorf("round %d goroutine %d: %v", r, g, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		wins[r] = len(winners)
		if len(winners) == 1 {
			var doc struct {
				Owner int `bson:"owner"`
			}
			if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&doc); err != nil {
				t.Fatalf("round %d: read back: %v", r, err)
			}
			if doc.Owner != winners[0] {
				t.Errorf("round %d: owner = %d, but goroutine %d was told it won", r, doc.Owner, winners[0])
			}
		}
	}
	return wins, int(conflicts.Load())
}

func TestConditionalUpdateHasOneWinner(t *testing.T) {
	t.Parallel()
	coll := connect(t, testServer.URI()).Collection("claims")
	wins, conflicts := raceClaims(t, coll, 100, 20)
	for r, w := range wins {
		if w != 1 {
			t.Errorf("round %d: %d winners, want exactly 1", r, w)
		}
	}
	// Twenty writers released at once on one document overlap: Firestore
	// answers some of them Aborted (112), and so must strict mode.
	t.Logf("100 rounds of 20 racers: %d answered 112", conflicts)
	if conflicts == 0 {
		t.Error("no racer was answered 112 (WriteConflict): overlapping writes to one document must conflict in strict mode")
	}
}

// TestRawFerretDBIsNotAtomic measures, without asserting, what the front
// protects against: the same race sent straight to FerretDB. Whether it
// shows double winners on a given run depends on scheduling, so it only
// logs; the numbers in docs/emulators-mongo.md come from this log.
func TestRawFerretDBIsNotAtomic(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement only")
	}
	t.Parallel()
	coll := connect(t, testServer.backend).Collection("claims")
	wins, _ := raceClaims(t, coll, 20, 20)
	bad, most := 0, 0
	for _, w := range wins {
		if w != 1 {
			bad++
		}
		most = max(most, w)
	}
	t.Logf("raw FerretDB, no front: %d of %d rounds did not have exactly one winner; most winners in a round: %d", bad, len(wins), most)

	ctx := context.Background()
	counters := coll.Database().Collection("counters")
	if _, err := counters.InsertOne(ctx, bson.D{{Key: "_id", Value: "c"}, {Key: "n", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 20; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				_, _ = counters.UpdateOne(ctx, bson.D{{Key: "_id", Value: "c"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
			}
		}()
	}
	wg.Wait()
	var doc struct {
		N int `bson:"n"`
	}
	if err := counters.FindOne(ctx, bson.D{{Key: "_id", Value: "c"}}).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	t.Logf("raw FerretDB, no front: 20x10 concurrent $inc ended at %d (want 200)", doc.N)
}

// TestConcurrentIncrementsAreNotLost: every increment acknowledged is
// applied, and none answered 112 is. In strict mode, overlapping updates of
// one document get some 112s, so the counter ends at the number
// acknowledged, not at the number sent.
func TestConcurrentIncrementsAreNotLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	coll := connect(t, testServer.URI()).Collection("counters")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "c"}, {Key: "n", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	var acked, conflicts atomic.Int64
	for g := 0; g < 20; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := 0; i < 10; i++ {
				res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "c"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
				switch {
				case isWriteConflict(err):
					conflicts.Add(1)
				case err != nil || res.ModifiedCount != 1:
					t.Errorf("goroutine %d inc %d: modified %v, err %v", g, i, res, err)
				default:
					acked.Add(1)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	var doc struct {
		N int `bson:"n"`
	}
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "c"}}).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	t.Logf("20x10 concurrent $inc: %d acknowledged, %d answered 112", acked.Load(), conflicts.Load())
	if int64(doc.N) != acked.Load() {
		t.Errorf("n = %d after 20x10 concurrent $inc, want %d (the increments acknowledged)", doc.N, acked.Load())
	}
	if conflicts.Load() == 0 {
		t.Error("no increment was answered 112: many concurrent updates of one document must see some in strict mode")
	}
}

// TestRefusals sends, through an ordinary driver, what Firestore (or baton's
// stand-in for it) refuses, and checks the explaining error and that nothing
// was written.
func TestRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := connect(t, testServer.URI())
	coll := db.Collection("refused")

	tests := []struct {
		name     string
		cmd      bson.D
		code     int32
		codeName string
		mention  string
	}{
		{
			name: "retryable write (txnNumber)",
			cmd: bson.D{{Key: "insert", Value: "refused"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: "a"}}}},
				{Key: "txnNumber", Value: int64(1)}},
			code: 20, codeName: "IllegalOperation", mention: "does not support retryable writes",
		},
		{
			name: "findAndModify with txnNumber",
			cmd: bson.D{{Key: "findAndModify", Value: "refused"}, {Key: "query", Value: bson.D{{Key: "_id", Value: "b"}}},
				{Key: "update", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}}, {Key: "upsert", Value: true},
				{Key: "txnNumber", Value: int64(7)}},
			code: 20, codeName: "IllegalOperation", mention: "txnNumber",
		},
		{
			name: "startTransaction",
			cmd: bson.D{{Key: "insert", Value: "refused"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: "c"}}}},
				{Key: "startTransaction", Value: true}, {Key: "autocommit", Value: false}},
			code: 20, codeName: "IllegalOperation", mention: "does not support transactions",
		},
		{
			name: "commitTransaction",
			cmd:  bson.D{{Key: "commitTransaction", Value: 1}},
			code: 20, codeName: "IllegalOperation", mention: "does not support transactions",
		},
		{
			name: "abortTransaction",
			cmd:  bson.D{{Key: "abortTransaction", Value: 1}},
			code: 20, codeName: "IllegalOperation", mention: "does not support transactions",
		},
		{
			name: "$changeStream aggregate",
			cmd: bson.D{{Key: "aggregate", Value: "refused"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}}},
				{Key: "cursor", Value: bson.D{}}},
			code: 40573, codeName: "Location40573", mention: "change streams",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := db.RunCommand(ctx, tc.cmd).Err()
			var ce mdriver.CommandError
			if !errors.As(err, &ce) {
				t.Fatalf("RunCommand = %v (%T), want a CommandError", err, err)
			}
			if ce.Code != tc.code || ce.Name != tc.codeName || !strings.Contains(ce.Message, tc.mention) {
				t.Errorf("error (-want,+got):\n- code %d %s, message containing %q\n+ code %d %s, message %q",
					tc.code, tc.codeName, tc.mention, ce.Code, ce.Name, ce.Message)
			}
		})
	}

	t.Run("Watch", func(t *testing.T) {
		_, err := coll.Watch(ctx, mdriver.Pipeline{})
		var ce mdriver.CommandError
		if !errors.As(err, &ce) || ce.Code != 40573 || !strings.Contains(ce.Message, "poll") {
			t.Errorf("Watch = %v, want code 40573 explaining to poll", err)
		}
	})

	n, err := coll.CountDocuments(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d documents written by refused commands, want 0", n)
	}
	// The connection is still good after refusals.
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "ok"}}); err != nil {
		t.Errorf("plain insert after refusals: %v", err)
	}
}

// TestDriverTransactionRefused drives a real driver session transaction:
// whatever the driver does first, no document may be written.
func TestDriverTransactionRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := connect(t, testServer.URI())
	coll := db.Collection("txn")
	sess, err := db.Client().StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		return coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "t"}})
	})
	if err == nil {
		t.Fatal("transaction committed, want a refusal")
	}
	t.Logf("driver transaction: %v", err)
	n, err := coll.CountDocuments(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("transaction wrote %d documents, want 0", n)
	}
}
