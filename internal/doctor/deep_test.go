package doctor_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"google.golang.org/api/option"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/internal/doctor"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// deepRig is a database holding every index baton needs (as baton local
// and Terraform make it) on the shared Mongo emulator, a bucket on the
// shared GCS emulator, and the DeepConfig naming both, with a scratch
// prefix the test knows.
func deepRig(t *testing.T) (*mongostore.Store, doctor.DeepConfig) {
	t.Helper()
	st := emutest.Store(t)
	if err := st.EnsureIndexes(t.Context(), doctor.Needed()...); err != nil {
		t.Fatalf("EnsureIndexes: %v", err)
	}
	_, bucket := emutest.GCS(t)
	return st, doctor.DeepConfig{
		MongoURI: emutest.MongoURI(t), Database: st.DatabaseName(),
		Bucket: bucket, StorageOptions: emutest.GCSServer(t).ClientOptions(),
		Scratch:    doctor.ScratchPrefix + "test_",
		IndexProbe: true,
		// A short window: the emulator's answer is known either way.
		RateWindow: 3 * time.Second,
	}
}

func rows(rep *doctor.Report, status doctor.Status) []doctor.Result {
	var out []doctor.Result
	for _, r := range rep.Results {
		if r.Status == status {
			out = append(out, r)
		}
	}
	return out
}

func findRow(t *testing.T, rep *doctor.Report, check string) doctor.Result {
	t.Helper()
	for _, r := range rep.Results {
		if r.Check == check {
			return r
		}
	}
	t.Fatalf("no row %q in %+v", check, rep.Results)
	return doctor.Result{}
}

// scratchLeft lists the collections and objects of the scratch prefix
// still there.
func scratchLeft(t *testing.T, st *mongostore.Store, c doctor.DeepConfig) []string {
	t.Helper()
	names, err := emutest.Raw(t, st).ListCollectionNames(context.Background(), bson.D{})
	if err != nil {
		t.Fatalf("list collections: %v", err)
	}
	var left []string
	for _, n := range names {
		if strings.HasPrefix(n, c.Scratch) {
			left = append(left, n)
		}
	}
	return left
}

// TestDeepPassesOnAFitDatabase: against a database with every index, every
// probe, explain, the race, the latency and the bucket checks pass, and
// the scratch collections are gone afterwards.
func TestDeepPassesOnAFitDatabase(t *testing.T) {
	st, c := deepRig(t)
	rep := doctor.Deep(t.Context(), c)
	for _, r := range rep.Results {
		if r.Status == doctor.Fail {
			t.Errorf("FAIL %s: %s (fix: %s)", r.Check, r.Detail, r.Fix)
		}
	}
	if !rep.OK || rep.Mode != "deep" {
		t.Errorf("ok %v, mode %q", rep.OK, rep.Mode)
	}
	for _, want := range []string{"probe GPU.ClaimBestJob", "probe Schedules.Advance", "explain due page (Schedules.DueInShard)",
		"explain GPU queue claim (GPU.ClaimBestJob)", "race: 20 conditional writers on one document", "latency: conditional write",
		"gcs: create-if-absent", "gcs: stale generation", "gcs: per-object write rate", "deep: cleanup", "gcs: cleanup", "deep: cost"} {
		r := findRow(t, rep, want)
		if r.Status != doctor.Pass && r.Status != doctor.Warn {
			t.Errorf("%s: %s %s", want, r.Status, r.Detail)
		}
	}
	// Each hot query is served by the index it names, one baton declares.
	for check, ix := range doctor.HotQueryIndexes() {
		_, name, _ := strings.Cut(ix, ".")
		if r := findRow(t, rep, check); r.Status != doctor.Pass || !strings.Contains(r.Detail, "id="+name+",") || strings.Contains(ix, "not declared") {
			t.Errorf("%s: %s %s; want it served by %s", check, r.Status, r.Detail, ix)
		}
	}
	if r := findRow(t, rep, "race: 20 conditional writers on one document"); !strings.Contains(r.Detail, "1 winner(s), 19 clean conflict(s), 0 other") {
		t.Errorf("race: %s", r.Detail)
	}
	if left := scratchLeft(t, st, c); len(left) > 0 {
		t.Errorf("scratch collections left behind: %v", left)
	}
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", b.String())
}

