package mongo

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// FerretDB's explain says nothing about indexes (it forwards a SQL plan),
// so the front answers explain itself, from the collection's indexes, in
// the terms of Firestore's Query Explain: a query an index serves is an
// IndexScan node, one no index serves a TableScan node, which reads (and
// bills) every document of the collection. `baton doctor --deep` judges
// the hot queries by those node names, so it passes on `baton local`
// (which creates every index) and fails on a database lacking one.
//
// Google documents the execution tree's nodes and attributes
// (https://cloud.google.com/firestore/mongodb-compatibility/docs/query-explain-reference:
// "TableScan", "IndexScan", "index: type=CollectionGroupIndex, id=…,
// keys=[a ASC, b ASC, __key__ ASC]"), not the BSON envelope they arrive
// in; the envelope below (queryPlanner.winningPlan, and the tree as text)
// is the emulator's, and the doctor reads the node names wherever they
// are.
//
// Explain is documented for aggregate, find, distinct and count only
// (https://cloud.google.com/firestore/mongodb-compatibility/docs/query-explain),
// so an explain of anything else (findAndModify, update, delete) is
// refused. Explain plans the query and does not run it (verbosity
// queryPlanner); asked for executionStats, the emulator still only plans.

// codeCommandNotSupported is MongoDB's CommandNotSupported, the refusal
// of an explain of a command Firestore's Query Explain does not cover.
const (
	codeCommandNotSupported     = 115
	codeNameCommandNotSupported = "CommandNotSupported"
)

// explainable are the commands Firestore's Query Explain covers.
var explainable = map[string]bool{"find": true, "aggregate": true, "count": true, "distinct": true}

// explainRequestID numbers the front's own requests to the backend.
var explainRequestID atomic.Int32

// explain answers an explain command with a plan computed from the
// collection's indexes, which it lists over the client's own backend
// connection (one request at a time, as serve relays them).
func (f *front) explain(req message, cmd command, client, backend net.Conn, br *bufio.Reader) error {
	inner, ok := cmd.body.Lookup("explain").DocumentOK()
	if !ok {
		return f.answer(req, cmd, client, (&refusal{2, "BadValue", "explain: the explain field must be a command document"}).doc())
	}
	first, err := inner.IndexErr(0)
	if err != nil {
		return f.answer(req, cmd, client, (&refusal{2, "BadValue", "explain: empty command document"}).doc())
	}
	name := first.Key()
	if !explainable[name] {
		return f.answer(req, cmd, client, (&refusal{codeCommandNotSupported, codeNameCommandNotSupported, fmt.Sprintf(
			"explain of %s is not supported: Firestore's Query Explain covers aggregate, find, distinct and count "+
				"(https://cloud.google.com/firestore/mongodb-compatibility/docs/query-explain); explain the equivalent find", name)}).doc())
	}
	coll, _ := first.Value().StringValueOK()
	db, _ := cmd.body.Lookup("$db").StringValueOK()
	indexes, err := listIndexes(backend, br, db, coll)
	if err != nil {
		return err
	}
	filter, sort := queryShape(name, inner)
	p := planQuery(filter, sort, indexes)
	return f.answer(req, cmd, client, p.reply(db, coll))
}

// indexSpec is one index as listIndexes reports it.
type indexSpec struct {
	name string
	keys []sortKey
}

// sortKey is one field of a sort or an index, with its direction (1 or -1).
type sortKey struct {
	field string
	dir   int
}

// opMsgFrame is an OP_MSG carrying body as its one section, with a fresh
// request id: the front's own questions to the backend (listIndexes for
// explain, the narrowing's aggregate) go out this way.
func opMsgFrame(body []byte) []byte {
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 0)                               // length, patched below
	b = binary.LittleEndian.AppendUint32(b, uint32(explainRequestID.Add(1))) //nolint:gosec // G115: a request id, bit for bit
	b = binary.LittleEndian.AppendUint32(b, 0)                               // responseTo
	b = binary.LittleEndian.AppendUint32(b, opMsg)
	b = binary.LittleEndian.AppendUint32(b, 0) // flagBits
	b = append(b, 0)                           // section kind 0
	b = append(b, body...)
	binary.LittleEndian.PutUint32(b[0:], uint32(len(b))) //nolint:gosec // G115: a header and one document no larger than a request's
	return b
}

