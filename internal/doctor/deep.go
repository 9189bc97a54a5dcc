package doctor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/storage"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"google.golang.org/api/option"

	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// DeepConfig names the deployment Deep proves: the same settings the
// functions read (BATON_MONGO_URI, BATON_DATABASE, BATON_BUCKET, and
// STORAGE_EMULATOR_HOST where one is set).
type DeepConfig struct {
	// MongoURI and Database open the database as the functions do.
	MongoURI, Database string
	// Bucket is baton's bucket; "" skips the Cloud Storage checks.
	Bucket string
	// StorageOptions are passed to the storage client; nil opens it as the
	// functions do (Application Default Credentials, or
	// STORAGE_EMULATOR_HOST).
	StorageOptions []option.ClientOption
	// Scratch begins the name of every collection and object Deep writes;
	// "" draws one, ScratchPrefix plus random hex. Deep removes them all
	// when it ends, however it ends.
	Scratch string
	// Racers is how many conditional writers race one document (0: 20).
	Racers int
	// LatencyWrites is how many conditional writes the latency is measured
	// over (0: 30).
	LatencyWrites int
	// IndexProbe runs the createIndexes probe on a scratch collection. Off
	// by default: the functions never send it (Terraform declares the
	// indexes), and on Firestore an index made so outlives its collection
	// and dropIndexes is refused, so it would be left behind.
	IndexProbe bool
	// RateWrites bounds the writes to one object in the per-object rate
	// check (0: 12); RateWindow bounds its time (0: 10s).
	RateWrites int
	RateWindow time.Duration
}

// ScratchPrefix begins the scratch names Deep draws: collections
// baton_doctor_<hex>_…, objects baton_doctor_<hex>_/… in the bucket (not
// under leases/, which a lifecycle rule might cover).
const ScratchPrefix = "baton_doctor_"

// Defaults of DeepConfig's bounds.
const (
	defaultRacers        = 20
	defaultLatencyWrites = 30
	defaultRateWrites    = 12
	defaultRateWindow    = 10 * time.Second
	// probeTimeout bounds one probe, so a server that hangs on a shape
	// fails that row instead of the whole run.
	probeTimeout = 30 * time.Second
	// cleanupTimeout bounds the removal of the scratch data, which runs on
	// a context of its own: an interrupt must not stop it.
	cleanupTimeout = time.Minute
)

// deepEnv is what the checks share: the scratch store, a raw client on the
// same database for what the store has no method for (explain, drop), and
// the counts of the work done, for the cost line.
type deepEnv struct {
	c       DeepConfig
	st      *mongostore.Store
	raw     *mongo.Database
	scratch string
	now     time.Time
	// extraReads and extraWrites count what the store's meter does not
	// see: explains, index creation, drops.
	mu          sync.Mutex
	extraReads  int64
	extraWrites int64
	gcsOps      int64
	// indexMade says the index probe created the scratch index, which the
	// cleanup drops.
	indexMade bool
}

func (e *deepEnv) count(reads, writes, gcs int64) {
	e.mu.Lock()
	e.extraReads += reads
	e.extraWrites += writes
	e.gcsOps += gcs
	e.mu.Unlock()
}

