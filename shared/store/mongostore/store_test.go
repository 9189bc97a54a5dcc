package mongostore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/baton-cron/baton/shared/store/mongostore"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/store"
)

func TestNormalizeURI(t *testing.T) {
	t.Parallel()
	firestore := "mongodb://UID:PASS@abc.us-central1.firestore.goog:443/baton?loadBalanced=true&tls=true&authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:gcp,TOKEN_RESOURCE:FIRESTORE"
	tests := []struct {
		in      string
		want    string
		wantErr error // nil, ErrRetryableWrites, or errAny
	}{
		{in: "mongodb://localhost:27017", want: "mongodb://localhost:27017/?retryWrites=false"},
		{in: "mongodb://localhost:27017/", want: "mongodb://localhost:27017/?retryWrites=false"},
		{in: "mongodb://localhost/db", want: "mongodb://localhost/db?retryWrites=false"},
		{in: "mongodb://localhost/db?", want: "mongodb://localhost/db?retryWrites=false"},
		{in: "mongodb://localhost/db?tls=true", want: "mongodb://localhost/db?tls=true&retryWrites=false"},
		{in: "mongodb://h1:1,h2:2/db?replicaSet=rs", want: "mongodb://h1:1,h2:2/db?replicaSet=rs&retryWrites=false"},
		{in: "mongodb+srv://cluster.example.com/db", want: "mongodb+srv://cluster.example.com/db?retryWrites=false"},
		{in: firestore, want: firestore + "&retryWrites=false"},
		{in: "mongodb://localhost/?retryWrites=false", want: "mongodb://localhost/?retryWrites=false"},
		{in: "mongodb://localhost/?retrywrites=FALSE", want: "mongodb://localhost/?retrywrites=FALSE"},
		{in: "mongodb://localhost/?retryWrites=true", wantErr: store.ErrRetryableWrites},
		{in: "mongodb://localhost/?RetryWrites=true&tls=true", wantErr: store.ErrRetryableWrites},
		{in: "mongodb://localhost/?retryWrites=false&retryWrites=true", wantErr: store.ErrRetryableWrites},
		{in: "postgres://localhost/db", wantErr: errAny},
		{in: "localhost:27017", wantErr: errAny},
		{in: "mongodb:///db", wantErr: errAny},
		{in: "mongodb://localhost/?%zz=1", wantErr: errAny},
	}
	for _, tc := range tests {
		got, err := mongostore.NormalizeURI(tc.in)
		switch {
		case tc.wantErr == nil && err != nil:
			t.Errorf("NormalizeURI(%q): unexpected error %v", tc.in, err)
		case errors.Is(tc.wantErr, errAny) && err == nil, tc.wantErr != nil && !errors.Is(tc.wantErr, errAny) && !errors.Is(err, tc.wantErr):
			t.Errorf("NormalizeURI(%q) error = %v, want %v", tc.in, err, tc.wantErr)
		case tc.wantErr == nil:
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("NormalizeURI(%q) (-want,+got):\n%s", tc.in, diff)
			}
		}
		if err != nil && strings.Contains(err.Error(), "PASS") {
			t.Errorf("NormalizeURI(%q) error leaks the password: %v", tc.in, err)
		}
	}
}

var errAny = errors.New("any error")

func TestOpenRefusesRetryableWrites(t *testing.T) {
	t.Parallel()
	_, err := mongostore.Open(context.Background(), emutest.MongoURI(t)+"&retryWrites=true", mongostore.Options{Database: "x"})
	if !errors.Is(err, store.ErrRetryableWrites) {
		t.Fatalf("Open with retryWrites=true = %v, want ErrRetryableWrites", err)
	}
	if !strings.Contains(err.Error(), "Firestore") || !strings.Contains(err.Error(), "retryWrites=false") {
		t.Errorf("error does not explain itself: %v", err)
	}
}

