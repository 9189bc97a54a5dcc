package functions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/functions"
	"github.com/baton-cron/baton/shared/lease"
)

// listMeter counts what the storage client asks of the emulator: each
// object list call with its maxResults and the number of objects its answer
// held, and every other GET (an object read), so a test can tell how many
// objects a page of GET /leases read.
type listMeter struct {
	mu    sync.Mutex
	lists []listCall
	reads int
}

type listCall struct {
	maxResults string
	items      int
}

func (m *listMeter) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || r.Method != http.MethodGet {
		return res, err
	}
	if !strings.HasSuffix(r.URL.Path, "/o") {
		m.mu.Lock()
		m.reads++
		m.mu.Unlock()
		return res, nil
	}
	body, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		return nil, err
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	var page struct {
		Items []json.RawMessage `json:"items"`
	}
	_ = json.Unmarshal(body, &page)
	m.mu.Lock()
	m.lists = append(m.lists, listCall{maxResults: r.URL.Query().Get("maxResults"), items: len(page.Items)})
	m.mu.Unlock()
	return res, nil
}

func (m *listMeter) take() ([]listCall, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, r := m.lists, m.reads
	m.lists, m.reads = nil, 0
	return l, r
}

// leaseView is GET /leases's item as a client (the console) reads it.
type leaseView struct {
	Name, Object, Holder, TTL      string
	Epoch, Generation              int64
	AcquiredAt, RenewedAt, Updated time.Time
	ExpiresAt                      time.Time
	Free, Live                     bool
}

type leasePage struct {
	Leases        []leaseView `json:"leases"`
	NextPageToken string      `json:"nextPageToken"`
}

// leaseAPI serves the functions on the emulator's bucket with a storage
// client that goes through meter, and returns the base URL.
func leaseAPI(t *testing.T, bucket string, meter *listMeter) string {
	t.Helper()
	gcs := emutest.GCSServer(t)
	c, err := storage.NewClient(context.Background(), append(gcs.ClientOptions(), option.WithHTTPClient(&http.Client{Transport: meter}))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	mux, err := functions.Mux(&functions.Deps{Storage: c, Bucket: bucket, Token: "tok"})
	if err != nil {
		t.Fatalf("Mux: %v", err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestListLeasesPages creates seven leases on the real GCS emulator, holds
// some and releases others, and pages through GET /leases two at a time:
// every lease is seen exactly once, in name order, no page holds more
// than two, each page is one list call of maxResults=2 (the cursor is the
// bucket list's own token: no skipping, no object read per lease; the
// answer holds the leases and the release markers beside them, lease.
// marker.go), and at most one object read besides (the marker of the
// page's last lease, which may be on the next page), held leases show
// their holder and live, released ones free.
func TestListLeasesPages(t *testing.T) {
	ctx := context.Background()
	client, bucket := emutest.GCS(t)
	m := lease.NewManager(client.Bucket(bucket), functions.LeasePrefix, lease.Options{Holder: "test-holder"})
	names := []string{"a", "b", "c", "d", "e", "f", "g"}
	held := map[string]bool{}
	for i, n := range names {
		l, err := m.Acquire(ctx, n, 30*time.Second)
		if err != nil {
			t.Fatalf("acquire %s: %v", n, err)
		}
		if i%2 == 0 {
			held[n] = true
			t.Cleanup(func() { _ = l.Release(context.Background()) })
		} else if err := l.Release(ctx); err != nil {
			t.Fatalf("release %s: %v", n, err)
		}
	}
	meter := &listMeter{}
	base := leaseAPI(t, bucket, meter)

	var seen []string
	token, pages := "", 0
	for {
		pages++
		if pages > len(names)+1 {
			t.Fatalf("more pages than leases: the cursor does not advance (seen %v)", seen)
		}
		code, body := call(t, "GET", base+"/Schedules/leases?pageSize=2&pageToken="+url.QueryEscape(token), "")
		if code != http.StatusOK {
			t.Fatalf("page %d: %d %s", pages, code, body)
		}
		var p leasePage
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			t.Fatalf("page %d: %v: %s", pages, err, body)
		}
		if len(p.Leases) > 2 {
			t.Errorf("page %d has %d leases, want at most 2", pages, len(p.Leases))
		}
		lists, reads := meter.take()
		if len(lists) != 1 || lists[0].maxResults != "2" || lists[0].items < len(p.Leases) {
			t.Errorf("page %d of %d leases: list calls %+v, want one with maxResults=2 answering at least %d objects", pages, len(p.Leases), lists, len(p.Leases))
		}
		if reads > 1 {
			t.Errorf("page %d: %d object reads besides the list, want at most 1 (the metadata mirror is enough; the last lease's marker may be on the next page)", pages, reads)
		}
		for _, l := range p.Leases {
			seen = append(seen, l.Name)
			if l.Object != functions.LeasePrefix+l.Name+".json" || l.TTL != "30s" || l.Epoch < 1 || l.Generation == 0 || l.Updated.IsZero() {
				t.Errorf("lease %s: %+v", l.Name, l)
			}
			if held[l.Name] {
				if l.Holder != "test-holder" || !l.Live || l.Free || !l.ExpiresAt.After(time.Now()) {
					t.Errorf("held lease %s shows holder %q live %v free %v expires %s", l.Name, l.Holder, l.Live, l.Free, l.ExpiresAt)
				}
			} else if !l.Free || l.Live || l.Holder != "" {
				t.Errorf("released lease %s shows holder %q live %v free %v", l.Name, l.Holder, l.Live, l.Free)
			}
		}
		if token = p.NextPageToken; token == "" {
			break
		}
	}
	if fmt.Sprint(seen) != fmt.Sprint(names) {
		t.Errorf("paged through %v, want each of %v once, in order", seen, names)
	}
}

// TestListLeasesErrors: bad page sizes and made-up tokens are 400s naming
// the parameter (never a 500, never a page), other methods 405, and
// without a bucket the route is 503 naming BATON_BUCKET.
func TestListLeasesErrors(t *testing.T) {
	_, bucket := emutest.GCS(t)
	base := leaseAPI(t, bucket, &listMeter{})
	for _, tc := range []struct {
		query, field string
	}{
		{"pageSize=0", "pageSize"},
		{"prefix=tick", "prefix"}, // a filter it does not have is refused, not ignored
		{"pageSize=501", "pageSize"},
		{"pageSize=two", "pageSize"},
		{"pageToken=garbage!", "pageToken"},
		{"pageToken=bGVhc2Vz", "pageToken"},                                     // base64 of "leases", not a token
		{"pageToken=eyJwIjoib3RoZXIvIiwidCI6Im90aGVyL3guanNvbiJ9", "pageToken"}, // a token of another prefix
	} {
		code, body := call(t, "GET", base+"/Schedules/leases?"+tc.query, "")
		if code != http.StatusBadRequest || !strings.Contains(body, `"field":"`+tc.field+`"`) {
			t.Errorf("%s: %d %s, want 400 naming %s", tc.query, code, body, tc.field)
		}
	}
	if code, body := call(t, "POST", base+"/Schedules/leases", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /leases: %d %s, want 405", code, body)
	}
	mux, err := functions.Mux(&functions.Deps{Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	if code, body := call(t, "GET", srv.URL+"/Schedules/leases", ""); code != http.StatusServiceUnavailable || !strings.Contains(body, "BATON_BUCKET") {
		t.Errorf("no bucket: %d %s, want 503 naming BATON_BUCKET", code, body)
	}
}
