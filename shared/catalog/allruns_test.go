package catalog_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/schedule"
)

// seedRuns inserts 30 runs of three schedules: every third failed, the
// odd ones manual, two per fire time (ties), fire times a minute apart
// from t0.
func seedRuns(t *testing.T, b *testBundle) []schedule.Run {
	t.Helper()
	runs := b.st.Collection(schedule.RunsCollection)
	var all []schedule.Run
	for i := range 30 {
		status, src := schedule.RunSucceeded, schedule.SourceScheduled
		if i%3 == 0 {
			status = schedule.RunFailed
		}
		if i%2 == 1 {
			src = schedule.SourceManual
		}
		r := schedule.Run{ID: fmt.Sprintf("r%02d", i), ScheduleID: fmt.Sprintf("s%d", i%3), FireTime: t0.Add(time.Duration(i/2) * time.Minute),
			Source: src, Status: status, Attempt: 1, CreatedAt: t0, Error: "boom"}
		if _, err := runs.InsertIdempotent(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		all = append(all, r)
	}
	return all
}

// listAll pages GET /runs with query q in pages of size, checking each
// page reads as many documents as it holds, and returns the run ids.
func listAll(t *testing.T, b *testBundle, q url.Values, size int) []string {
	t.Helper()
	var ids []string
	token := ""
	for range 100 {
		pq := url.Values{}
		for k, v := range q {
			pq[k] = v
		}
		pq.Set("pageSize", fmt.Sprint(size))
		if token != "" {
			pq.Set("pageToken", token)
		}
		before := b.st.Meter().Total()
		res := b.do(t, http.MethodGet, "/runs?"+pq.Encode(), "")
		if res.Status != http.StatusOK {
			t.Fatalf("GET /runs?%s: %d %s", pq.Encode(), res.Status, res.Body)
		}
		var page catalog.RunPage
		res.json(t, &page)
		if read := b.st.Meter().Total() - before; read != int64(len(page.Runs)) {
			t.Errorf("GET /runs?%s read %d documents for %d runs", pq.Encode(), read, len(page.Runs))
		}
		for _, r := range page.Runs {
			ids = append(ids, r.ID)
		}
		if token = page.NextPageToken; token == "" {
			return ids
		}
	}
	t.Fatalf("GET /runs?%s does not end", q.Encode())
	return nil
}

// TestAllRuns: GET /runs filters by status, source, schedule and since,
// newest fire time first with ties by id, and pages over each run once.
func TestAllRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	all := seedRuns(t, b)
	since := t0.Add(10 * time.Minute)
	for _, tc := range []struct {
		q    string
		keep func(schedule.Run) bool
	}{
		{"", func(schedule.Run) bool { return true }},
		{"status=failed", func(r schedule.Run) bool { return r.Status == schedule.RunFailed }},
		{"source=manual", func(r schedule.Run) bool { return r.Source == schedule.SourceManual }},
		{"schedule=s1", func(r schedule.Run) bool { return r.ScheduleID == "s1" }},
		{"schedule=s0&status=failed", func(r schedule.Run) bool { return r.ScheduleID == "s0" && r.Status == schedule.RunFailed }},
		{"since=" + since.Format(time.RFC3339), func(r schedule.Run) bool { return !r.FireTime.Before(since) }},
		{"status=succeeded&since=" + since.Format(time.RFC3339), func(r schedule.Run) bool {
			return r.Status == schedule.RunSucceeded && !r.FireTime.Before(since)
		}},
		{"schedule=nobody", func(schedule.Run) bool { return false }},
	} {
		var want []string
		for i := len(all) - 1; i >= 0; i-- { // fire time and id grow with i
			if tc.keep(all[i]) {
				want = append(want, all[i].ID)
			}
		}
		q, err := url.ParseQuery(tc.q)
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{1, 4, 500} {
			if got := listAll(t, b, q, size); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("GET /runs?%s in pages of %d = %v; want %v", tc.q, size, got, want)
			}
		}
	}
}

