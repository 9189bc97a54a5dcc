package catalog_test

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-cron/baton/shared/schedule"
)

const holidays = `{"timeZone":"Europe/Berlin","dates":["2026-12-25"],"ranges":[{"from":"2026-12-28","to":"2026-12-31"}],"rules":[{"month":1,"day":1},{"month":11,"weekday":"thu","nth":4}],"weekdays":["sun"]}`

// TestCalendarsCRUD: PUT creates (201) then replaces (200, version 2,
// If-Match honoured), GET reads with the ETag, the list pages with a
// cursor, DELETE removes.
func TestCalendarsCRUD(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.do(t, http.MethodPut, "/calendars/holidays-de", holidays)
	if res.Status != http.StatusCreated || res.Header.Get("ETag") != `"1"` || res.Header.Get("Location") != "/calendars/holidays-de" {
		t.Fatalf("create: %d %v %s", res.Status, res.Header, res.Body)
	}
	var c schedule.Calendar
	res.json(t, &c)
	if c.ID != "holidays-de" || c.Version != 1 || !c.CreatedAt.Equal(t0) || len(c.Rules) != 2 {
		t.Errorf("created %+v", c)
	}
	if res := b.do(t, http.MethodPut, "/calendars/holidays-de", `{"dates":["2026-12-24"]}`, "If-Match", `"7"`); res.Status != http.StatusPreconditionFailed {
		t.Errorf("replace with a stale If-Match: %d %s; want 412", res.Status, res.Body)
	}
	res = b.do(t, http.MethodPut, "/calendars/holidays-de", `{"dates":["2026-12-24"]}`, "If-Match", `"1"`)
	if res.Status != http.StatusOK || res.Header.Get("ETag") != `"2"` {
		t.Fatalf("replace: %d %s", res.Status, res.Body)
	}
	res = b.do(t, http.MethodGet, "/calendars/holidays-de", "")
	var got schedule.Calendar
	res.json(t, &got)
	want := schedule.Calendar{ID: "holidays-de", Dates: []string{"2026-12-24"}, Version: 2, CreatedAt: t0, UpdatedAt: t0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after replace (-want,+got):\n%s", diff)
	}
	for _, id := range []string{"a", "b"} {
		if res := b.do(t, http.MethodPut, "/calendars/"+id, `{"weekdays":["sat"]}`); res.Status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", id, res.Status, res.Body)
		}
	}
	var ids []string
	token := ""
	for {
		var page struct {
			Calendars     []schedule.Calendar `json:"calendars"`
			NextPageToken string              `json:"nextPageToken"`
		}
		b.do(t, http.MethodGet, "/calendars?pageSize=2&pageToken="+token, "").json(t, &page)
		for _, c := range page.Calendars {
			ids = append(ids, c.ID)
		}
		if page.NextPageToken == "" {
			break
		}
		token = page.NextPageToken
	}
	if diff := cmp.Diff([]string{"a", "b", "holidays-de"}, ids); diff != "" {
		t.Errorf("list (-want,+got):\n%s", diff)
	}
	if res := b.do(t, http.MethodDelete, "/calendars/holidays-de", ""); res.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", res.Status, res.Body)
	}
	if res := b.do(t, http.MethodGet, "/calendars/holidays-de", ""); res.Status != http.StatusNotFound {
		t.Errorf("get after delete: %d", res.Status)
	}
	if res := b.do(t, http.MethodDelete, "/calendars/holidays-de", ""); res.Status != http.StatusNotFound {
		t.Errorf("delete again: %d", res.Status)
	}
}

