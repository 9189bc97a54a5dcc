package emutest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/baton-cron/baton/emulator/mongo"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

var (
	mongoOnce sync.Once
	mongoSrv  *mongo.Server
	mongoErr  error
)

// EnvLax names the environment variable that starts the test emulators in
// lax mode (BATON_EMULATOR_LAX=1), for a developer debugging a test: the
// Mongo emulator then serialises writes, never answers 112, returns
// unsorted results in insertion order and checks no document limits (see
// mongo.Options.Lax). Tests are meant to pass strict, as production is.
const EnvLax = "BATON_EMULATOR_LAX"

// Lax reports whether EnvLax asks for lax emulators.
func Lax() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(EnvLax))) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// MongoURI returns the URI of the package-wide Mongo emulator, starting it
// on first use. It lives until the test binary exits; its data is in a
// temporary directory. The emulator is strict unless EnvLax is set, and
// the URI carries loadBalanced=true, as Firestore's do.
func MongoURI(t testing.TB) string {
	t.Helper()
	mongoOnce.Do(func() {
		mongoSrv, mongoErr = mongo.Start(context.Background(), mongo.Options{Lax: Lax()})
	})
	if mongoErr != nil {
		t.Fatalf("emutest: start mongo emulator: %v", mongoErr)
	}
	return mongoSrv.URI()
}

// MongoStats returns the package-wide Mongo emulator's counters: the 112s
// it answered to overlapping writes, the most writes it ran at once. A
// test reads them before and after what it measures.
func MongoStats(t testing.TB) mongo.Stats {
	t.Helper()
	MongoURI(t)
	return mongoSrv.Stats()
}

// MongoBilling returns what the package-wide Mongo emulator billed
// database db so far, in Firestore's units (mongo.Server.Billing). A test
// reads it before and after the write it prices.
func MongoBilling(t testing.TB, db string) mongo.Billing {
	t.Helper()
	MongoURI(t)
	return mongoSrv.Billing(db)
}

// DBName returns a database name unique to this test.
func DBName(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, t.Name())
	if len(name) > 40 {
		name = name[:40]
	}
	return strings.ToLower(name) + "_" + hex.EncodeToString(b[:])
}

// Store opens a store on a fresh database of the shared emulator and closes
// it when the test ends.
func Store(t testing.TB) *mongostore.Store {
	t.Helper()
	s, err := mongostore.Open(context.Background(), MongoURI(t), mongostore.Options{Database: DBName(t)})
	if err != nil {
		t.Fatalf("emutest: open store: %v", err)
	}
	t.Cleanup(func() {
		_ = Raw(t, s).Drop(context.Background())
		_ = s.Close(context.Background())
	})
	return s
}

var (
	rawMu      sync.Mutex
	rawClients = map[string]*driver.Client{}
)

// RawClient is a plain driver client on uri, for what a test must do
// beside the store: seed in bulk, read back unmetered, run admin
// commands. The store itself offers no raw handle, so that nothing in
// production can step around its metering and its write rules. Clients
// are shared per URI by the whole test binary, and live until it exits.
func RawClient(t testing.TB, uri string) *driver.Client {
	t.Helper()
	rawMu.Lock()
	defer rawMu.Unlock()
	if c, ok := rawClients[uri]; ok {
		return c
	}
	norm, err := mongostore.NormalizeURI(uri)
	if err != nil {
		t.Fatalf("emutest: raw client: %v", err)
	}
	c, err := driver.Connect(options.Client().ApplyURI(norm))
	if err != nil {
		t.Fatalf("emutest: raw client: %v", err)
	}
	rawClients[uri] = c
	return c
}

// Raw is a plain driver handle on the database of st, a store Store
// opened on the shared emulator.
func Raw(t testing.TB, st *mongostore.Store) *driver.Database {
	t.Helper()
	return RawClient(t, MongoURI(t)).Database(st.DatabaseName())
}