func TestOpenUsesDatabaseFromURI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := emutest.DBName(t)
	// The emulator's URI is mongodb://host:port/?loadBalanced=true: the
	// database goes in the path, before the options.
	s, err := mongostore.Open(ctx, strings.Replace(emutest.MongoURI(t), "/?", "/"+name+"?", 1), mongostore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	defer func() {
		if err := emutest.Raw(t, s).Drop(ctx); err != nil {
			t.Errorf("drop the test database: %v", err)
		}
	}()
	if got := s.DatabaseName(); got != name {
		t.Errorf("database = %q, want %q from the URI path", got, name)
	}
}

type job struct {
	ID    string `bson:"_id"`
	Owner string `bson:"owner,omitempty"`
	N     int    `bson:"n"`
	Fence int64  `bson:"fence,omitempty"`
}

func TestInsertIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := emutest.Store(t).Collection("runs")
	ok, err := c.InsertIdempotent(ctx, job{ID: "r1", N: 1})
	if err != nil || !ok {
		t.Fatalf("first insert = %v, %v; want true, nil", ok, err)
	}
	ok, err = c.InsertIdempotent(ctx, job{ID: "r1", N: 2})
	if err != nil || ok {
		t.Fatalf("duplicate insert = %v, %v; want false, nil", ok, err)
	}
	var got job
	if err := c.Get(ctx, "r1", &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(job{ID: "r1", N: 1}, got); diff != "" {
		t.Errorf("duplicate overwrote the first insert (-want,+got):\n%s", diff)
	}
	if err := c.Get(ctx, "nope", &got); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get missing = %v, want ErrNotFound", err)
	}
}

func TestInsertIdempotentRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := emutest.Store(t).Collection("runs")
	var wg sync.WaitGroup
	var mu sync.Mutex
	inserted := 0
	start := make(chan struct{})
	for g := 0; g < 20; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ok, err := c.InsertIdempotent(ctx, job{ID: "same", N: g})
			if err != nil {
				t.Errorf("goroutine %d: %v", g, err)
			}
			if ok {
				mu.Lock()
				inserted++
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	if inserted != 1 {
		t.Errorf("%d goroutines inserted the same _id, want 1", inserted)
	}
}

func TestEnsureIndexesUnique(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := emutest.Store(t)
	idx := mongostore.Index{Collection: "slots", Name: "jobId_unique", Keys: bson.D{{Key: "jobId", Value: 1}}, Unique: true}
	if err := s.EnsureIndexes(ctx, idx); err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureIndexes(ctx, idx); err != nil {
		t.Fatalf("EnsureIndexes twice: %v", err)
	}
	c := s.Collection("slots")
	ok, err := c.InsertIdempotent(ctx, bson.D{{Key: "_id", Value: "s1"}, {Key: "jobId", Value: "j"}})
	if err != nil || !ok {
		t.Fatalf("insert s1 = %v, %v", ok, err)
	}
	// Another _id with the same unique key is also "already done".
	ok, err = c.InsertIdempotent(ctx, bson.D{{Key: "_id", Value: "s2"}, {Key: "jobId", Value: "j"}})
	if err != nil || ok {
		t.Fatalf("insert s2 with a taken jobId = %v, %v; want false, nil", ok, err)
	}
	n, err := c.Count(ctx, bson.D{})
	if err != nil || n != 1 {
		t.Errorf("count = %d, %v; want 1", n, err)
	}
}

// TestEnsureIndexOnIDAlone: Firestore needs an index on _id declared (it
// has none of its own); here it is a no-op over the built-in one, and
// must not be refused for carrying unique: false.
func TestEnsureIndexOnIDAlone(t *testing.T) {
	t.Parallel()
	s := emutest.Store(t)
	idx := mongostore.Index{Collection: "schedules", Name: "list", Keys: bson.D{{Key: "_id", Value: 1}}}
	if err := s.EnsureIndexes(context.Background(), idx); err != nil {
		t.Fatalf("EnsureIndexes on _id alone: %v", err)
	}
}

func TestConditionalWritesReturnConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := emutest.Store(t).Collection("jobs")
	if _, err := c.InsertIdempotent(ctx, job{ID: "j", N: 1}); err != nil {
		t.Fatal(err)
	}
	set := func(n int) bson.D { return bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: n}}}} }
	if err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: "j"}, {Key: "n", Value: 1}}, set(2)); err != nil {
		t.Fatalf("update with the right old value: %v", err)
	}
	if err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: "j"}, {Key: "n", Value: 1}}, set(3)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("update with a stale old value = %v, want ErrConflict", err)
	}
	var after job
	if err := c.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: "j"}, {Key: "n", Value: 2}}, set(4), &after); err != nil {
		t.Fatal(err)
	}
	if after.N != 4 {
		t.Errorf("FindOneAndUpdate returned n=%d, want the document after the update (4)", after.N)
	}
	if err := c.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: "j"}, {Key: "n", Value: 2}}, set(5), &after); !errors.Is(err, store.ErrConflict) {
		t.Errorf("FindOneAndUpdate stale = %v, want ErrConflict", err)
	}
	if err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: "j"}, {Key: "n", Value: 3}}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("DeleteOne stale = %v, want ErrConflict", err)
	}
	if err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: "j"}, {Key: "n", Value: 4}}); err != nil {
		t.Errorf("DeleteOne: %v", err)
	}
}

// TestFindOneAndUpdateClaimRace: the store's compare-and-set, raced through
// the emulator, has exactly one winner per round. (The 100-round version of
// this race, on the raw driver, is in emulator/mongo; 25 rounds here keep
// the package quick under -race.)
func TestFindOneAndUpdateClaimRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := emutest.Store(t).Collection("claims")
	for r := 0; r < 25; r++ {
		id := fmt.Sprintf("j%03d", r)
		if _, err := c.InsertIdempotent(ctx, bson.D{{Key: "_id", Value: id}, {Key: "owner", Value: nil}}); err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var winners []string
		for g := 0; g < 20; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				me := fmt.Sprintf("w%02d", g)
				var after job
				err := c.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: id}, {Key: "owner", Value: nil}},
					bson.D{{Key: "$set", Value: bson.D{{Key: "owner", Value: me}}}}, &after)
				switch {
				case err == nil:
					mu.Lock()
					winners = append(winners, me)
					mu.Unlock()
					if after.Owner != me {
						t.Errorf("round %d: %s won but the returned owner is %q", r, me, after.Owner)
					}
				case !errors.Is(err, store.ErrConflict):
					t.Errorf("round %d: %s: %v", r, me, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 {
			t.Errorf("round %d: winners %v, want exactly one", r, winners)
		}
	}
}

