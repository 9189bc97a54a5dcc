package mongostore

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/baton-cron/baton/shared/store"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// PageQuery describes one page of a keyset-paginated list.
type PageQuery struct {
	// Filter restricts the documents; nil means all. A token is bound to
	// the filter's encoding, so pass the same filter for every page, and use
	// bson.D rather than a many-key bson.M inside it (map order varies).
	Filter bson.D
	// SortField is the primary sort key; empty means _id alone. _id is
	// always the tie-breaker, so equal sort keys never repeat or vanish.
	// The field must hold one BSON type (missing or null is fine): MongoDB
	// range operators do not compare across types.
	SortField string
	// SortType is the BSON type the sort field holds (bson.TypeDateTime,
	// bson.TypeString, ...). A token whose sort value has another type is
	// refused, so that even a validly signed token can only ever carry a
	// value the list could have produced. Zero accepts any scalar type;
	// null (a missing key) is always accepted.
	SortType bson.Type
	// IDType is the BSON type of _id, checked the same way; zero accepts
	// any scalar type.
	IDType bson.Type
	// Desc sorts newest (largest) first.
	Desc bool
	// Limit is the page size, 1..1000; default 50.
	Limit int
	// Token is the NextToken of the previous page, or empty for the first.
	Token string
}

// Page is one page of results.
type Page struct {
	// NextToken continues the list; empty means this was the last page.
	NextToken string
	// Count is the number of documents in this page.
	Count int
}

const maxLimit = 1000

func (q *PageQuery) normalize() error {
	if q.Limit == 0 {
		q.Limit = 50
	}
	if q.Limit < 1 || q.Limit > maxLimit {
		return fmt.Errorf("store: page size %d out of range 1..%d", q.Limit, maxLimit)
	}
	if q.SortField == "_id" {
		q.SortField = ""
	}
	return nil
}

type pageToken struct {
	Query []byte        `bson:"q"`
	Sort  bson.RawValue `bson:"s,omitempty"`
	ID    bson.RawValue `bson:"i"`
}

// queryHash binds a token to its query, so a token from one list cannot be
// replayed against another.
func (c *Collection) queryHash(q PageQuery) ([]byte, error) {
	f := q.Filter
	if f == nil {
		f = bson.D{}
	}
	b, err := bson.Marshal(bson.D{{Key: "c", Value: c.name}, {Key: "f", Value: f}, {Key: "s", Value: q.SortField}, {Key: "d", Value: q.Desc}})
	if err != nil {
		return nil, err
	}
	h := sha256.Sum256(b)
	return h[:8], nil
}

func (c *Collection) sign(b []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write(b)
	return m.Sum(nil)[:16]
}

func (c *Collection) encodeToken(q PageQuery, last bson.Raw) (string, error) {
	qh, err := c.queryHash(q)
	if err != nil {
		return "", err
	}
	t := pageToken{Query: qh, ID: last.Lookup("_id")}
	if q.SortField != "" {
		v, err := last.LookupErr(splitPath(q.SortField)...)
		if err != nil {
			v = bson.RawValue{Type: bson.TypeNull}
		}
		t.Sort = v
	}
	b, err := bson.Marshal(t)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(append(c.sign(b), b...)), nil
}

func (c *Collection) decodeToken(q PageQuery) (*pageToken, error) {
	raw, err := base64.RawURLEncoding.DecodeString(q.Token)
	if err != nil || len(raw) < 17 {
		return nil, store.ErrBadPageToken
	}
	mac, body := raw[:16], raw[16:]
	if !hmac.Equal(mac, c.sign(body)) {
		return nil, store.ErrBadPageToken
	}
	var t pageToken
	if err := bson.Unmarshal(body, &t); err != nil {
		return nil, store.ErrBadPageToken
	}
	qh, err := c.queryHash(q)
	if err != nil || !bytes.Equal(qh, t.Query) {
		return nil, fmt.Errorf("%w: it belongs to a different query", store.ErrBadPageToken)
	}
	// Only our encoder can sign a body, but a body it could not have made
	// (from an older version, say) must not reach the query as a zero value.
	if t.ID.Type == 0 || (q.SortField != "" && t.Sort.Type == 0) {
		return nil, fmt.Errorf("%w: incomplete position", store.ErrBadPageToken)
	}
	// The values go into the filter as operands ({$gt: value}): a document
	// there would be read as operators ($where, $expr...), an array as a
	// set. The MAC says who made the token, not that it is harmless, so
	// the type is checked too, in case the key ever leaks.
	if err := checkTokenValue("_id", t.ID, q.IDType, false); err != nil {
		return nil, err
	}
	if q.SortField != "" {
		if err := checkTokenValue(q.SortField, t.Sort, q.SortType, true); err != nil {
			return nil, err
		}
	}
	return &t, nil
}