// Deep proves a deployment by using it: in scratch collections and a
// scratch object prefix it creates and removes, it runs every command
// shape baton sends (a probe per store operation, derived from the
// conformance suite, shared/store/storetest), explains the hot queries
// against the real collections (explain plans and reads nothing), races
// conditional writers on one document, measures the latency of a
// conditional write, and checks the bucket's preconditions and its
// per-object write rate. Every finding is a row of the report; nothing is
// an error. The scratch data is removed on every path, ctx's end included.
func Deep(ctx context.Context, c DeepConfig) *Report {
	r := &Report{Mode: "deep"}
	if c.Racers <= 0 {
		c.Racers = defaultRacers
	}
	if c.LatencyWrites <= 0 {
		c.LatencyWrites = defaultLatencyWrites
	}
	if c.RateWrites <= 0 {
		c.RateWrites = defaultRateWrites
	}
	if c.RateWindow <= 0 {
		c.RateWindow = defaultRateWindow
	}
	scratch := c.Scratch
	if scratch == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		scratch = ScratchPrefix + hex.EncodeToString(b[:]) + "_"
	}
	e := &deepEnv{c: c, scratch: scratch, now: time.Now().UTC().Truncate(time.Millisecond)}

	if c.MongoURI == "" {
		r.fail("deep: database", "BATON_MONGO_URI is unset", "set BATON_MONGO_URI (and BATON_DATABASE) as the functions have them: terraform output cli_env, or . DATA_DIR/env for baton local")
	} else if err := e.open(ctx); err != nil {
		r.fail("deep: database", err.Error(), "check BATON_MONGO_URI and BATON_DATABASE; baton doctor (without --deep) says more")
	} else {
		defer e.closeMongo(ctx)
		r.pass("deep: database", fmt.Sprintf("database %s, scratch collections %s*", e.st.DatabaseName(), scratch))
		func() {
			// Removed however the checks end: a panic, an interrupt (ctx),
			// a failure.
			defer e.cleanupMongo(ctx, r)
			e.probes(ctx, r)
			e.explains(ctx, r)
			e.race(ctx, r)
			e.latency(ctx, r)
		}()
	}
	if c.Bucket == "" {
		r.skip("gcs", "BATON_BUCKET is unset: no bucket to check")
	} else {
		e.gcs(ctx, r)
	}
	e.cost(r)
	return r.finish()
}

