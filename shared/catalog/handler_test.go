package catalog_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/internal/skipscan"
	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/schedule"
)

func TestCreateGetDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)

	res := b.do(t, http.MethodPost, "/schedules", `{"id":"nightly","cron":"30 2 * * *","timeZone":"Europe/Berlin","target":{"type":"http","http":{"url":"https://hooks.example.com/run"}}}`)
	if res.Status != http.StatusCreated {
		t.Fatalf("create: status %d, body %s", res.Status, res.Body)
	}
	if got, want := res.Header.Get("Location"), "/schedules/nightly"; got != want {
		t.Errorf("Location = %q, want %q", got, want)
	}
	if got, want := res.Header.Get("ETag"), `"1"`; got != want {
		t.Errorf("ETag = %q, want %q", got, want)
	}
	var created schedule.Schedule
	res.json(t, &created)
	want := schedule.Schedule{
		ID: "nightly", Cron: "30 2 * * *", TimeZone: "Europe/Berlin",
		Target:  schedule.Target{Type: "http", HTTP: &schedule.HTTPTarget{Method: "POST", URL: "https://hooks.example.com/run", Timeout: schedule.Duration(30 * time.Second)}},
		Overlap: schedule.OverlapBufferOne, Catchup: schedule.CatchupLatest, MaxCatchup: 10,
		CatchupWindow: schedule.Duration(time.Hour), Retry: schedule.Retry{MaxAttempts: 1, Backoff: schedule.Duration(30 * time.Second)},
		LeaseTTL: schedule.Duration(30 * time.Second), Enabled: true,
		// 02:30 in Berlin (CET, UTC+1) on 2 March, the first after t0.
		NextRunAt: time.Date(2026, 3, 2, 1, 30, 0, 0, time.UTC),
		Version:   1, CreatedAt: t0, UpdatedAt: t0,
	}
	if diff := cmp.Diff(want, created); diff != "" {
		t.Errorf("created schedule (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(want, *b.stored(t, "nightly")); diff != "" {
		t.Errorf("stored schedule (-want,+got):\n%s", diff)
	}

	res = b.do(t, http.MethodGet, "/schedules/nightly", "")
	if res.Status != http.StatusOK || res.Header.Get("ETag") != `"1"` {
		t.Fatalf("get: status %d, ETag %q, body %s", res.Status, res.Header.Get("ETag"), res.Body)
	}
	var got schedule.Schedule
	res.json(t, &got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("get (-want,+got):\n%s", diff)
	}

	if res := b.do(t, http.MethodPost, "/schedules", noopBody("nightly", "* * * * *")); res.Status != http.StatusConflict ||
		res.apiError(t).Message != "a schedule with this id already exists" {
		t.Errorf("duplicate create: status %d, want 409 saying the id is taken; body %s", res.Status, res.Body)
	}
	if n := b.count(t, schedule.SchedulesCollection); n != 1 {
		t.Errorf("after a duplicate create: %d schedules stored, want 1", n)
	}
	if got := b.stored(t, "nightly").Cron; got != "30 2 * * *" {
		t.Errorf("duplicate create changed the stored cron to %q", got)
	}

	if res := b.do(t, http.MethodDelete, "/schedules/nightly", ""); res.Status != http.StatusNoContent {
		t.Fatalf("delete: status %d, body %s", res.Status, res.Body)
	}
	for _, m := range []string{http.MethodGet, http.MethodDelete, http.MethodPatch} {
		res := b.do(t, m, "/schedules/nightly", `{"description":"x"}`)
		// The answer is written for the caller, not the log's
		// "catalog: get nightly: catalog: schedule not found".
		if e := res.apiError(t); res.Status != http.StatusNotFound || e.Code != "not_found" || e.Message != "no such schedule" {
			t.Errorf("%s after delete: status %d, body %s; want 404 not_found, no such schedule", m, res.Status, res.Body)
		}
	}
	if n := b.count(t, schedule.SchedulesCollection); n != 0 {
		t.Errorf("after delete: %d schedules stored, want 0", n)
	}
}

