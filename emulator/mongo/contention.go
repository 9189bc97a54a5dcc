package mongo

import (
	"fmt"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// codeWriteConflict is MongoDB's WriteConflict, the code Firestore with
// MongoDB compatibility gives its Aborted status: "Aborted (112): Too much
// contention on these documents. Please try again", answered to "a
// document receiving too many updates per second"
// (https://cloud.google.com/firestore/mongodb-compatibility/docs/understand-error-codes).
const (
	codeWriteConflict     = 112
	codeNameWriteConflict = "WriteConflict"
)

// docLocks are strict mode's write locks. Each collection has a
// read/write lock. A write that names its documents by _id takes the read
// side and then its documents; a write to a document whose lock another
// write holds is answered 112 at once, as Firestore answers Aborted to
// contention on one document, instead of waiting its turn. A write that
// does not name its documents (a findAndModify that sorts to pick "the
// best queued job", a statement whose filter is not an _id equality) takes
// the write side: it runs alone in its collection, which is what keeps
// FerretDB's query-then-write atomic for it.
//
// Failing the later writer at once, rather than making it wait, is what
// Firestore's Enterprise edition (the one with MongoDB compatibility) does
// by default: it "resolves data contention by delaying or failing one of
// the operations", with OPTIMISTIC concurrency unless configured otherwise
// (https://cloud.google.com/firestore/docs/transaction-data-contention).
//
// Only writes that overlap in time conflict. Firestore's 1 write per
// second per document is a sustained rate it tolerates bursts above (see
// docs/emulators-mongo.md), so a sequence of writes to one document from
// one client, each waiting for the last, is never refused here.
type docLocks struct {
	mu    sync.Mutex
	colls map[string]*sync.RWMutex
	held  map[docKey]bool
}

// docKey names one document: its namespace and its _id's BSON type and
// bytes (so the string "1" and the integer 1 are different documents).
type docKey struct {
	ns string
	id string
}

func (l *docLocks) coll(ns string) *sync.RWMutex {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.colls == nil {
		l.colls = map[string]*sync.RWMutex{}
		l.held = map[docKey]bool{}
	}
	m := l.colls[ns]
	if m == nil {
		m = &sync.RWMutex{}
		l.colls[ns] = m
	}
	return m
}

// lockWrite takes the locks the write needs and returns their release, or
// the 112 refusal when one of its documents is being written. Lax mode
// serialises every write on one mutex and never refuses.
func (f *front) lockWrite(cmd command) (release func(), conflict *refusal) {
	if !f.strict {
		f.writeMu.Lock()
		return f.writeMu.Unlock, nil
	}
	ns := cmd.namespace()
	m := f.locks.coll(ns)
	ids, pinned := writeTargets(cmd)
	if !pinned {
		m.Lock()
		return m.Unlock, nil
	}
	m.RLock()
	l := &f.locks
	l.mu.Lock()
	for _, id := range ids {
		if l.held[docKey{ns, id.key}] {
			l.mu.Unlock()
			m.RUnlock()
			return nil, &refusal{codeWriteConflict, codeNameWriteConflict, fmt.Sprintf(
				"Too much contention on these documents. Please try again. "+
					"(baton's Firestore emulator: another write to %s _id %s was in flight; Firestore answers Aborted (112) "+
					"to a document receiving too many updates per second, %s)", ns, id.show, urlErrors)}
		}
	}
	for _, id := range ids {
		l.held[docKey{ns, id.key}] = true
	}
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		for _, id := range ids {
			delete(l.held, docKey{ns, id.key})
		}
		l.mu.Unlock()
		m.RUnlock()
	}, nil
}

// target is one document a write names: key identifies it, show is for
// the error message.
type target struct {
	key, show string
}

// writeTargets returns the _ids a write command touches, and whether it
// names them all. Insert names each document's _id; update and delete
// statements name one when their filter is an _id equality ({_id: v} or
// {_id: {$eq: v}}); findAndModify likewise by its query. Anything else
// (no _id, an operator on _id, a statement without a filter) does not pin.
func writeTargets(cmd command) ([]target, bool) {
	var docs []bson.Raw
	var field string // "" for insert (the documents themselves), else the filter's key
	switch cmd.name {
	case "insert":
		docs = cmd.docs("documents")
	case "update":
		docs, field = cmd.docs("updates"), "q"
	case "delete":
		docs, field = cmd.docs("deletes"), "q"
	case "findAndModify", "findandmodify":
		docs = []bson.Raw{cmd.body}
		field = "query"
	default:
		return nil, false
	}
	if len(docs) == 0 {
		return nil, false
	}
	seen := map[string]bool{}
	var out []target
	for _, d := range docs {
		filter := d
		if field != "" {
			f, ok := d.Lookup(field).DocumentOK()
			if !ok {
				return nil, false
			}
			filter = f
		}
		v, err := filter.LookupErr("_id")
		if err != nil {
			return nil, false
		}
		if field != "" {
			if sub, ok := v.DocumentOK(); ok {
				// {_id: {$eq: v}} is an equality; any other operator is not.
				eq, err := sub.LookupErr("$eq")
				if elems, _ := sub.Elements(); err != nil || len(elems) != 1 {
					return nil, false
				}
				v = eq
			}
		}
		switch v.Type {
		case bson.TypeEmbeddedDocument, bson.TypeArray, bson.TypeRegex, bson.TypeUndefined:
			return nil, false
		}
		key := string(rune(v.Type)) + string(v.Value)
		if !seen[key] {
			seen[key] = true
			out = append(out, target{key: key, show: v.String()})
		}
	}
	return out, true
}

// docs returns the documents of a write command's array argument, from the
// body or from the OP_MSG document sequence the driver sends it in.
func (c command) docs(name string) []bson.Raw {
	if seq, ok := c.seqs[name]; ok {
		return seq
	}
	arr, ok := c.body.Lookup(name).ArrayOK()
	if !ok {
		return nil
	}
	vals, err := arr.Values()
	if err != nil {
		return nil
	}
	out := make([]bson.Raw, 0, len(vals))
	for _, v := range vals {
		if d, ok := v.DocumentOK(); ok {
			out = append(out, d)
		}
	}
	return out
}
