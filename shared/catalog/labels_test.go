package catalog_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/schedule"
)

func labelledBody(id string, labels map[string]string) string {
	return mustJSON(map[string]any{"id": id, "cron": "* * * * *", "labels": labels,
		"target": map[string]any{"type": "builtin", "builtin": map[string]any{"name": "noop"}}})
}

// TestLabelSelectorList: a labelSelector lists only the schedules holding
// every term, in id order, one keyset page at a time, each page reading
// only the documents it returns; a token is bound to its selector.
func TestLabelSelectorList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var want []string
	for i := range 23 {
		labels := map[string]string{"team": "web", "baton.dev/owner": "repo-a"}
		id := fmt.Sprintf("s%02d", i)
		if i%3 == 0 {
			labels["team"] = "data"
			want = append(want, id)
		}
		if i == 9 {
			labels["baton.dev/owner"] = "repo-b" // data, but another owner
			want = want[:len(want)-1]
		}
		if res := b.do(t, http.MethodPost, "/schedules", labelledBody(id, labels)); res.Status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", id, res.Status, res.Body)
		}
	}
	// The stored form is an array of pairs, which the labels index serves.
	var raw bson.M
	if err := emutest.Raw(t, b.st).Collection(schedule.SchedulesCollection).FindOne(context.Background(), bson.D{{Key: "_id", Value: "s00"}}).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(bson.A{"baton.dev/owner=repo-a", "team=data"}, raw["labels"]); diff != "" {
		t.Errorf("stored labels (-want,+got):\n%s", diff)
	}

	sel := url.QueryEscape("team=data, baton.dev/owner=repo-a")
	meter := b.st.Meter()
	var got []string
	token, pages := "", 0
	for {
		before := meter.Total()
		res := b.do(t, http.MethodGet, "/schedules?pageSize=3&labelSelector="+sel+"&pageToken="+token, "")
		if res.Status != http.StatusOK {
			t.Fatalf("page %d: %d %s", pages, res.Status, res.Body)
		}
		var page catalog.SchedulePage
		res.json(t, &page)
		if read := meter.Total() - before; read != int64(len(page.Schedules)) {
			t.Errorf("page %d: %d documents read for %d returned; want reads = page length", pages, read, len(page.Schedules))
		}
		for _, sc := range page.Schedules {
			got = append(got, sc.ID)
			if sc.Labels["team"] != "data" {
				t.Errorf("%s listed with labels %v", sc.ID, sc.Labels)
			}
		}
		pages++
		if page.NextPageToken == "" {
			break
		}
		if pages == 1 {
			// The token of a filtered list is refused by the unfiltered one.
			if res := b.do(t, http.MethodGet, "/schedules?pageSize=3&pageToken="+page.NextPageToken, ""); res.Status != http.StatusBadRequest || res.apiError(t).Field != "pageToken" {
				t.Errorf("filtered token on the unfiltered list: %d %s; want 400 pageToken", res.Status, res.Body)
			}
		}
		token = page.NextPageToken
		if pages > 20 {
			t.Fatal("pagination does not end")
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("listed ids (-want,+got):\n%s", diff)
	}
}

// TestBadLabelsStoreNothing: a label that breaks the key or value rules,
// or one label too many, is a 400 naming it, and nothing is written; a
// bad selector is a 400 naming labelSelector.
func TestBadLabelsStoreNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tooMany := map[string]string{}
	for i := range schedule.MaxLabels + 1 {
		tooMany[fmt.Sprintf("k%d", i)] = "v"
	}
	for _, tc := range []struct {
		labels      map[string]string
		field, want string
	}{
		{map[string]string{"bad key": "x"}, `labels["bad key"]`, "invalid label key"},
		{map[string]string{"team": "has space"}, "labels.team", "invalid label value"},
		{map[string]string{"-team": "x"}, "labels.-team", "invalid label key"},
		{map[string]string{strings.Repeat("k", 64): "x"}, "labels." + strings.Repeat("k", 64), "at most 63"},
		{map[string]string{"team": strings.Repeat("v", 64)}, "labels.team", "at most 63"},
		{map[string]string{"Example.com/team": "x"}, `labels["Example.com/team"]`, "DNS subdomain"},
		{map[string]string{"/team": "x"}, `labels["/team"]`, "prefix"},
		{map[string]string{"a=b": "x"}, `labels["a=b"]`, "invalid label key"},
		{tooMany, "labels", "at most 64"},
	} {
		res := b.do(t, http.MethodPost, "/schedules", labelledBody("bad", tc.labels))
		if res.Status != http.StatusBadRequest {
			t.Errorf("labels %v: status %d, want 400; body %s", tc.labels, res.Status, res.Body)
			continue
		}
		if e := res.apiError(t); e.Field != tc.field || !strings.Contains(e.Message, tc.want) {
			t.Errorf("labels %v: field %q message %q; want field %q, message with %q", tc.labels, e.Field, e.Message, tc.field, tc.want)
		}
		res = b.do(t, http.MethodPut, "/calendars/bad", mustJSON(map[string]any{"labels": tc.labels, "weekdays": []string{"sat"}}))
		if res.Status != http.StatusBadRequest || res.apiError(t).Field != tc.field {
			t.Errorf("calendar labels %v: %d %s; want 400 naming %s", tc.labels, res.Status, res.Body, tc.field)
		}
	}
	if n := b.count(t, schedule.SchedulesCollection) + b.count(t, schedule.CalendarsCollection); n != 0 {
		t.Errorf("%d documents stored after refused writes, want 0", n)
	}
	// The longest key and value the rules allow are accepted.
	ok := map[string]string{"example.com/" + strings.Repeat("k", 63): strings.Repeat("v", 63), "empty": ""}
	if res := b.do(t, http.MethodPost, "/schedules", labelledBody("ok", ok)); res.Status != http.StatusCreated {
		t.Errorf("the longest labels: %d %s", res.Status, res.Body)
	}
	for q, reason := range map[string]string{
		"team":             "want key=value",
		"team notin (a,b)": "notin is not supported",
		"team in ()":       "at least one value",
		"team in (a,b":     "without ')'",
		"bad key=x":        "invalid label key",
		"team!=bad value":  "invalid label value",
		"team=data,":       "empty term",
	} {
		res := b.do(t, http.MethodGet, "/schedules?labelSelector="+url.QueryEscape(q), "")
		if res.Status != http.StatusBadRequest {
			t.Errorf("labelSelector %q: %d %s; want 400 labelSelector", q, res.Status, res.Body)
			continue
		}
		if e := res.apiError(t); e.Field != "labelSelector" || !strings.Contains(e.Message, reason) {
			t.Errorf("labelSelector %q: field %q message %q; want labelSelector with %q", q, e.Field, e.Message, reason)
		}
	}
}

