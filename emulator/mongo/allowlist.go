package mongo

// The allowlist: every command, option, stage and operator the emulator
// lets through in strict mode, each with the Google page that says
// Firestore with MongoDB compatibility supports it. Anything else is
// refused (allowlistRefusal) with the error a MongoDB server gives for an
// unsupported feature, naming the feature and the page.
//
// Where no Google page states a feature that baton uses, the entry says
// Unstated: strict mode accepts it (refusing it would only break baton
// locally, with nothing saying Firestore refuses it), and the docs and
// `baton doctor --deep` list it as unproven. Entries that only tests need
// say TestOnly, with why.
//
// The wire inventory (shared/store/wire, wirecheck_test.go) holds every
// shape mongostore sends to this list; docs/emulators-mongo.md's "Wire
// inventory" table is generated from both.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/store/wire"
)

// Google's pages the entries cite.
const (
	// "Supported features: 8.0": the tables of commands, operators,
	// stages and index properties.
	urlFeatures = "https://docs.cloud.google.com/firestore/mongodb-compatibility/docs/supported-features-80"
	// "Behavior differences": read and write concerns, read
	// preference, upsert, retryable writes.
	urlBehavior = "https://docs.cloud.google.com/firestore/mongodb-compatibility/docs/behavior-differences"
	// "Authenticate and connect to a database": load-balanced mode,
	// retryable reads, the authentication mechanisms.
	urlConnect = "https://cloud.google.com/firestore/mongodb-compatibility/docs/connect"
	// "Indexes overview": sparse, multikey and unique indexes.
	urlIndexOverview = "https://cloud.google.com/firestore/mongodb-compatibility/docs/index-overview"
	// "Manage indexes": createIndexes with key and name, one index a
	// request.
	urlIndexing = "https://docs.cloud.google.com/firestore/mongodb-compatibility/docs/indexing"
	// "Firestore with MongoDB compatibility overview": queries with
	// filters, sorts and limits, paged through cursors.
	urlOverview = "https://docs.cloud.google.com/firestore/mongodb-compatibility/docs/overview"
)

// Entry is one supported feature.
type Entry struct {
	// Kind and Name are the feature, as wire.Shape names it. An option's
	// name is "command.field" ("update.statements.q" for a field of an
	// update statement); "command.*" admits every field (the handshake's).
	Kind wire.Kind
	Name string
	// URL is the Google page that supports it; for an Unstated entry,
	// the page closest to it.
	URL string
	// Unstated: no Google page states it. Accepted, listed as unproven.
	Unstated bool
	// TestOnly says why only tests need it; empty for what production
	// sends.
	TestOnly string
	// Note says what the page says, or why the entry is here.
	Note string
}

// Refused is a feature baton sends knowing that Firestore may refuse it,
// because it handles the refusal: the inventory check accepts it, the
// front still refuses it.
type Refused struct {
	Kind     wire.Kind
	Name     string
	URL      string
	Fallback string
}

func cmd(name, url, note string) Entry {
	return Entry{Kind: wire.KindCommand, Name: name, URL: url, Note: note}
}
func opt(name, url, note string) Entry {
	return Entry{Kind: wire.KindOption, Name: name, URL: url, Note: note}
}
func unstated(k wire.Kind, name, note string) Entry {
	return Entry{Kind: k, Name: name, URL: urlFeatures, Unstated: true, Note: note}
}
func testOnly(k wire.Kind, name, url, why string) Entry {
	return Entry{Kind: k, Name: name, URL: url, TestOnly: why}
}
func each(k wire.Kind, url, note string, names ...string) []Entry {
	out := make([]Entry, 0, len(names))
	for _, n := range names {
		out = append(out, Entry{Kind: k, Name: n, URL: url, Note: note})
	}
	return out
}