// FailCommand turns on the Mongo emulator's failCommand fail point (see
// emulator/mongo), limited to the collection coll of st's database, and
// turns it off when the test ends. mode is "alwaysOn", bson.D{{"times",
// n}} or bson.D{{"skip", n}}. As in mongod there is one fail point per
// emulator, so tests that use it must not run in parallel with each other.
func FailCommand(t testing.TB, st *mongostore.Store, coll string, mode any, commands ...string) {
	t.Helper()
	// 1 is InternalError: a refusal that nothing retries (the driver runs
	// with retryWrites=false; the store retries only 112, and 262 on
	// inserts) and that no one takes for the server going away. A test of
	// the store's retries injects those codes with FailCommandCode.
	FailCommandCode(t, st, coll, mode, 1, commands...)
}

// FailCommandCode is FailCommand with the error code chosen: 112 for
// Firestore's Aborted (WriteConflict), 262 for its DeadlineExceeded
// (ExceededTimeLimit). The command does not run.
func FailCommandCode(t testing.TB, st *mongostore.Store, coll string, mode any, code int32, commands ...string) {
	t.Helper()
	failCommand(t, st, coll, mode, bson.D{{Key: "errorCode", Value: code}}, commands)
}

// FailCommandCodeAfterRun is the lost answer in Firestore's shape: matching
// commands run, and their reply is then replaced by a top-level error with
// code (the emulator's data.errorCodeAfterRun), e.g. 262 for a write that
// committed while its deadline expired.
func FailCommandCodeAfterRun(t testing.TB, st *mongostore.Store, coll string, mode any, code int32, commands ...string) {
	t.Helper()
	failCommand(t, st, coll, mode, bson.D{{Key: "errorCodeAfterRun", Value: code}}, commands)
}

// FailCommandAfterWrite is FailCommand for the other half of a lost answer:
// matching writes land, and then their reply carries a write concern
// error, so the caller sees a failure for a write that happened.
func FailCommandAfterWrite(t testing.TB, st *mongostore.Store, coll string, mode any, commands ...string) {
	t.Helper()
	failCommand(t, st, coll, mode, bson.D{{Key: "writeConcernError", Value: bson.D{
		{Key: "code", Value: 64}, {Key: "errmsg", Value: "waiting for replication timed out (emulator fail point)"}}}}, commands)
}

// FailCommandDrop is FailCommand for a dropped connection: the emulator
// closes the connection instead of answering matching commands, which
// apply nothing, and the caller sees a network error.
func FailCommandDrop(t testing.TB, st *mongostore.Store, coll string, mode any, commands ...string) {
	t.Helper()
	failCommand(t, st, coll, mode, bson.D{{Key: "closeConnection", Value: true}}, commands)
}

func failCommand(t testing.TB, st *mongostore.Store, coll string, mode any, how bson.D, commands []string) {
	t.Helper()
	names := bson.A{}
	for _, c := range commands {
		names = append(names, c)
	}
	data := append(bson.D{{Key: "failCommands", Value: names}, {Key: "namespace", Value: st.DatabaseName() + "." + coll}}, how...)
	admin := RawClient(t, MongoURI(t)).Database("admin")
	if err := ConfigureFailPoint(admin, mode, data); err != nil {
		t.Fatalf("emutest: configure failCommand: %v", err)
	}
	t.Cleanup(func() { _ = ConfigureFailPoint(admin, "off", nil) })
}

// FailCommandOff turns the fail point off before the test ends.
func FailCommandOff(t testing.TB, st *mongostore.Store) {
	t.Helper()
	if err := ConfigureFailPoint(RawClient(t, MongoURI(t)).Database("admin"), "off", nil); err != nil {
		t.Fatalf("emutest: turn failCommand off: %v", err)
	}
}

// ConfigureFailPoint sends configureFailPoint for failCommand to the
// server of admin (its admin database); data is omitted when nil (mode
// "off"). The FailCommand helpers call it for the shared emulator; a
// harness on another server calls it with its own RawClient.
func ConfigureFailPoint(admin *driver.Database, mode any, data bson.D) error {
	cmd := bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: mode}}
	if data != nil {
		cmd = append(cmd, bson.E{Key: "data", Value: data})
	}
	return admin.RunCommand(context.Background(), cmd).Err()
}
