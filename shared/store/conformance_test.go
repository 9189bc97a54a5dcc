package store_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/storetest"
)

// envTestMongoURI names a MongoDB-API endpoint (a Firestore database with
// MongoDB compatibility, a mongod) to run the conformance suite against as
// well as the emulator. The suite writes to a database of its own there,
// baton_storetest_<random>, and drops it at the end.
const envTestMongoURI = "BATON_TEST_MONGO_URI"

// TestConformance runs the storage conformance suite (shared/store/storetest)
// against the embedded emulator, and against BATON_TEST_MONGO_URI when it
// is set. It arms the emulator's one fail point, so it does not run in
// parallel (the parallel tests of the package use other namespaces).
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

func (emulatorHarness) Open(t *testing.T) *store.Store { return emutest.Store(t) }

func (emulatorHarness) Faults(_ *testing.T, st *store.Store) (storetest.Faults, string) {
	return failPoint{st: st, answerLost: true}, ""
}

// failPoint injects faults through MongoDB's failCommand fail point, which
// the emulator implements (emulator/mongo) and a mongod started with
// enableTestCommands=1 has. answerLost says whether the server knows the
// emulator's errorCodeAfterRun, which mongod does not.
type failPoint struct {
	st         *store.Store
	answerLost bool
}

func (f failPoint) Refuse(t *testing.T, coll string, times int, code int32, commands ...string) {
	t.Helper()
	emutest.FailCommandCode(t, f.st, coll, bson.D{{Key: "times", Value: times}}, code, commands...)
}

func (f failPoint) LoseAnswer(t *testing.T, coll string, times int, code int32, commands ...string) {
	t.Helper()
	if !f.answerLost {
		t.Skip("the endpoint's failCommand has no errorCodeAfterRun (the emulator's addition), so a landed write's lost answer cannot be injected")
	}
	emutest.FailCommandCodeAfterRun(t, f.st, coll, bson.D{{Key: "times", Value: times}}, code, commands...)
}

// uriHarness runs the suite on a real endpoint: one database per run,
// named at random and dropped when the run ends, in which each case uses
// collections of its own; a Store per case, so each case has its own
// Meter. Faults are injected only if the endpoint accepts
// configureFailPoint, probed once.
type uriHarness struct {
	uri, db string

	probe      sync.Once
	faults     bool   // configureFailPoint is accepted
	answerLost bool   // and knows errorCodeAfterRun
	why        string // why there are no faults
}

func newURIHarness(t *testing.T, uri string) *uriHarness {
	var b [6]byte
	_, _ = rand.Read(b[:])
	h := &uriHarness{uri: uri, db: "baton_storetest_" + hex.EncodeToString(b[:])}
	// One connection up front, so that a wrong URI fails once rather
	// than in every case; it drops the database at the end.
	st, err := store.Open(t.Context(), uri, store.Options{Database: h.db})
	if err != nil {
		t.Fatalf("open %s: %v", envTestMongoURI, err)
	}
	t.Logf("writing to database %s on %s (dropped at the end)", h.db, envTestMongoURI)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := st.Database().Drop(ctx); err != nil {
			t.Errorf("drop the suite's database %s: %v; drop it by hand", h.db, err)
		}
		_ = st.Close(ctx)
	})
	return h
}

func (h *uriHarness) Open(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), h.uri, store.Options{Database: h.db})
	if err != nil {
		t.Fatalf("open %s: %v", envTestMongoURI, err)
	}
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	return st
}

func (h *uriHarness) Faults(t *testing.T, st *store.Store) (storetest.Faults, string) {
	h.probe.Do(func() { h.probeFaults(t, st) })
	if !h.faults {
		return nil, h.why
	}
	return failPoint{st: st, answerLost: h.answerLost}, ""
}

// probeFaults asks the endpoint to turn the fail point off, which
// changes nothing where it exists: Firestore refuses the command. Then it
// arms errorCodeAfterRun once on a collection of its own, and inserts: a
// server that ignores the option answers the insert with success.
func (h *uriHarness) probeFaults(t *testing.T, st *store.Store) {
	ctx := t.Context()
	admin := st.Database().Client().Database("admin")
	off := bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}}
	if err := admin.RunCommand(ctx, off).Err(); err != nil {
		h.why = "the endpoint refused configureFailPoint: " + err.Error()
		return
	}
	h.faults = true
	const probe = "storetest_probe"
	arm := bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"insert"}},
			{Key: "namespace", Value: h.db + "." + probe}, {Key: "errorCodeAfterRun", Value: storetest.CodeDeadlineExceeded}}}}
	if err := admin.RunCommand(ctx, arm).Err(); err != nil {
		return
	}
	defer func() { _ = admin.RunCommand(context.Background(), off).Err() }()
	_, err := st.Database().Collection(probe).InsertOne(ctx, bson.D{{Key: "_id", Value: "probe"}})
	var ce mongo.CommandError
	h.answerLost = errors.As(err, &ce) && ce.Code == storetest.CodeDeadlineExceeded
}
