package mongostore

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/wire"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// DefaultDatabase is used when neither the URI path nor Options name one.
const DefaultDatabase = "baton"

// MinPageKeyLen is the shortest Options.PageKey accepted: 32 bytes (256
// bits, SHA-256's output size), past any guessing.
const MinPageKeyLen = 32

// Options configures Open.
type Options struct {
	// Database overrides the database named in the URI path.
	Database string
	// Meter receives read and write counts; nil makes a new one.
	Meter *store.Meter
	// PageKey signs page tokens, so that a token the caller edits or makes
	// up is refused rather than read into a query. It must be secret, and
	// at least MinPageKeyLen bytes: a public key (as baton once had) lets
	// anyone sign a token. Every instance that serves one list must share
	// it (BATON_PAGE_TOKEN_SECRET). Empty draws a random key, which only
	// this Store knows: right for a single process (baton local, baton
	// daemon, tests), wrong behind a load balancer, where the next page
	// may be asked of another instance.
	PageKey []byte
	// ConnectTimeout bounds the initial ping; default 10s.
	ConnectTimeout time.Duration
	// CollectionPrefix begins the name of every collection the domain
	// views (Schedules, Runs, Catalog, GPU) use. Empty in production; the
	// conformance suite sets it to run in a shared database without
	// touching baton's own collections.
	CollectionPrefix string
	// Recorder notes the shape of every command the store sends (the
	// wire inventory, docs/emulators-mongo.md). Nil means the process's
	// recorder when BATON_MONGO_WIRELOG is set, and none otherwise.
	Recorder *wire.Recorder
}

// Store is a connected database handle. It is safe for concurrent use.
type Store struct {
	client  *mongo.Client
	db      *mongo.Database
	meter   *store.Meter
	pageKey []byte
	prefix  string
}

// NormalizeURI checks a connection string for Firestore compatibility. It
// adds retryWrites=false when the URI says nothing, and refuses
// retryWrites=true with store.ErrRetryableWrites. Everything else in the URI is
// kept byte for byte (a re-encoded query would mangle values such as
// authMechanismProperties=ENVIRONMENT:gcp,TOKEN_RESOURCE:FIRESTORE), and
// multi-host URIs, which net/url cannot parse, are accepted.
func NormalizeURI(uri string) (string, error) {
	p, err := splitURI(uri)
	if err != nil {
		return "", err
	}
	q, err := url.ParseQuery(p.query)
	if err != nil {
		return "", fmt.Errorf("store: open %s: query: %w", redact(uri), err)
	}
	for k, vs := range q {
		if strings.EqualFold(k, "retryWrites") {
			for _, v := range vs {
				if !strings.EqualFold(v, "false") {
					return "", fmt.Errorf("store: open %s: %w", redact(uri), store.ErrRetryableWrites)
				}
			}
			return uri, nil
		}
	}
	switch {
	case p.hasQuery && (p.query == "" || strings.HasSuffix(p.query, "&")):
		return uri + "retryWrites=false", nil
	case p.hasQuery:
		return uri + "&retryWrites=false", nil
	case p.hasPath:
		return uri + "?retryWrites=false", nil
	default:
		return uri + "/?retryWrites=false", nil
	}
}

// uriParts is a MongoDB connection string cut at its separators:
// scheme://[userinfo@]hosts[/database][?query].
type uriParts struct {
	hosts    string
	database string
	hasPath  bool
	query    string
	hasQuery bool
}

func splitURI(uri string) (uriParts, error) {
	var p uriParts
	rest, ok := strings.CutPrefix(uri, "mongodb://")
	if !ok {
		rest, ok = strings.CutPrefix(uri, "mongodb+srv://")
	}
	if !ok {
		return p, fmt.Errorf("store: open: %q is not a mongodb:// or mongodb+srv:// URI", redact(uri))
	}
	rest, p.query, p.hasQuery = strings.Cut(rest, "?")
	p.hosts, p.database, p.hasPath = strings.Cut(rest, "/")
	if at := strings.LastIndex(p.hosts, "@"); at >= 0 {
		p.hosts = p.hosts[at+1:]
	}
	if p.hosts == "" {
		return p, fmt.Errorf("store: open: %q names no host", redact(uri))
	}
	db, err := url.PathUnescape(p.database)
	if err != nil {
		return p, fmt.Errorf("store: open %s: database name: %w", redact(uri), err)
	}
	p.database = db
	return p, nil
}