// TestCalendarBadInputStoresNothing: every bad calendar, and every
// schedule naming an unknown calendar, is a 400 naming the field, with
// nothing written.
func TestCalendarBadInputStoresNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if res := b.do(t, http.MethodPut, "/calendars/hol", `{"dates":["2026-12-25"]}`); res.Status != http.StatusCreated {
		t.Fatalf("seed: %d %s", res.Status, res.Body)
	}
	withCals := func(id, field string, ids ...string) string {
		return mustJSON(map[string]any{"id": id, "cron": "0 10 * * *", field: ids, "target": map[string]any{"type": "builtin", "builtin": map[string]any{"name": "noop"}}})
	}
	if res := b.do(t, http.MethodPost, "/schedules", withCals("existing", "excludeCalendars", "hol")); res.Status != http.StatusCreated {
		t.Fatalf("seed schedule: %d %s", res.Status, res.Body)
	}
	beforeCal, beforeSched := b.do(t, http.MethodGet, "/calendars/hol", "").Body, b.stored(t, "existing")
	for _, tc := range []struct {
		name, method, path, body string
		field                    string
	}{
		{"bad date", "PUT", "/calendars/hol", `{"dates":["2026-12-25","25.12.2026"]}`, "dates[1]"},
		{"reversed range", "PUT", "/calendars/hol", `{"ranges":[{"from":"2026-12-31","to":"2026-12-24"}]}`, "ranges[0].to"},
		{"bad month", "PUT", "/calendars/hol", `{"rules":[{"month":0,"day":1}]}`, "rules[0].month"},
		{"bad nth", "PUT", "/calendars/hol", `{"rules":[{"month":11,"weekday":"thu","nth":0}]}`, "rules[0].nth"},
		{"bad weekday", "PUT", "/calendars/hol", `{"weekdays":["sat","holiday"]}`, "weekdays[1]"},
		{"bad zone", "PUT", "/calendars/hol", `{"timeZone":"Mars/Olympus"}`, "timeZone"},
		{"unknown field", "PUT", "/calendars/hol", `{"days":[]}`, "days"},
		{"wrong type", "PUT", "/calendars/hol", `{"dates":"2026-12-25"}`, "dates"},
		{"id differs", "PUT", "/calendars/hol", `{"id":"other"}`, "id"},
		{"bad id", "PUT", "/calendars/Not_OK", `{}`, "id"},
		{"empty body", "PUT", "/calendars/hol", ``, ""},
		{"bad If-Match", "PUT", "/calendars/hol", `{}`, ""},
		{"unknown exclude calendar", "POST", "/schedules", withCals("new", "excludeCalendars", "hol", "nope"), "excludeCalendars[1]"},
		{"unknown only calendar", "POST", "/schedules", withCals("new", "onlyCalendars", "nope"), "onlyCalendars[0]"},
		{"calendar listed twice", "POST", "/schedules", withCals("new", "excludeCalendars", "hol", "hol"), "excludeCalendars[1]"},
		{"patch: unknown calendar", "PATCH", "/schedules/existing", `{"onlyCalendars":["nope"]}`, "onlyCalendars[0]"},
		{"patch: bad calendar id", "PATCH", "/schedules/existing", `{"excludeCalendars":["hol","Bad Id"]}`, "excludeCalendars[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.name == "bad If-Match" {
				hdr = []string{"If-Match", "v1"}
				tc.field = "If-Match"
			}
			res := b.do(t, tc.method, tc.path, tc.body, hdr...)
			e := res.apiError(t)
			if res.Status != http.StatusBadRequest || e.Field != tc.field {
				t.Fatalf("status, field = %d, %q; want 400, %q (%s)", res.Status, e.Field, tc.field, res.Body)
			}
			if n := b.count(t, schedule.CalendarsCollection); n != 1 {
				t.Errorf("%d calendars stored, want 1", n)
			}
			if n := b.count(t, schedule.SchedulesCollection); n != 1 {
				t.Errorf("%d schedules stored, want 1", n)
			}
			if got := b.do(t, http.MethodGet, "/calendars/hol", "").Body; string(got) != string(beforeCal) {
				t.Errorf("calendar changed: %s", got)
			}
			if diff := cmp.Diff(beforeSched, b.stored(t, "existing")); diff != "" {
				t.Errorf("schedule changed (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestCalendarDeleteWhileNamed: a calendar that a schedule names may be
// deleted (documented: the tick treats it as having no days); the
// schedule can still be edited otherwise, and naming it anew is refused.
func TestCalendarDeleteWhileNamed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.do(t, http.MethodPut, "/calendars/hol", `{"dates":["2026-12-25"]}`)
	body := mustJSON(map[string]any{"id": "s", "cron": "0 10 * * *", "excludeCalendars": []string{"hol"}, "target": map[string]any{"type": "builtin", "builtin": map[string]any{"name": "noop"}}})
	if res := b.do(t, http.MethodPost, "/schedules", body); res.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	if res := b.do(t, http.MethodDelete, "/calendars/hol", ""); res.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", res.Status, res.Body)
	}
	if res := b.do(t, http.MethodPatch, "/schedules/s", `{"description":"still editable"}`); res.Status != http.StatusOK {
		t.Errorf("patch of a schedule naming a deleted calendar: %d %s", res.Status, res.Body)
	}
	if res := b.do(t, http.MethodPost, "/schedules/s:pause", ""); res.Status != http.StatusOK {
		t.Errorf("pause: %d %s", res.Status, res.Body)
	}
	if res := b.do(t, http.MethodPatch, "/schedules/s", `{"excludeCalendars":null}`); res.Status != http.StatusOK {
		t.Fatalf("dropping the calendar: %d %s", res.Status, res.Body)
	}
	if res := b.do(t, http.MethodPatch, "/schedules/s", `{"excludeCalendars":["hol"]}`); res.Status != http.StatusBadRequest || res.apiError(t).Field != "excludeCalendars[0]" {
		t.Errorf("naming the deleted calendar anew: %d %s; want 400 excludeCalendars[0]", res.Status, res.Body)
	}
}
