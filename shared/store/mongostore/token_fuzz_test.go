package mongostore

import (
	"encoding/base64"
	"errors"
	"testing"

	"github.com/baton-cron/baton/shared/store"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// FuzzPageToken feeds arbitrary tokens to the decoder, both as they come and
// signed with the collection's key (so the fuzzer also reaches the BSON
// decoding and the keyset filter behind the signature check). Whatever the
// input, the answer is a filter or store.ErrBadPageToken, never a panic.
func FuzzPageToken(f *testing.F) {
	c := &Collection{name: "items", key: []byte("baton page token v1")}
	q := PageQuery{SortField: "k", Limit: 10, Filter: bson.D{{Key: "enabled", Value: true}}}
	if err := q.normalize(); err != nil {
		f.Fatal(err)
	}
	last, err := bson.Marshal(bson.D{{Key: "_id", Value: "d0001"}, {Key: "k", Value: 3}})
	if err != nil {
		f.Fatal(err)
	}
	good, err := c.encodeToken(q, last)
	if err != nil {
		f.Fatal(err)
	}
	goodRaw, _ := base64.RawURLEncoding.DecodeString(good)
	f.Add(good, false, false)
	f.Add(string(goodRaw[16:]), true, false)
	f.Add(string(goodRaw[16:]), true, true)
	f.Add("", false, false)
	f.Add("garbage", false, true)
	f.Add("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", false, false)

	f.Fuzz(func(t *testing.T, in string, sign, desc bool) {
		tok := in
		if sign {
			body := []byte(in)
			tok = base64.RawURLEncoding.EncodeToString(append(c.sign(body), body...))
		}
		qq := q
		qq.Desc = desc
		qq.Token = tok
		pt, err := c.decodeToken(qq)
		if err != nil {
			if !errors.Is(err, store.ErrBadPageToken) {
				t.Fatalf("decodeToken(%q) = %v, want store.ErrBadPageToken", tok, err)
			}
			return
		}
		if _, err := bson.Marshal(keysetAfter(qq, pt)); err != nil {
			// A signed body that decodes is our own encoding; its filter
			// must marshal.
			t.Fatalf("token %q decoded but its filter does not marshal: %v", tok, err)
		}
	})
}