// open connects the scratch store and the raw client, as the functions
// open theirs.
func (e *deepEnv) open(ctx context.Context) error {
	e.st = nil
	st, err := mongostore.Open(ctx, e.c.MongoURI, mongostore.Options{Database: e.c.Database, CollectionPrefix: e.scratch, ConnectTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	norm, err := mongostore.NormalizeURI(e.c.MongoURI)
	if err != nil {
		_ = st.Close(context.WithoutCancel(ctx))
		return err
	}
	cl, err := mongo.Connect(options.Client().ApplyURI(norm).SetRetryWrites(false))
	if err != nil {
		_ = st.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("deep: connect: %w", err)
	}
	e.st = st
	e.raw = cl.Database(st.DatabaseName())
	return nil
}

// closeMongo closes the store and the raw client. The raw client is
// disconnected under a context that has already ended, as mongostore's
// Close does: the driver then skips the endSessions it would send to the
// admin database, which a Firestore connection, "limited to a single ...
// database"
// (https://cloud.google.com/firestore/mongodb-compatibility/docs/behavior-differences),
// may refuse.
func (e *deepEnv) closeMongo(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = e.st.Close(cctx)
	ended, end := context.WithCancel(context.WithoutCancel(ctx))
	end()
	_ = e.raw.Client().Disconnect(ended)
}

// cleanupMongo deletes the documents of every scratch collection, then
// drops it where the server has drop (Firestore does not: a collection
// without documents is gone there), and drops the scratch index when the
// index probe made one. It runs on a context of its own, so that an
// interrupt that ended ctx still leaves nothing behind.
func (e *deepEnv) cleanupMongo(ctx context.Context, r *Report) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	byHand := "delete the documents of the collections named " + e.scratch + "* by hand (mongosh: db.getCollectionNames().filter(n => n.startsWith('" + e.scratch + "')).forEach(n => db[n].deleteMany({})))"
	names, err := e.raw.ListCollectionNames(cctx, bson.D{{Key: "name", Value: bson.D{{Key: "$regex", Value: "^" + e.scratch}}}})
	if err != nil {
		// A server without $regex in listCollections' filter: list all.
		if names, err = e.raw.ListCollectionNames(cctx, bson.D{}); err != nil {
			r.fail("deep: cleanup", fmt.Sprintf("list the scratch collections %s*: %v", e.scratch, err), byHand)
			return
		}
	}
	var removed, failed []string
	var docs int64
	for _, n := range names {
		if !strings.HasPrefix(n, e.scratch) {
			continue
		}
		coll := e.raw.Collection(n)
		if e.indexMade && n == e.scratch+indexProbeCollection {
			if err := coll.Indexes().DropOne(cctx, indexProbeName); err != nil && !isNamespaceNotFound(err) {
				failed = append(failed, fmt.Sprintf("drop the scratch index %s.%s: %v (on Firestore: gcloud firestore indexes composite list --database=DATABASE, then delete the one on collection group %s)", n, indexProbeName, err, n))
			}
		}
		res, err := coll.DeleteMany(cctx, bson.D{})
		if err != nil {
			failed = append(failed, fmt.Sprintf("delete the documents of %s: %v", n, err))
			continue
		}
		docs += res.DeletedCount
		// Where the server has drop, the empty collection goes too; where
		// it does not (Firestore), it is gone already.
		_ = coll.Drop(cctx)
		removed = append(removed, n)
	}
	e.count(docs, docs, 0) // Firestore bills a delete as a write, and the read that found the document
	if len(failed) > 0 {
		r.fail("deep: cleanup", strings.Join(failed, "; "), byHand)
		return
	}
	r.pass("deep: cleanup", fmt.Sprintf("deleted %d scratch documents in %d collections (%s*)", docs, len(removed), e.scratch))
}

// isNamespaceNotFound reports an index or collection that is not there
// (NamespaceNotFound 26, IndexNotFound 27): nothing to remove.
func isNamespaceNotFound(err error) bool {
	var ce mongo.CommandError
	return errors.As(err, &ce) && (ce.Code == 26 || ce.Code == 27 || ce.Name == "NamespaceNotFound" || ce.Name == "IndexNotFound")
}

// cost states what the run read and wrote, counted: the store's meter
// (documents, as Firestore bills them), the explains, drops and index
// operations the doctor made itself, and the Cloud Storage operations.
func (e *deepEnv) cost(r *Report) {
	var reads, writes int64
	if e.st != nil {
		m := e.st.Meter()
		reads, writes = m.Total(), m.Writes()
	}
	e.mu.Lock()
	reads += e.extraReads
	writes += e.extraWrites
	gcs := e.gcsOps
	e.mu.Unlock()
	r.pass("deep: cost", fmt.Sprintf("%d document reads, %d document writes (the store's meter, plus the explains at one read each and the scratch deletes), %d Cloud Storage operations", reads, writes, gcs))
}

// refusal describes a server's refusal of a command: its code, code name
// and message, for the report. ok is false for an error that is not a
// server's answer (a timeout, a closed connection).
func refusal(err error) (string, bool) {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return fmt.Sprintf("%s (%d): %s", ce.Name, ce.Code, ce.Message), true
	}
	var we mongo.WriteException
	if errors.As(err, &we) && len(we.WriteErrors) > 0 {
		w := we.WriteErrors[0]
		return fmt.Sprintf("write error %d: %s", w.Code, w.Message), true
	}
	return "", false
}

// shapeFix is the fix of a shape the server refused or answered wrongly.
func shapeFix(shape string) string {
	return "baton sends " + shape + " in production: point BATON_MONGO_URI at a Firestore Enterprise database with MongoDB compatibility " +
		"(docs/emulators-mongo.md lists every shape baton sends with the Google page that supports it); if it is one, report this row to baton"
}

// errWrong is a probe's answer that came back but is not what the store's
// contract promises.
var errWrong = errors.New("wrong answer")

// isConflict reports a plain conflict: the losing answer of a conditional
// write.
func isConflict(err error) bool {
	return errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrStaleFence) && !errors.Is(err, store.ErrUnknownOutcome)
}

// newStorage opens the storage client as the functions do, unless the
// config names options.
func (e *deepEnv) newStorage(ctx context.Context) (*storage.Client, error) {
	return storage.NewClient(ctx, e.c.StorageOptions...)
}
