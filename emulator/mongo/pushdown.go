package mongo

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Narrowing conditional writes. FerretDB v1's SQLite backend pushes a
// filter down to SQL only when the filter is exactly {_id: <string or
// ObjectID>} (backends/sqlite/collection.go, Query: "if
// params.Filter.Len() == 1"); any other filter reads and decodes every
// document of the collection in Go. Nearly every write baton sends is a
// compare-and-set by _id plus a condition ({_id, status: "pending"},
// {_id, nextRunAt, version, fence: {$lte}}), so each one cost a scan of its
// whole collection: a run's claim got slower with every run stored, and a
// test of thousands of schedules over minutes grew quadratically
// (issue 28's scale test). Firestore serves those writes from the _id
// alone.
//
// The front holds the write's document lock (contention.go) or, in lax
// mode, the single write mutex, so no other write can touch that document
// until the reply is read. Under it, narrow asks FerretDB whether the
// document matches the whole filter, with an aggregate whose first $match
// is the lone _id (which FerretDB pushes down) and whose second is the
// filter (evaluated by the same matcher the write would use), then forwards
// the write with its filter narrowed to {_id}: the document when it
// matched, a sentinel _id that no document has when it did not, so that
// FerretDB still writes the reply (n: 0, value: null) itself. Whatever the
// front cannot vouch for (an upsert, several statements, a positional $
// update, an _id that FerretDB would not push down, an aggregate that
// fails) is forwarded as it came.

// noMatchID is the _id a narrowed write is sent with when its document
// does not match its filter: no client writes it (a NUL cannot start a
// document id that baton's validation accepts, and the string says what
// it is if it ever shows up).
const noMatchID = "\x00baton mongo front: no document matched the filter"

// narrowable are the write commands narrow rewrites, by the field that
// holds their statements ("" for findAndModify, whose body is the one
// statement) and the statement's filter field.
var narrowable = map[string]struct{ stmts, filter string }{
	"update":        {"updates", "q"},
	"delete":        {"deletes", "q"},
	"findAndModify": {"", "query"},
	"findandmodify": {"", "query"},
}

// narrow returns out (a write's OP_MSG, as it is about to be forwarded)
// with its filter narrowed to its _id, after checking the filter against
// that one document over the client's own backend connection. It must be
// called with the write's locks held. ok is false when the write is to be
// forwarded unchanged; err only when the backend connection failed.
func (f *front) narrow(cmd command, out []byte, backend net.Conn, br *bufio.Reader) (narrowed []byte, ok bool, err error) {
	n, isNarrowable := narrowable[cmd.name]
	if !isNarrowable || cmd.opCode != opMsg {
		return nil, false, nil
	}
	stmt := cmd.body
	if n.stmts != "" {
		stmts := cmd.docs(n.stmts)
		if len(stmts) != 1 {
			return nil, false, nil
		}
		stmt = stmts[0]
	}
	filter, isDoc := stmt.Lookup(n.filter).DocumentOK()
	if !isDoc || upserts(stmt) || positional(stmt) {
		return nil, false, nil
	}
	id, found := idEquality(filter, 0)
	if !found {
		return nil, false, nil
	}
	if elems, err := filter.Elements(); err != nil || (len(elems) == 1 && elems[0].Key() == "_id" && elems[0].Value().Type != bson.TypeEmbeddedDocument) {
		return nil, false, nil // {_id: v} alone is pushed down already
	}
	db, _ := cmd.body.Lookup("$db").StringValueOK()
	coll, _ := cmd.body.Index(0).Value().StringValueOK()
	matched, checked, err := matchesByID(backend, br, db, coll, id, filter)
	if err != nil || !checked {
		return nil, false, err
	}
	narrowID := any(id)
	if !matched {
		narrowID = noMatchID
	}
	stmt, err = withField(stmt, n.filter, bson.D{{Key: "_id", Value: narrowID}})
	if err != nil {
		return nil, false, nil
	}
	body := cmd.body
	if n.stmts == "" {
		body = stmt
	} else {
		// The statement goes into the body as a one-element array, in
		// place of the body's array or the document sequence it came in.
		if body, err = withField(body, n.stmts, bson.A{stmt}); err != nil {
			return nil, false, nil
		}
	}
	flags := binary.LittleEndian.Uint32(out[headerLen:]) &^ flagChecksumPresent
	var b []byte
	b = append(b, out[:headerLen]...) // length patched below; requestID kept for the reply
	b = binary.LittleEndian.AppendUint32(b, flags)
	b = append(b, 0) // section kind 0
	b = append(b, body...)
	binary.LittleEndian.PutUint32(b[0:], uint32(len(b))) //nolint:gosec // G115: a header and one document no larger than the request's
	return b, true, nil
}