// listIndexes asks the backend for coll's indexes. A collection that does
// not exist has none.
func listIndexes(backend net.Conn, br *bufio.Reader, db, coll string) ([]indexSpec, error) {
	body, err := bson.Marshal(bson.D{{Key: "listIndexes", Value: coll}, {Key: "$db", Value: db}})
	if err != nil {
		return nil, fmt.Errorf("explain: build listIndexes: %w", err)
	}
	if _, err := backend.Write(opMsgFrame(body)); err != nil {
		return nil, fmt.Errorf("explain: forward listIndexes: %w", err)
	}
	reply, err := readMessage(br)
	if err != nil {
		return nil, fmt.Errorf("explain: read listIndexes reply: %w", err)
	}
	doc, _, err := parseOpMsg(reply.raw)
	if err != nil {
		return nil, fmt.Errorf("explain: listIndexes reply: %w", err)
	}
	batch, ok := doc.Lookup("cursor", "firstBatch").ArrayOK()
	if !ok {
		return nil, nil // NamespaceNotFound: no collection, no index
	}
	vals, err := batch.Values()
	if err != nil {
		return nil, fmt.Errorf("explain: listIndexes reply: %w", err)
	}
	var out []indexSpec
	for _, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			continue
		}
		name, _ := d.Lookup("name").StringValueOK()
		keys, ok := d.Lookup("key").DocumentOK()
		if !ok {
			continue
		}
		elems, err := keys.Elements()
		if err != nil {
			continue
		}
		spec := indexSpec{name: name}
		for _, e := range elems {
			spec.keys = append(spec.keys, sortKey{e.Key(), direction(e.Value())})
		}
		out = append(out, spec)
	}
	return out, nil
}

// direction reads an index or sort direction whatever number type holds it.
func direction(v bson.RawValue) int {
	if n, ok := v.AsInt64OK(); ok && n < 0 {
		return -1
	}
	if f, ok := v.DoubleOK(); ok && f < 0 {
		return -1
	}
	return 1
}

// queryShape is the filter and sort of an explained command: find's filter
// and sort, count's and distinct's query, an aggregate's leading $match and
// its first $sort.
func queryShape(name string, inner bson.Raw) (filter bson.Raw, sort []sortKey) {
	switch name {
	case "find":
		filter, _ = inner.Lookup("filter").DocumentOK()
		if s, ok := inner.Lookup("sort").DocumentOK(); ok {
			sort = sortKeys(s)
		}
	case "count", "distinct":
		filter, _ = inner.Lookup("query").DocumentOK()
	case "aggregate":
		stages, _ := inner.Lookup("pipeline").ArrayOK()
		vals, _ := stages.Values()
		for i, v := range vals {
			st, ok := v.DocumentOK()
			if !ok {
				continue
			}
			if m, ok := st.Lookup("$match").DocumentOK(); ok && i == 0 {
				filter = m
			}
			if s, ok := st.Lookup("$sort").DocumentOK(); ok && sort == nil {
				sort = sortKeys(s)
			}
		}
	}
	return filter, sort
}

func sortKeys(d bson.Raw) []sortKey {
	elems, _ := d.Elements()
	out := make([]sortKey, 0, len(elems))
	for _, e := range elems {
		out = append(out, sortKey{e.Key(), direction(e.Value())})
	}
	return out
}

// predicates are a filter's top-level fields by how an index can serve
// them: equality ({f: v}, $eq, $in), then range ($lt, $lte, $gt, $gte),
// in filter order. Other operators ($ne, $exists, $or ...) are residual:
// applied to what the scan returns, needing no index of their own.
type predicates struct {
	eq    []string
	rng   []string
	idEq  bool // _id is pinned: a lookup by document key
	empty bool // the filter selects every document
}

func analyze(filter bson.Raw) predicates {
	var p predicates
	p.empty = true
	var walk func(d bson.Raw)
	walk = func(d bson.Raw) {
		elems, _ := d.Elements()
		for _, e := range elems {
			k := e.Key()
			if k == "$and" {
				arr, _ := e.Value().ArrayOK()
				vals, _ := arr.Values()
				for _, v := range vals {
					if sub, ok := v.DocumentOK(); ok {
						walk(sub)
					}
				}
				continue
			}
			p.empty = false
			if strings.HasPrefix(k, "$") {
				continue // $or, $nor, $expr: residual
			}
			kind := "eq"
			if ops, ok := e.Value().DocumentOK(); ok {
				if first, err := ops.IndexErr(0); err == nil && strings.HasPrefix(first.Key(), "$") {
					kind = "residual"
					opElems, _ := ops.Elements()
					for _, op := range opElems {
						switch op.Key() {
						case "$eq", "$in":
							kind = "eq"
						case "$lt", "$lte", "$gt", "$gte":
							if kind != "eq" {
								kind = "range"
							}
						}
					}
				}
			}
			switch {
			case kind == "eq" && k == "_id":
				p.idEq = true
			case kind == "eq":
				p.eq = append(p.eq, k)
			case kind == "range":
				p.rng = append(p.rng, k)
			}
		}
	}
	if filter != nil {
		walk(filter)
	}
	return p
}