// Allowlist is every feature strict mode lets through.
var Allowlist = concat(
	// Commands: "Database commands", "Administrative commands",
	// "Diagnostic commands" and "Session commands" on Supported
	// features. Commands the page marks "No" are not here.
	[]Entry{
		cmd("find", urlFeatures, "Query and write operations: Yes"),
		cmd("insert", urlFeatures, "Query and write operations: Yes"),
		cmd("update", urlFeatures, "Query and write operations: Yes; replaceOne is sent as update"),
		cmd("delete", urlFeatures, "Query and write operations: Yes"),
		cmd("findAndModify", urlFeatures, "Query and write operations: Yes"),
		cmd("getMore", urlFeatures, "Query and write operations: Yes"),
		cmd("aggregate", urlFeatures, "Aggregation: Yes"),
		cmd("count", urlFeatures, "Aggregation: Yes"),
		cmd("distinct", urlFeatures, "Aggregation: Yes"),
		cmd("killCursors", urlFeatures, "Administrative: Yes"),
		cmd("create", urlFeatures, "Administrative: Yes"),
		cmd("createIndexes", urlFeatures, "Administrative: Yes"),
		cmd("listCollections", urlFeatures, "Administrative: Yes"),
		cmd("listDatabases", urlFeatures, "Administrative: Yes"),
		cmd("listIndexes", urlFeatures, "Administrative: Yes"),
		cmd("buildInfo", urlFeatures, "Diagnostic: Yes"),
		cmd("connectionStatus", urlFeatures, "Diagnostic: Yes"),
		cmd("explain", urlFeatures, "Diagnostic: Yes (Query Explain has its limits)"),
		cmd("hello", urlFeatures, "Diagnostic: Yes; the handshake in load-balanced mode"),
		cmd("hostInfo", urlFeatures, "Diagnostic: Yes"),
		cmd("endSessions", urlFeatures, "Session commands: Yes; the driver sends it on Disconnect"),
		cmd("saslStart", urlConnect, "MONGODB-OIDC and SCRAM authentication run over SASL; the page connects with both"),
		cmd("saslContinue", urlConnect, "as saslStart"),
		unstated(wire.KindCommand, "isMaster", "the legacy handshake: the driver sends it when not in load-balanced mode, which Firestore requires (Connect); hello is listed"),
		unstated(wire.KindCommand, "ismaster", "isMaster's lower-case spelling, sent by older drivers"),
		unstated(wire.KindCommand, "ping", "not in the tables; mongostore.Open pings to check the connection (issue 26, finding 4)"),
		testOnly(wire.KindCommand, "dropDatabase", urlFeatures, "tests drop their own database when they end (emutest.Store); Firestore says No and deletes databases through its admin API"),
		testOnly(wire.KindCommand, "drop", urlFeatures, "tests drop their own collections; Firestore says No"),
		testOnly(wire.KindCommand, "dropIndexes", urlFeatures, "tests drop an index to see baton doctor notice; Firestore says No to dropIndexes (dropIndex: Yes)"),
	},

	// Options every command may carry: the read preference, read and
	// write concerns Firestore documents, and maxTimeMS.
	[]Entry{
		opt("*.$readPreference", urlBehavior, "Read preference: primary, primaryPreferred, secondaryPreferred, nearest"),
		opt("*.readConcern", urlBehavior, "Read concern: snapshot, majority, linearizable"),
		opt("*.writeConcern", urlBehavior, "Write concern: w: 'majority' and w: 1 only"),
		unstated(wire.KindOption, "*.maxTimeMS", "the driver adds it from a context deadline; no page says Firestore honours it (issue 26, finding 5)"),
	},

	// find, and the cursor that pages it.
	[]Entry{
		opt("find.filter", urlFeatures, "the query operators table"),
		opt("find.sort", urlOverview, "queries take sorts, filters and limits"),
		opt("find.limit", urlOverview, "queries take sorts, filters and limits"),
		opt("find.projection", urlFeatures, "the projection operators table"),
		unstated(wire.KindOption, "find.skip", "internal/skipscan's baseline only; Firestore bills the documents skipped"),
		unstated(wire.KindOption, "find.batchSize", "cursor batching; getMore is supported"),
		unstated(wire.KindOption, "find.singleBatch", "the driver's FindOne sends it, with limit 1"),
		opt("getMore.collection", urlFeatures, "getMore: Yes"),
		opt("getMore.batchSize", urlFeatures, "getMore: Yes"),
		opt("killCursors.cursors", urlFeatures, "killCursors: Yes"),
	},

	// Writes.
	[]Entry{
		opt("insert.documents", urlFeatures, "insert: Yes"),
		opt("insert.ordered", urlFeatures, "insert: Yes"),
		opt("update.updates", urlFeatures, "update: Yes"),
		opt("update.ordered", urlFeatures, "update: Yes"),
		opt("update.statements.q", urlFeatures, "update: Yes"),
		opt("update.statements.u", urlFeatures, "update: Yes; the update operators table"),
		opt("update.statements.multi", urlFeatures, "update: Yes"),
		opt("update.statements.upsert", urlBehavior, "Writes: upsert of update and findAndModify, except for $-named documents"),
		opt("delete.deletes", urlFeatures, "delete: Yes"),
		opt("delete.ordered", urlFeatures, "delete: Yes"),
		opt("delete.statements.q", urlFeatures, "delete: Yes"),
		opt("delete.statements.limit", urlFeatures, "delete: Yes (deleteOne sends limit 1)"),
		opt("findAndModify.query", urlFeatures, "findAndModify: Yes"),
		opt("findAndModify.update", urlFeatures, "findAndModify: Yes"),
		opt("findAndModify.new", urlFeatures, "findAndModify: Yes"),
		opt("findAndModify.remove", urlFeatures, "findAndModify: Yes"),
		opt("findAndModify.upsert", urlBehavior, "Writes: upsert of update and findAndModify"),
		opt("findAndModify.fields", urlFeatures, "the projection operators table"),
		unstated(wire.KindOption, "findAndModify.sort", "the claim queries (GPU queue, slots) pick the first match in an order; no page says findAndModify honours sort (issue 26, finding 5)"),
	},

	// Aggregation, counts, indexes, explain.
	[]Entry{
		opt("aggregate.pipeline", urlFeatures, "the stage operators table"),
		opt("aggregate.cursor", urlFeatures, "aggregate: Yes; every aggregate carries a cursor"),
		opt("count.query", urlFeatures, "count: Yes"),
		opt("count.limit", urlFeatures, "count: Yes"),
		opt("distinct.key", urlFeatures, "distinct: Yes"),
		opt("distinct.query", urlFeatures, "distinct: Yes"),
		opt("createIndexes.indexes", urlIndexing, "one index a request"),
		opt("listIndexes.cursor", urlFeatures, "listIndexes: Yes"),
		opt("listCollections.filter", urlFeatures, "listCollections: Yes"),
		opt("listCollections.nameOnly", urlFeatures, "listCollections: Yes"),
		opt("listCollections.cursor", urlFeatures, "listCollections: Yes"),
		opt("listCollections.authorizedCollections", urlFeatures, "listCollections: Yes"),
		opt("listDatabases.nameOnly", urlFeatures, "listDatabases: Yes"),
		opt("explain.verbosity", urlFeatures, "explain: Yes"),
		opt("endSessions.*", urlFeatures, "endSessions: Yes"),
		opt("hello.*", urlFeatures, "the driver's handshake fields (client metadata, loadBalanced, compression, …)"),
		opt("isMaster.*", urlFeatures, "the legacy handshake's fields"),
		opt("ismaster.*", urlFeatures, "the legacy handshake's fields"),
		opt("saslStart.*", urlConnect, "authentication"),
		opt("saslContinue.*", urlConnect, "authentication"),
		unstated(wire.KindOption, "ping.*", "ping is unstated"),
		testOnly(wire.KindOption, "drop.*", urlFeatures, "as drop"),
		testOnly(wire.KindOption, "dropDatabase.*", urlFeatures, "as dropDatabase"),
		testOnly(wire.KindOption, "dropIndexes.*", urlFeatures, "as dropIndexes"),
	},

	// Query operators: "Query and projection operators", every row
	// marked Yes.
	each(wire.KindQuery, urlFeatures, "Query and projection operators: Yes",
		"$all", "$elemMatch", "$size",
		"$eq", "$gt", "$gte", "$in", "$lt", "$lte", "$ne", "$nin",
		"$exists", "$type",
		"$expr", "$mod", "$regex",
		"$and", "$nor", "$not", "$or"),

	// Projection operators ($meta only in part, so not here), and plain
	// inclusion and exclusion, which the table does not mention.
	each(wire.KindProjection, urlFeatures, "Projection operators: Yes", "$", "$elemMatch", "$slice"),
	[]Entry{
		unstated(wire.KindProjection, wire.ProjectionInclude, "a plain {field: 1}: the table lists only the operators (issue 26, finding 5)"),
		unstated(wire.KindProjection, wire.ProjectionExclude, "a plain {field: 0}: the table lists only the operators (issue 26, finding 5)"),
	},

	// Update operators and modifiers.
	each(wire.KindUpdate, urlFeatures, "Update operators: Yes",
		"$", "$[]", "$[<identifier>]", "$addToSet", "$pop", "$pull", "$pullAll", "$push",
		"$bit",
		"$currentDate", "$inc", "$max", "$min", "$mul", "$rename", "$set", "$setOnInsert", "$unset",
		"$each", "$position", "$slice", "$sort"),

	// Stages: "Stage operators", every row marked Yes.
	each(wire.KindStage, urlFeatures, "Stage operators: Yes",
		"$addFields", "$bucket", "$count", "$documents", "$facet", "$group", "$limit", "$lookup",
		"$match", "$project", "$replaceRoot", "$replaceWith", "$sample", "$set", "$skip", "$sort",
		"$sortByCount", "$unionWith", "$unset", "$unwind"),

	// Accumulators in $group.
	each(wire.KindAccumulator, urlFeatures, "Accumulators: Yes",
		"$addToSet", "$avg", "$count", "$first", "$last", "$max", "$mergeObjects", "$min", "$push", "$sum"),

	// Index options: "Index properties" (Background, Sparse, TTL,
	// Unique: Yes), and the name the Indexing page's example gives.
	[]Entry{
		{Kind: wire.KindIndexOption, Name: "name", URL: urlIndexing, Note: `createIndexes {key, name}`},
		{Kind: wire.KindIndexOption, Name: "unique", URL: urlIndexOverview, Note: "Unique indexes"},
		{Kind: wire.KindIndexOption, Name: "sparse", URL: urlIndexOverview, Note: "Sparse indexes"},
		{Kind: wire.KindIndexOption, Name: "background", URL: urlFeatures, Note: "Index properties: Background: Yes"},
		{Kind: wire.KindIndexOption, Name: "expireAfterSeconds", URL: urlFeatures, Note: "Index properties: TTL: Yes"},
	},
)