// redact hides the password of a connection string, for error messages
// (which `baton doctor` prints in its table and JSON). The userinfo runs
// from scheme:// to the LAST "@" that is followed by a host list, not to the
// first "/", "?" or "@": a password may hold any of those unescaped (the
// driver refuses such a URI, and the refusal is exactly what gets printed).
// The user is kept, the password masked. An "@" in the query (appName=a@b)
// can only make it mask too much, never too little.
func redact(uri string) string {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return "<not a URI>"
	}
	at := -1
	for i := strings.LastIndex(rest, "@"); i >= 0; i = strings.LastIndex(rest[:i], "@") {
		if isHostList(rest[i+1:]) {
			at = i
			break
		}
	}
	if at < 0 {
		return uri
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return uri
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// isHostList reports whether s starts with a non-empty host list (host[:port]
// entries, comma-separated, IPv6 in brackets) that ends at "/", "?" or the
// end of s.
func isHostList(s string) bool {
	end := strings.IndexAny(s, "/?")
	if end < 0 {
		end = len(s)
	}
	if end == 0 {
		return false
	}
	for _, c := range s[:end] {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.ContainsRune(".-_:,[]%", c):
		default:
			return false
		}
	}
	return true
}

// Open connects to the database named by uri and pings it. It is the only
// way baton opens a database: it forces retryWrites=false and keeps
// retryable reads on.
func Open(ctx context.Context, uri string, o Options) (*Store, error) {
	return open(ctx, uri, o, nil)
}

// open is Open, with tune (when set) applied to the client's options before
// the wire recorder, which chains any monitor tune set:
// the package's tests record the wire with it.
func open(ctx context.Context, uri string, o Options, tune func(*options.ClientOptions)) (*Store, error) {
	norm, err := NormalizeURI(uri)
	if err != nil {
		return nil, err
	}
	key, err := pageKey(o.PageKey)
	if err != nil {
		return nil, err
	}
	name := o.Database
	if name == "" {
		p, _ := splitURI(norm) // norm passed splitURI in NormalizeURI
		name = p.database
	}
	if name == "" {
		name = DefaultDatabase
	}
	copts := options.Client().ApplyURI(norm).SetRetryWrites(false).SetRetryReads(true)
	if tune != nil {
		tune(copts)
	}
	// The wire inventory (docs/emulators-mongo.md): off unless
	// BATON_MONGO_WIRELOG names a directory, and then only a monitor
	// that notes each command's shape once.
	rec := o.Recorder
	if rec == nil {
		if rec, err = wire.FromEnv(); err != nil {
			return nil, fmt.Errorf("store: open: %w", err)
		}
	}
	if rec != nil {
		copts.SetMonitor(rec.Monitor(copts.Monitor))
	}
	client, err := mongo.Connect(copts)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", redact(uri), err)
	}
	timeout := o.ConnectTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The ping goes to the deployment's own database, not to admin as
	// client.Ping's does: "each connection is limited to a single
	// Firestore with MongoDB compatibility database"
	// (https://cloud.google.com/firestore/mongodb-compatibility/docs/behavior-differences).
	db := client.Database(name)
	if err := db.RunCommand(pctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		_ = disconnect(ctx, client)
		return nil, fmt.Errorf("store: open %s: ping: %w", redact(uri), err)
	}
	m := o.Meter
	if m == nil {
		m = store.NewMeter()
	}
	return &Store{client: client, db: db, meter: m, pageKey: key, prefix: o.CollectionPrefix}, nil
}

// pageKey checks Options.PageKey, or draws a random one when it is empty.
func pageKey(k []byte) ([]byte, error) {
	if len(k) == 0 {
		k = make([]byte, MinPageKeyLen)
		if _, err := rand.Read(k); err != nil {
			return nil, fmt.Errorf("store: open: draw a page token key: %w", err)
		}
		return k, nil
	}
	if len(k) < MinPageKeyLen {
		return nil, fmt.Errorf("store: open: page token key is %d bytes, want at least %d", len(k), MinPageKeyLen)
	}
	return bytes.Clone(k), nil
}