// TestConcurrentIncrements: no acknowledged increment is lost, and none
// reported not applied was applied. The strict emulator answers 112 to
// overlapping writes on one document, as Firestore does under contention;
// an increment whose 112s outlast the store's retries is reported as not
// applied (a conflict), so the counter ends at the number acknowledged.
func TestConcurrentIncrements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := emutest.Store(t).Collection("counters")
	if _, err := c.InsertIdempotent(ctx, job{ID: "c"}); err != nil {
		t.Fatal(err)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	var acked, refused atomic.Int64
	for g := 0; g < 20; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := 0; i < 10; i++ {
				err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: "c"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
				var se mongo.ServerError
				switch {
				case err == nil:
					acked.Add(1)
				case errors.Is(err, store.ErrConflict), errors.As(err, &se) && se.HasErrorCode(112):
					refused.Add(1) // not applied: contention outlasted the retries
				default:
					t.Errorf("inc: %v", err)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	var got job
	if err := c.Get(ctx, "c", &got); err != nil {
		t.Fatal(err)
	}
	t.Logf("20x10 concurrent $inc: %d acknowledged, %d not applied (contention)", acked.Load(), refused.Load())
	if int64(got.N) != acked.Load() {
		t.Errorf("n = %d after 20x10 $inc, want %d (the increments acknowledged)", got.N, acked.Load())
	}
}

func TestFencedUpdate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := emutest.Store(t).Collection("schedules")
	if _, err := c.InsertIdempotent(ctx, job{ID: "s", N: 0}); err != nil {
		t.Fatal(err)
	}
	byID := bson.D{{Key: "_id", Value: "s"}}
	set := func(n int) bson.D { return bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: n}}}} }
	get := func() job {
		t.Helper()
		var j job
		if err := c.Get(ctx, "s", &j); err != nil {
			t.Fatal(err)
		}
		return j
	}

	// A document never fenced accepts any epoch.
	if err := c.FencedUpdate(ctx, byID, store.Fence{Epoch: 5}, set(1)); err != nil {
		t.Fatalf("epoch 5 on an unfenced document: %v", err)
	}
	// The same holder writes again.
	if err := c.FencedUpdate(ctx, byID, store.Fence{Epoch: 5}, set(2)); err != nil {
		t.Fatalf("epoch 5 again: %v", err)
	}
	// A newer holder wins.
	if err := c.FencedUpdate(ctx, byID, store.Fence{Epoch: 6}, set(3)); err != nil {
		t.Fatalf("epoch 6: %v", err)
	}
	if diff := cmp.Diff(job{ID: "s", N: 3, Fence: 6}, get()); diff != "" {
		t.Errorf("after epoch 6 (-want,+got):\n%s", diff)
	}
	// The old holder wakes up: refused, document unchanged.
	err := c.FencedUpdate(ctx, byID, store.Fence{Epoch: 5}, set(99))
	if !errors.Is(err, store.ErrStaleFence) || !errors.Is(err, store.ErrConflict) {
		t.Errorf("epoch 5 after 6 = %v, want ErrStaleFence (wrapping ErrConflict)", err)
	}
	if diff := cmp.Diff(job{ID: "s", N: 3, Fence: 6}, get()); diff != "" {
		t.Errorf("stale write changed the document (-want,+got):\n%s", diff)
	}
	// A condition that no longer holds is a conflict, not a stale fence.
	err = c.FencedUpdate(ctx, bson.D{{Key: "_id", Value: "s"}, {Key: "n", Value: 2}}, store.Fence{Epoch: 7}, set(4))
	if !errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrStaleFence) {
		t.Errorf("stale condition = %v, want ErrConflict but not ErrStaleFence", err)
	}
	// So is a missing document.
	err = c.FencedUpdate(ctx, bson.D{{Key: "_id", Value: "missing"}}, store.Fence{Epoch: 7}, set(4))
	if !errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrStaleFence) {
		t.Errorf("missing document = %v, want ErrConflict but not ErrStaleFence", err)
	}
	// A custom fence field and an update with its own $set.
	err = c.FencedUpdate(ctx, byID, store.Fence{Field: "leaseEpoch", Epoch: 1},
		bson.D{{Key: "$set", Value: bson.D{{Key: "owner", Value: "x"}}}, {Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	var raw bson.M
	if err := c.Get(ctx, "s", &raw); err != nil {
		t.Fatal(err)
	}
	want := bson.M{"_id": "s", "n": int64(4), "fence": int64(6), "owner": "x", "leaseEpoch": int64(1)}
	if diff := cmp.Diff(want, normalizeInts(raw)); diff != "" {
		t.Errorf("custom fence field (-want,+got):\n%s", diff)
	}
}

// normalizeInts maps int32 to int64 so comparisons do not depend on how the
// server stored a small number.
func normalizeInts(m bson.M) bson.M {
	out := bson.M{}
	for k, v := range m {
		if i, ok := v.(int32); ok {
			v = int64(i)
		}
		out[k] = v
	}
	return out
}

// TestFencedUpdateStaleWhenTheNewerHolderMovedTheCondition: the usual
// fenced write holds the value its holder read (a tick's advance holds the
// old nextRunAt). Once the newer holder has written, that value is gone
// too, so a re-read by the caller's filter finds nothing and used to call
// the refusal a plain conflict: a stale tick took it for an edit that wins
// and went on deciding. The stored fence is what tells them apart.
func TestFencedUpdateStaleWhenTheNewerHolderMovedTheCondition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := emutest.Store(t).Collection("schedules")
	if _, err := c.InsertIdempotent(ctx, job{ID: "s", N: 1}); err != nil {
		t.Fatal(err)
	}
	set := func(n int) bson.D { return bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: n}}}} }
	read := bson.D{{Key: "_id", Value: "s"}, {Key: "n", Value: 1}}
	// The newer holder (epoch 6) advances from the value both read.
	if err := c.FencedUpdate(ctx, read, store.Fence{Epoch: 6}, set(2)); err != nil {
		t.Fatal(err)
	}
	// The older holder (epoch 5) wakes with the same read.
	err := c.FencedUpdate(ctx, read, store.Fence{Epoch: 5}, set(3))
	if !errors.Is(err, store.ErrStaleFence) {
		t.Errorf("older holder after the newer one moved the value = %v, want ErrStaleFence", err)
	}
	// A same-or-newer holder that meets a moved value is in a plain
	// conflict (an edit).
	err = c.FencedUpdate(ctx, read, store.Fence{Epoch: 6}, set(3))
	if !errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrStaleFence) {
		t.Errorf("same holder, moved value = %v, want ErrConflict but not ErrStaleFence", err)
	}
}

