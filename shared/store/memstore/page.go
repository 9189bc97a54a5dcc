package memstore

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/store"
)

// pageQuery is one keyset page, as mongostore's PageQuery: sorted by
// sortField (a time field; "" for _id alone), then _id, both descending
// with desc.
type pageQuery struct {
	coll string
	// binding names the query and its filter: a token from another query
	// (another list, another filter, another now) is refused.
	binding string
	match   func(bson.M) bool
	shard   *int64 // scan only this vshard's schedules (match requires it too)
	// dueBy, set on the due query of all schedules (match: enabled and
	// nextRunAt ≤ dueBy), serves it from the typed due index.
	dueBy     *int64
	sortField string
	desc      bool
	limit     int
	token     string
}

// pageToken is the position after the last document of a page.
type pageToken struct {
	Q    string `json:"q"`           // hash of the binding
	K    *int64 `json:"k,omitempty"` // the sort key, in milliseconds (nil: missing)
	ID   string `json:"i"`
	Sort bool   `json:"s,omitempty"` // the query sorts by a field
}

// maxLimit is mongostore's page size bound.
const maxLimit = 1000

func (s *Store) sign(body []byte) []byte {
	m := hmac.New(sha256.New, s.key[:])
	m.Write(body)
	return m.Sum(nil)[:16]
}

func bindingHash(q pageQuery) string {
	h := sha256.Sum256([]byte(q.coll + "\x00" + q.binding + "\x00" + q.sortField + fmt.Sprint(q.desc)))
	return base64.RawURLEncoding.EncodeToString(h[:12])
}

func (s *Store) encodeToken(q pageQuery, last bson.M) (string, error) {
	t := pageToken{Q: bindingHash(q), ID: idOf(last), Sort: q.sortField != ""}
	if q.sortField != "" {
		if v, ok := msOf(last[q.sortField]); ok {
			t.K = &v
		}
	}
	body, err := json.Marshal(t)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(append(s.sign(body), body...)), nil
}

func (s *Store) decodeToken(q pageQuery) (*pageToken, error) {
	raw, err := base64.RawURLEncoding.DecodeString(q.token)
	if err != nil || len(raw) < 17 {
		return nil, store.ErrBadPageToken
	}
	mac, body := raw[:16], raw[16:]
	if !hmac.Equal(mac, s.sign(body)) {
		return nil, store.ErrBadPageToken
	}
	var t pageToken
	if err := json.Unmarshal(body, &t); err != nil || t.Q != bindingHash(q) || t.Sort != (q.sortField != "") {
		return nil, store.ErrBadPageToken
	}
	return &t, nil
}

// keyCmp orders a document against the position (k, id) in ascending
// order: missing sort keys first, as MongoDB sorts null before values.
func keyCmp(m bson.M, field string, k *int64, id string) int {
	if field != "" {
		v, ok := msOf(m[field])
		switch {
		case !ok && k != nil:
			return -1
		case ok && k == nil:
			return 1
		case ok && v < *k:
			return -1
		case ok && v > *k:
			return 1
		}
	}
	return strings.Compare(idOf(m), id)
}

// page reads one keyset page: a page of n reads n documents, however deep.
func (s *Store) page(ctx context.Context, q pageQuery) ([]bson.M, string, error) {
	if q.limit == 0 {
		q.limit = 50
	}
	if q.limit < 1 || q.limit > maxLimit {
		return nil, "", fmt.Errorf("store: page size %d out of range 1..%d", q.limit, maxLimit)
	}
	match := q.match
	var after *pageToken
	if q.token != "" {
		t, err := s.decodeToken(q)
		if err != nil {
			return nil, "", fmt.Errorf("store: page %s: %w", q.coll, err)
		}
		after = t
		after := func(m bson.M) bool {
			c := keyCmp(m, q.sortField, t.K, t.ID)
			if q.desc {
				return c < 0
			}
			return c > 0
		}
		match = func(m bson.M) bool { return (q.match == nil || q.match(m)) && after(m) }
	}
	if match == nil {
		match = func(bson.M) bool { return true }
	}
	less := func(a, b bson.M) bool {
		c := 0
		if q.sortField != "" {
			c = cmpTime(a, b, q.sortField)
		}
		if c == 0 {
			c = cmpID(a, b)
		}
		if q.desc {
			return c > 0
		}
		return c < 0
	}
	var got []bson.M
	var err error
	if q.dueBy != nil && !q.desc && q.sortField == "nextRunAt" {
		got, err = s.duePage(ctx, *q.dueBy, after, q.limit)
	} else {
		got, err = s.findIn(ctx, q.coll, "page", q.shard, match, less, q.limit)
	}
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(got) == q.limit {
		if next, err = s.encodeToken(q, got[len(got)-1]); err != nil {
			return nil, "", fmt.Errorf("store: page %s: token: %w", q.coll, err)
		}
	}
	return got, next, nil
}

// duePage is the due query's page from the typed due index: the first
// limit enabled schedules with nextRunAt ≤ by, after the position t, in
// (nextRunAt, _id) order. It reads and meters as find does.
func (s *Store) duePage(ctx context.Context, by int64, t *pageToken, limit int) ([]bson.M, error) {
	if err := s.wait(ctx, KindQuery); err != nil {
		return nil, fmt.Errorf("store: page in %s: %w", schedColl, err)
	}
	type key struct {
		at int64
		id string
	}
	less := func(a, b key) bool { return a.at < b.at || (a.at == b.at && a.id < b.id) }
	var from *key
	if t != nil {
		from = &key{id: t.ID}
		if t.K != nil {
			from.at = *t.K
		} else {
			from.at = -1 << 63
		}
	}
	top := make([]key, 0, min(limit, 64))
	s.mu.Lock()
	for id, at := range s.dueIdx {
		k := key{at, id}
		if at > by || (from != nil && !less(*from, k)) || (len(top) == limit && !less(k, top[limit-1])) {
			continue
		}
		i := sort.Search(len(top), func(i int) bool { return less(k, top[i]) })
		if len(top) < limit {
			top = append(top, key{})
		}
		copy(top[i+1:], top[i:len(top)-1])
		top[i] = k
	}
	out := make([]bson.M, len(top))
	c := s.colls[schedColl]
	for i, k := range top {
		out[i] = c[k.id]
	}
	s.mu.Unlock()
	s.meter.Add(schedColl+".page", int64(len(out)))
	return out, nil
}