func TestCreateGeneratesID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.do(t, http.MethodPost, "/schedules", noopBody("", "*/5 * * * *"))
	if res.Status != http.StatusCreated {
		t.Fatalf("status %d, body %s", res.Status, res.Body)
	}
	var sc schedule.Schedule
	res.json(t, &sc)
	if !schedule.IDPattern.MatchString(sc.ID) {
		t.Errorf("generated id %q does not match %s", sc.ID, schedule.IDPattern)
	}
	if got := b.stored(t, sc.ID); got.Cron != "*/5 * * * *" {
		t.Errorf("stored cron %q", got.Cron)
	}
	if want := time.Date(2026, 3, 1, 10, 5, 0, 0, time.UTC); !sc.NextRunAt.Equal(want) {
		t.Errorf("nextRunAt = %s, want %s", sc.NextRunAt, want)
	}
}

// TestBadInputStoresNothing is the API's input guarantee: every kind of bad
// input gets 400 (or 413) naming the field, and the database is unchanged.
func TestBadInputStoresNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if res := b.do(t, http.MethodPost, "/schedules", noopBody("existing", "0 * * * *")); res.Status != http.StatusCreated {
		t.Fatalf("seed: %d %s", res.Status, res.Body)
	}
	before := b.stored(t, "existing")

	httpTarget := func(url string) string {
		return mustJSON(map[string]any{"id": "new", "cron": "* * * * *", "target": map[string]any{"type": "http", "http": map[string]any{"url": url}}})
	}
	big := `{"id":"new","cron":"* * * * *","description":"` + strings.Repeat("x", 70<<10) + `","target":{"type":"builtin","builtin":{"name":"noop"}}}`
	tests := []struct {
		name, method, path, body string
		header                   []string
		status                   int
		field                    string
	}{
		{"invalid cron", "POST", "/schedules", noopBody("new", "61 * * * *"), nil, 400, "cron"},
		{"cron with 7 fields", "POST", "/schedules", noopBody("new", "* * * * * * *"), nil, 400, "cron"},
		{"cron that never fires", "POST", "/schedules", noopBody("new", "0 0 30 2 *"), nil, 400, "cron"},
		{"unknown time zone", "POST", "/schedules", `{"id":"new","cron":"* * * * *","timeZone":"Mars/Olympus","target":{"type":"builtin","builtin":{"name":"noop"}}}`, nil, 400, "timeZone"},
		{"unknown overlap policy", "POST", "/schedules", `{"id":"new","cron":"* * * * *","overlap":"queue","target":{"type":"builtin","builtin":{"name":"noop"}}}`, nil, 400, "overlap"},
		{"unknown catchup policy", "POST", "/schedules", `{"id":"new","cron":"* * * * *","catchup":"some","target":{"type":"builtin","builtin":{"name":"noop"}}}`, nil, 400, "catchup"},
		{"malformed target url", "POST", "/schedules", httpTarget("https://hooks.example.com:port/x"), nil, 400, "target.http.url"},
		{"relative target url", "POST", "/schedules", httpTarget("/run"), nil, 400, "target.http.url"},
		{"ssrf: metadata server", "POST", "/schedules", httpTarget("http://169.254.169.254/computeMetadata/v1/"), nil, 400, "target.http.url"},
		{"ssrf: loopback", "POST", "/schedules", httpTarget("http://127.0.0.1:8080/Schedules"), nil, 400, "target.http.url"},
		{"ssrf: host not on allowlist", "POST", "/schedules", httpTarget("https://evil.example.org/"), nil, 400, "target.http.url"},
		{"unknown field", "POST", "/schedules", `{"id":"new","cron":"* * * * *","colour":"red","target":{"type":"builtin","builtin":{"name":"noop"}}}`, nil, 400, "colour"},
		{"unknown builtin", "POST", "/schedules", `{"id":"new","cron":"* * * * *","target":{"type":"builtin","builtin":{"name":"rm-rf"}}}`, nil, 400, "target.builtin.name"},
		{"invalid id", "POST", "/schedules", noopBody("Has/Slash", "* * * * *"), nil, 400, "id"},
		{"wrong type", "POST", "/schedules", `{"id":"new","cron":5}`, nil, 400, "cron"},
		{"malformed json", "POST", "/schedules", `{"id":"new",`, nil, 400, ""},
		{"empty body", "POST", "/schedules", ``, nil, 400, ""},
		{"body over the limit", "POST", "/schedules", big, nil, 413, ""},
		{"patch: invalid cron", "PATCH", "/schedules/existing", `{"cron":"every day"}`, nil, 400, "cron"},
		{"patch: unknown time zone", "PATCH", "/schedules/existing", `{"timeZone":"Europe/Atlantis"}`, nil, 400, "timeZone"},
		{"patch: unknown policy", "PATCH", "/schedules/existing", `{"catchup":"sometimes"}`, nil, 400, "catchup"},
		{"patch: disallowed target", "PATCH", "/schedules/existing", `{"target":{"type":"http","builtin":null,"http":{"url":"http://10.0.0.1/"}}}`, nil, 400, "target.http.url"},
		{"patch: two targets", "PATCH", "/schedules/existing", `{"target":{"type":"http","http":{"url":"https://hooks.example.com/"}}}`, nil, 400, "target.builtin"},
		{"patch: unknown field", "PATCH", "/schedules/existing", `{"crontab":"* * * * *"}`, nil, 400, "crontab"},
		{"patch: change id", "PATCH", "/schedules/existing", `{"id":"other"}`, nil, 400, "id"},
		{"patch: duplicate field", "PATCH", "/schedules/existing", `{"cron":"* * * * *","cron":"0 25 * * *"}`, nil, 400, "cron"},
		{"patch: duplicate nested field", "PATCH", "/schedules/existing", `{"retry":{"maxAttempts":2,"maxAttempts":3}}`, nil, 400, "retry.maxAttempts"},
		{"patch: $ arg key", "PATCH", "/schedules/existing", `{"target":{"builtin":{"args":{"$where":"1"}}}}`, nil, 400, `target.builtin.args["$where"]`},
		{"create: __x__ arg key", "POST", "/schedules", `{"id":"new","cron":"* * * * *","target":{"type":"builtin","builtin":{"name":"noop","args":{"__x__":"1"}}}}`, nil, 400, "target.builtin.args.__x__"},
		{"patch: not an object", "PATCH", "/schedules/existing", `["cron"]`, nil, 400, ""},
		{"patch: body over the limit", "PATCH", "/schedules/existing", `{"description":"` + strings.Repeat("x", 70<<10) + `"}`, nil, 413, ""},
		{"patch: malformed If-Match", "PATCH", "/schedules/existing", `{"description":"x"}`, []string{"If-Match", "yesterday"}, 400, "If-Match"},
		{"pause with another field", "POST", "/schedules/existing:pause", `{"enabled":true}`, nil, 400, "enabled"},
		{"pause: reason not a string", "POST", "/schedules/existing:pause", `{"reason":42}`, nil, 400, "reason"},
		{"pause: reason too long", "POST", "/schedules/existing:pause", `{"reason":"` + strings.Repeat("x", schedule.MaxDescription+1) + `"}`, nil, 400, "reason"},
		{"pause: not an object", "POST", "/schedules/existing:pause", `"stop"`, nil, 400, ""},
		{"resume with a body", "POST", "/schedules/existing:resume", `{"reason":"x"}`, nil, 400, ""},
		{"delete: malformed If-Match", "DELETE", "/schedules/existing", ``, []string{"If-Match", `"v1"`}, 400, "If-Match"},
		{"list: bad pageSize", "GET", "/schedules?pageSize=lots", ``, nil, 400, "pageSize"},
		{"list: pageSize too large", "GET", "/schedules?pageSize=100000", ``, nil, 400, "pageSize"},
		{"list: forged pageToken", "GET", "/schedules?pageToken=AAAAAAAAAAAAAAAAAAAAAAAA", ``, nil, 400, "pageToken"},
		{"runs: bad pageSize", "GET", "/schedules/existing/runs?pageSize=-1", ``, nil, 400, "pageSize"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := b.do(t, tc.method, tc.path, tc.body, tc.header...)
			e := res.apiError(t)
			if res.Status != tc.status || e.Field != tc.field {
				t.Fatalf("status, field = %d, %q; want %d, %q (message %q)", res.Status, e.Field, tc.status, tc.field, e.Message)
			}
			if e.Message == "" || e.Code == "" {
				t.Errorf("error without code or message: %s", res.Body)
			}
			if n := b.count(t, schedule.SchedulesCollection); n != 1 {
				t.Errorf("%d schedules stored after bad input, want 1", n)
			}
			if diff := cmp.Diff(before, b.stored(t, "existing")); diff != "" {
				t.Errorf("bad input changed the stored schedule (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestPatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if res := b.do(t, http.MethodPost, "/schedules", `{"id":"job","description":"hourly job","cron":"0 * * * *","overlap":"skip","target":{"type":"builtin","builtin":{"name":"sleep","args":{"duration":"1s"}}}}`); res.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	later := t0.Add(3 * time.Hour)
	b.clock.Set(later)

	// Merge patch: cron replaced, overlap reset to its default with null,
	// description removed, builtin args merged key by key.
	res := b.do(t, http.MethodPatch, "/schedules/job", `{"cron":"*/20 * * * *","overlap":null,"description":null,"target":{"builtin":{"args":{"n":"2"}}},"version":99,"nextRunAt":"2000-01-01T00:00:00Z"}`, "If-Match", `"1"`)
	if res.Status != http.StatusOK {
		t.Fatalf("patch: %d %s", res.Status, res.Body)
	}
	if got := res.Header.Get("ETag"); got != `"2"` {
		t.Errorf("ETag after patch = %q, want \"2\"", got)
	}
	var got schedule.Schedule
	res.json(t, &got)
	stored := b.stored(t, "job")
	if diff := cmp.Diff(stored, &got); diff != "" {
		t.Errorf("answer differs from the database (-stored,+answer):\n%s", diff)
	}
	type view struct {
		Cron, Overlap, Description string
		Args                       map[string]string
		Version                    int64
		NextRunAt, CreatedAt, Upd  time.Time
	}
	wantV := view{Cron: "*/20 * * * *", Overlap: "buffer_one", Args: map[string]string{"duration": "1s", "n": "2"}, Version: 2,
		NextRunAt: later.Truncate(time.Minute).Add(20 * time.Minute), CreatedAt: t0, Upd: later}
	gotV := view{stored.Cron, string(stored.Overlap), stored.Description, stored.Target.Builtin.Args, stored.Version, stored.NextRunAt, stored.CreatedAt, stored.UpdatedAt}
	if diff := cmp.Diff(wantV, gotV); diff != "" {
		t.Errorf("stored after patch (-want,+got):\n%s", diff)
	}

	// The description was removed from the document, not left behind.
	raw, err := emutest.Raw(t, b.st).Collection(schedule.SchedulesCollection).FindOne(context.Background(), map[string]string{"_id": "job"}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.LookupErr("description"); err == nil {
		t.Errorf("description still stored after patching it to null: %s", raw)
	}

	// A stale If-Match is 412 and changes nothing.
	res = b.do(t, http.MethodPatch, "/schedules/job", `{"cron":"* * * * *"}`, "If-Match", `"1"`)
	if res.Status != http.StatusPreconditionFailed || res.apiError(t).Code != "failed_precondition" {
		t.Fatalf("stale If-Match: %d %s; want 412", res.Status, res.Body)
	}
	if diff := cmp.Diff(stored, b.stored(t, "job")); diff != "" {
		t.Errorf("412 changed the schedule (-want,+got):\n%s", diff)
	}
	// So is a stale DELETE.
	if res := b.do(t, http.MethodDelete, "/schedules/job", "", "If-Match", "1"); res.Status != http.StatusPreconditionFailed {
		t.Errorf("stale If-Match on DELETE: %d %s; want 412", res.Status, res.Body)
	}
	// The current version (bare or as an ETag) is accepted.
	if res := b.do(t, http.MethodPatch, "/schedules/job", `{"maxCatchup":3}`, "If-Match", "2"); res.Status != http.StatusOK {
		t.Errorf("If-Match 2: %d %s", res.Status, res.Body)
	}
	if res := b.do(t, http.MethodDelete, "/schedules/job", "", "If-Match", `W/"3"`); res.Status != http.StatusNoContent {
		t.Errorf("If-Match W/\"3\" on DELETE: %d %s", res.Status, res.Body)
	}
}

// TestConcurrentPatches checks that unconditional patches racing on one
// schedule all land: each re-reads and re-applies on a version conflict.
func TestConcurrentPatches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if res := b.do(t, http.MethodPost, "/schedules", noopBody("hot", "* * * * *")); res.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	const writers = 4
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.svc.Update(context.Background(), "hot", map[string]any{"target": map[string]any{"builtin": map[string]any{"args": map[string]any{fmt.Sprint("w", i): "x"}}}}, 0)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("update: %v", err)
		}
	}
	sc := b.stored(t, "hot")
	if sc.Version != 1+writers || len(sc.Target.Builtin.Args) != writers {
		t.Errorf("after %d concurrent patches: version %d, args %v; want version %d and every writer's arg", writers, sc.Version, sc.Target.Builtin.Args, 1+writers)
	}
}

func TestPauseResumeTrigger(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if res := b.do(t, http.MethodPost, "/schedules", noopBody("p", "0 */6 * * *")); res.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	res := b.do(t, http.MethodPost, "/schedules/p:pause", "")
	if res.Status != http.StatusOK {
		t.Fatalf("pause: %d %s", res.Status, res.Body)
	}
	if sc := b.stored(t, "p"); sc.Enabled || sc.Version != 2 {
		t.Errorf("after pause: enabled %v, version %d; want false, 2", sc.Enabled, sc.Version)
	}
	// Resume a day later: nextRunAt is recomputed from the new now, so the
	// times missed while paused are not owed.
	b.clock.Set(t0.Add(24 * time.Hour))
	res = b.do(t, http.MethodPost, "/schedules/p:resume", "", "If-Match", `"2"`)
	if res.Status != http.StatusOK {
		t.Fatalf("resume: %d %s", res.Status, res.Body)
	}
	sc := b.stored(t, "p")
	if want := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC); !sc.Enabled || !sc.NextRunAt.Equal(want) || sc.Version != 3 {
		t.Errorf("after resume: enabled %v, nextRunAt %s, version %d; want true, %s, 3", sc.Enabled, sc.NextRunAt, sc.Version, want)
	}
	if res := b.do(t, http.MethodPost, "/schedules/p:pause", "", "If-Match", `"2"`); res.Status != http.StatusPreconditionFailed {
		t.Errorf("pause with stale If-Match: %d %s; want 412", res.Status, res.Body)
	}

	res = b.do(t, http.MethodPost, "/schedules/p:trigger", "")
	if res.Status != http.StatusOK {
		t.Fatalf("trigger: %d %s", res.Status, res.Body)
	}
	var run schedule.Run
	res.json(t, &run)
	if run.ScheduleID != "p" || run.Source != schedule.SourceManual {
		t.Errorf("trigger answered %+v; want a manual run of p", run)
	}
	if res := b.do(t, http.MethodPost, "/schedules/ghost:trigger", ""); res.Status != http.StatusNotFound {
		t.Errorf("trigger of a missing schedule: %d %s; want 404", res.Status, res.Body)
	}
	if diff := cmp.Diff([]string{"p"}, b.trig.calls); diff != "" {
		t.Errorf("Triggerer calls (-want,+got):\n%s", diff)
	}
	// The manual run shows in the history.
	res = b.do(t, http.MethodGet, "/schedules/p/runs", "")
	var page catalog.RunPage
	res.json(t, &page)
	if len(page.Runs) != 1 || page.Runs[0].ID != run.ID {
		t.Errorf("runs after trigger: %s", res.Body)
	}
}