// TestAllRunsBadInput: every bad filter or page parameter is 400 naming
// it, a combination no index serves is refused before any read, and a
// token from one filter does not continue another.
func TestAllRunsBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedRuns(t, b)
	res := b.do(t, http.MethodGet, "/runs?status=failed&pageSize=2", "")
	var page catalog.RunPage
	res.json(t, &page)
	if page.NextPageToken == "" {
		t.Fatalf("first page: %s", res.Body)
	}
	for _, tc := range []struct{ q, field, says string }{
		{"status=broken", "status", "broken"},
		{"status=FAILED", "status", "FAILED"},
		{"source=cron", "source", "cron"},
		{"schedule=Bad%20Id", "schedule", "Bad Id"},
		{"since=yesterday", "since", "RFC 3339"},
		{"since=1h", "since", "RFC 3339"},
		{"source=manual&status=failed", "source", "cannot be combined"},
		{"source=manual&schedule=s1", "source", "cannot be combined"},
		{"pageSize=0", "pageSize", "between 1 and 500"},
		{"pageSize=501", "pageSize", "between 1 and 500"},
		{"pageSize=x", "pageSize", "integer"},
		{"pageToken=junk", "pageToken", "invalid page token"},
		// A misspelt filter is refused, not ignored (which would list
		// every run as if filtered).
		{"scheduleId=s1", "scheduleId", "unknown query parameter"},
		{"schedule=s1&zeta=1&alpha=2", "alpha", "takes pageSize, pageToken, status, source, schedule, since"},
		{"status=succeeded&pageSize=2&pageToken=" + page.NextPageToken, "pageToken", "invalid page token"},
	} {
		before := b.st.Meter().Total()
		res := b.do(t, http.MethodGet, "/runs?"+tc.q, "")
		e := res.apiError(t)
		if res.Status != http.StatusBadRequest || e.Code != "invalid_argument" || e.Field != tc.field || !strings.Contains(e.Message, tc.says) {
			t.Errorf("GET /runs?%s = %d %s; want 400 naming %s, saying %q", tc.q, res.Status, res.Body, tc.field, tc.says)
		}
		if read := b.st.Meter().Total() - before; read != 0 {
			t.Errorf("GET /runs?%s read %d documents; a refused list reads none", tc.q, read)
		}
	}
	if res := b.do(t, http.MethodPost, "/runs", ""); res.Status != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET" {
		t.Errorf("POST /runs = %d, Allow %q; want 405, GET", res.Status, res.Header.Get("Allow"))
	}
	if res := b.do(t, http.MethodGet, "/runs/r01/more", ""); res.Status != http.StatusNotFound {
		t.Errorf("GET /runs/r01/more = %d; want 404", res.Status)
	}
}

// TestGetRun: GET /runs/{id} answers the run, and 404 naming the id when
// there is none.
func TestGetRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	all := seedRuns(t, b)
	res := b.do(t, http.MethodGet, "/runs/r07", "")
	var got schedule.Run
	res.json(t, &got)
	if want := all[7]; res.Status != http.StatusOK || got.ID != want.ID || got.ScheduleID != want.ScheduleID || got.Status != want.Status || !got.FireTime.Equal(want.FireTime) {
		t.Errorf("GET /runs/r07 = %d %s; want %+v", res.Status, res.Body, want)
	}
	res = b.do(t, http.MethodGet, "/runs/"+url.PathEscape("nightly@20260301T100000Z"), "")
	e := res.apiError(t)
	if res.Status != http.StatusNotFound || e.Code != "not_found" || !strings.Contains(e.Message, `"nightly@20260301T100000Z"`) {
		t.Errorf("GET of a missing run = %d %s; want 404 naming it", res.Status, res.Body)
	}
	if res := b.do(t, http.MethodDelete, "/runs/r07", ""); res.Status != http.StatusMethodNotAllowed {
		t.Errorf("DELETE /runs/r07 = %d; want 405", res.Status)
	}
}
