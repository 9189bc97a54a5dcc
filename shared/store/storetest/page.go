package storetest

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/store/mongostore"
)

// pdoc is a paged document; K is nil for a document without the sort key.
type pdoc struct {
	ID string `bson:"_id"`
	K  *int64 `bson:"k,omitempty"`
}

func key(k int64) *int64 { return &k }

// compareP orders a and b by ascending (k, _id),
// documents without k first, as MongoDB sorts a missing key as null.
func compareP(a, b pdoc) int {
	switch {
	case a.K == nil && b.K != nil:
		return -1
	case a.K != nil && b.K == nil:
		return 1
	case a.K != nil && *a.K != *b.K:
		return cmp.Compare(*a.K, *b.K)
	}
	return cmp.Compare(a.ID, b.ID)
}

// page: keyset pages on a sort key most documents share. The _id
// tie-breaker is what keeps a page boundary inside a run of equal keys
// from repeating or dropping documents; the console's lists and the
// daemon's poll on (updatedAt, _id) rely on it.
func (s *suite) page(t *testing.T) {
	for _, desc := range []bool{false, true} {
		t.Run(fmt.Sprintf("Ties/desc=%v", desc), func(t *testing.T) { s.pageTies(t, desc) })
	}
	for _, desc := range []bool{false, true} {
		t.Run(fmt.Sprintf("ConcurrentInserts/desc=%v", desc), func(t *testing.T) { s.pageInserting(t, desc) })
	}
}

// query is the page query of the cases: by k, typed, 5 or 7 a page so
// that boundaries fall inside runs of equal keys.
func query(desc bool, limit int) mongostore.PageQuery {
	return mongostore.PageQuery{SortField: "k", SortType: bson.TypeInt64, IDType: bson.TypeString, Desc: desc, Limit: limit}
}

// seedPages inserts n documents whose key takes three values, and nulls
// documents without the key.
func seedPages(t *testing.T, c *mongostore.Collection, prefix string, n, nulls int) []pdoc {
	t.Helper()
	var docs []pdoc
	for i := range n {
		docs = append(docs, pdoc{ID: fmt.Sprintf("%s%04d", prefix, i), K: key(int64(i % 3))})
	}
	for i := range nulls {
		docs = append(docs, pdoc{ID: fmt.Sprintf("%s%04d", prefix, n+i)})
	}
	for _, d := range docs {
		insert(t, c, d)
	}
	return docs
}

func (s *suite) pageTies(t *testing.T, desc bool) {
	_, c := s.coll(t)
	want := seedPages(t, c, "d", 50, 7)
	slices.SortFunc(want, compareP)
	if desc {
		slices.Reverse(want)
	}
	const limit = 5
	var got []pdoc
	q := query(desc, limit)
	for pages := 0; ; pages++ {
		if pages > len(want) {
			t.Fatalf("still paging after %d pages of %d documents", pages, len(want))
		}
		var batch []pdoc
		p, err := c.Page(t.Context(), q, &batch)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		if p.Count != len(batch) {
			t.Errorf("page %d: Count %d, but %d documents", pages, p.Count, len(batch))
		}
		if p.NextToken != "" && len(batch) != limit {
			t.Errorf("page %d: %d documents and a next token; only a full page continues", pages, len(batch))
		}
		got = append(got, batch...)
		if p.NextToken == "" {
			break
		}
		q.Token = p.NextToken
	}
	if !slices.EqualFunc(got, want, func(a, b pdoc) bool { return compareP(a, b) == 0 }) {
		t.Errorf("pages gave %d documents %v;\nwant each of %d once, in order: %v", len(got), ids(got), len(want), ids(want))
	}
}

func ids(ds []pdoc) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

// pageInserting pages while another goroutine inserts documents with the
// same keys, ahead of the cursor and behind it: no document comes back
// twice, the order never goes backwards, and every document that existed
// throughout comes back.
func (s *suite) pageInserting(t *testing.T, desc bool) {
	_, c := s.coll(t)
	before := seedPages(t, c, "d", 60, 5)

	// Each page read lets the inserter add three documents while the
	// next page is read, so the inserts interleave with the scan on every
	// run.
	pageRead := make(chan struct{}, 1)
	stop := make(chan struct{})
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
			for range 3 {
				d := pdoc{ID: fmt.Sprintf("n%04d", i), K: key(int64(i % 3))}
				if i%7 == 6 {
					d.K = nil
				}
				if ok, err := c.InsertIdempotent(t.Context(), d); err != nil || !ok {
					t.Errorf("concurrent insert %s = %v, %v", d.ID, ok, err)
				}
				i++
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	seen := map[string]int{}
	var last *pdoc
	q := query(desc, 7)
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatalf("still paging after %d pages", pages)
		}
		var batch []pdoc
		p, err := c.Page(t.Context(), q, &batch)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		select {
		case pageRead <- struct{}{}:
		default:
		}
		for _, d := range batch {
			seen[d.ID]++
			if last != nil {
				order := compareP(*last, d)
				if desc {
					order = -order
				}
				if order >= 0 {
					t.Errorf("page %d: %s came after %s; the order went backwards", pages, d.ID, last.ID)
				}
			}
			last = &d
		}
		if p.NextToken == "" {
			break
		}
		q.Token = p.NextToken
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("%s came back %d times", id, n)
		}
	}
	var missed []string
	for _, d := range before {
		if seen[d.ID] == 0 {
			missed = append(missed, d.ID)
		}
	}
	if len(missed) > 0 {
		t.Errorf("%d documents existed throughout the scan and were never seen: %v", len(missed), missed)
	}
}