// plan is the emulator's answer to an explain: the index that serves the
// query, or a table scan.
type plan struct {
	scan   bool
	lookup bool // by _id alone: the document is read by its key
	index  indexSpec
}

// planQuery picks an index whose leading fields are the filter's equality
// fields (in any order), followed by the sort's fields in order (all in
// the index's directions, or all reversed), or, without a sort, by the
// first range field. A trailing _id in the sort needs no key of its own:
// Firestore orders every index by the document key last (the __key__ of
// the reference page's keys=[…]). No such index is a table scan; so is a
// query with neither filter nor sort, which reads everything by design.
func planQuery(filter bson.Raw, sort []sortKey, indexes []indexSpec) plan {
	p := analyze(filter)
	var need []sortKey
	for _, s := range sort {
		if !contains(p.eq, s.field) {
			need = append(need, s)
		}
	}
	if n := len(need); n > 0 && need[n-1].field == "_id" && (n > 1 || len(p.eq) > 0 || p.idEq) {
		need = need[:n-1]
	}
	if p.idEq && len(need) == 0 {
		return plan{lookup: true}
	}
	if len(p.eq) == 0 && len(need) == 0 && len(p.rng) == 0 {
		return plan{scan: true}
	}
	// A range must lead the ordering: Firestore scans one range of the
	// index, so the inequality field comes right after the equalities.
	if len(need) > 0 && len(p.rng) > 0 && need[0].field != p.rng[0] {
		return plan{scan: true}
	}
	for _, ix := range indexes {
		if serves(ix, p, need) {
			return plan{index: ix}
		}
	}
	return plan{scan: true}
}

func serves(ix indexSpec, p predicates, need []sortKey) bool {
	i := 0
	for i < len(ix.keys) && contains(p.eq, ix.keys[i].field) {
		i++
	}
	if i != len(p.eq) {
		return false // an equality field is not in the index's prefix
	}
	if len(need) == 0 {
		if len(p.rng) == 0 {
			return true
		}
		return i < len(ix.keys) && ix.keys[i].field == p.rng[0]
	}
	if len(ix.keys)-i < len(need) {
		return false
	}
	flip := need[0].dir != ix.keys[i].dir
	for j, s := range need {
		k := ix.keys[i+j]
		if k.field != s.field || (k.dir != s.dir) != flip {
			return false
		}
	}
	return true
}

func contains(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

// reply is the explain answer: the winning plan's node, and the execution
// tree as Firestore prints it.
func (p plan) reply(db, coll string) bson.D {
	var node bson.D
	var tree string
	switch {
	case p.lookup:
		node = bson.D{{Key: "stage", Value: "TableAccess"}, {Key: "source", Value: "/" + coll}, {Key: "keys", Value: "__key__"}}
		tree = "• TableAccess\n    source: /" + coll + "\n    (a lookup by _id)\n"
	case p.scan:
		node = bson.D{{Key: "stage", Value: "TableScan"}, {Key: "source", Value: "/" + coll}}
		tree = "• TableScan\n    source: /" + coll + "\n"
	default:
		keys := make([]string, 0, len(p.index.keys)+1)
		for _, k := range p.index.keys {
			dir := "ASC"
			if k.dir < 0 {
				dir = "DESC"
			}
			keys = append(keys, k.field+" "+dir)
		}
		keys = append(keys, "__key__ ASC")
		desc := fmt.Sprintf("type=CollectionGroupIndex, id=%s, keys=[%s]", p.index.name, strings.Join(keys, ", "))
		node = bson.D{{Key: "stage", Value: "IndexScan"}, {Key: "index", Value: desc}}
		tree = "• IndexScan\n    index: " + desc + "\n"
	}
	return bson.D{
		{Key: "queryPlanner", Value: bson.D{
			{Key: "namespace", Value: db + "." + coll},
			{Key: "winningPlan", Value: node},
		}},
		{Key: "explain", Value: tree},
		{Key: "ok", Value: 1.0},
	}
}
