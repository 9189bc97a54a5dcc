package mongo

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	_ "modernc.org/sqlite" // the driver FerretDB's SQLite backend uses
)

// The _id index FerretDB's SQLite backend does not use. FerretDB indexes
// _id as _ferretdb_sjson->"_id" (metadata/registry.go, indexesCreate), but
// looks a document up by _ferretdb_sjson->'$._id' (metadata.IDColumn), a
// different expression, so SQLite never takes the index: every lookup by
// _id (a find by _id, the write of an updated document, a delete) parses
// the JSON of every row of the table: at 5,000 documents a lookup took
// about 1.7 times as long as with an index (BenchmarkIDLookup), and the
// gap grows with the table, so issue 28's scale test, whose runs collection
// reaches 20,000 documents, paid more for every run it stored. Firestore
// reads a document by its id directly.
//
// idIndexer adds, once per collection, an index on FerretDB's lookup
// expression itself, over a connection of its own to the database's
// SQLite file (as FerretDB opens it: WAL, a busy timeout). FerretDB keeps
// its indexes in its own metadata, so it neither lists nor drops this one;
// SQLite drops it with the table.
type idIndexer struct {
	dir string // FerretDB's SQLite directory; "" turns the indexer off

	// mu serialises ensure and forget, so that a drop is forwarded only
	// once no index is being built on its file.
	mu   sync.Mutex
	done map[string]bool // namespace → indexed
}

// idIndexColumn is metadata.IDColumn: FerretDB's _id lookup expression.
const idIndexColumn = `_ferretdb_sjson->'$._id'`

// ensure indexes the collection of namespace db.coll if it has not yet, and
// says whether it is indexed. A collection that does not exist yet is not
// (the next write creates it, and calls again). It takes no context: the
// front's connections have none, and SQLite's busy timeout (10 s, as
// FerretDB's own) bounds the wait for the file's write lock.
func (x *idIndexer) ensure(db, coll string) (bool, error) {
	if x == nil || x.dir == "" || db == "" || coll == "" {
		return false, nil
	}
	ns := db + "." + coll
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.done[ns] {
		return true, nil
	}
	conn, err := x.open(db)
	if err != nil || conn == nil {
		return false, err
	}
	// Closed at once: a connection kept open could outlive its file
	// (dropDatabase deletes it) and, closing last, remove the WAL of a
	// database created since under the same name.
	defer func() { _ = conn.Close() }()
	var table string
	err = conn.QueryRow(`SELECT table_name FROM _ferretdb_collections WHERE name = ?`, coll).Scan(&table)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") || errors.Is(err, sql.ErrNoRows) {
			return false, nil // no collection yet
		}
		return false, fmt.Errorf("mongo emulator: _id index of %s: table name: %w", ns, err)
	}
	q := fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %q ON %q (%s)`, table+"_baton_id_lookup", table, idIndexColumn)
	if _, err := conn.Exec(q); err != nil {
		return false, fmt.Errorf("mongo emulator: _id index of %s: %w", ns, err)
	}
	if x.done == nil {
		x.done = map[string]bool{}
	}
	x.done[ns] = true
	return true, nil
}

// forget is called when a collection (coll "") or a whole database is
// dropped: the next write recreates its table, under a name that may
// differ, which needs the index again.
func (x *idIndexer) forget(db, coll string) {
	if x == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for ns := range x.done {
		if ns == db+"."+coll || (coll == "" && strings.HasPrefix(ns, db+".")) {
			delete(x.done, ns)
		}
	}
}

// open opens db's SQLite file, which must exist (FerretDB creates it;
// an empty file created here would list as a database). x.mu is held.
func (x *idIndexer) open(db string) (*sql.DB, error) {
	path := filepath.Join(x.dir, db+".sqlite")
	if _, err := os.Stat(path); err != nil {
		return nil, nil //nolint:nilnil // no database yet: nothing to index
	}
	q := url.Values{}
	q.Set("mode", "rw")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(wal)")
	conn, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("mongo emulator: _id index: open %s: %w", db, err)
	}
	return conn, nil
}