// TestFencedUpdateNeedsAnID: the stale-fence check re-reads the document by
// _id, so a filter without one is a programming error, reported as such
// before anything is written, never as a conflict a caller would take for
// an edit.
func TestFencedUpdateNeedsAnID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := emutest.Store(t).Collection("schedules")
	if _, err := c.InsertIdempotent(ctx, job{ID: "s", N: 1}); err != nil {
		t.Fatal(err)
	}
	err := c.FencedUpdate(ctx, bson.D{{Key: "n", Value: 1}}, store.Fence{Epoch: 1}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 2}}}})
	if err == nil || errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "_id") {
		t.Errorf("filter without _id = %v, want an error naming _id, not a conflict", err)
	}
	var j job
	if err := c.Get(ctx, "s", &j); err != nil {
		t.Fatal(err)
	}
	if j.N != 1 || j.Fence != 0 {
		t.Errorf("after the refused call: %+v, want it unchanged", j)
	}
}

// TestEnsureIndexesReplacesChangedKeys: a local database kept across
// versions (baton local's data dir) holds an index under a name whose
// keys a newer version changed (runs.all became (vshard, fireTime, _id));
// EnsureIndexes replaces it rather than failing the start.
func TestEnsureIndexesReplacesChangedKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := emutest.Store(t)
	old := mongostore.Index{Collection: "runs", Name: "all", Keys: bson.D{{Key: "fireTime", Value: -1}, {Key: "_id", Value: -1}}}
	now := mongostore.Index{Collection: "runs", Name: "all", Keys: bson.D{{Key: "vshard", Value: 1}, {Key: "fireTime", Value: -1}, {Key: "_id", Value: -1}}}
	if err := s.EnsureIndexes(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureIndexes(ctx, now); err != nil {
		t.Fatalf("EnsureIndexes with the keys changed: %v", err)
	}
	cur, err := emutest.Raw(t, s).Collection("runs").Indexes().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var specs []struct {
		Name string `bson:"name"`
		Key  bson.D `bson:"key"`
	}
	if err := cur.All(ctx, &specs); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, sp := range specs {
		if sp.Name == "all" {
			found = true
			if fmt.Sprint(sp.Key) != fmt.Sprint(now.Keys) {
				t.Errorf("index all has keys %v; want %v", sp.Key, now.Keys)
			}
		}
	}
	if !found {
		t.Errorf("no index all after EnsureIndexes: %v", specs)
	}
}