// TestPauseResumeNoChange: pausing a paused schedule or resuming an enabled
// one answers 200 with the schedule as stored: same version, same nextRunAt,
// and nothing written to the store. A stale If-Match is still a 412.
func TestPauseResumeNoChange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if res := b.do(t, http.MethodPost, "/schedules", noopBody("n", "0 */6 * * *")); res.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	meter := b.st.Meter()
	check := func(action string, wantEnabled bool, wantVersion int64) {
		t.Helper()
		before, writes := b.stored(t, "n"), meter.Writes()
		b.clock.Set(b.clock.Now().Add(time.Hour)) // a recomputed nextRunAt would move
		res := b.do(t, http.MethodPost, "/schedules/n:"+action, "")
		if res.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", action, res.Status, res.Body)
		}
		var got schedule.Schedule
		res.json(t, &got)
		if got.Enabled != wantEnabled || got.Version != wantVersion {
			t.Errorf("%s answered enabled %v, version %d; want %v, %d", action, got.Enabled, got.Version, wantEnabled, wantVersion)
		}
		sc := b.stored(t, "n")
		if sc.Version != wantVersion || !sc.NextRunAt.Equal(before.NextRunAt) {
			t.Errorf("after a no-op %s: version %d, nextRunAt %s; want %d, %s", action, sc.Version, sc.NextRunAt, wantVersion, before.NextRunAt)
		}
		if n := meter.Writes() - writes; n != 0 {
			t.Errorf("a no-op %s wrote %d documents; want 0", action, n)
		}
	}
	check("resume", true, 1) // created enabled
	if res := b.do(t, http.MethodPost, "/schedules/n:pause", ""); res.Status != http.StatusOK {
		t.Fatalf("pause: %d %s", res.Status, res.Body)
	}
	check("pause", false, 2)
	if res := b.do(t, http.MethodPost, "/schedules/n:pause", "", "If-Match", `"1"`); res.Status != http.StatusPreconditionFailed {
		t.Errorf("no-op pause with stale If-Match: %d %s; want 412", res.Status, res.Body)
	}
	if res := b.do(t, http.MethodPost, "/schedules/n:pause", "", "If-Match", `"2"`); res.Status != http.StatusOK {
		t.Errorf("no-op pause with current If-Match: %d %s; want 200", res.Status, res.Body)
	}
	if res := b.do(t, http.MethodPost, "/schedules/ghost:pause", ""); res.Status != http.StatusNotFound {
		t.Errorf("pause of a missing schedule: %d %s; want 404", res.Status, res.Body)
	}
}

