package mongostore_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/baton-cron/baton/internal/skipscan"
	"github.com/baton-cron/baton/shared/store/mongostore"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/store"
)

type item struct {
	ID string `bson:"_id"`
	K  int    `bson:"k"`
}

// seed inserts n documents whose sort key k takes only `distinct` values, so
// most documents share their key with many others.
func seed(t *testing.T, s *mongostore.Store, c *mongostore.Collection, n, distinct int) {
	t.Helper()
	docs := make([]any, n)
	for i := range docs {
		docs[i] = item{ID: fmt.Sprintf("d%04d", i), K: i % distinct}
	}
	if _, err := emutest.Raw(t, s).Collection(c.Name()).InsertMany(context.Background(), docs); err != nil {
		t.Fatalf("seed: %v", err)
	}
}

// TestPageEachDocumentOnceWhileInserting pages over documents with ten
// distinct sort keys (1,000 ascending; 300 descending, to keep the package
// quick under -race) while another goroutine inserts: every pre-existing
// document comes back exactly once, nothing comes back twice, and the order
// never goes backwards.
func TestPageEachDocumentOnceWhileInserting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc bool
		n    int
	}{{false, 1000}, {true, 300}} {
		t.Run(fmt.Sprintf("desc=%v", tc.desc), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := emutest.Store(t)
			c := s.Collection("items")
			seed(t, s, c, tc.n, 10)

			// The inserter runs alongside the pager. Each page read lets it
			// insert a few more documents while the next page is read, so
			// the inserts interleave with the scan on every run without
			// flooding the emulator.
			stop := make(chan struct{})
			pageRead := make(chan struct{}, 1)
			pageRead <- struct{}{}
			var inserted atomic.Int64
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; {
					select {
					case <-stop:
						return
					case <-pageRead:
					}
					for j := 0; j < 3; j++ {
						// New keys on both sides of the cursor, and ids that
						// sort between existing ones.
						if _, err := c.InsertIdempotent(ctx, item{ID: fmt.Sprintf("d%04d-new%d", i%tc.n, i), K: (i * 7) % 10}); err != nil {
							t.Errorf("concurrent insert: %v", err)
							return
						}
						inserted.Add(1)
						i++
					}
				}
			}()

			seen := map[string]int{}
			var prev *item
			q := mongostore.PageQuery{SortField: "k", Desc: tc.desc, Limit: 45}
			for pages := 0; ; pages++ {
				if pages > 200 {
					t.Fatal("no end after 200 pages")
				}
				var docs []item
				p, err := c.Page(ctx, q, &docs)
				if err != nil {
					t.Fatalf("page %d: %v", pages, err)
				}
				select {
				case pageRead <- struct{}{}:
				default:
				}
				if p.Count != len(docs) {
					t.Errorf("page %d: Count %d, decoded %d", pages, p.Count, len(docs))
				}
				for i := range docs {
					d := docs[i]
					seen[d.ID]++
					if prev != nil && !ordered(*prev, d, tc.desc) {
						t.Errorf("page %d: %v came after %v", pages, d, *prev)
					}
					prev = &d
				}
				if p.NextToken == "" {
					break
				}
				q.Token = p.NextToken
			}
			close(stop)
			wg.Wait()

			for i := 0; i < tc.n; i++ {
				if id := fmt.Sprintf("d%04d", i); seen[id] != 1 {
					t.Errorf("pre-existing %s seen %d times, want 1", id, seen[id])
				}
			}
			for id, n := range seen {
				if n > 1 {
					t.Errorf("%s seen %d times", id, n)
				}
			}
			if inserted.Load() == 0 {
				t.Error("nothing was inserted during the scan")
			}
			t.Logf("%d inserted during the scan, %d of them seen", inserted.Load(), len(seen)-tc.n)
		})
	}
}

func ordered(a, b item, desc bool) bool {
	if desc {
		a, b = b, a
	}
	return a.K < b.K || a.K == b.K && a.ID < b.ID
}

// TestPageSortKeyMissing: documents without the sort field sort first
// (MongoDB's null order) and paging still reaches every document.
func TestPageSortKeyMissing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := emutest.Store(t).Collection("items")
	for i := 0; i < 10; i++ {
		doc := bson.D{{Key: "_id", Value: fmt.Sprintf("d%02d", i)}}
		if i%2 == 0 {
			doc = append(doc, bson.E{Key: "k", Value: i})
		}
		if _, err := c.InsertIdempotent(ctx, doc); err != nil {
			t.Fatal(err)
		}
	}
	for _, desc := range []bool{false, true} {
		seen := map[string]int{}
		q := mongostore.PageQuery{SortField: "k", Desc: desc, Limit: 3}
		for pages := 0; pages < 20; pages++ {
			var docs []bson.M
			p, err := c.Page(ctx, q, &docs)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range docs {
				seen[d["_id"].(string)]++
			}
			if p.NextToken == "" {
				break
			}
			q.Token = p.NextToken
		}
		if len(seen) != 10 {
			t.Errorf("desc=%v: saw %d distinct documents, want 10: %v", desc, len(seen), seen)
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("desc=%v: %s seen %d times", desc, id, n)
			}
		}
	}
}