// scalarTypes are the BSON types a token may carry when the query does not
// name one: plain comparable values, never a document, an array, code or a
// regular expression, which a filter would interpret rather than compare.
var scalarTypes = map[bson.Type]bool{
	bson.TypeString: true, bson.TypeDateTime: true, bson.TypeInt32: true, bson.TypeInt64: true,
	bson.TypeDouble: true, bson.TypeDecimal128: true, bson.TypeObjectID: true, bson.TypeBoolean: true,
	bson.TypeTimestamp: true,
}

// checkTokenValue refuses a token value that is not a scalar, or not of
// type want when the query names one; null only where nullOK (a sort key
// may be missing, an _id may not). A want that is itself not a scalar
// type admits nothing, so a mistaken SortType fails closed.
func checkTokenValue(field string, v bson.RawValue, want bson.Type, nullOK bool) error {
	if v.Type == bson.TypeNull && nullOK {
		return nil
	}
	if !scalarTypes[v.Type] || want != 0 && v.Type != want {
		return fmt.Errorf("%w: %s holds a %v", store.ErrBadPageToken, field, v.Type)
	}
	if err := v.Validate(); err != nil {
		return fmt.Errorf("%w: %s: %w", store.ErrBadPageToken, field, err)
	}
	return nil
}

// Page reads one page into out (a pointer to a slice) with a keyset cursor:
// the filter resumes after the last (SortField, _id) seen, so a page of n
// documents reads n documents, however deep it is. Concurrent inserts never
// make a document appear twice; documents whose sort key moves behind the
// cursor during a scan are seen on the next scan.
func (c *Collection) Page(ctx context.Context, q PageQuery, out any) (Page, error) {
	if err := q.normalize(); err != nil {
		return Page{}, err
	}
	filter := q.Filter
	if q.Token != "" {
		t, err := c.decodeToken(q)
		if err != nil {
			return Page{}, fmt.Errorf("store: page %s: %w", c.name, err)
		}
		after := keysetAfter(q, t)
		if len(filter) > 0 {
			filter = bson.D{{Key: "$and", Value: bson.A{filter, after}}}
		} else {
			filter = after
		}
	}
	if filter == nil {
		filter = bson.D{}
	}
	dir := 1
	if q.Desc {
		dir = -1
	}
	sort := bson.D{}
	if q.SortField != "" {
		sort = append(sort, bson.E{Key: q.SortField, Value: dir})
	}
	sort = append(sort, bson.E{Key: "_id", Value: dir})
	raws, err := c.findRaw(ctx, "page", filter, options.Find().SetSort(sort).SetLimit(int64(q.Limit)))
	if err != nil {
		return Page{}, err
	}
	p := Page{Count: len(raws)}
	if len(raws) == q.Limit {
		if p.NextToken, err = c.encodeToken(q, raws[len(raws)-1]); err != nil {
			return Page{}, fmt.Errorf("store: page %s: token: %w", c.name, err)
		}
	}
	if err := decodeAll(raws, out); err != nil {
		return Page{}, fmt.Errorf("store: page %s: %w", c.name, err)
	}
	return p, nil
}

func (c *Collection) findRaw(ctx context.Context, op string, filter any, opts ...options.Lister[options.FindOptions]) ([]bson.Raw, error) {
	cur, err := c.c.Find(ctx, filter, opts...)
	if err != nil {
		return nil, fmt.Errorf("store: %s %s: %w", op, c.name, err)
	}
	var raws []bson.Raw
	if err := cur.All(ctx, &raws); err != nil {
		return nil, fmt.Errorf("store: %s %s: %w", op, c.name, err)
	}
	c.meter.Add(c.op(op), int64(len(raws)))
	return raws, nil
}

// keysetAfter is the filter for "after (t.Sort, t.ID)" in the page order.
// MongoDB compares values only within one type ($gt: 5 never matches a
// string or a null), so the sort field must hold one type, and a missing or
// null sort key, which sorts before every value, is handled apart: without
// that, a page ending on a null key would never reach the values after it.
func keysetAfter(q PageQuery, t *pageToken) bson.D {
	cmp := "$gt"
	if q.Desc {
		cmp = "$lt"
	}
	idAfter := bson.D{{Key: "$gt", Value: t.ID}}
	if q.Desc {
		idAfter = bson.D{{Key: "$lt", Value: t.ID}}
	}
	if q.SortField == "" {
		return bson.D{{Key: "_id", Value: idAfter}}
	}
	f := q.SortField
	isNull := t.Sort.Type == bson.TypeNull || t.Sort.Type == bson.TypeUndefined
	switch {
	case isNull && !q.Desc: // nulls first: every value is still ahead
		return bson.D{{Key: "$or", Value: bson.A{
			bson.D{{Key: f, Value: bson.D{{Key: "$ne", Value: nil}}}},
			bson.D{{Key: f, Value: nil}, {Key: "_id", Value: idAfter}},
		}}}
	case isNull && q.Desc: // nulls last: only later nulls remain
		return bson.D{{Key: f, Value: nil}, {Key: "_id", Value: idAfter}}
	case q.Desc: // values, then the nulls at the end
		return bson.D{{Key: "$or", Value: bson.A{
			bson.D{{Key: f, Value: bson.D{{Key: cmp, Value: t.Sort}}}},
			bson.D{{Key: f, Value: t.Sort}, {Key: "_id", Value: idAfter}},
			bson.D{{Key: f, Value: nil}},
		}}}
	default:
		return bson.D{{Key: "$or", Value: bson.A{
			bson.D{{Key: f, Value: bson.D{{Key: cmp, Value: t.Sort}}}},
			bson.D{{Key: f, Value: t.Sort}, {Key: "_id", Value: idAfter}},
		}}}
	}
}

