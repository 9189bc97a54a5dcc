package mongo

import (
	"strings"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Billing units, as Firestore Enterprise edition (which serves the MongoDB
// compatible API) bills them
// (https://cloud.google.com/firestore/enterprise/pricing, "Reads, writes,
// and deletes"): a read is charged in read units of 4 KiB of the data it
// processes (documents or index entries), a write or a delete in write
// units of 1 KiB, the index entries it writes included.
const (
	readUnitBytes  = 4 * 1024
	writeUnitBytes = 1024
	// entryOverhead is the fixed part of a document's and of an index
	// entry's stored size in Firestore with MongoDB compatibility
	// (https://cloud.google.com/firestore/mongodb-compatibility/docs/storage-size:
	// "48 additional bytes" in both).
	entryOverhead = 48
)

// valueSize is a field value's stored size as the storage-size page
// tables it (https://cloud.google.com/firestore/mongodb-compatibility/docs/storage-size,
// "Field value size"), not its BSON length: a string is its UTF-8 bytes
// and 1 (BSON adds a 4-byte length), a date 8, a 32-bit integer 4. The
// page has no row for an ObjectId: its 12 bytes are counted.
func valueSize(v bson.RawValue) int64 {
	switch v.Type {
	case bson.TypeString:
		s, _ := v.StringValueOK()
		return int64(len(s)) + 1
	case bson.TypeBoolean, bson.TypeNull, bson.TypeMinKey, bson.TypeMaxKey, bson.TypeUndefined:
		return 1
	case bson.TypeInt32:
		return 4
	case bson.TypeInt64, bson.TypeDouble, bson.TypeDateTime, bson.TypeTimestamp:
		return 8
	case bson.TypeDecimal128:
		return 16
	case bson.TypeObjectID:
		return 12
	case bson.TypeBinary:
		sub, data, _ := v.BinaryOK()
		if sub != 0 {
			return int64(len(data)) + 1
		}
		return int64(len(data))
	case bson.TypeRegex:
		pat, opt, _ := v.RegexOK()
		return int64(len(pat)+1) + int64(len(opt)+1)
	case bson.TypeEmbeddedDocument:
		d, _ := v.DocumentOK()
		return fieldsSize(d, false)
	case bson.TypeArray:
		a, _ := v.ArrayOK()
		vals, _ := a.Values()
		var n int64
		for _, e := range vals {
			n += valueSize(e)
		}
		return n
	}
	return int64(len(v.Value))
}

// fieldsSize sums each field's name (as a string: bytes and 1) and value;
// a document's own _id counts its value only.
func fieldsSize(d bson.Raw, top bool) int64 {
	els, _ := d.Elements()
	var n int64
	for _, e := range els {
		if !top || e.Key() != "_id" {
			n += int64(len(e.Key())) + 1
		}
		n += valueSize(e.Value())
	}
	return n
}

// docSize is a document's stored size: its collection's name, its fields'
// names but _id's, every value, and 48 bytes ("Document size").
func docSize(coll string, doc bson.Raw) int64 {
	return int64(len(coll)) + 1 + fieldsSize(doc, true) + entryOverhead
}

// UnbilledApp is the application name (the URI's appName) of a client
// whose commands Billing leaves out: a meter's own reads, such as
// baton bench cost's polling for the end of a phase, which would otherwise
// be billed to the runs it waits for. It is only a name; any client may
// send it, so it is for measuring tools, not a limit of anything.
const UnbilledApp = "baton-unbilled"

// Billing is what the front has seen pass that Firestore would bill, in
// its units. It is measured on the wire, so it counts every store, the
// unmetered ones included. Documents and index entries are sized by the
// storage-size page (docSize, entryBytes); updates and deletes, whose
// documents do not cross the wire, are priced at the average size of the
// collection's documents seen so far.
type Billing struct {
	// ReadUnits and WriteUnits are the totals.
	ReadUnits, WriteUnits int64
	// Collections is the same by collection name.
	Collections map[string]CollectionBilling
}

// CollectionBilling is Billing for one collection.
type CollectionBilling struct {
	// ReadUnits and WriteUnits are Firestore's billing units.
	ReadUnits, WriteUnits int64
	// Queries counts read commands (find, aggregate, count; getMore is
	// part of its query). DocsRead counts documents returned.
	Queries, DocsRead int64
	// Writes counts documents inserted, updated or deleted;
	// IndexEntries the index entries those writes wrote or removed.
	Writes, IndexEntries int64
	// Indexes is the number of secondary indexes created on it.
	Indexes int
	// AvgDocBytes is the average document size (stored size): of each
	// document's latest version seen whole, else of all seen;
	// AvgIndexBytes the average size of an inserted document's index
	// entries, all together. With them a caller prices what a document
	// costs to keep and, at the end of its retention, to delete.
	AvgDocBytes, AvgIndexBytes int64
}

// indexDef is one secondary index as createIndexes declared it.
type indexDef struct {
	fields  []string
	sparse  bool
	partial []string // top-level fields of partialFilterExpression
}

// covers reports whether a document with these fields has an entry in the
// index: a sparse or partial index leaves out a document without its
// fields (an approximation of partialFilterExpression: presence only).
func (ix indexDef) covers(has func(string) bool) bool {
	if ix.sparse {
		some := false
		for _, f := range ix.fields {
			some = some || has(f)
		}
		if !some {
			return false
		}
	}
	for _, f := range ix.partial {
		if !has(f) {
			return false
		}
	}
	return true
}

type collBill struct {
	CollectionBilling
	name     string // the collection's, without its database
	indexes  []indexDef
	docBytes int64 // sum of document sizes seen
	docsSeen int64
	idxBytes int64 // sum of index entry bytes of inserted documents
	idxDocs  int64
	// latest is each document's size as last seen whole (inserted,
	// returned by findAndModify, read without a projection), by _id, for
	// the first maxTracked documents; latestSum sums it. A document grows
	// as it is updated (a run's claim and outcome), so the average of
	// every size seen would lean to whichever versions happened to cross
	// the wire most: an update or a delete writes, and storage keeps, the
	// latest.
	latest    map[string]int64
	latestSum int64
}

// maxTracked bounds the documents a collection's latest sizes are kept for,
// so that a long-running local stack does not grow without end.
const maxTracked = 1 << 16

// seen records a document of size bytes (stored size); whole is false for
// a projection, which is counted in the average of what was seen but is
// not the document's size.
func (c *collBill) seen(doc bson.Raw, size int, whole bool) {
	c.docBytes += int64(size)
	c.docsSeen++
	if !whole {
		return
	}
	id := string(doc.Lookup("_id").Value)
	if id == "" {
		return
	}
	if c.latest == nil {
		c.latest = map[string]int64{}
	}
	old, ok := c.latest[id]
	if !ok && len(c.latest) >= maxTracked {
		return
	}
	c.latest[id] = int64(size)
	c.latestSum += int64(size) - old
}

// avgDoc is the average document size: of each document's latest whole
// size when any was seen, else of everything seen, else a guess.
func (c *collBill) avgDoc() int64 {
	if n := int64(len(c.latest)); n > 0 {
		return c.latestSum / n
	}
	if c.docsSeen == 0 {
		return 256
	}
	return c.docBytes / c.docsSeen
}

func (c *collBill) avgIdx() int64 {
	if c.idxDocs == 0 {
		// No insert seen yet: an entry of the page's 48 bytes, the
		// collection's name, an _id and a value or two.
		return int64(len(c.indexes)) * 100
	}
	return c.idxBytes / c.idxDocs
}

// avgEntry is the average size of one index entry of the collection.
func (c *collBill) avgEntry() int64 {
	return max(c.avgIdx()/int64(max(len(c.indexes), 1)), 1)
}

type biller struct {
	mu    sync.Mutex
	colls map[string]*collBill // by "db.collection"
}

func (b *biller) coll(ns string) *collBill {
	if b.colls == nil {
		b.colls = map[string]*collBill{}
	}
	c := b.colls[ns]
	if c == nil {
		_, name, _ := strings.Cut(ns, ".")
		c = &collBill{name: name}
		b.colls[ns] = c
	}
	return c
}

func units(bytes, unit int64) int64 { return max((bytes+unit-1)/unit, 1) }

// snapshot returns the billing of database db ("" for all).
func (b *biller) snapshot(db string) Billing {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := Billing{Collections: map[string]CollectionBilling{}}
	for ns, c := range b.colls {
		d, name, _ := strings.Cut(ns, ".")
		if db != "" && d != db {
			continue
		}
		cb := c.CollectionBilling
		cb.Indexes = len(c.indexes)
		cb.AvgDocBytes, cb.AvgIndexBytes = c.avgDoc(), c.avgIdx()
		prev := out.Collections[name]
		prev.ReadUnits += cb.ReadUnits
		prev.WriteUnits += cb.WriteUnits
		prev.Queries += cb.Queries
		prev.DocsRead += cb.DocsRead
		prev.Writes += cb.Writes
		prev.IndexEntries += cb.IndexEntries
		prev.Indexes, prev.AvgDocBytes, prev.AvgIndexBytes = cb.Indexes, cb.AvgDocBytes, cb.AvgIndexBytes
		out.Collections[name] = prev
		out.ReadUnits += cb.ReadUnits
		out.WriteUnits += cb.WriteUnits
	}
	return out
}

// entryBytes is the size of one index entry of doc in ix ("Index entry
// size"): the collection's name, the _id value, the indexed values (an
// absent one is null, 1 byte) and 48 bytes. An index whose last key is
// _id counts it once: Terraform declares that key as __name__, the
// document name every index entry already ends with, which the page's _id
// term is. (The page does not say so in words; it is what __name__ is.)
func entryBytes(coll string, doc bson.Raw, ix indexDef) int64 {
	n := int64(len(coll)) + 1 + valueSize(doc.Lookup("_id")) + entryOverhead
	for _, f := range ix.fields {
		if f == "_id" {
			continue
		}
		v, err := doc.LookupErr(strings.Split(f, ".")...)
		if err != nil {
			n++ // null
			continue
		}
		n += valueSize(v)
	}
	return n
}

// observe bills one command from its request and the backend's reply.
// Commands that answered an error bill nothing, except writes, whose
// reply's n says how many landed.
func (b *biller) observe(cmd command, reply bson.Raw) {
	db, _ := cmd.body.Lookup("$db").StringValueOK()
	collName, _ := cmd.body.Index(0).Value().StringValueOK()
	ns := db + "." + collName
	b.mu.Lock()
	defer b.mu.Unlock()
	switch cmd.name {
	case "createIndexes":
		b.createIndexes(ns, cmd)
	case "find", "aggregate":
		if ok, _ := reply.Lookup("ok").AsFloat64OK(); ok != 1 {
			return
		}
		batch, _ := reply.Lookup("cursor", "firstBatch").ArrayOK()
		c := b.coll(ns)
		c.Queries++
		b.read(c, batch, true, !idOnly(cmd.body), cmd.name == "find" && !hasProjection(cmd.body, "projection"))
	case "getMore":
		cur, _ := reply.Lookup("cursor").DocumentOK()
		full, _ := cur.Lookup("ns").StringValueOK()
		batch, _ := cur.Lookup("nextBatch").ArrayOK()
		if full == "" {
			return
		}
		b.read(b.coll(full), batch, false, false, false)
	case "count":
		n, ok := reply.Lookup("n").AsInt64OK()
		if !ok {
			return
		}
		c := b.coll(ns)
		c.Queries++
		// A count reads index entries only, in 4 KiB tranches.
		u := units(n*c.avgEntry(), readUnitBytes)
		c.ReadUnits += u
	case "insert":
		b.insert(ns, collName, cmd, reply)
	case "update":
		b.update(ns, cmd, reply)
	case "delete":
		n, _ := reply.Lookup("n").AsInt64OK()
		c := b.coll(ns)
		b.write(c, n, c.avgDoc(), c.avgIdx(), int64(len(c.indexes)))
	case "findAndModify", "findandmodify":
		n, _ := reply.Lookup("lastErrorObject", "n").AsInt64OK()
		if n == 0 {
			return
		}
		c := b.coll(ns)
		size := c.avgDoc()
		if v, ok := reply.Lookup("value").DocumentOK(); ok {
			size = docSize(collName, bson.Raw(v))
			c.seen(bson.Raw(v), int(size), !hasProjection(cmd.body, "fields"))
		}
		if rm, _ := cmd.body.Lookup("remove").BooleanOK(); rm {
			b.write(c, n, size, c.avgIdx(), int64(len(c.indexes)))
			return
		}
		u, _ := cmd.body.Lookup("update").DocumentOK()
		entries, ebytes := changedEntries(c, u)
		b.write(c, n, size, ebytes, entries)
	}
}

// hasProjection reports whether the command's field key (find's
// "projection", findAndModify's "fields") limits the fields returned.
func hasProjection(body bson.Raw, key string) bool {
	p, ok := body.Lookup(key).DocumentOK()
	return ok && len(p) > 5 // an empty document is 5 bytes
}

// idOnly reports whether a find's filter names only _id: a lookup by
// document name, which reads no index.
func idOnly(body bson.Raw) bool {
	f, ok := body.Lookup("filter").DocumentOK()
	if !ok {
		return false
	}
	els, err := f.Elements()
	return err == nil && len(els) == 1 && els[0].Key() == "_id"
}

// read bills a batch of documents a query returned; whole is false when
// they may be projections (an aggregate, a getMore, a find with one).
func (b *biller) read(c *collBill, batch bson.RawArray, query, index, whole bool) {
	vals, _ := batch.Values()
	var u int64
	for _, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			continue
		}
		size := docSize(c.name, bson.Raw(d))
		c.seen(bson.Raw(d), int(size), whole)
		u += units(size, readUnitBytes)
	}
	c.DocsRead += int64(len(vals))
	if index {
		// The index entries the query scanned, in 4 KiB tranches.
		u += units(int64(len(vals))*c.avgEntry(), readUnitBytes)
	} else if query && u == 0 {
		u = 1 // a query that returns nothing is still charged
	}
	c.ReadUnits += u
}