// TestDeepFailsOnAMissingIndex: with the runs.history index dropped, the
// explain of the run history page is a table scan, and that row alone
// fails, naming the query and the index to create.
func TestDeepFailsOnAMissingIndex(t *testing.T) {
	st, c := deepRig(t)
	if err := emutest.Raw(t, st).Collection("runs").Indexes().DropOne(t.Context(), "history"); err != nil {
		t.Fatalf("drop runs.history: %v", err)
	}
	rep := doctor.Deep(t.Context(), c)
	failed := rows(rep, doctor.Fail)
	if rep.OK || len(failed) != 1 {
		t.Fatalf("ok %v, failed %+v; want the one explain row", rep.OK, failed)
	}
	f := failed[0]
	if f.Check != "explain run history page (Catalog.ListRuns)" || !strings.Contains(f.Detail, "TableScan") ||
		!strings.Contains(f.Detail, "runs.history") || !strings.Contains(f.Fix, `google_firestore_index.baton["runs(scheduleId ASCENDING,fireTime DESCENDING,_id DESCENDING)"]`) {
		t.Errorf("failed row = %+v", f)
	}
}

// TestDeepFailsOnARefusedShape: a database that refuses findAndModify on
// the GPU queue (the fail point answers CommandNotSupported, as a server
// without the shape would) fails the GPU claim's probe, naming the command
// and its sort, and the scratch data is still removed.
func TestDeepFailsOnARefusedShape(t *testing.T) {
	st, c := deepRig(t)
	emutest.FailCommandCode(t, st, c.Scratch+"gpu_jobs", "alwaysOn", 115, "findAndModify")
	rep := doctor.Deep(t.Context(), c)
	if rep.OK {
		t.Fatal("ok with findAndModify refused")
	}
	r := findRow(t, rep, "probe GPU.ClaimBestJob")
	if r.Status != doctor.Fail || !strings.Contains(r.Detail, "refused: findAndModify gpu_jobs") ||
		!strings.Contains(r.Detail, "sort {priority: -1, createdAt: 1, _id: 1}") || !strings.Contains(r.Detail, "(115)") || r.Fix == "" {
		t.Errorf("GPU.ClaimBestJob row = %+v", r)
	}
	for _, f := range rows(rep, doctor.Fail) {
		if !strings.HasPrefix(f.Check, "probe GPU.") {
			t.Errorf("unexpected failure: %+v", f)
		}
	}
	if left := scratchLeft(t, st, c); len(left) > 0 {
		t.Errorf("scratch collections left behind: %v", left)
	}
}

