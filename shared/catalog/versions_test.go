package catalog_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/schedule"
)

// versionView is one record of GET /schedules/{id}/versions, as a client
// reads it.
type versionView struct {
	ScheduleID string    `json:"scheduleId"`
	Version    int64     `json:"version"`
	Op         string    `json:"op"`
	Actor      string    `json:"actor"`
	At         time.Time `json:"at"`
	ExpireAt   time.Time `json:"expireAt"`
	Diff       []struct {
		Field  string          `json:"field"`
		Before json.RawMessage `json:"before"`
		After  json.RawMessage `json:"after"`
	} `json:"diff"`
}

// field is the (before, after) of one field in v's diff, "" when absent.
func (v versionView) field(name string) (before, after string, ok bool) {
	for _, d := range v.Diff {
		if d.Field == name {
			return string(d.Before), string(d.After), true
		}
	}
	return "", "", false
}

// versions pages through the whole history of id, pageSize at a time.
func (b *testBundle) versions(t *testing.T, id string, pageSize int) []versionView {
	t.Helper()
	var all []versionView
	token := ""
	for range 1000 {
		path := fmt.Sprintf("/schedules/%s/versions?pageSize=%d", id, pageSize)
		if token != "" {
			path += "&pageToken=" + token
		}
		res := b.do(t, http.MethodGet, path, "")
		if res.Status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, res.Status, res.Body)
		}
		var page struct {
			Versions      []versionView `json:"versions"`
			NextPageToken string        `json:"nextPageToken"`
		}
		res.json(t, &page)
		all = append(all, page.Versions...)
		if token = page.NextPageToken; token == "" {
			return all
		}
	}
	t.Fatal("versions: no last page")
	return nil
}

