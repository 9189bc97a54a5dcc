package mongostore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/store/mongostore"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/store/storetest"
)

// envTestMongoURI names a MongoDB-API endpoint (a Firestore database with
// MongoDB compatibility, a mongod) to run the conformance suite against as
// well as the emulator. A URI that names no database gets a database of
// the run's own, baton_storetest_<random>, dropped at the end. A URI that
// names one (Firestore's always do: its databases must exist before a
// connection) is written to in collections storetest_<random>_..., and
// only those are dropped at the end.
const envTestMongoURI = "BATON_TEST_MONGO_URI"

func TestConformance(t *testing.T) {
	t.Run("emulator", func(t *testing.T) {
		storetest.Run(t, emulatorHarness{})
	})
	t.Run("uri", func(t *testing.T) {
		uri := os.Getenv(envTestMongoURI)
		if uri == "" {
			t.Skipf("%s is not set; set it to a MongoDB-API endpoint to run the suite there (docs/deploy.md)", envTestMongoURI)
		}
		storetest.Run(t, newURIHarness(t, uri))
	})
}

// emulatorHarness gives each case a fresh database on the package's
// emulator, and faults through its failCommand fail point.
type emulatorHarness struct{}

func (emulatorHarness) Open(t *testing.T) *mongostore.Store { return emutest.Store(t) }

func (emulatorHarness) Faults(t *testing.T, st *mongostore.Store) (storetest.Faults, string) {
	return failPoint{admin: emutest.RawClient(t, emutest.MongoURI(t)).Database("admin"), db: st.DatabaseName(), answerLost: true}, ""
}

// failPoint injects faults through MongoDB's failCommand fail point, which
// the emulator implements (emulator/mongo) and a mongod started with
// enableTestCommands=1 has. answerLost says whether the server knows the
// emulator's errorCodeAfterRun, which mongod does not.
type failPoint struct {
	admin      *mongo.Database // the server's admin database
	db         string          // the database whose commands fail
	answerLost bool
}

func (f failPoint) Refuse(t *testing.T, coll string, times int, code int32, commands ...string) {
	t.Helper()
	f.arm(t, bson.D{{Key: "times", Value: times}}, coll, bson.D{{Key: "errorCode", Value: code}}, commands)
}

func (f failPoint) LoseAnswer(t *testing.T, coll string, times int, code int32, commands ...string) {
	t.Helper()
	if !f.answerLost {
		t.Skip("the endpoint's failCommand has no errorCodeAfterRun (the emulator's addition), so a landed write's lost answer cannot be injected")
	}
	f.arm(t, bson.D{{Key: "times", Value: times}}, coll, bson.D{{Key: "errorCodeAfterRun", Value: code}}, commands)
}

// arm turns failCommand on for commands on coll until t ends.
func (f failPoint) arm(t *testing.T, mode bson.D, coll string, how bson.D, commands []string) {
	t.Helper()
	names := bson.A{}
	for _, c := range commands {
		names = append(names, c)
	}
	data := append(bson.D{{Key: "failCommands", Value: names}, {Key: "namespace", Value: f.db + "." + coll}}, how...)
	if err := emutest.ConfigureFailPoint(f.admin, mode, data); err != nil {
		t.Fatalf("configure failCommand: %v", err)
	}
	t.Cleanup(func() { _ = emutest.ConfigureFailPoint(f.admin, "off", nil) })
}

// uriHarness runs the suite on a real endpoint, in a database of the
// run's own or, when the URI names a database, in collections of the
// run's own there (see envTestMongoURI); a Store per case, so each case
// has its own Meter. Faults are injected only if the endpoint accepts
// configureFailPoint, probed once.
type uriHarness struct {
	uri, db string
	// prefix begins the run's collection names when the database is not
	// the run's own; empty when it is.
	prefix string

	probe      sync.Once
	faults     bool   // configureFailPoint is accepted
	answerLost bool   // and knows errorCodeAfterRun
	why        string // why there are no faults
}

// uriHarnessPrefixed is a uriHarness in a database that is not the run's:
// it names the suite's collections.
type uriHarnessPrefixed struct{ *uriHarness }