// Close disconnects.
func (s *Store) Close(ctx context.Context) error {
	if err := disconnect(ctx, s.client); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// disconnect closes client's connections without the endSessions command
// the driver's Disconnect sends to the admin database (mongo/client.go,
// endSessions: database "admin", errors ignored), which a Firestore
// connection, "limited to a single ... database"
// (https://cloud.google.com/firestore/mongodb-compatibility/docs/behavior-differences),
// may refuse or take for another database. The driver has no option to
// skip it, nor to send it elsewhere, nor to disable the implicit sessions
// that fill its pool. Ending sessions is an optimisation (the driver
// ignores its failure; a server session unused for
// logicalSessionTimeoutMinutes ends on its own), so Close does without:
// Disconnect gets a context that has already ended, and the driver, which
// checks the context before it writes a command, sends nothing. The
// driver reads a deadline on Disconnect's context as "wait for operations
// in flight"; that wait is done here instead, as the driver does it (it
// polls too, having no signal to wait on), until ctx ends.
func disconnect(ctx context.Context, client *mongo.Client) error {
	if _, ok := ctx.Deadline(); ok {
		t := time.NewTicker(10 * time.Millisecond)
		for client.NumberSessionsInProgress() > 0 && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-t.C:
			}
		}
		t.Stop()
	}
	ended, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cancel()
	return client.Disconnect(ended)
}

// Meter returns the store's meter of documents read and written.
func (s *Store) Meter() *store.Meter { return s.meter }

// DatabaseName is the name of the database the Store writes to.
func (s *Store) DatabaseName() string { return s.db.Name() }

// IndexKeys lists the key documents of the indexes on collection, in the
// server's order, for `baton doctor` to compare with the ones the queries
// need (Indexes).
func (s *Store) IndexKeys(ctx context.Context, collection string) ([]bson.Raw, error) {
	specs, err := s.db.Collection(collection).Indexes().ListSpecifications(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: list indexes of %s: %w", collection, err)
	}
	keys := make([]bson.Raw, 0, len(specs))
	for _, sp := range specs {
		keys = append(keys, sp.KeysDocument)
	}
	return keys, nil
}

// Collection returns a metered handle on the named collection.
func (s *Store) Collection(name string) *Collection {
	return &Collection{c: s.db.Collection(name), name: name, meter: s.meter, key: s.pageKey}
}

// Collection is a metered collection with idempotent, conditional writes.
type Collection struct {
	c     *mongo.Collection
	name  string
	meter *store.Meter
	key   []byte
}

// Name is the collection's name.
func (c *Collection) Name() string { return c.name }

func (c *Collection) op(name string) string { return c.name + "." + name }

// InsertIdempotent inserts doc, which must carry a deterministic _id. A
// duplicate key means an earlier attempt (or a concurrent twin) already
// inserted it: inserted is false and err is nil.
//
// It does not rely on the duplicate-key code alone, which Firestore does
// not document. A 112 (Aborted) and a deadline code (262, 50) are retried,
// up to WriteAttempts in all: the _id is deterministic, so a retry of an
// insert that landed answers a duplicate. On any other error, or when the
// attempts run out, the document is read back by _id: when it is there,
// and of the same kind as doc (sameKind), the insert happened (ours, whose
// answer was lost, or a twin's) and it returns false, nil. Callers must
// therefore treat inserted == false as "it is there", never as "another
// writer's". When the read-back fails too, the error wraps
// store.ErrUnknownOutcome.
func (c *Collection) InsertIdempotent(ctx context.Context, doc any) (inserted bool, err error) {
	err = retryWrite(ctx, true, func() error {
		_, err := c.c.InsertOne(ctx, doc)
		return err
	})
	switch {
	case err == nil:
		c.meter.AddWrite(c.op("insert"), 1)
		return true, nil
	case mongo.IsDuplicateKeyError(err):
		return false, nil
	}
	return c.insertReadBack(ctx, doc, err)
}

// insertReadBack settles a failed insert by reading its _id back.
func (c *Collection) insertReadBack(ctx context.Context, doc any, insertErr error) (bool, error) {
	ours, merr := bson.Marshal(doc)
	if merr != nil {
		return false, fmt.Errorf("store: insert into %s: %w", c.name, insertErr)
	}
	id, lerr := bson.Raw(ours).LookupErr("_id")
	if lerr != nil {
		return false, fmt.Errorf("store: insert into %s: the document has no _id to read back: %w", c.name, insertErr)
	}
	// Not on ctx alone: a deadline that cut the insert short would cut
	// the read-back too, and leave a landed insert reported unknown.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var stored bson.Raw
	err := c.c.FindOne(rctx, bson.D{{Key: "_id", Value: id}}).Decode(&stored)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		// Not there: the insert did not land (Firestore reads are
		// strongly consistent), as far as a read can tell.
		return false, c.plainWriteError("insert into", insertErr)
	case err != nil:
		return false, fmt.Errorf("store: insert into %s: %w: %w; reading _id %v back failed too: %v", c.name, store.ErrUnknownOutcome, insertErr, id, err) //nolint:errorlint // the outcome is the insert's; wrapping the read's error too would let a read timeout change how retryWrite classifies it
	}
	c.meter.Add(c.op("insertCheck"), 1)
	if why, ok := sameKind(ours, stored); !ok {
		return false, fmt.Errorf("store: insert into %s: %w; _id %v holds a different kind of document (%s), not taken for this insert", c.name, insertErr, id, why)
	}
	return false, nil
}