func splitPath(p string) []string {
	var out []string
	start := 0
	for i := 0; i < len(p); i++ {
		if p[i] == '.' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return append(out, p[start:])
}

// decodeAll unmarshals raws into out, a pointer to a slice.
func decodeAll(raws []bson.Raw, out any) error {
	if out == nil {
		return nil
	}
	if rs, ok := out.(*[]bson.Raw); ok {
		*rs = raws
		return nil
	}
	v := reflect.ValueOf(out)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Slice {
		return fmt.Errorf("decode: out must be a pointer to a slice, not %T", out)
	}
	sl := reflect.MakeSlice(v.Elem().Type(), len(raws), len(raws))
	for i, r := range raws {
		if err := bson.Unmarshal(r, sl.Index(i).Addr().Interface()); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
	}
	v.Elem().Set(sl)
	return nil
}

// mergeQueries bounds the shard queries of one MergedPage in flight.
const mergeQueries = 16

// MergedPage is Page over an index that leads with field, for a list that
// does not know field's value: one keyset query per value of values (each
// {field: value} plus q.Filter, served by the index), merged in the page
// order. A token is the position of the last document returned, bound to
// q as Page's is, so every value's query resumes after it. It reads at
// most len(values) × q.Limit documents a page: the price of an index that
// spreads its writes over len(values) ranges
// (docs/scheduler.md, "Runs and their decider shard").
func (c *Collection) MergedPage(ctx context.Context, q PageQuery, field string, values []any, out any) (Page, error) {
	if err := q.normalize(); err != nil {
		return Page{}, err
	}
	var after bson.D
	if q.Token != "" {
		t, err := c.decodeToken(q)
		if err != nil {
			return Page{}, fmt.Errorf("store: page %s: %w", c.name, err)
		}
		after = keysetAfter(q, t)
	}
	dir := 1
	if q.Desc {
		dir = -1
	}
	sort := bson.D{}
	if q.SortField != "" {
		sort = append(sort, bson.E{Key: q.SortField, Value: dir})
	}
	sort = append(sort, bson.E{Key: "_id", Value: dir})
	var (
		mu   sync.Mutex
		all  []bson.Raw
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, mergeQueries)
	)
	for _, v := range values {
		filter := append(bson.D{{Key: field, Value: v}}, q.Filter...)
		if after != nil {
			filter = bson.D{{Key: "$and", Value: bson.A{filter, after}}}
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			raws, err := c.findRaw(ctx, "page", filter, options.Find().SetSort(sort).SetLimit(int64(q.Limit)))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			all = append(all, raws...)
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return Page{}, errors.Join(errs...)
	}
	slices.SortFunc(all, func(a, b bson.Raw) int {
		c := 0
		if q.SortField != "" {
			c = compareRaw(a.Lookup(splitPath(q.SortField)...), b.Lookup(splitPath(q.SortField)...))
		}
		if c == 0 {
			c = compareRaw(a.Lookup("_id"), b.Lookup("_id"))
		}
		return c * dir
	})
	p := Page{}
	if len(all) >= q.Limit {
		all = all[:q.Limit]
		var err error
		if p.NextToken, err = c.encodeToken(q, all[len(all)-1]); err != nil {
			return Page{}, fmt.Errorf("store: page %s: token: %w", c.name, err)
		}
	}
	p.Count = len(all)
	if err := decodeAll(all, out); err != nil {
		return Page{}, fmt.Errorf("store: page %s: %w", c.name, err)
	}
	return p, nil
}

// compareRaw orders two values of a sort key as MongoDB does for the types
// a keyset holds: missing or null first, then numbers, strings and dates
// by value; other types by their type, then bytes (never met by a sort
// field of one type).
func compareRaw(a, b bson.RawValue) int {
	rank := func(v bson.RawValue) int {
		switch v.Type {
		case 0, bson.TypeNull, bson.TypeUndefined:
			return 0
		case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble:
			return 1
		case bson.TypeString:
			return 2
		case bson.TypeDateTime:
			return 3
		}
		return 4 + int(v.Type)
	}
	if ra, rb := rank(a), rank(b); ra != rb {
		return cmp.Compare(ra, rb)
	}
	switch a.Type {
	case 0, bson.TypeNull, bson.TypeUndefined:
		return 0
	case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble:
		return cmp.Compare(a.AsFloat64(), b.AsFloat64())
	case bson.TypeString:
		return strings.Compare(a.StringValue(), b.StringValue())
	case bson.TypeDateTime:
		return cmp.Compare(a.DateTime(), b.DateTime())
	}
	return bytes.Compare(a.Value, b.Value)
}