func (b *biller) write(c *collBill, n, docBytes, idxBytes, entries int64) {
	if n <= 0 {
		return
	}
	c.Writes += n
	c.IndexEntries += n * entries
	u := n * units(docBytes+idxBytes, writeUnitBytes)
	c.WriteUnits += u
}

func docs(cmd command, key string) []bson.Raw {
	if s, ok := cmd.seqs[key]; ok {
		return s
	}
	arr, ok := cmd.body.Lookup(key).ArrayOK()
	if !ok {
		return nil
	}
	vals, _ := arr.Values()
	out := make([]bson.Raw, 0, len(vals))
	for _, v := range vals {
		if d, ok := v.DocumentOK(); ok {
			out = append(out, bson.Raw(d))
		}
	}
	return out
}

func (b *biller) insert(ns, coll string, cmd command, reply bson.Raw) {
	n, _ := reply.Lookup("n").AsInt64OK()
	failed := map[int]bool{}
	if we, ok := reply.Lookup("writeErrors").ArrayOK(); ok {
		vals, _ := we.Values()
		for _, v := range vals {
			if d, ok := v.DocumentOK(); ok {
				i, _ := d.Lookup("index").AsInt64OK()
				failed[int(i)] = true
			}
		}
	}
	c := b.coll(ns)
	var landed int64
	for i, d := range docs(cmd, "documents") {
		if failed[i] || landed >= n {
			continue
		}
		landed++
		has := func(f string) bool { _, err := d.LookupErr(strings.Split(f, ".")...); return err == nil }
		var ib, entries int64
		for _, ix := range c.indexes {
			if ix.covers(has) {
				ib += entryBytes(coll, d, ix)
				entries++
			}
		}
		size := docSize(coll, d)
		c.seen(d, int(size), true)
		c.idxBytes += ib
		c.idxDocs++
		b.write(c, 1, size, ib, entries)
	}
}