func TestTriggerUnconfigured(t *testing.T) {
	t.Parallel()
	b := setup(t)
	svc := catalog.New(b.st, catalog.Options{Clock: b.clock})
	if _, err := svc.Trigger(context.Background(), "x"); err == nil || !strings.Contains(err.Error(), "not configured") {
		t.Errorf("Trigger without a Triggerer: %v; want ErrNoTrigger", err)
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if res := b.do(t, http.MethodPost, "/schedules", noopBody("r", "* * * * *")); res.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	tests := []struct {
		method, path string
		status       int
		allow        string
	}{
		{"PUT", "/schedules", 405, "GET, POST"},
		{"DELETE", "/schedules", 405, "GET, POST"},
		{"POST", "/schedules/r", 405, "GET, PATCH, DELETE"},
		{"PUT", "/schedules/r", 405, "GET, PATCH, DELETE"},
		{"GET", "/schedules/r:pause", 405, "POST"},
		{"DELETE", "/schedules/r:trigger", 405, "POST"},
		{"POST", "/schedules/r/runs", 405, "GET"},
		{"POST", "/schedules/r:explode", 404, ""},
		{"GET", "/schedules/r/leases", 404, ""},
		{"GET", "/schedules/r/runs/x", 404, ""},
		{"GET", "/", 404, ""},
		{"GET", "/jobs", 404, ""},
		{"GET", "/schedules/nope", 404, ""},
		{"POST", "/schedules/nope:pause", 404, ""},
		{"GET", "/schedules/nope/runs", 404, ""},
	}
	for _, tc := range tests {
		res := b.do(t, tc.method, tc.path, "")
		e := res.apiError(t)
		if res.Status != tc.status || res.Header.Get("Allow") != tc.allow || e.Code == "" {
			t.Errorf("%s %s: status %d, Allow %q, body %s; want %d, Allow %q", tc.method, tc.path, res.Status, res.Header.Get("Allow"), res.Body, tc.status, tc.allow)
		}
	}
	// Without the token: 401 in the shared shape.
	req, _ := http.NewRequest(http.MethodGet, b.srv.URL+"/schedules", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %d; want 401", res.StatusCode)
	}
}

// TestListPagination pages through many schedules: each is listed exactly
// once, in id order, and every page reads only the documents it returns
// (keyset, not skip), however deep it is.
func TestListPagination(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n, size = 130, 25
	ctx := context.Background()
	var want []string
	for i := range n {
		id := fmt.Sprintf("s%04d", (i*37)%n) // created out of order
		want = append(want, id)
		sc := &schedule.Schedule{ID: id, Cron: "* * * * *", Enabled: true, Target: schedule.Target{Type: "builtin", Builtin: &schedule.BuiltinTarget{Name: "noop"}}}
		if _, err := b.svc.Create(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(want)

	meter := b.st.Meter()
	var got []string
	token, pages := "", 0
	for {
		before := meter.Total()
		res := b.do(t, http.MethodGet, "/schedules?pageSize=25&pageToken="+token, "")
		if res.Status != http.StatusOK {
			t.Fatalf("page %d: %d %s", pages, res.Status, res.Body)
		}
		var page catalog.SchedulePage
		res.json(t, &page)
		read := meter.Total() - before
		if read != int64(len(page.Schedules)) || read > size {
			t.Errorf("page %d: %d documents read for %d returned (page size %d); want reads = page length", pages, read, len(page.Schedules), size)
		}
		for _, sc := range page.Schedules {
			got = append(got, sc.ID)
		}
		pages++
		if page.NextPageToken == "" {
			break
		}
		token = page.NextPageToken
		if pages > n {
			t.Fatal("pagination does not end")
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("listed ids (-want,+got):\n%s", diff)
	}
	if pages != n/size+1 {
		t.Errorf("%d pages, want %d", pages, n/size+1)
	}
	keyset := meter.Op("schedules.page")

	// The same walk with skip/limit, the baseline: Firestore bills the
	// skipped documents, so deep pages cost more and more.
	var skip int64
	for i := range pages {
		var docs []schedule.Schedule
		n, err := skipscan.Page(ctx, emutest.Raw(t, b.st).Collection(schedule.SchedulesCollection), "", size, i, &docs)
		if err != nil {
			t.Fatal(err)
		}
		skip += n
	}
	t.Logf("listing %d schedules in pages of %d: keyset read %d documents, skip read %d (%.1fx)", n, size, keyset, skip, float64(skip)/float64(keyset))
	if keyset != n || skip <= keyset {
		t.Errorf("keyset read %d documents for %d schedules, skip %d; want keyset = %d < skip", keyset, n, skip, n)
	}
	// A page token is bound to its list: the schedules token is refused by
	// the runs history.
	first := b.do(t, http.MethodGet, "/schedules?pageSize=5", "")
	var page catalog.SchedulePage
	first.json(t, &page)
	res := b.do(t, http.MethodGet, "/schedules/s0001/runs?pageToken="+page.NextPageToken, "")
	if res.Status != http.StatusBadRequest || res.apiError(t).Field != "pageToken" {
		t.Errorf("schedules token on runs: %d %s; want 400 pageToken", res.Status, res.Body)
	}
}

// TestRunsHistory lists a schedule's runs newest first, each once, with
// ties on fireTime broken by id, and only that schedule's runs.
func TestRunsHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if res := b.do(t, http.MethodPost, "/schedules", noopBody("hist", "* * * * *")); res.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	ctx := context.Background()
	runs := b.st.Collection(schedule.RunsCollection)
	var want []string
	for i := range 23 {
		ft := t0.Add(time.Duration(i/2) * time.Minute) // pairs share a fire time
		src := schedule.SourceScheduled
		if i%2 == 1 {
			src = schedule.SourceMisfire
		}
		r := schedule.Run{ID: schedule.RunID("hist", ft, src, 1), ScheduleID: "hist", FireTime: ft, Source: src, Status: schedule.RunSucceeded, Attempt: 1, CreatedAt: ft}
		if _, err := runs.InsertIdempotent(ctx, r); err != nil {
			t.Fatal(err)
		}
		want = append(want, r.ID)
		other := r
		other.ID, other.ScheduleID = schedule.RunID("other", ft, src, 1), "other"
		if _, err := runs.InsertIdempotent(ctx, other); err != nil {
			t.Fatal(err)
		}
	}
	// Newest first; equal fire times by _id descending.
	sort.Slice(want, func(i, j int) bool { return want[i] > want[j] })
	sort.SliceStable(want, func(i, j int) bool {
		return want[i][:len("hist@20260301T100000Z")] > want[j][:len("hist@20260301T100000Z")]
	})

	meter := b.st.Meter()
	var got []string
	token := ""
	for range 10 {
		before := meter.Total()
		res := b.do(t, http.MethodGet, "/schedules/hist/runs?pageSize=5&pageToken="+token, "")
		if res.Status != http.StatusOK {
			t.Fatalf("%d %s", res.Status, res.Body)
		}
		var page catalog.RunPage
		res.json(t, &page)
		if read := meter.Total() - before; read != int64(len(page.Runs)) {
			t.Errorf("page read %d documents for %d runs", read, len(page.Runs))
		}
		for _, r := range page.Runs {
			got = append(got, r.ID)
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("run history order (-want,+got):\n%s", diff)
	}

	// History outlives its schedule.
	if res := b.do(t, http.MethodDelete, "/schedules/hist", ""); res.Status != http.StatusNoContent {
		t.Fatalf("delete: %d", res.Status)
	}
	res := b.do(t, http.MethodGet, "/schedules/hist/runs?pageSize=1", "")
	var page catalog.RunPage
	res.json(t, &page)
	if res.Status != http.StatusOK || len(page.Runs) != 1 || page.Runs[0].ID != want[0] {
		t.Errorf("runs of a deleted schedule: %d %s", res.Status, res.Body)
	}
}

// TestListBytesBounded: a schedule filled to the size bound is accepted,
// and as the API returns it (with its timestamps and version) it is still
// within schedule.MaxScheduleJSON, so a list page is within MaxListBytes.
func TestListBytesBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fill := func(pad int) *schedule.Schedule {
		args := map[string]string{"pad": strings.Repeat("<", pad)}
		for i := range 15 {
			args[fmt.Sprintf("a%d", i)] = strings.Repeat("y", 3600)
		}
		return &schedule.Schedule{ID: "full", Cron: "@hourly", Description: strings.Repeat("d", schedule.MaxDescription),
			Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop", Args: args}}}
	}
	lo, hi := 0, schedule.MaxArgValueLen // the largest pad that validates
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if fill(mid).Normalize(schedule.ValidateOptions{}) == nil {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if res := b.do(t, http.MethodPost, "/schedules", mustJSON(fill(lo))); res.Status != http.StatusCreated {
		t.Fatalf("create a schedule at the size bound: %d %.300s", res.Status, res.Body)
	}
	over := fill(lo + 1)
	over.ID = "over"
	if res := b.do(t, http.MethodPost, "/schedules", mustJSON(over)); res.Status != http.StatusBadRequest {
		t.Errorf("create a schedule 1 byte over the bound: %d, want 400: %.300s", res.Status, res.Body)
	}
	res := b.do(t, http.MethodGet, "/schedules/full", "")
	if n := len(strings.TrimSpace(string(res.Body))); res.Status != http.StatusOK || n > schedule.MaxScheduleJSON {
		t.Errorf("GET of a schedule at the bound: %d, %d bytes; want 200 and at most %d", res.Status, n, schedule.MaxScheduleJSON)
	}
	if catalog.MaxListBytes != catalog.MaxPageSize*schedule.MaxScheduleJSON || catalog.MaxListBytes > 32<<20 {
		t.Errorf("MaxListBytes = %d, want MaxPageSize × MaxScheduleJSON, at most the 32 MiB docs/api.md promises", catalog.MaxListBytes)
	}
}

// TestPauseReason: POST :pause {"reason"} keeps the reason on the paused
// schedule, a second pause (with another reason) changes nothing, and
// resuming clears it; a PATCH that enables the schedule clears it too.
func TestPauseReason(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if res := b.do(t, http.MethodPost, "/schedules", noopBody("r", "0 * * * *")); res.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	pause := func(body string) schedule.Schedule {
		t.Helper()
		res := b.do(t, http.MethodPost, "/schedules/r:pause", body)
		if res.Status != http.StatusOK {
			t.Fatalf("pause %s: %d %s", body, res.Status, res.Body)
		}
		var sc schedule.Schedule
		res.json(t, &sc)
		return sc
	}
	if sc := pause(`{"reason":"upstream maintenance until 14:00"}`); sc.Enabled || sc.PauseReason != "upstream maintenance until 14:00" || sc.Version != 2 {
		t.Errorf("pause answered enabled %v, reason %q, version %d", sc.Enabled, sc.PauseReason, sc.Version)
	}
	if sc := b.stored(t, "r"); sc.PauseReason != "upstream maintenance until 14:00" {
		t.Errorf("stored reason = %q", sc.PauseReason)
	}
	if sc := pause(`{"reason":"another"}`); sc.PauseReason != "upstream maintenance until 14:00" || sc.Version != 2 {
		t.Errorf("second pause: reason %q, version %d; want the first reason at version 2", sc.PauseReason, sc.Version)
	}
	if res := b.do(t, http.MethodPost, "/schedules/r:resume", ""); res.Status != http.StatusOK {
		t.Fatalf("resume: %d %s", res.Status, res.Body)
	}
	if sc := b.stored(t, "r"); !sc.Enabled || sc.PauseReason != "" {
		t.Errorf("after resume: enabled %v, reason %q; want true and none", sc.Enabled, sc.PauseReason)
	}
	pause(`{"reason":"again"}`)
	if res := b.do(t, http.MethodPatch, "/schedules/r", `{"enabled":true}`); res.Status != http.StatusOK {
		t.Fatalf("patch: %d %s", res.Status, res.Body)
	}
	if sc := b.stored(t, "r"); !sc.Enabled || sc.PauseReason != "" {
		t.Errorf("after PATCH enabled: reason %q; want none", sc.PauseReason)
	}
	if sc := pause(""); sc.PauseReason != "" {
		t.Errorf("pause without a body: reason %q; want none", sc.PauseReason)
	}
}
