package mongostore

import (
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/store"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// signedToken signs an arbitrary position with c's key, as only someone
// holding the key could: the type check must refuse what the MAC lets by.
func signedToken(t *testing.T, c *Collection, q PageQuery, sort, id any) string {
	t.Helper()
	qh, err := c.queryHash(q)
	if err != nil {
		t.Fatal(err)
	}
	doc := bson.D{{Key: "q", Value: qh}, {Key: "i", Value: id}}
	if sort != nil {
		doc = append(doc, bson.E{Key: "s", Value: sort})
	}
	body, err := bson.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(append(c.sign(body), body...))
}

// TestTokenValuesAreTyped: a validly signed token whose position is an
// operator document, an array or a value of another type than the list's
// sort field is refused, so no token can put an operator ($where → 500, or
// worse) into the keyset filter.
func TestTokenValuesAreTyped(t *testing.T) {
	c := &Collection{name: "runs", key: []byte("0123456789abcdef0123456789abcdef")}
	base := PageQuery{SortField: "fireTime", SortType: bson.TypeDateTime, IDType: bson.TypeString, Desc: true, Limit: 10}
	untyped := PageQuery{SortField: "k", Limit: 10}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	where := bson.D{{Key: "$where", Value: "sleep(10000) || true"}}
	tests := []struct {
		name     string
		q        PageQuery
		sort, id any
		ok       bool
	}{
		{"well typed", base, now, "s1:2026", true},
		{"null sort key", base, nil, "s1:2026", false}, // no "s" at all: incomplete
		{"explicit null sort key", base, bson.Null{}, "s1:2026", true},
		{"operator as _id", base, now, where, false},
		{"operator as sort value", base, where, "s1:2026", false},
		{"operator as untyped sort value", untyped, where, "a", false},
		{"operator as untyped _id", untyped, 3, where, false},
		{"array as sort value", untyped, bson.A{1, 2}, "a", false},
		{"regex as _id", untyped, 3, bson.Regex{Pattern: ".*"}, false},
		{"code as sort value", untyped, bson.JavaScript("1"), "a", false},
		{"int where a time is expected", base, int64(5), "s1:2026", false},
		{"string where a time is expected", base, "2026", "s1:2026", false},
		{"int _id where a string is expected", base, now, int32(7), false},
		{"untyped scalar", untyped, int32(3), "a", true},
	}
	for _, tc := range tests {
		q := tc.q
		if err := q.normalize(); err != nil {
			t.Fatal(err)
		}
		q.Token = signedToken(t, c, q, tc.sort, tc.id)
		_, err := c.decodeToken(q)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case !tc.ok && !errors.Is(err, store.ErrBadPageToken):
			t.Errorf("%s: decodeToken = %v, want store.ErrBadPageToken", tc.name, err)
		}
	}
}

// TestPageKeyLength: a short key is refused (it could be guessed), and an
// empty one is drawn at random, never the public constant baton once used.
func TestPageKeyLength(t *testing.T) {
	if _, err := pageKey([]byte("baton page token v1")); err == nil {
		t.Error("a 19-byte key was accepted")
	}
	a, err := pageKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pageKey(nil)
	if len(a) < MinPageKeyLen || string(a) == string(b) || string(a) == "baton page token v1" {
		t.Errorf("drawn keys %x, %x: want two different random keys of %d bytes", a, b, MinPageKeyLen)
	}
}