// TestVersionsRecordEveryWrite: create, patch, pause, resume and delete
// each leave one record, newest first, with the actor, the time, the
// version and a field-level diff of the user-visible spec only; the
// tick's bookkeeping (nextRunAt) is not in it.
func TestVersionsRecordEveryWrite(t *testing.T) {
	b := setup(t)
	if res := b.do(t, http.MethodPost, "/schedules", `{"id":"h","description":"d1","cron":"*/5 * * * *","target":{"type":"builtin","builtin":{"name":"noop"}}}`); res.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	b.clock.Set(t0.Add(time.Minute))
	if res := b.do(t, http.MethodPatch, "/schedules/h", `{"description":"d2","cron":"*/10 * * * *"}`); res.Status != http.StatusOK {
		t.Fatalf("patch: %d %s", res.Status, res.Body)
	}
	if res := b.do(t, http.MethodPost, "/schedules/h:pause", `{"reason":"db migration"}`); res.Status != http.StatusOK {
		t.Fatalf("pause: %d %s", res.Status, res.Body)
	}
	if res := b.do(t, http.MethodPost, "/schedules/h:resume", ``); res.Status != http.StatusOK {
		t.Fatalf("resume: %d %s", res.Status, res.Body)
	}
	got := b.versions(t, "h", 2)
	ops := []string{}
	for _, v := range got {
		ops = append(ops, fmt.Sprintf("%d:%s", v.Version, v.Op))
	}
	if want := "[4:resume 3:pause 2:update 1:create]"; fmt.Sprint(ops) != want {
		t.Fatalf("history = %v, want %s", ops, want)
	}
	upd := got[2]
	if upd.Actor != "local" || !upd.At.Equal(t0.Add(time.Minute)) {
		t.Errorf("update record: actor %q at %s, want local at %s", upd.Actor, upd.At, t0.Add(time.Minute))
	}
	if want := t0.Add(time.Minute).Add(schedule.DefaultKeep); !upd.ExpireAt.Equal(want) {
		t.Errorf("update record expireAt = %s, want at + the default keep, %s", upd.ExpireAt, want)
	}
	if bf, af, _ := upd.field("description"); bf != `"d1"` || af != `"d2"` {
		t.Errorf("update diff of description = %s → %s, want \"d1\" → \"d2\"", bf, af)
	}
	if bf, af, _ := upd.field("cron"); bf != `"*/5 * * * *"` || af != `"*/10 * * * *"` {
		t.Errorf("update diff of cron = %s → %s", bf, af)
	}
	for _, v := range got {
		for _, f := range []string{"nextRunAt", "version", "updatedAt", "createdAt", "misfire"} {
			if _, _, ok := v.field(f); ok {
				t.Errorf("version %d's diff shows bookkeeping field %s", v.Version, f)
			}
		}
	}
	if _, af, _ := got[1].field("pauseReason"); af != `"db migration"` {
		t.Errorf("pause diff of pauseReason after = %s", af)
	}
	if bf, af, _ := got[0].field("enabled"); bf != "false" || af != "true" {
		t.Errorf("resume diff of enabled = %s → %s", bf, af)
	}

	if res := b.do(t, http.MethodDelete, "/schedules/h", ""); res.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", res.Status, res.Body)
	}
	got = b.versions(t, "h", 50)
	if len(got) != 5 || got[0].Op != schedule.ChangeDelete || got[0].Version != 5 {
		t.Fatalf("after delete: %+v, want a delete record at version 5 on top of 4", got)
	}
	if bf, af, _ := got[0].field("description"); bf != `"d2"` || af != "" {
		t.Errorf("delete diff of description = %s → %s, want \"d2\" → absent", bf, af)
	}
	// A schedule created again under the id keeps the old history below
	// its own.
	if res := b.do(t, http.MethodPost, "/schedules", `{"id":"h","cron":"*/5 * * * *","target":{"type":"builtin","builtin":{"name":"noop"}}}`); res.Status != http.StatusCreated {
		t.Fatalf("create again: %d %s", res.Status, res.Body)
	}
	got = b.versions(t, "h", 3)
	if len(got) != 6 || got[0].Op != schedule.ChangeCreate || got[1].Op != schedule.ChangeDelete {
		t.Fatalf("after a new create: %d records, top %+v", len(got), got[0])
	}
	if res := b.do(t, http.MethodGet, "/schedules/nope/versions", ""); res.Status != http.StatusNotFound {
		t.Errorf("versions of an unknown id: %d, want 404", res.Status)
	}
	if res := b.do(t, http.MethodGet, "/schedules/h/versions?pageSize=0", ""); res.Status != http.StatusBadRequest || res.apiError(t).Field != "pageSize" {
		t.Errorf("pageSize=0: %d %s, want 400 naming pageSize", res.Status, res.Body)
	}
	for _, q := range []string{"/schedules/h/versions?limit=5", "/schedules/h/runs?status=failed", "/schedules?label=team%3Dops", "/calendars?labels=a"} {
		if res := b.do(t, http.MethodGet, q, ""); res.Status != http.StatusBadRequest || res.apiError(t).Field == "" || !strings.Contains(res.apiError(t).Message, "unknown query parameter") {
			t.Errorf("GET %s: %d %s, want 400 naming the unknown parameter", q, res.Status, res.Body)
		}
	}
}

// TestVersionsPageIsKeyset: a page of n reads n records however deep it
// is (plus the schedule), never a skip.
func TestVersionsPageIsKeyset(t *testing.T) {
	b := setup(t)
	if res := b.do(t, http.MethodPost, "/schedules", noopBody("k", "*/5 * * * *")); res.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	for i := range 30 {
		if res := b.do(t, http.MethodPatch, "/schedules/k", fmt.Sprintf(`{"description":"v%d"}`, i)); res.Status != http.StatusOK {
			t.Fatalf("patch %d: %d %s", i, res.Status, res.Body)
		}
	}
	m := b.st.Meter()
	token := ""
	for page := 0; ; page++ {
		m.Reset()
		path := "/schedules/k/versions?pageSize=5"
		if token != "" {
			path += "&pageToken=" + token
		}
		res := b.do(t, http.MethodGet, path, "")
		var p struct {
			Versions      []versionView `json:"versions"`
			NextPageToken string        `json:"nextPageToken"`
		}
		res.json(t, &p)
		if n := m.Op(schedule.VersionsCollection + ".page"); n > 5 {
			t.Errorf("page %d read %d records, want at most 5", page, n)
		}
		if token = p.NextPageToken; token == "" {
			break
		}
	}
}