// Get reads one document by _id into out. It returns store.ErrNotFound when absent.
func (c *Collection) Get(ctx context.Context, id any, out any) error {
	return c.FindOne(ctx, bson.D{{Key: "_id", Value: id}}, out)
}

// FindOne reads the first document matching filter into out, or returns
// store.ErrNotFound.
func (c *Collection) FindOne(ctx context.Context, filter any, out any, opts ...options.Lister[options.FindOneOptions]) error {
	err := c.c.FindOne(ctx, filter, opts...).Decode(out)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return fmt.Errorf("store: find in %s: %w", c.name, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("store: find in %s: %w", c.name, err)
	}
	c.meter.Add(c.op("find"), 1)
	return nil
}

// Find reads every document matching filter into out (a pointer to a slice).
// Use it only where the result is bounded by a limit or by the work due;
// unbounded lists go through Page.
func (c *Collection) Find(ctx context.Context, filter any, out any, opts ...options.Lister[options.FindOptions]) error {
	cur, err := c.c.Find(ctx, filter, opts...)
	if err != nil {
		return fmt.Errorf("store: find in %s: %w", c.name, err)
	}
	var raws []bson.Raw
	if err := cur.All(ctx, &raws); err != nil {
		return fmt.Errorf("store: find in %s: %w", c.name, err)
	}
	c.meter.Add(c.op("find"), int64(len(raws)))
	if err := decodeAll(raws, out); err != nil {
		return fmt.Errorf("store: find in %s: %w", c.name, err)
	}
	return nil
}

// Count counts matching documents. Firestore bills a count like the reads
// behind it, so the result is metered.
func (c *Collection) Count(ctx context.Context, filter any) (int64, error) {
	return c.CountLimit(ctx, filter, 0)
}

// CountLimit is Count stopping at limit matches (limit ≤ 0: no limit), so
// its reads are bounded by limit.
//
// It sends the count command ({count, query, limit}), which Firestore
// with MongoDB compatibility lists among its supported commands
// (https://cloud.google.com/firestore/mongodb-compatibility/docs/supported-features,
// "Commands"), and not the driver's CountDocuments, whose aggregate of
// $match, $group with $sum, and $skip/$limit is a pipeline shape Google
// does not state it serves.
func (c *Collection) CountLimit(ctx context.Context, filter any, limit int64) (int64, error) {
	if filter == nil {
		filter = bson.D{}
	}
	cmd := bson.D{{Key: "count", Value: c.c.Name()}, {Key: "query", Value: filter}}
	if limit > 0 {
		cmd = append(cmd, bson.E{Key: "limit", Value: limit})
	}
	var res struct {
		N bson.RawValue `bson:"n"`
	}
	if err := c.c.Database().RunCommand(ctx, cmd).Decode(&res); err != nil {
		return 0, fmt.Errorf("store: count %s: %w", c.name, err)
	}
	n, ok := res.N.AsInt64OK()
	if !ok {
		return 0, fmt.Errorf("store: count %s: the answer's n is %s, not a number", c.name, res.N.Type)
	}
	c.meter.Add(c.op("count"), n)
	return n, nil
}

// UpdateOne applies update to one document matching filter. When nothing
// matches, the filter's condition no longer holds and it returns store.ErrConflict.
//
// A 112 (Aborted) is retried (WriteAttempts in all), and when every
// attempt met one, the write was not applied and the error wraps
// store.ErrContended (a store.ErrConflict). A write that may have landed
// (262, 50, a lost connection) is not retried, and gives an error wrapping
// store.ErrUnknownOutcome, never store.ErrConflict.
func (c *Collection) UpdateOne(ctx context.Context, filter, update any) error {
	var res *mongo.UpdateResult
	err := retryWrite(ctx, false, func() (err error) {
		res, err = c.c.UpdateOne(ctx, filter, update)
		return err
	})
	if err != nil {
		return c.writeError("update", err)
	}
	if res.MatchedCount == 0 {
		return fmt.Errorf("store: update %s: %w", c.name, store.ErrConflict)
	}
	// Matched, not only modified: each matched document was written to,
	// even by an update that left its fields as they were.
	c.meter.AddWrite(c.op("update"), res.MatchedCount)
	return nil
}