// idEquality finds the _id that filter pins with an equality, at its top
// level ({_id: v} or {_id: {$eq: v}}) or in an element of a top-level
// $and, as the store's fenced writes wrap theirs ({$and: [{_id: v, …},
// {$or: [fence…]}]}): a document that matches filter has that _id. Only a
// string or an ObjectID counts, the _ids FerretDB pushes down.
func idEquality(filter bson.Raw, depth int) (bson.RawValue, bool) {
	if v, err := filter.LookupErr("_id"); err == nil {
		if sub, isDoc := v.DocumentOK(); isDoc {
			elems, err := sub.Elements()
			if err != nil || len(elems) != 1 || elems[0].Key() != "$eq" {
				return bson.RawValue{}, false
			}
			v = elems[0].Value()
		}
		return v, v.Type == bson.TypeString || v.Type == bson.TypeObjectID
	}
	and, isArray := filter.Lookup("$and").ArrayOK()
	if !isArray || depth > 4 {
		return bson.RawValue{}, false
	}
	vals, err := and.Values()
	if err != nil {
		return bson.RawValue{}, false
	}
	for _, v := range vals {
		if d, isDoc := v.DocumentOK(); isDoc {
			if id, found := idEquality(d, depth+1); found {
				return id, true
			}
		}
	}
	return bson.RawValue{}, false
}

// upserts reports whether a statement may insert: its document cannot be
// named by _id alone then (FerretDB builds it from the filter's fields).
func upserts(stmt bson.Raw) bool {
	v, err := stmt.LookupErr("upsert")
	if err != nil {
		return false
	}
	b, isBool := v.BooleanOK()
	return !isBool || b
}

// positional reports whether an update names a field through the
// positional operator ($, $[], $[<id>]), whose meaning depends on which
// array element the filter matched; or is a pipeline update. Either keeps
// its filter.
func positional(stmt bson.Raw) bool {
	for _, key := range []string{"u", "update"} {
		v, err := stmt.LookupErr(key)
		if err != nil {
			continue
		}
		doc, isDoc := v.DocumentOK()
		if !isDoc {
			return true // a pipeline
		}
		ops, err := doc.Elements()
		if err != nil {
			return true
		}
		for _, op := range ops {
			fields, isDoc := op.Value().DocumentOK()
			if !isDoc {
				continue
			}
			elems, err := fields.Elements()
			if err != nil {
				return true
			}
			for _, e := range elems {
				if strings.Contains(e.Key(), "$") {
					return true
				}
			}
		}
	}
	return false
}

// withField returns doc with its field key set to v (kept in its place),
// or appended when doc has none.
func withField(doc bson.Raw, key string, v any) (bson.Raw, error) {
	d, err := toD(doc)
	if err != nil {
		return nil, err
	}
	set := false
	for i := range d {
		if d[i].Key == key {
			d[i].Value, set = v, true
		}
	}
	if !set {
		d = append(d, bson.E{Key: key, Value: v})
	}
	return bson.Marshal(d)
}

// matchesByID asks the backend whether the document of coll with _id id
// matches filter: an aggregate whose first $match is the lone _id, so that
// FerretDB reads one row, and whose second is the whole filter, so that
// FerretDB's own matcher decides. checked is false when the backend
// refused the aggregate (an operator $match does not take, say).
func matchesByID(backend net.Conn, br *bufio.Reader, db, coll string, id bson.RawValue, filter bson.Raw) (matched, checked bool, err error) {
	body, err := bson.Marshal(bson.D{
		{Key: "aggregate", Value: coll},
		{Key: "pipeline", Value: bson.A{
			bson.D{{Key: "$match", Value: bson.D{{Key: "_id", Value: id}}}},
			bson.D{{Key: "$match", Value: filter}},
		}},
		{Key: "cursor", Value: bson.D{}},
		{Key: "$db", Value: db},
	})
	if err != nil {
		return false, false, nil
	}
	if _, err := backend.Write(opMsgFrame(body)); err != nil {
		return false, false, fmt.Errorf("narrow: forward aggregate: %w", err)
	}
	reply, err := readMessage(br)
	if err != nil {
		return false, false, fmt.Errorf("narrow: read aggregate reply: %w", err)
	}
	doc, _, err := parseOpMsg(reply.raw)
	if err != nil {
		return false, false, nil
	}
	if ok, _ := doc.Lookup("ok").AsFloat64OK(); ok != 1 {
		return false, false, nil
	}
	if cursorID, _ := doc.Lookup("cursor", "id").AsInt64OK(); cursorID != 0 {
		return false, false, nil // one document at most fits any batch; never seen
	}
	batch, isArray := doc.Lookup("cursor", "firstBatch").ArrayOK()
	if !isArray {
		return false, false, nil
	}
	vals, err := batch.Values()
	if err != nil {
		return false, false, nil
	}
	return len(vals) == 1, true, nil
}