func (h uriHarnessPrefixed) CollectionPrefix() string { return h.prefix }

func newURIHarness(t *testing.T, uri string) storetest.Harness {
	cs, err := connstring.Parse(uri)
	if err != nil {
		t.Fatalf("%s: %v", envTestMongoURI, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	run := hex.EncodeToString(b[:])
	h := &uriHarness{uri: uri, db: cs.Database}
	if h.db == "" {
		h.db = "baton_storetest_" + run
	} else {
		h.prefix = storetest.DefaultCollectionPrefix + run + "_"
	}
	// One connection up front, so that a wrong URI fails once rather
	// than in every case; it cleans up at the end.
	st, err := mongostore.Open(t.Context(), uri, mongostore.Options{Database: h.db})
	if err != nil {
		t.Fatalf("open %s: %v", envTestMongoURI, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		defer func() { _ = st.Close(ctx) }()
		raw := emutest.RawClient(t, uri).Database(h.db)
		if h.prefix == "" {
			if err := raw.Drop(ctx); err != nil {
				t.Errorf("drop the suite's database %s: %v; drop it by hand", h.db, err)
			}
			return
		}
		names, err := raw.ListCollectionNames(ctx, bson.D{})
		if err != nil {
			t.Errorf("list the collections of %s to drop the suite's (%s*): %v; drop them by hand", h.db, h.prefix, err)
			return
		}
		for _, n := range names {
			if !strings.HasPrefix(n, h.prefix) {
				continue
			}
			if err := raw.Collection(n).Drop(ctx); err != nil {
				t.Errorf("drop the suite's collection %s.%s: %v; drop it by hand", h.db, n, err)
			}
		}
	})
	if h.prefix == "" {
		t.Logf("writing to database %s (dropped at the end)", h.db)
		return h
	}
	t.Logf("writing to collections %s* of database %s (dropped at the end)", h.prefix, h.db)
	return uriHarnessPrefixed{h}
}

func (h *uriHarness) Open(t *testing.T) *mongostore.Store {
	t.Helper()
	st, err := mongostore.Open(t.Context(), h.uri, mongostore.Options{Database: h.db, CollectionPrefix: storetest.ViewPrefix(t, h.prefix)})
	if err != nil {
		t.Fatalf("open %s: %v", envTestMongoURI, err)
	}
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	return st
}

func (h *uriHarness) Faults(t *testing.T, st *mongostore.Store) (storetest.Faults, string) {
	h.probe.Do(func() { h.probeFaults(t, st) })
	if !h.faults {
		return nil, h.why
	}
	return failPoint{admin: emutest.RawClient(t, h.uri).Database("admin"), db: h.db, answerLost: h.answerLost}, ""
}

// probeFaults asks the endpoint to turn the fail point off, which
// changes nothing where it exists: Firestore refuses the command. Then it
// arms errorCodeAfterRun once on a collection of its own, and inserts: a
// server that ignores the option answers the insert with success.
func (h *uriHarness) probeFaults(t *testing.T, st *mongostore.Store) {
	ctx := t.Context()
	admin := emutest.RawClient(t, h.uri).Database("admin")
	off := bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}}
	if err := admin.RunCommand(ctx, off).Err(); err != nil {
		h.why = "the endpoint refused configureFailPoint: " + err.Error()
		return
	}
	h.faults = true
	probe := h.prefix + "faultprobe"
	arm := bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"insert"}},
			{Key: "namespace", Value: h.db + "." + probe}, {Key: "errorCodeAfterRun", Value: storetest.CodeDeadlineExceeded}}}}
	if err := admin.RunCommand(ctx, arm).Err(); err != nil {
		return
	}
	defer func() { _ = admin.RunCommand(context.Background(), off).Err() }()
	_, err := emutest.RawClient(t, h.uri).Database(h.db).Collection(probe).InsertOne(ctx, bson.D{{Key: "_id", Value: "probe"}})
	var ce mongo.CommandError
	h.answerLost = errors.As(err, &ce) && ce.Code == storetest.CodeDeadlineExceeded
}