// FindOneAndUpdate atomically updates the first document matching filter
// (in sort order, if opts set one) and decodes the document after the update
// into out. When nothing matches it returns store.ErrConflict. Errors are
// retried and reported as UpdateOne's.
func (c *Collection) FindOneAndUpdate(ctx context.Context, filter, update any, out any, opts ...options.Lister[options.FindOneAndUpdateOptions]) error {
	opts = append([]options.Lister[options.FindOneAndUpdateOptions]{options.FindOneAndUpdate().SetReturnDocument(options.After)}, opts...)
	noDoc := false
	err := retryWrite(ctx, false, func() error {
		err := c.c.FindOneAndUpdate(ctx, filter, update, opts...).Decode(out)
		noDoc = errors.Is(err, mongo.ErrNoDocuments)
		if noDoc {
			return nil // a settled answer, not a failure to retry
		}
		return err
	})
	if err != nil {
		return c.writeError("find-and-update", err)
	}
	if noDoc {
		return fmt.Errorf("store: find-and-update %s: %w", c.name, store.ErrConflict)
	}
	c.meter.Add(c.op("findAndModify"), 1)
	c.meter.AddWrite(c.op("findAndModify"), 1)
	return nil
}

// DeleteOne deletes one document matching filter, or returns store.ErrConflict.
// Errors are retried and reported as UpdateOne's.
func (c *Collection) DeleteOne(ctx context.Context, filter any) error {
	var res *mongo.DeleteResult
	err := retryWrite(ctx, false, func() (err error) {
		res, err = c.c.DeleteOne(ctx, filter)
		return err
	})
	if err != nil {
		return c.writeError("delete from", err)
	}
	if res.DeletedCount == 0 {
		return fmt.Errorf("store: delete from %s: %w", c.name, store.ErrConflict)
	}
	c.meter.AddWrite(c.op("delete"), res.DeletedCount)
	return nil
}

// FencedUpdate applies update to the document matching filter only while the
// document's stored fence is at most f.Epoch, and records f.Epoch as the new
// fence. A holder that paused past its lease and woke after a newer holder
// wrote gets store.ErrStaleFence; a filter that matches nothing while the stored
// fence is not newer (an edit moved the condition, or the document is gone)
// gets store.ErrConflict; when that check itself fails, the error wraps neither.
// update must be a bson.D of update operators.
//
// filter must hold the document's _id at its top level: on a miss the
// document is re-read by _id alone. The rest of the filter is usually a
// value the holder read, which the newer holder's own write has changed
// too, so a re-read by the whole filter would find nothing and call every
// stale write a conflict.
func (c *Collection) FencedUpdate(ctx context.Context, filter bson.D, f store.Fence, update bson.D) error {
	id, ok := idOf(filter)
	if !ok {
		return fmt.Errorf("store: fenced update %s: the filter must hold _id (the stale-fence check re-reads by it): %v", c.name, filter)
	}
	field := fenceField(f)
	fenced := bson.D{{Key: "$and", Value: bson.A{
		filter,
		bson.D{{Key: "$or", Value: bson.A{
			bson.D{{Key: field, Value: bson.D{{Key: "$lte", Value: f.Epoch}}}},
			bson.D{{Key: field, Value: bson.D{{Key: "$exists", Value: false}}}},
		}}},
	}}}
	upd := withSet(update, field, f.Epoch)
	// Retried on 112 only, as UpdateOne: after a 262 the write may have
	// landed, and a retry would then be refused by the very fence it set
	// (or by the rest of the filter it changed) and report a conflict.
	var res *mongo.UpdateResult
	err := retryWrite(ctx, false, func() (err error) {
		res, err = c.c.UpdateOne(ctx, fenced, upd)
		return err
	})
	contended := err != nil && notApplied(err)
	if err != nil && !contended {
		return c.writeError("fenced update", err)
	}
	if !contended && res.MatchedCount > 0 {
		c.meter.AddWrite(c.op("fencedUpdate"), res.MatchedCount)
		return nil
	}
	// miss is what a write that was not applied reports when the fence
	// does not refuse it: a conflict, or the contention that outlasted
	// the retries (a conflict too, yet one whose condition may hold).
	miss := func() error { return fmt.Errorf("store: fenced update %s: %w", c.name, store.ErrConflict) }
	if contended {
		miss = func() error { return c.writeError("fenced update", err) }
	}
	// Tell a stale fence from a plain conflict: the fence first, because a
	// newer holder's write is what moved the rest of the filter (and may
	// be the write this one contended with). This read happens only on the
	// failure path, so the success path costs no read.
	var doc bson.Raw
	rerr := c.c.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&doc)
	switch {
	case errors.Is(rerr, mongo.ErrNoDocuments):
		return miss()
	case rerr != nil:
		// Not a conflict: the caller must not take an unknown for an
		// edit that wins.
		return fmt.Errorf("store: fenced update %s: not applied, and the fence check failed: %w", c.name, rerr)
	}
	c.meter.Add(c.op("fenceCheck"), 1)
	if v, lerr := doc.LookupErr(field); lerr == nil {
		if stored, ok := v.AsInt64OK(); ok && stored > f.Epoch {
			return fmt.Errorf("store: fenced update %s: stored fence %d > epoch %d: %w", c.name, stored, f.Epoch, store.ErrStaleFence)
		}
	}
	return miss()
}