// TestVersionsRetention: a schedule keeps at most VersionsKept records;
// older ones are pruned by the writes, in bounded batches.
func TestVersionsRetention(t *testing.T) {
	b := setupWith(t, func(o *catalog.Options) { o.VersionsKept = 5 })
	if res := b.do(t, http.MethodPost, "/schedules", noopBody("r", "*/5 * * * *")); res.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	for i := range 12 {
		if res := b.do(t, http.MethodPatch, "/schedules/r", fmt.Sprintf(`{"description":"v%d"}`, i)); res.Status != http.StatusOK {
			t.Fatalf("patch %d: %d %s", i, res.Status, res.Body)
		}
	}
	got := b.versions(t, "r", 50)
	if len(got) != 5 || got[0].Version != 13 || got[4].Version != 9 {
		t.Fatalf("kept %d records (%d..%d), want the last 5 (13..9)", len(got), got[0].Version, got[len(got)-1].Version)
	}
	if n := b.count(t, schedule.VersionsCollection); n != 5 {
		t.Errorf("%d records stored, want 5", n)
	}
}

// TestVersionsUnderFaults: every write of a sequence, with one fault
// injected into either of its two writes (the change record, the schedule)
// - a WriteConflict, a dropped connection, a write that lands and answers
// an error - and the client retrying what failed. Afterwards the history
// has exactly one record per version that landed (none lost, none
// doubled), consecutive, and its diffs chain: each record's "before" is
// the previous record's "after". Not parallel: one fail point.
func TestVersionsUnderFaults(t *testing.T) {
	type write struct{ method, path, body string }
	seq := []write{
		{http.MethodPost, "/schedules", `{"id":"f","description":"d1","cron":"*/5 * * * *","target":{"type":"builtin","builtin":{"name":"noop"}}}`},
		{http.MethodPatch, "/schedules/f", `{"description":"d2"}`},
		{http.MethodPost, "/schedules/f:pause", `{"reason":"why"}`},
		{http.MethodPost, "/schedules/f:resume", ``},
		{http.MethodPatch, "/schedules/f", `{"description":"d3"}`},
		{http.MethodDelete, "/schedules/f", ``},
	}
	faults := []struct {
		name string
		arm  func(t *testing.T, b *testBundle, coll string)
	}{
		{"write conflict", func(t *testing.T, b *testBundle, coll string) {
			emutest.FailCommandCode(t, b.st, coll, bson.D{{Key: "times", Value: 1}}, 112, "update", "insert", "delete")
		}},
		{"dropped connection", func(t *testing.T, b *testBundle, coll string) {
			emutest.FailCommandDrop(t, b.st, coll, bson.D{{Key: "times", Value: 1}}, "update", "insert", "delete")
		}},
		{"lands, answers an error", func(t *testing.T, b *testBundle, coll string) {
			emutest.FailCommandCodeAfterRun(t, b.st, coll, bson.D{{Key: "times", Value: 1}}, 262, "update", "insert", "delete")
		}},
	}
	for _, f := range faults {
		for _, coll := range []string{schedule.VersionsCollection, schedule.SchedulesCollection} {
			for at := range seq {
				t.Run(fmt.Sprintf("%s/%s/write %d", f.name, coll, at), func(t *testing.T) {
					b := setup(t)
					for i, w := range seq {
						if i == at {
							f.arm(t, b, coll)
						}
						for try := 0; ; try++ {
							res := b.do(t, w.method, w.path, w.body)
							if res.Status < 300 || (w.method == http.MethodDelete && res.Status == http.StatusNotFound && try > 0) {
								break
							}
							// Between the failure and the retry, the history
							// shows what landed, no more.
							if cur := b.do(t, http.MethodGet, "/schedules/f", ""); cur.Status == http.StatusOK {
								var sc schedule.Schedule
								cur.json(t, &sc)
								vs := b.versions(t, "f", 50)
								if len(vs) == 0 || vs[0].Version != sc.Version {
									t.Errorf("after failed write %d: schedule at version %d, history %v", i, sc.Version, summary(vs))
								}
								for _, v := range vs {
									if v.Version > sc.Version || v.Op == schedule.ChangeDelete {
										t.Errorf("after failed write %d: schedule at version %d, history shows %d:%s, a write that did not land (%v)", i, sc.Version, v.Version, v.Op, summary(vs))
									}
								}
							}
							if try == 3 {
								t.Fatalf("write %d (%s %s) failed %d times: %d %s", i, w.method, w.path, try+1, res.Status, res.Body)
							}
						}
						emutest.FailCommandOff(t, b.st)
					}
					checkChain(t, b.versions(t, "f", 2))
				})
			}
		}
	}
}

