package mongo

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Firestore's natural order "does not match insertion order or order by
// _id ascending" (Queries, https://cloud.google.com/firestore/mongodb-compatibility/docs/behavior-differences).
// FerretDB returns documents in insertion order, so code that forgot a sort
// works locally and not in production. Strict mode shuffles every batch of
// a find without a sort, and of an aggregate without a $sort stage; and a
// find with a limit and no sort is asked of FerretDB with a wider limit,
// so that the documents returned are a random few of the matching ones,
// not always the first inserted: a query that pages by "limit, no sort"
// and counts on seeing every document in turn starves locally as it may
// in production.

// widenFactor and widenMin bound how far a limit without a sort is widened:
// to max(limit × widenFactor, limit + widenMin), at most widenMax.
const (
	widenFactor = 4
	widenMin    = 256
	widenMax    = 10000
)

// order is what the front does to the replies of one request.
type order struct {
	// shuffle: reorder the documents of the reply's batch.
	shuffle bool
	// limit > 0: the request's limit was widened; keep this many.
	limit int64
	// wide is the widened limit asked of FerretDB.
	wide int64
}

// orderFor decides whether a request's replies are shuffled: an unsorted
// find or aggregate, or a getMore on a cursor one of them opened.
func (f *front) orderFor(sess *session, cmd command) order {
	if !f.strict {
		return order{}
	}
	switch cmd.name {
	case "find":
		if s, ok := cmd.body.Lookup("sort").DocumentOK(); ok {
			if elems, _ := s.Elements(); len(elems) > 0 {
				return order{}
			}
		}
		o := order{shuffle: true}
		if n, ok := cmd.body.Lookup("limit").AsInt64OK(); ok && n > 0 && len(cmd.seqs) == 0 {
			o.limit = n
			o.wide = min(max(n*widenFactor, n+widenMin), widenMax)
			if o.wide <= n {
				o.limit = 0
			}
		}
		return o
	case "aggregate":
		if hasStage(cmd.body, "$sort") {
			return order{}
		}
		return order{shuffle: true}
	case "getMore":
		id, ok := cmd.body.Lookup("getMore").AsInt64OK()
		if ok && sess.shuffled[id] {
			return order{shuffle: true}
		}
	case "killCursors":
		if arr, ok := cmd.body.Lookup("cursors").ArrayOK(); ok {
			vals, _ := arr.Values()
			for _, v := range vals {
				if id, ok := v.AsInt64OK(); ok {
					delete(sess.shuffled, id)
				}
			}
		}
	}
	return order{}
}

// widen rewrites a find's limit to o.wide, in one batch: FerretDB then
// answers with up to o.wide matching documents, of which reorder keeps a
// random o.limit. The request has no document sequences (orderFor checked),
// so the new message is its header, its flags (checksum dropped, since it
// covered the old body) and the new body.
func (o order) widen(req message, cmd command) ([]byte, error) {
	d, err := toD(cmd.body)
	if err != nil {
		return nil, fmt.Errorf("widen find: %w", err)
	}
	out := d[:0:0]
	for _, e := range d {
		switch e.Key {
		case "limit", "batchSize", "singleBatch":
			continue
		}
		out = append(out, e)
	}
	out = append(out, bson.E{Key: "limit", Value: o.wide}, bson.E{Key: "batchSize", Value: o.wide}, bson.E{Key: "singleBatch", Value: true})
	body, err := bson.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("widen find: %w", err)
	}
	flags := binary.LittleEndian.Uint32(req.raw[headerLen:]) &^ flagChecksumPresent
	b := append([]byte(nil), req.raw[:headerLen]...)
	b = binary.LittleEndian.AppendUint32(b, flags)
	b = append(b, 0)
	b = append(b, body...)
	binary.LittleEndian.PutUint32(b[0:], uint32(len(b))) //nolint:gosec // G115: a header and one BSON document
	return b, nil
}

// reorder shuffles the batch of a cursor reply (firstBatch or nextBatch),
// cuts it to a widened find's own limit, and remembers an open cursor so
// its getMores are shuffled too. A reply that is an error, or not a
// cursor, is relayed as it came.
func (f *front) reorder(sess *session, req message, reply message, o order) ([]byte, error) {
	body, _, err := parseOpMsg(reply.raw)
	if err != nil {
		return nil, fmt.Errorf("reorder reply: %w", err)
	}
	cur, ok := body.Lookup("cursor").DocumentOK()
	if !ok {
		return reply.raw, nil
	}
	cd, err := toD(cur)
	if err != nil {
		return nil, fmt.Errorf("reorder reply: %w", err)
	}
	for i, e := range cd {
		rv, ok := e.Value.(bson.RawValue)
		if !ok {
			continue
		}
		switch e.Key {
		case "firstBatch", "nextBatch":
			arr, ok := rv.ArrayOK()
			if !ok {
				return reply.raw, nil
			}
			vals, err := arr.Values()
			if err != nil {
				return nil, fmt.Errorf("reorder reply: %w", err)
			}
			rand.Shuffle(len(vals), func(a, b int) { vals[a], vals[b] = vals[b], vals[a] }) //nolint:gosec // G404: an order that is not insertion order, not a secret
			if o.limit > 0 && int64(len(vals)) > o.limit {
				vals = vals[:o.limit]
			}
			batch := make(bson.A, len(vals))
			for j, v := range vals {
				batch[j] = v
			}
			cd[i].Value = batch
			if len(vals) > 1 {
				f.stats.shuffled.Add(1)
			}
		case "id":
			id, _ := rv.AsInt64OK()
			if id == 0 {
				if g, ok := req.getMoreID(); ok {
					delete(sess.shuffled, g)
				}
			} else {
				if sess.shuffled == nil {
					sess.shuffled = map[int64]bool{}
				}
				sess.shuffled[id] = true
			}
		}
	}
	d, err := toD(body)
	if err != nil {
		return nil, fmt.Errorf("reorder reply: %w", err)
	}
	for i := range d {
		if d[i].Key == "cursor" {
			d[i].Value = cd
		}
	}
	return replyTo(req, d)
}

// getMoreID returns the cursor a getMore request names.
func (m message) getMoreID() (int64, bool) {
	cmd, err := inspect(m)
	if err != nil || cmd.name != "getMore" {
		return 0, false
	}
	return cmd.body.Lookup("getMore").AsInt64OK()
}

// hasStage reports whether an aggregate pipeline has a stage named stage.
func hasStage(body bson.Raw, stage string) bool {
	arr, ok := body.Lookup("pipeline").ArrayOK()
	if !ok {
		return false
	}
	vals, err := arr.Values()
	if err != nil {
		return false
	}
	for _, v := range vals {
		if d, ok := v.DocumentOK(); ok {
			if _, err := d.LookupErr(stage); err == nil {
				return true
			}
		}
	}
	return false
}