// idOf returns the value of filter's top-level _id.
func idOf(filter bson.D) (any, bool) {
	for _, e := range filter {
		if e.Key == "_id" {
			return e.Value, true
		}
	}
	return nil, false
}

// withSet returns update with {$set: {field: value}} merged in.
func withSet(update bson.D, field string, value any) bson.D {
	out := make(bson.D, 0, len(update)+1)
	merged := false
	for _, e := range update {
		if e.Key == "$set" && !merged {
			set := bson.D{}
			switch v := e.Value.(type) {
			case bson.D:
				set = append(set, v...)
			case bson.M:
				for k, x := range v {
					set = append(set, bson.E{Key: k, Value: x})
				}
			}
			set = append(set, bson.E{Key: field, Value: value})
			out = append(out, bson.E{Key: "$set", Value: set})
			merged = true
			continue
		}
		out = append(out, e)
	}
	if !merged {
		out = append(out, bson.E{Key: "$set", Value: bson.D{{Key: field, Value: value}}})
	}
	return out
}

// Index declares an index. Each domain package lists the indexes its
// queries need; EnsureIndexes creates them locally, and Terraform declares
// the same ones as google_firestore_index resources.
type Index struct {
	Collection string
	Name       string
	Keys       bson.D
	Unique     bool
}

// EnsureIndexes creates the indexes if they do not exist. An index that
// exists under the name with other keys or options (a database kept
// across versions, baton local's data dir, when a version changed an
// index: runs.all became (vshard, fireTime, _id)) is dropped and created
// again with the declared ones.
func (s *Store) EnsureIndexes(ctx context.Context, idx ...Index) error {
	for _, ix := range idx {
		o := options.Index().SetName(ix.Name)
		if ix.Unique {
			// Only when asked: an index on _id alone refuses even
			// unique: false (InvalidIndexSpecificationOption).
			o.SetUnique(true)
		}
		m := mongo.IndexModel{Keys: ix.Keys, Options: o}
		iv := s.db.Collection(ix.Collection).Indexes()
		_, err := iv.CreateOne(ctx, m)
		var ce mongo.CommandError
		if errors.As(err, &ce) && (ce.Code == codeIndexOptionsConflict || ce.Code == codeIndexKeySpecsConflict) {
			if derr := iv.DropOne(ctx, ix.Name); derr != nil {
				return fmt.Errorf("store: replace index %s.%s, whose keys changed: drop: %w", ix.Collection, ix.Name, derr)
			}
			_, err = iv.CreateOne(ctx, m)
		}
		if err != nil {
			return fmt.Errorf("store: create index %s.%s: %w", ix.Collection, ix.Name, err)
		}
	}
	return nil
}

// MongoDB's codes for an index that exists under the name with other
// options or keys.
const (
	codeIndexOptionsConflict  = 85
	codeIndexKeySpecsConflict = 86
)

// fenceField is the document field a fence is recorded in.
func fenceField(f store.Fence) string {
	if f.Field == "" {
		return store.DefaultFenceField
	}
	return f.Field
}