// checkChain: got (newest first) ends with a delete, is consecutive from
// 1, and each record's before is the previous one's after, for the fields
// the sequence changes.
func checkChain(t *testing.T, got []versionView) {
	t.Helper()
	if len(got) == 0 || got[0].Op != schedule.ChangeDelete {
		t.Fatalf("history %+v does not end with the delete", got)
	}
	state := map[string]string{}
	for i := len(got) - 1; i >= 0; i-- {
		v := got[i]
		if want := int64(len(got) - i); v.Version != want {
			t.Fatalf("record %d has version %d, want %d: a change lost or doubled (%v)", len(got)-i, v.Version, want, summary(got))
		}
		for _, f := range []string{"description", "enabled", "pauseReason"} {
			bf, af, ok := v.field(f)
			if !ok {
				continue
			}
			if bf != state[f] {
				t.Errorf("version %d (%s): %s before = %s, but version %d left it %s (%v)", v.Version, v.Op, f, bf, v.Version-1, state[f], summary(got))
			}
			state[f] = af
		}
	}
	if state["description"] != "" {
		t.Errorf("after the delete the description is %s, want absent", state["description"])
	}
}

func summary(got []versionView) []string {
	var s []string
	for _, v := range got {
		s = append(s, fmt.Sprintf("%d:%s", v.Version, v.Op))
	}
	return s
}

// TestHistoryKeepValidated: history.keep is a duration (with days) between
// 1h and 3650d; anything else is 400 naming history.keep, nothing written.
func TestHistoryKeepValidated(t *testing.T) {
	b := setup(t)
	for _, keep := range []string{`""`, `"30x"`, `"59m"`, `"3651d"`, `"-1d"`, `30`} {
		body := `{"id":"k","cron":"*/5 * * * *","history":{"keep":` + keep + `},"target":{"type":"builtin","builtin":{"name":"noop"}}}`
		res := b.do(t, http.MethodPost, "/schedules", body)
		if res.Status != http.StatusBadRequest || res.apiError(t).Field != "history.keep" {
			t.Errorf("keep %s: %d %s, want 400 naming history.keep", keep, res.Status, res.Body)
		}
	}
	if n := b.count(t, schedule.SchedulesCollection); n != 0 {
		t.Errorf("%d schedules written by refused creates", n)
	}
	for i, keep := range []string{"1h", "30d", "3650d", "36h"} {
		// Each create its own millisecond: a schedule's incarnations are
		// told apart by createdAt.
		b.clock.Set(t0.Add(time.Duration(i) * time.Second))
		res := b.do(t, http.MethodPost, "/schedules", `{"id":"k","cron":"*/5 * * * *","history":{"keep":"`+keep+`"},"target":{"type":"builtin","builtin":{"name":"noop"}}}`)
		if res.Status != http.StatusCreated {
			t.Errorf("keep %s: %d %s, want 201", keep, res.Status, res.Body)
		}
		if res := b.do(t, http.MethodDelete, "/schedules/k", ""); res.Status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", res.Status, res.Body)
		}
	}
	b.clock.Set(t0.Add(time.Minute))
	res := b.do(t, http.MethodPost, "/schedules", `{"id":"k","cron":"*/5 * * * *","history":{"keep":"2d"},"target":{"type":"builtin","builtin":{"name":"noop"}}}`)
	if res.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	if vs := b.versions(t, "k", 1); !vs[0].ExpireAt.Equal(vs[0].At.Add(48 * time.Hour)) {
		t.Errorf("a record of a schedule with keep 2d expires at %s, want at + 48h", vs[0].ExpireAt)
	}
	if res := b.do(t, http.MethodPatch, "/schedules/k", `{"history":{"keep":"1m"}}`); res.Status != http.StatusBadRequest || res.apiError(t).Field != "history.keep" {
		t.Errorf("patch keep 1m: %d %s, want 400 naming history.keep", res.Status, res.Body)
	}
}