// TestPageReadCost is the point of keyset pages: page k of size 50 reads 50
// documents, while skip reads (k+1)*50, because Firestore bills the skipped
// ones.
func TestPageReadCost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := emutest.Store(t)
	c := s.Collection("items")
	seed(t, s, c, 400, 10)
	const k, size = 5, 50
	q := mongostore.PageQuery{SortField: "k", Limit: size}
	var cursorPage []item
	for i := 0; i <= k; i++ {
		if i == k {
			s.Meter().Reset()
		}
		cursorPage = nil
		p, err := c.Page(ctx, q, &cursorPage)
		if err != nil {
			t.Fatal(err)
		}
		q.Token = p.NextToken
	}
	if got := s.Meter().Op("items.page"); got != size {
		t.Errorf("cursor page %d costs %d reads, want %d", k, got, size)
	}
	if got := s.Meter().Total(); got != size {
		t.Errorf("meter total after cursor page = %d, want %d", got, size)
	}

	var skipPage []item
	got, err := skipscan.Page(ctx, emutest.Raw(t, s).Collection(c.Name()), "k", size, k, &skipPage)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64((k + 1) * size); got != want {
		t.Errorf("skip page %d costs %d reads, want %d", k, got, want)
	}
	if len(skipPage) != size || len(cursorPage) != size {
		t.Fatalf("page sizes: skip %d, cursor %d; want %d", len(skipPage), len(cursorPage), size)
	}
	for i := range skipPage {
		if skipPage[i] != cursorPage[i] {
			t.Fatalf("skip and cursor pages differ at %d: %v vs %v", i, skipPage[i], cursorPage[i])
		}
	}
}

func TestPageTokenErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := emutest.Store(t)
	c := s.Collection("items")
	seed(t, s, c, 30, 3)
	base := mongostore.PageQuery{SortField: "k", Limit: 10, Filter: bson.D{{Key: "k", Value: bson.D{{Key: "$gte", Value: 0}}}}}
	var docs []item
	p, err := c.Page(ctx, base, &docs)
	if err != nil || p.NextToken == "" {
		t.Fatalf("first page: %v, token %q", err, p.NextToken)
	}
	tok := p.NextToken

	// The genuine token works.
	q := base
	q.Token = tok
	if _, err := c.Page(ctx, q, &docs); err != nil {
		t.Fatalf("genuine token: %v", err)
	}

	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) string {
		b := append([]byte(nil), raw...)
		b[i] ^= 1
		return base64.RawURLEncoding.EncodeToString(b)
	}
	other := func(f func(*mongostore.PageQuery)) mongostore.PageQuery {
		q := base
		f(&q)
		q.Token = tok
		return q
	}
	tests := []struct {
		name string
		q    mongostore.PageQuery
		coll string
	}{
		{"tampered body", other(func(q *mongostore.PageQuery) { q.Token = "" }), ""},
		{"other filter", other(func(q *mongostore.PageQuery) { q.Filter = bson.D{{Key: "k", Value: 1}} }), ""},
		{"no filter", other(func(q *mongostore.PageQuery) { q.Filter = nil }), ""},
		{"other sort field", other(func(q *mongostore.PageQuery) { q.SortField = "x" }), ""},
		{"other direction", other(func(q *mongostore.PageQuery) { q.Desc = true }), ""},
		{"other collection", other(func(*mongostore.PageQuery) {}), "others"},
		{"garbage", other(func(q *mongostore.PageQuery) {}), ""},
	}
	tests[0].q.Token = flip(len(raw) - 3)
	tests[len(tests)-1].q.Token = "not a token!"
	garbage := []string{"x", "AAAA", "====", base64.RawURLEncoding.EncodeToString(make([]byte, 40)), flip(0), tok[:len(tok)-2], tok + "A"}
	for _, g := range garbage {
		q := base
		q.Token = g
		tests = append(tests, struct {
			name string
			q    mongostore.PageQuery
			coll string
		}{"garbage " + g, q, ""})
	}
	for _, tc := range tests {
		cc := c
		if tc.coll != "" {
			cc = s.Collection(tc.coll)
		}
		var out []item
		if _, err := cc.Page(ctx, tc.q, &out); !errors.Is(err, store.ErrBadPageToken) {
			t.Errorf("%s: Page = %v, want ErrBadPageToken", tc.name, err)
		}
	}

	// A token signed with another key is refused too.
	s2, err := mongostore.Open(ctx, emutest.MongoURI(t), mongostore.Options{Database: s.DatabaseName(), PageKey: []byte("another deployment's secret, 32+ bytes")})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close(ctx)
	q = base
	q.Token = tok
	if _, err := s2.Collection("items").Page(ctx, q, &docs); !errors.Is(err, store.ErrBadPageToken) {
		t.Errorf("token from another key: %v, want ErrBadPageToken", err)
	}
}

func TestPageLimit(t *testing.T) {
	t.Parallel()
	c := emutest.Store(t).Collection("items")
	for _, n := range []int{-1, 1001} {
		var out []item
		if _, err := c.Page(context.Background(), mongostore.PageQuery{Limit: n}, &out); err == nil {
			t.Errorf("Limit %d accepted", n)
		}
	}
}