// changedEntries is the index entries an update rewrites: those of every
// index on a field it sets or unsets, each removed and written again.
// A pipeline or a replacement rewrites them all.
func changedEntries(c *collBill, u bson.Raw) (entries, bytes int64) {
	if len(c.indexes) == 0 {
		return 0, 0
	}
	per := c.avgIdx() / int64(len(c.indexes))
	els, err := u.Elements()
	if err != nil || len(els) == 0 || !strings.HasPrefix(els[0].Key(), "$") {
		n := int64(len(c.indexes))
		return 2 * n, 2 * n * per
	}
	touched := map[string]bool{}
	for _, e := range els {
		fs, ok := e.Value().DocumentOK()
		if !ok {
			continue
		}
		fe, _ := fs.Elements()
		for _, f := range fe {
			touched[strings.Split(f.Key(), ".")[0]] = true
		}
	}
	for _, ix := range c.indexes {
		for _, f := range append(ix.fields, ix.partial...) {
			if touched[strings.Split(f, ".")[0]] {
				entries += 2
				bytes += 2 * per
				break
			}
		}
	}
	return entries, bytes
}

func (b *biller) update(ns string, cmd command, reply bson.Raw) {
	n, _ := reply.Lookup("n").AsInt64OK()
	if n == 0 {
		return
	}
	c := b.coll(ns)
	ups := docs(cmd, "updates")
	var entries, ebytes int64
	for _, u := range ups {
		if spec, ok := u.Lookup("u").DocumentOK(); ok {
			e, eb := changedEntries(c, spec)
			entries, ebytes = max(entries, e), max(ebytes, eb)
		} else {
			n := int64(len(c.indexes))
			entries, ebytes = 2*n, 2*n*c.avgIdx()/max(n, 1)
		}
	}
	b.write(c, n, c.avgDoc(), ebytes, entries)
}

func (b *biller) createIndexes(ns string, cmd command) {
	arr, ok := cmd.body.Lookup("indexes").ArrayOK()
	if !ok {
		return
	}
	vals, _ := arr.Values()
	c := b.coll(ns)
	have := map[string]bool{}
	for _, ix := range c.indexes {
		have[strings.Join(ix.fields, ",")] = true
	}
	for _, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			continue
		}
		key, _ := d.Lookup("key").DocumentOK()
		kels, _ := key.Elements()
		var ix indexDef
		for _, k := range kels {
			ix.fields = append(ix.fields, k.Key())
		}
		if len(ix.fields) == 1 && ix.fields[0] == "_id" {
			continue
		}
		if have[strings.Join(ix.fields, ",")] {
			continue
		}
		ix.sparse, _ = d.Lookup("sparse").BooleanOK()
		if pf, ok := d.Lookup("partialFilterExpression").DocumentOK(); ok {
			pels, _ := pf.Elements()
			for _, p := range pels {
				ix.partial = append(ix.partial, p.Key())
			}
		}
		c.indexes = append(c.indexes, ix)
	}
}