// TestLabelsPatchAndCalendars: a merge patch sets and removes single
// labels, and calendars carry and filter by labels as schedules do.
func TestLabelsPatchAndCalendars(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if res := b.do(t, http.MethodPost, "/schedules", labelledBody("p", map[string]string{"team": "data", "tier": "1"})); res.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	if res := b.do(t, http.MethodPatch, "/schedules/p", `{"labels":{"tier":null,"env":"prod"}}`); res.Status != http.StatusOK {
		t.Fatalf("patch: %d %s", res.Status, res.Body)
	}
	if diff := cmp.Diff(schedule.Labels{"team": "data", "env": "prod"}, b.stored(t, "p").Labels); diff != "" {
		t.Errorf("labels after patch (-want,+got):\n%s", diff)
	}
	if res := b.do(t, http.MethodPatch, "/schedules/p", `{"labels":null}`); res.Status != http.StatusOK {
		t.Fatalf("patch labels null: %d %s", res.Status, res.Body)
	}
	if got := b.stored(t, "p").Labels; len(got) != 0 {
		t.Errorf("labels after {\"labels\": null}: %v, want none", got)
	}
	res := b.do(t, http.MethodGet, "/schedules?labelSelector=team%3Ddata", "")
	var sp catalog.SchedulePage
	res.json(t, &sp)
	if len(sp.Schedules) != 0 {
		t.Errorf("a schedule whose labels were removed is still selected: %s", res.Body)
	}
	for _, id := range []string{"hol-de", "hol-us"} {
		team := strings.TrimPrefix(id, "hol-")
		if res := b.do(t, http.MethodPut, "/calendars/"+id, mustJSON(map[string]any{"labels": map[string]string{"region": team}, "weekdays": []string{"sun"}})); res.Status != http.StatusCreated {
			t.Fatalf("put %s: %d %s", id, res.Status, res.Body)
		}
	}
	res = b.do(t, http.MethodGet, "/calendars?labelSelector=region%3Dus", "")
	var page catalog.CalendarPage
	res.json(t, &page)
	if len(page.Calendars) != 1 || page.Calendars[0].ID != "hol-us" {
		t.Errorf("calendars with region=us: %s", res.Body)
	}
}

// TestLabelSelectorSetTerms: != and in through the API, as kubectl reads
// them: != keeps the schedules without the label, in those with one of
// the values, the terms ANDed, one keyset page at a time, and a page
// token stays bound to its selector.
func TestLabelSelectorSetTerms(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for id, labels := range map[string]map[string]string{
		"a": {"team": "data", "env": "prod"},
		"b": {"team": "web", "env": "prod"},
		"c": {"env": "staging"},
		"d": {"team": "web", "env": "dev"},
		"e": {},
	} {
		if res := b.do(t, http.MethodPost, "/schedules", labelledBody(id, labels)); res.Status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", id, res.Status, res.Body)
		}
	}
	list := func(sel string) (ids []string, first string) {
		token := ""
		for range 10 {
			res := b.do(t, http.MethodGet, "/schedules?pageSize=1&labelSelector="+url.QueryEscape(sel)+"&pageToken="+token, "")
			if res.Status != http.StatusOK {
				t.Fatalf("%s: %d %s", sel, res.Status, res.Body)
			}
			var page catalog.SchedulePage
			res.json(t, &page)
			for _, sc := range page.Schedules {
				ids = append(ids, sc.ID)
			}
			if first == "" {
				first = page.NextPageToken
			}
			if token = page.NextPageToken; token == "" {
				return ids, first
			}
		}
		t.Fatalf("%s: the pages do not end", sel)
		return nil, ""
	}
	for sel, want := range map[string]string{
		"team!=data":                       "[b c d e]",
		"env in (prod, staging)":           "[a b c]",
		"team!=data,env in (prod,staging)": "[b c]",
		"team in (web),env!=dev":           "[b]",
	} {
		if got, _ := list(sel); fmt.Sprint(got) != want {
			t.Errorf("labelSelector %q listed %v; want %s", sel, got, want)
		}
	}
	_, token := list("team!=data")
	res := b.do(t, http.MethodGet, "/schedules?pageSize=1&labelSelector=team%3Ddata&pageToken="+token, "")
	if res.Status != http.StatusBadRequest || res.apiError(t).Field != "pageToken" {
		t.Errorf("a team!=data token on team=data: %d %s; want 400 pageToken", res.Status, res.Body)
	}
}