// TestDeepCleansUpWhenInterrupted: a run interrupted as a command starts
// (its context ends as the first create begins) lets that command finish,
// runs nothing after it, and still removes every scratch collection: no
// write is left in flight to land after the cleanup.
func TestDeepCleansUpWhenInterrupted(t *testing.T) {
	st, c := deepRig(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer doctor.SetBeforeProbe(func(name string) {
		if name == "Catalog.Create" {
			cancel()
		}
	})()
	rep := doctor.Deep(ctx, c)
	if r := findRow(t, rep, "probe Catalog.Create"); r.Status != doctor.Pass {
		t.Errorf("the command under way at the interrupt: %+v; want it finished (PASS)", r)
	}
	if r := findRow(t, rep, "probe Catalog.Get"); r.Status != doctor.Skip {
		t.Errorf("the probe after the interrupt: %+v; want SKIP", r)
	}
	if r := findRow(t, rep, "deep: cleanup"); r.Status != doctor.Pass {
		t.Errorf("cleanup: %+v", r)
	}
	if left := scratchLeft(t, st, c); len(left) > 0 {
		t.Errorf("scratch collections left behind after an interrupt: %v", left)
	}
}

// TestDeepRaceNamesAnUncleanLoser: racers whose update is answered with an
// error that is not a conflict (InternalError, three times: a server that
// fails writes under contention instead of refusing them cleanly) fail
// the race row, which says how many and quotes the first.
func TestDeepRaceNamesAnUncleanLoser(t *testing.T) {
	st, c := deepRig(t)
	emutest.FailCommandCode(t, st, c.Scratch+"race", bson.D{{Key: "times", Value: 3}}, 1, "update")
	rep := doctor.Deep(t.Context(), c)
	r := findRow(t, rep, "race: 20 conditional writers on one document")
	if r.Status != doctor.Fail || !strings.Contains(r.Detail, "3 other error(s)") || !strings.Contains(r.Detail, "first: ") {
		t.Errorf("race row = %+v", r)
	}
	if left := scratchLeft(t, st, c); len(left) > 0 {
		t.Errorf("scratch collections left behind: %v", left)
	}
}

// rateLimited stands in front of the GCS emulator and answers uploads the
// way Cloud Storage answers writes to one object faster than once a
// second (https://cloud.google.com/storage/quotas#objects): 429 with
// reason rateLimitExceeded, here for the first upload of the "cas" object
// and for every upload of the "rate" object after its third. Until the
// GCS emulator limits the rate itself, it is how a test meets the answer.
func rateLimited(t *testing.T) []option.ClientOption {
	t.Helper()
	target, err := url.Parse(emutest.GCSServer(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	uploads := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Query().Get("name")
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/upload/") && name != "" {
			mu.Lock()
			uploads[name]++
			n := uploads[name]
			mu.Unlock()
			if (strings.HasSuffix(name, "/cas") && n == 1) || (strings.HasSuffix(name, "/rate") && n > 3) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = io.WriteString(w, `{"error":{"code":429,"message":"The object exceeded the rate limit for object mutation operations (create, update, and delete).","errors":[{"domain":"usageLimits","reason":"rateLimitExceeded","message":"rate limit"}]}}`)
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return []option.ClientOption{option.WithEndpoint(srv.URL + "/storage/v1/"), option.WithoutAuthentication()}
}

// TestDeepGCSRateAnswer: a 429 on a precondition write is paced (written
// again a second later), not taken for the precondition's answer, and the
// rate check reports the 429 rateLimitExceeded it met as the expected
// answer, after the writes that went through.
func TestDeepGCSRateAnswer(t *testing.T) {
	_, c := deepRig(t)
	c.StorageOptions = rateLimited(t)
	rep := doctor.Deep(t.Context(), c)
	for _, check := range []string{"gcs: create-if-absent", "gcs: generation match", "gcs: stale generation", "gcs: cleanup"} {
		if r := findRow(t, rep, check); r.Status != doctor.Pass {
			t.Errorf("%s: %+v", check, r)
		}
	}
	r := findRow(t, rep, "gcs: per-object write rate")
	// The proxy answers 429 from the fourth write; the strict emulator
	// behind it may answer first, from the third (its burst is 2). Either
	// way writes went through before the 429.
	if r.Status != doctor.Pass || (!strings.Contains(r.Detail, "write 3 ") && !strings.Contains(r.Detail, "write 4 ")) || !strings.Contains(r.Detail, "429 (rateLimitExceeded)") {
		t.Errorf("rate row = %+v", r)
	}
}

// TestDeepOptionalShapeRefused: a refusal of createIndexes, which the
// functions never send (only baton daemon --ensure-indexes and baton local
// do), is a WARN that says so, not a failure.
func TestDeepOptionalShapeRefused(t *testing.T) {
	st, c := deepRig(t)
	emutest.FailCommandCode(t, st, c.Scratch+"runs", "alwaysOn", 115, "createIndexes")
	rep := doctor.Deep(t.Context(), c)
	r := findRow(t, rep, "probe createIndexes")
	if r.Status != doctor.Warn || !strings.Contains(r.Detail, "refused: createIndexes") || !strings.Contains(r.Fix, "--ensure-indexes") {
		t.Errorf("createIndexes row = %+v", r)
	}
	if !rep.OK {
		t.Errorf("failed: %+v", rows(rep, doctor.Fail))
	}
}