// ExpectedRefusals lists what baton sends knowing Firestore may answer no.
var ExpectedRefusals = []Refused{
	{wire.KindStage, "$changeStream", urlFeatures,
		"Stage operators: $changeStream: No (a preview elsewhere). WatchSchedules tries it; on ErrCannotWatch baton daemon polls on (updatedAt, _id)"},
}

func concat(parts ...[]Entry) []Entry {
	var out []Entry
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// allowed indexes Allowlist by kind and name.
var allowed = func() map[wire.Feature]*Entry {
	m := map[wire.Feature]*Entry{}
	for i := range Allowlist {
		e := &Allowlist[i]
		m[wire.Feature{Kind: e.Kind, Name: e.Name}] = e
	}
	return m
}()

// Lookup returns the entry that admits f, or nil. An option is admitted
// by its own entry, by "command.*", or by "*.option" (the options every
// command may carry). Command names are matched as the server matches
// them: findAndModify in either case.
func Lookup(f wire.Feature) *Entry {
	if e := allowed[f]; e != nil {
		return e
	}
	if f.Kind == wire.KindCommand && strings.EqualFold(f.Name, "findandmodify") {
		return allowed[wire.Feature{Kind: wire.KindCommand, Name: "findAndModify"}]
	}
	if f.Kind != wire.KindOption {
		return nil
	}
	command, field, ok := strings.Cut(f.Name, ".")
	if !ok {
		return nil
	}
	if strings.EqualFold(command, "findandmodify") {
		command = "findAndModify"
		if e := allowed[wire.Feature{Kind: wire.KindOption, Name: command + "." + field}]; e != nil {
			return e
		}
	}
	if e := allowed[wire.Feature{Kind: wire.KindOption, Name: command + ".*"}]; e != nil {
		return e
	}
	if strings.Contains(field, ".") {
		return nil // a statement's field: no wildcard
	}
	return allowed[wire.Feature{Kind: wire.KindOption, Name: "*." + field}]
}

// ExpectedRefusal returns the expected refusal that covers f, or nil.
func ExpectedRefusal(f wire.Feature) *Refused {
	for i := range ExpectedRefusals {
		r := &ExpectedRefusals[i]
		if r.Kind == f.Kind && r.Name == f.Name {
			return r
		}
	}
	return nil
}

// Unlisted returns the features of s that the allowlist does not admit.
func Unlisted(s wire.Shape) []wire.Feature {
	var out []wire.Feature
	for _, f := range s.Features() {
		if Lookup(f) == nil {
			out = append(out, f)
		}
	}
	return out
}

// Refusal codes. Google's pages document no error for an unsupported
// feature, so the front answers what mongod answers to a feature it does
// not know, which is what drivers and tools already recognise:
//
//   - a command: 59 CommandNotFound ("no such command");
//   - an option: 40415, "BSON field 'find.x' is an unknown field";
//   - a stage: 40324, "Unrecognized pipeline stage name";
//   - a query or projection operator: 2 BadValue ("unknown operator");
//   - an update operator: 9 FailedToParse ("Unknown modifier");
//   - an accumulator: 15952, "unknown group operator";
//   - an index option: 197 InvalidIndexSpecificationOption.
var refusalCodes = map[wire.Kind]struct {
	code int32
	name string
}{
	wire.KindCommand:     {59, "CommandNotFound"},
	wire.KindOption:      {40415, "Location40415"},
	wire.KindStage:       {40324, "Location40324"},
	wire.KindQuery:       {2, "BadValue"},
	wire.KindProjection:  {2, "BadValue"},
	wire.KindUpdate:      {9, "FailedToParse"},
	wire.KindAccumulator: {15952, "Location15952"},
	wire.KindIndexOption: {197, "InvalidIndexSpecificationOption"},
}

// allowlistRefusal refuses c when it uses a feature the allowlist does
// not admit, naming the first such feature. The front calls it only in
// strict mode.
func allowlistRefusal(c command) *refusal {
	s := wire.Of(c.body, sequences(c))
	bad := Unlisted(s)
	if len(bad) == 0 {
		return nil
	}
	f := bad[0]
	rc := refusalCodes[f.Kind]
	return &refusal{rc.code, rc.name, fmt.Sprintf(
		"%s: %s is not supported by Firestore with MongoDB compatibility: no Google page lists it as supported "+
			"(see %s; baton's allowlist is emulator/mongo/allowlist.go; the emulator's lax mode lets it through)",
		c.name, f, urlFeatures)}
}

// sequences reads an OP_MSG's document sequences (kind-1 sections), which
// the front otherwise skips: update's updates and delete's deletes come
// there, and their filters and update operators are policed too.
func sequences(c command) wire.Sequences {
	if c.opCode != opMsg || len(c.raw) < headerLen+5 {
		return nil
	}
	raw := c.raw
	end := len(raw)
	if binary.LittleEndian.Uint32(raw[headerLen:])&flagChecksumPresent != 0 {
		end -= 4
	}
	var out wire.Sequences
	p := headerLen + 4
	for p < end {
		kind := raw[p]
		p++
		if p+4 > end {
			return out
		}
		size := int(int32(binary.LittleEndian.Uint32(raw[p:]))) //nolint:gosec // G115: parseOpMsg already checked every size
		if size < 5 || p+size > end {
			return out
		}
		if kind == 1 {
			sec := raw[p+4 : p+size]
			nul := bytes.IndexByte(sec, 0)
			if nul >= 0 {
				id := string(sec[:nul])
				docs := sec[nul+1:]
				for len(docs) >= 5 {
					n := int(int32(binary.LittleEndian.Uint32(docs))) //nolint:gosec // G115: a BSON length; checked below
					if n < 5 || n > len(docs) {
						break
					}
					if out == nil {
						out = wire.Sequences{}
					}
					out[id] = append(out[id], bson.Raw(docs[:n]))
					docs = docs[n:]
				}
			}
		}
		p += size
	}
	return out
}
