package doctor

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore/apiv1/admin/adminpb"
	"cloud.google.com/go/scheduler/apiv1/schedulerpb"
	"cloud.google.com/go/storage"
	"go.mongodb.org/mongo-driver/v2/bson"
	"google.golang.org/api/option"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/functions"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

const (
	testProject = "proj"
	testDB      = "baton"
	testRegion  = "europe-west4"
	testTickURL = "https://baton-tick-123456.europe-west4.run.app"
)

// adminDouble is a TEST DOUBLE of the Firestore admin API, serving only the
// two methods doctor calls (GetDatabase, ListIndexes) over a real gRPC
// connection. There is no emulator of the admin API: the gcloud Firestore
// emulator does not serve it, and not for Enterprise databases.
type adminDouble struct {
	adminpb.UnimplementedFirestoreAdminServer
	mu      sync.Mutex
	db      *adminpb.Database // nil: NotFound
	indexes map[string][]*adminpb.Index
	parents []string // ListIndexes parents asked for
}

func (d *adminDouble) GetDatabase(_ context.Context, req *adminpb.GetDatabaseRequest) (*adminpb.Database, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.db == nil || req.GetName() != d.db.GetName() {
		return nil, status.Errorf(codes.NotFound, "database %s not found", req.GetName())
	}
	return proto.Clone(d.db).(*adminpb.Database), nil
}

func (d *adminDouble) ListIndexes(_ context.Context, req *adminpb.ListIndexesRequest) (*adminpb.ListIndexesResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.parents = append(d.parents, req.GetParent())
	prefix := "projects/" + testProject + "/databases/" + testDB + "/collectionGroups/"
	group, ok := strings.CutPrefix(req.GetParent(), prefix)
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "bad parent %q", req.GetParent())
	}
	resp := &adminpb.ListIndexesResponse{}
	for _, ix := range d.indexes[group] {
		resp.Indexes = append(resp.Indexes, proto.Clone(ix).(*adminpb.Index))
	}
	return resp, nil
}

// schedulerDouble is a TEST DOUBLE of the Cloud Scheduler API (GetJob only).
// The project's own emulator/scheduler fires HTTP targets in-process but
// serves no Cloud Scheduler API, so it cannot answer GetJob.
type schedulerDouble struct {
	schedulerpb.UnimplementedCloudSchedulerServer
	job *schedulerpb.Job // nil: NotFound
}

func (d *schedulerDouble) GetJob(_ context.Context, req *schedulerpb.GetJobRequest) (*schedulerpb.Job, error) {
	if d.job == nil || req.GetName() != d.job.GetName() {
		return nil, status.Errorf(codes.NotFound, "job %s not found", req.GetName())
	}
	return proto.Clone(d.job).(*schedulerpb.Job), nil
}

// serveGRPC serves a test double on a loopback port and returns client
// options for it.
func serveGRPC(t *testing.T, register func(*grpc.Server)) []option.ClientOption {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return []option.ClientOption{option.WithEndpoint(lis.Addr().String()), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials()))}
}

func goodDatabase() *adminpb.Database {
	return &adminpb.Database{
		Name:                            "projects/" + testProject + "/databases/" + testDB,
		LocationId:                      testRegion,
		Type:                            adminpb.Database_FIRESTORE_NATIVE,
		DatabaseEdition:                 adminpb.Database_ENTERPRISE,
		MongodbCompatibleDataAccessMode: adminpb.Database_DATA_ACCESS_MODE_ENABLED,
		PointInTimeRecoveryEnablement:   adminpb.Database_POINT_IN_TIME_RECOVERY_ENABLED,
	}
}

// firestoreIndex is ix as the admin API lists it once Terraform made it.
func firestoreIndex(ix mongostore.Index, state adminpb.Index_State) *adminpb.Index {
	out := &adminpb.Index{
		Name:       "projects/" + testProject + "/databases/" + testDB + "/collectionGroups/" + ix.Collection + "/indexes/CICAg" + ix.Name,
		QueryScope: adminpb.Index_COLLECTION_GROUP,
		ApiScope:   adminpb.Index_MONGODB_COMPATIBLE_API,
		State:      state,
		Density:    adminpb.Index_DENSE,
	}
	for _, f := range fields(ix) {
		o := adminpb.Index_IndexField_ASCENDING
		if f.Order == "DESCENDING" {
			o = adminpb.Index_IndexField_DESCENDING
		}
		out.Fields = append(out.Fields, &adminpb.Index_IndexField{FieldPath: f.Path, ValueMode: &adminpb.Index_IndexField_Order_{Order: o}})
	}
	return out
}

func goodIndexes() map[string][]*adminpb.Index {
	out := map[string][]*adminpb.Index{}
	for i, ix := range Needed() {
		fi := firestoreIndex(ix, adminpb.Index_READY)
		if i%2 == 0 {
			// Firestore may append the document name; doctor must not
			// count that as another index.
			fi.Fields = append(fi.Fields, &adminpb.Index_IndexField{FieldPath: "__name__", ValueMode: &adminpb.Index_IndexField_Order_{Order: adminpb.Index_IndexField_ASCENDING}})
		}
		out[ix.Collection] = append(out[ix.Collection], fi)
	}
	// An index of another API scope is not one of baton's.
	out["runs"] = append(out["runs"], &adminpb.Index{Name: "other", ApiScope: adminpb.Index_ANY_API, State: adminpb.Index_READY,
		Fields: []*adminpb.Index_IndexField{{FieldPath: "status", ValueMode: &adminpb.Index_IndexField_Order_{Order: adminpb.Index_IndexField_ASCENDING}}}})
	return out
}

func goodJob() *schedulerpb.Job {
	return &schedulerpb.Job{
		Name:     "projects/" + testProject + "/locations/" + testRegion + "/jobs/baton-tick",
		Schedule: "* * * * *",
		TimeZone: "Etc/UTC",
		State:    schedulerpb.Job_ENABLED,
		// Set up an hour ago, last called 20s ago, and Tick answered OK.
		UserUpdateTime:  timestamppb.New(time.Now().Add(-time.Hour)),
		LastAttemptTime: timestamppb.New(time.Now().Add(-20 * time.Second)),
		Status:          &rpcstatus.Status{Code: int32(codes.OK)},
		Target: &schedulerpb.Job_HttpTarget{HttpTarget: &schedulerpb.HttpTarget{
			Uri: testTickURL, HttpMethod: schedulerpb.HttpMethod_POST,
			AuthorizationHeader: &schedulerpb.HttpTarget_OidcToken{OidcToken: &schedulerpb.OidcToken{
				ServiceAccountEmail: "baton-scheduler@proj.iam.gserviceaccount.com", Audience: testTickURL}},
		}},
	}
}

// bucketAttrsDouble is a TEST DOUBLE of the Cloud Storage JSON API's bucket
// GET, used only for the attributes fake-gcs-server (emulator/gcs) cannot
// represent: it keeps versioning, but has no uniform bucket-level access and
// no lifecycle rules. Existence and versioning are tested against the
// emulator itself (TestCloudBucketOnTheEmulator).
func bucketAttrsDouble(t *testing.T, name string, body map[string]any) []option.ClientOption {
	t.Helper()
	body["name"] = name
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/storage/v1/b/"+name {
			http.Error(w, `{"error":{"code":404,"message":"Not Found"}}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	return []option.ClientOption{option.WithEndpoint(srv.URL + "/storage/v1/"), option.WithoutAuthentication()}
}

func goodBucket() map[string]any {
	return map[string]any{
		"location":         "EUROPE-WEST4",
		"iamConfiguration": map[string]any{"uniformBucketLevelAccess": map[string]any{"enabled": true}},
		"versioning":       map[string]any{"enabled": false},
		"lifecycle": map[string]any{"rule": []any{map[string]any{
			"action": map[string]any{"type": "Delete"}, "condition": map[string]any{"age": 30, "matchesPrefix": []string{"outputs/"}}}}},
	}
}

// world is a deployment to check: every part good until a test spoils one.
type world struct {
	admin  *adminDouble
	sched  *schedulerDouble
	bucket map[string]any
}

func newWorld() *world {
	return &world{
		admin:  &adminDouble{db: goodDatabase(), indexes: goodIndexes()},
		sched:  &schedulerDouble{job: goodJob()},
		bucket: goodBucket(),
	}
}

func (w *world) run(t *testing.T) *Report {
	t.Helper()
	return w.runWith(t, func(*CloudConfig) {})
}

// runWith runs Cloud after edit has changed its config.
func (w *world) runWith(t *testing.T, edit func(*CloudConfig)) *Report {
	t.Helper()
	cfg := CloudConfig{
		Project: testProject, Database: testDB, Location: testRegion, Bucket: "baton-bucket", Region: testRegion,
		Job: "baton-tick", TickURL: testTickURL,
		AdminOptions:     serveGRPC(t, func(s *grpc.Server) { adminpb.RegisterFirestoreAdminServer(s, w.admin) }),
		SchedulerOptions: serveGRPC(t, func(s *grpc.Server) { schedulerpb.RegisterCloudSchedulerServer(s, w.sched) }),
		StorageOptions:   bucketAttrsDouble(t, "baton-bucket", w.bucket),
	}
	edit(&cfg)
	rep, err := Cloud(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// row returns the result named check, failing the test when there is none.
func row(t *testing.T, rep *Report, check string) Result {
	t.Helper()
	for _, r := range rep.Results {
		if r.Check == check {
			return r
		}
	}
	t.Fatalf("no %q line in:\n%s", check, table(rep))
	return Result{}
}

func table(rep *Report) string {
	var b strings.Builder
	_ = rep.WriteTable(&b)
	return b.String()
}

func TestCloudAllGoodPasses(t *testing.T) {
	rep := newWorld().run(t)
	if !rep.OK {
		t.Fatalf("a good deployment failed:\n%s", table(rep))
	}
	t.Log("\n" + table(rep))
	for _, r := range rep.Results {
		want := Pass
		if strings.HasPrefix(r.Check, "firestore: change stream") {
			want = Skip // no BATON_MONGO_URI given
		}
		if r.Status != want {
			t.Errorf("%s: %s (%s), want %s", r.Check, r.Status, r.Detail, want)
		}
	}
	for _, ix := range Needed() {
		if got := row(t, rep, indexName(ix)); got.Status != Pass {
			t.Errorf("%s: %s", got.Check, got.Status)
		}
	}
}

func TestCloudMissingIndexFailsNamingIt(t *testing.T) {
	w := newWorld()
	var kept []*adminpb.Index
	for _, ix := range w.admin.indexes["runs"] {
		if !strings.HasSuffix(ix.GetName(), "/indexes/CICAghistory") {
			kept = append(kept, ix)
		}
	}
	// A near miss stays: the same shape and orders, another field. It is
	// not the index the history query needs.
	near := firestoreIndex(mongostore.Index{Collection: "runs", Name: "near", Keys: bson.D{{Key: "scheduleId", Value: 1}, {Key: "createdAt", Value: -1}, {Key: "_id", Value: -1}}}, adminpb.Index_READY)
	w.admin.indexes["runs"] = append(kept, near)
	rep := w.run(t)
	if rep.OK {
		t.Fatalf("a missing index passed:\n%s", table(rep))
	}
	got := row(t, rep, "index runs.history")
	if got.Status != Fail || !strings.Contains(got.Detail, "missing") {
		t.Fatalf("runs.history: %+v", got)
	}
	for _, want := range []string{
		`terraform apply -target='google_firestore_index.baton["runs(scheduleId ASCENDING,fireTime DESCENDING,_id DESCENDING)"]'`,
		"gcloud firestore indexes composite create --project=proj --database=baton --collection-group=runs --api-scope=mongodb-compatible-api",
		"--field-config=field-path=fireTime,order=descending",
	} {
		if !strings.Contains(got.Fix, want) {
			t.Errorf("fix %q lacks %q", got.Fix, want)
		}
	}
	if !strings.Contains(table(rep), "FAIL    index runs.history") {
		t.Errorf("table has no FAIL line naming the index:\n%s", table(rep))
	}
	for _, r := range rep.Results {
		if r.Status == Fail && r.Check != "index runs.history" {
			t.Errorf("%s failed too: %s", r.Check, r.Detail)
		}
	}
}

// listedAs is ix as the admin API lists it once Terraform made it with
// index_id_field = idPath: the code's _id declared as idPath, and __name__
// appended in the last field's direction when the declaration did not end
// with it (https://firebase.google.com/docs/firestore/reference/rest/v1/projects.databases.collectionGroups.indexes).
func listedAs(ix mongostore.Index, idPath string) *adminpb.Index {
	out := firestoreIndex(ix, adminpb.Index_READY)
	for _, f := range out.Fields {
		if f.FieldPath == "_id" {
			f.FieldPath = idPath
		}
	}
	if last := out.Fields[len(out.Fields)-1]; last.FieldPath != "__name__" {
		out.Fields = append(out.Fields, &adminpb.Index_IndexField{FieldPath: "__name__", ValueMode: &adminpb.Index_IndexField_Order_{Order: last.GetOrder()}})
	}
	return out
}

// TestCloudIndexesMatchEitherIDForm is finding 3 of issue 26: whichever
// field path the deployment gave the code's _id (index_id_field, __name__
// by default), every index passes, with the __name__ the admin API appends.
func TestCloudIndexesMatchEitherIDForm(t *testing.T) {
	for _, idPath := range []string{"__name__", "_id"} {
		t.Run(idPath, func(t *testing.T) {
			w := newWorld()
			w.admin.indexes = map[string][]*adminpb.Index{}
			for _, ix := range Needed() {
				w.admin.indexes[ix.Collection] = append(w.admin.indexes[ix.Collection], listedAs(ix, idPath))
			}
			rep := w.run(t)
			for _, ix := range Needed() {
				if got := row(t, rep, indexName(ix)); got.Status != Pass {
					t.Errorf("%s listed as %v: %s %s", got.Check, listedAs(ix, idPath).GetFields(), got.Status, got.Detail)
				}
			}
		})
	}
}

// TestCloudIndexIDFormKeepsDirection: __name__ stands for _id in its own
// direction; the wrong one, or the document name where the code has another
// field, is not the index.
func TestCloudIndexIDFormKeepsDirection(t *testing.T) {
	versions := mongostore.Index{Collection: "schedule_versions", Name: "history", Keys: bson.D{{Key: "scheduleId", Value: 1}, {Key: "_id", Value: -1}}}
	asc := mongostore.Index{Collection: "schedule_versions", Name: "history", Keys: bson.D{{Key: "scheduleId", Value: 1}, {Key: "_id", Value: 1}}}
	sweep := mongostore.Index{Collection: "runs", Name: "sweep", Keys: bson.D{{Key: "status", Value: 1}, {Key: "sweepAt", Value: 1}}}
	for _, c := range []struct {
		name   string
		listed *adminpb.Index
		want   mongostore.Index
		match  bool
	}{
		{"__name__ in the code's direction", listedAs(versions, "__name__"), versions, true},
		{"__name__ in the other direction", listedAs(asc, "__name__"), versions, false},
		{"_id then the appended __name__", listedAs(versions, "_id"), versions, true},
		{"the appended __name__ after the code's fields", listedAs(sweep, "__name__"), sweep, true},
		{"__name__ in place of a field", listedAs(mongostore.Index{Collection: "runs", Keys: bson.D{{Key: "status", Value: 1}, {Key: "_id", Value: 1}}}, "__name__"), sweep, false},
	} {
		if got := matchIndex([]*adminpb.Index{c.listed}, c.want) != nil; got != c.match {
			t.Errorf("%s: %v against %s: match %v, want %v", c.name, c.listed.GetFields(), keysText(c.want), got, c.match)
		}
	}
}

// TestCreateIndexFixNamesTheDocumentName: the printed gcloud line declares
// the code's _id as __name__, the form Terraform uses by default, and says
// what to do where the API refuses it.
func TestCreateIndexFixNamesTheDocumentName(t *testing.T) {
	fix := createIndexFix(testProject, testDB, mongostore.Index{Collection: "gpu_slots", Name: "claim", Keys: bson.D{{Key: "leaseUntil", Value: 1}, {Key: "_id", Value: 1}}})
	for _, want := range []string{"--field-config=field-path=leaseUntil,order=ascending --field-config=field-path=__name__,order=ascending", "index_id_field=_id"} {
		if !strings.Contains(fix, want) {
			t.Errorf("fix %q lacks %q", fix, want)
		}
	}
	if fix := createIndexFix(testProject, testDB, mongostore.Index{Collection: "runs", Name: "notify", Keys: bson.D{{Key: "notifyAt", Value: 1}}}); strings.Contains(fix, "__name__") {
		t.Errorf("fix for an index without _id names __name__: %q", fix)
	}
}

func TestCloudCreatingIndexFails(t *testing.T) {
	w := newWorld()
	w.admin.indexes["gpu_jobs"][0].State = adminpb.Index_CREATING
	rep := w.run(t)
	got := row(t, rep, "index gpu_jobs.queue")
	if rep.OK || got.Status != Fail || !strings.Contains(got.Detail, "CREATING") || !strings.HasPrefix(got.Fix, "wait") {
		t.Fatalf("a CREATING index: ok=%v %+v", rep.OK, got)
	}
}

func TestCloudSparseIndexWarns(t *testing.T) {
	w := newWorld()
	w.admin.indexes["gpu_slots"][0].Density = adminpb.Index_SPARSE_ANY
	rep := w.run(t)
	got := row(t, rep, "index gpu_slots.claim")
	if !rep.OK || got.Status != Warn || !strings.Contains(got.Fix, "-replace=") {
		t.Fatalf("a sparse index: ok=%v %+v", rep.OK, got)
	}
}

func TestCloudIndexOfAnotherAPIScopeIsMissing(t *testing.T) {
	w := newWorld()
	w.admin.indexes["gpu_slots"][0].ApiScope = adminpb.Index_ANY_API
	rep := w.run(t)
	if got := row(t, rep, "index gpu_slots.claim"); got.Status != Fail {
		t.Fatalf("an ANY_API index counted as baton's: %+v", got)
	}
}

func TestCloudWrongEditionFails(t *testing.T) {
	w := newWorld()
	w.admin.db.DatabaseEdition = adminpb.Database_STANDARD
	rep := w.run(t)
	if got := row(t, rep, "firestore: edition"); rep.OK || got.Status != Fail || !strings.Contains(got.Detail, "STANDARD") {
		t.Fatalf("a Standard database: ok=%v %+v", rep.OK, got)
	}
}

func TestCloudMongoAccessOffFails(t *testing.T) {
	w := newWorld()
	w.admin.db.MongodbCompatibleDataAccessMode = adminpb.Database_DATA_ACCESS_MODE_DISABLED
	w.admin.db.FirestoreDataAccessMode = adminpb.Database_DATA_ACCESS_MODE_ENABLED
	rep := w.run(t)
	if got := row(t, rep, "firestore: MongoDB-compatible access"); rep.OK || got.Status != Fail {
		t.Fatalf("a Native-mode database: ok=%v %+v", rep.OK, got)
	}
}

// TestCloudPITROffWarns: point_in_time_recovery = false is a Terraform
// choice, so the report still passes, with a WARN that says what is lost.
func TestCloudPITROffWarns(t *testing.T) {
	w := newWorld()
	w.admin.db.PointInTimeRecoveryEnablement = adminpb.Database_POINT_IN_TIME_RECOVERY_DISABLED
	rep := w.run(t)
	got := row(t, rep, "firestore: point-in-time recovery")
	if !rep.OK || got.Status != Warn || !strings.Contains(got.Detail, "cannot be undone") ||
		!strings.Contains(got.Fix, "gcloud firestore databases update --project=proj --database=baton --enable-pitr") {
		t.Fatalf("PITR off: ok=%v %+v\n%s", rep.OK, got, table(rep))
	}
}

func TestCloudWrongLocationFails(t *testing.T) {
	w := newWorld()
	w.admin.db.LocationId = "nam5"
	rep := w.run(t)
	if got := row(t, rep, "firestore: location"); rep.OK || got.Status != Fail {
		t.Fatalf("another location: ok=%v %+v", rep.OK, got)
	}
}

func TestCloudMissingDatabaseFailsAndSkipsIndexes(t *testing.T) {
	w := newWorld()
	w.admin.db = nil
	rep := w.run(t)
	got := row(t, rep, "firestore: database")
	if rep.OK || got.Status != Fail || !strings.Contains(got.Fix, "terraform apply") {
		t.Fatalf("no database: ok=%v %+v", rep.OK, got)
	}
	if got := row(t, rep, "index runs.history"); got.Status != Skip {
		t.Errorf("index checked without a database: %+v", got)
	}
}

func TestCloudSchedulerJob(t *testing.T) {
	t.Run("paused", func(t *testing.T) {
		w := newWorld()
		w.sched.job.State = schedulerpb.Job_PAUSED
		rep := w.run(t)
		got := row(t, rep, "scheduler: enabled")
		if rep.OK || got.Status != Fail || !strings.Contains(got.Fix, "gcloud scheduler jobs resume baton-tick --project=proj --location=europe-west4") {
			t.Fatalf("paused: %+v", got)
		}
	})
	t.Run("another target", func(t *testing.T) {
		w := newWorld()
		// A coherent mistake: the Run function's URL, as target and audience.
		ht := w.sched.job.GetHttpTarget()
		ht.Uri = "https://baton-run-123456.europe-west4.run.app"
		ht.GetOidcToken().Audience = ht.Uri
		rep := w.run(t)
		if got := row(t, rep, "scheduler: target"); rep.OK || got.Status != Fail || !strings.Contains(got.Detail, "not the Tick function") {
			t.Fatalf("wrong target: %+v", got)
		}
	})
	t.Run("another host without --tick-url", func(t *testing.T) {
		w := newWorld()
		ht := w.sched.job.GetHttpTarget()
		ht.Uri = "https://baton-run-123456.europe-west4.run.app"
		ht.GetOidcToken().Audience = ht.Uri
		rep := w.runWith(t, func(c *CloudConfig) { c.TickURL = "" })
		if got := row(t, rep, "scheduler: target"); rep.OK || got.Status != Fail || !strings.Contains(got.Detail, "host is not the baton-tick function's") {
			t.Fatalf("wrong host: %+v", got)
		}
	})
	t.Run("no OIDC token", func(t *testing.T) {
		w := newWorld()
		w.sched.job.GetHttpTarget().AuthorizationHeader = nil
		rep := w.run(t)
		if got := row(t, rep, "scheduler: target"); rep.OK || got.Status != Fail || !strings.Contains(got.Detail, "OIDC") {
			t.Fatalf("no token: %+v", got)
		}
	})
	t.Run("right host without --tick-url warns", func(t *testing.T) {
		rep := newWorld().runWith(t, func(c *CloudConfig) { c.TickURL = "" })
		if got := row(t, rep, "scheduler: target"); !rep.OK || got.Status != Warn || !strings.Contains(got.Fix, "pass --tick-url") {
			t.Fatalf("a host-prefix match: ok=%v %+v", rep.OK, got)
		}
	})
	t.Run("token for another account", func(t *testing.T) {
		w := newWorld()
		w.sched.job.GetHttpTarget().GetOidcToken().ServiceAccountEmail = "123-compute@developer.gserviceaccount.com"
		rep := w.run(t)
		if got := row(t, rep, "scheduler: target"); rep.OK || got.Status != Fail ||
			!strings.Contains(got.Detail, "not baton-scheduler@proj.iam.gserviceaccount.com") {
			t.Fatalf("another account: %+v", got)
		}
	})
	t.Run("last attempt refused", func(t *testing.T) {
		w := newWorld()
		w.sched.job.Status = &rpcstatus.Status{Code: int32(codes.PermissionDenied), Message: "The request was not authorized to invoke this service."}
		rep := w.run(t)
		got := row(t, rep, "scheduler: last attempt")
		if rep.OK || got.Status != Fail || !strings.Contains(got.Detail, "PermissionDenied") || !strings.Contains(got.Detail, "not authorized") ||
			!strings.Contains(got.Fix, "gcloud functions logs read baton-tick --project=proj --region=europe-west4") || !strings.Contains(got.Fix, "roles/run.invoker") {
			t.Fatalf("refused: %+v", got)
		}
	})
	t.Run("no attempt for two intervals", func(t *testing.T) {
		w := newWorld()
		w.sched.job.LastAttemptTime = timestamppb.New(time.Now().Add(-5 * time.Minute))
		rep := w.run(t)
		if got := row(t, rep, "scheduler: last attempt"); rep.OK || got.Status != Fail || !strings.Contains(got.Detail, "stopped calling Tick") {
			t.Fatalf("stale: %+v", got)
		}
		// The same age under a ten-minute schedule is on time: the
		// interval is the job's own cron's.
		w.sched.job.Schedule = "*/10 * * * *"
		rep = w.run(t)
		if got := row(t, rep, "scheduler: last attempt"); got.Status != Pass {
			t.Fatalf("on time for */10: %+v", got)
		}
	})
	t.Run("never attempted", func(t *testing.T) {
		w := newWorld()
		w.sched.job.LastAttemptTime = nil
		w.sched.job.Status = nil
		rep := w.run(t)
		if got := row(t, rep, "scheduler: last attempt"); rep.OK || got.Status != Fail || !strings.Contains(got.Detail, "no attempt since") {
			t.Fatalf("never, set up an hour ago: %+v", got)
		}
		w.sched.job.UserUpdateTime = timestamppb.New(time.Now().Add(-10 * time.Second))
		rep = w.run(t)
		if got := row(t, rep, "scheduler: last attempt"); !rep.OK || got.Status != Skip {
			t.Fatalf("never, set up just now: %+v", got)
		}
	})
	t.Run("missing", func(t *testing.T) {
		w := newWorld()
		w.sched.job = nil
		rep := w.run(t)
		if got := row(t, rep, "scheduler: job baton-tick"); rep.OK || got.Status != Fail || !strings.Contains(got.Fix, "scheduler.tf") {
			t.Fatalf("missing job: %+v", got)
		}
	})
}

func TestCloudBucketAttributes(t *testing.T) {
	t.Run("uniform access off", func(t *testing.T) {
		w := newWorld()
		w.bucket["iamConfiguration"] = map[string]any{"uniformBucketLevelAccess": map[string]any{"enabled": false}}
		rep := w.run(t)
		if got := row(t, rep, "bucket: uniform access"); rep.OK || got.Status != Fail {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("retention policy", func(t *testing.T) {
		w := newWorld()
		w.bucket["retentionPolicy"] = map[string]any{"retentionPeriod": "3600", "effectiveTime": "2026-01-02T03:04:05Z"}
		rep := w.run(t)
		if got := row(t, rep, "bucket: retention"); rep.OK || got.Status != Fail || !strings.Contains(got.Detail, "cannot be overwritten or deleted") ||
			!strings.Contains(got.Fix, "gcloud storage buckets update gs://baton-bucket --clear-retention-period") {
			t.Fatalf("%+v", got)
		}
		w.bucket["retentionPolicy"] = map[string]any{"retentionPeriod": "3600", "effectiveTime": "2026-01-02T03:04:05Z", "isLocked": true}
		if got := row(t, w.run(t), "bucket: retention"); got.Status != Fail || !strings.Contains(got.Fix, "new bucket") {
			t.Fatalf("locked: %+v", got)
		}
	})
	t.Run("default event-based hold", func(t *testing.T) {
		w := newWorld()
		w.bucket["defaultEventBasedHold"] = true
		rep := w.run(t)
		if got := row(t, rep, "bucket: retention"); rep.OK || got.Status != Fail || !strings.Contains(got.Fix, "--no-default-event-based-hold") {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("a delete rule for every object", func(t *testing.T) {
		w := newWorld()
		w.bucket["lifecycle"] = map[string]any{"rule": []any{map[string]any{"action": map[string]any{"type": "Delete"}, "condition": map[string]any{"age": 7}}}}
		rep := w.run(t)
		if got := row(t, rep, "bucket: lifecycle"); rep.OK || got.Status != Fail || !strings.Contains(got.Detail, "every object") {
			t.Fatalf("%+v", got)
		}
	})
}

func TestTouchesPrefix(t *testing.T) {
	for _, c := range []struct {
		prefixes []string
		want     bool
	}{
		{nil, true},
		{[]string{"outputs/"}, false},
		{[]string{"outputs/", "leases/tick"}, true},
		{[]string{"lea"}, true},
		{[]string{"leases/"}, true},
		{[]string{"functions/"}, false},
	} {
		if got := touchesPrefix(c.prefixes, leasePrefix); got != c.want {
			t.Errorf("touchesPrefix(%v) = %v, want %v", c.prefixes, got, c.want)
		}
	}
	// A rule that only changes storage class deletes nothing.
	r := &Report{}
	judgeBucket(&storage.BucketAttrs{Name: "b", UniformBucketLevelAccess: storage.UniformBucketLevelAccess{Enabled: true},
		Lifecycle: storage.Lifecycle{Rules: []storage.LifecycleRule{{Action: storage.LifecycleAction{Type: storage.SetStorageClassAction, StorageClass: "NEARLINE"}}}}}, r)
	if r.finish(); !r.OK {
		t.Errorf("a SetStorageClass rule failed: %+v", r.Results)
	}
}

func TestLeasePrefixIsTheFunctions(t *testing.T) {
	if leasePrefix != functions.LeasePrefix {
		t.Fatalf("leasePrefix %q, functions.LeasePrefix %q", leasePrefix, functions.LeasePrefix)
	}
}

// TestCloudBucketOnTheEmulator checks what fake-gcs-server can represent:
// a bucket that is not there, and versioning.
func TestCloudBucketOnTheEmulator(t *testing.T) {
	srv := emutest.GCSServer(t)
	ctx := context.Background()
	cl, err := srv.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	versioned := emutest.BucketName(t)
	if err := cl.Bucket(versioned).Create(ctx, testProject, &storage.BucketAttrs{VersioningEnabled: true}); err != nil {
		t.Fatal(err)
	}
	plain := emutest.BucketName(t)
	if err := srv.CreateBucket(ctx, plain); err != nil {
		t.Fatal(err)
	}
	check := func(bucket string) *Report {
		r := &Report{}
		cloudBucket(ctx, CloudConfig{Project: testProject, Database: testDB, Bucket: bucket, StorageOptions: srv.ClientOptions()}, r)
		return r.finish()
	}

	if got := row(t, check("no-such-bucket-"+plain), "bucket"); got.Status != Fail || !strings.Contains(got.Fix, "terraform apply") {
		t.Errorf("a missing bucket: %+v", got)
	}
	if got := row(t, check(versioned), "bucket: versioning"); got.Status != Fail || !strings.Contains(got.Fix, "--no-versioning") {
		t.Errorf("a versioned bucket: %+v", got)
	}
	if got := row(t, check(plain), "bucket: versioning"); got.Status != Pass {
		t.Errorf("an unversioned bucket: %+v", got)
	}
}

// TestCloudChangeStreamWarnsWhereNoneOpens: the MongoDB API emulator has no
// change streams, and answers a $changeStream with an error, as a Firestore
// database without one (Terraform's change_stream = false) does. The daemon
// then polls, so the check warns and the report passes.
func TestCloudChangeStreamWarnsWhereNoneOpens(t *testing.T) {
	r := &Report{}
	cloudChangeStream(context.Background(), CloudConfig{Database: emutest.DBName(t), MongoURI: emutest.MongoURI(t)}, r)
	got := row(t, r, "firestore: change stream baton-schedules")
	if r.finish(); !r.OK || got.Status != Warn || !strings.Contains(got.Detail, "refused a change stream") ||
		!strings.Contains(got.Detail, "polls") || !strings.Contains(got.Fix, "change_stream = true") {
		t.Fatalf("%+v", got)
	}
}

// TestCloudChangeStreamConnectionFailureIsNotBlamedOnTheStream: a URI that
// cannot connect (here nothing listens; from a laptop, ENVIRONMENT:gcp finds
// no metadata server) is a SKIP naming the connection, not a verdict on the
// change stream, and it hides the URI's password.
func TestCloudChangeStreamConnectionFailureIsNotBlamedOnTheStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r := &Report{}
	cloudChangeStream(ctx, CloudConfig{Database: testDB, MongoURI: "mongodb://baton:s3cr?et@127.0.0.1:1/baton"}, r)
	got := row(t, r, "firestore: change stream baton-schedules")
	if r.finish(); !r.OK || got.Status != Skip || !strings.Contains(got.Detail, "could not reach the database") ||
		strings.Contains(got.Detail, "refused a change stream") || strings.Contains(got.Detail, "s3cr") {
		t.Fatalf("%+v", got)
	}
}

// TestNamesMatchTerraform: the names doctor looks for are the ones
// infra/terraform gives the Tick function, its Scheduler job and the change
// stream.
func TestNamesMatchTerraform(t *testing.T) {
	for file, want := range map[string]string{
		"main.tf":      `name        = "` + TickFunction + `"`,
		"scheduler.tf": `name             = "baton-tick"`,
		"iam.tf":       `account_id   = "` + SchedulerAccountID + `"`,
		"firestore.tf": `name             = "baton-schedules"`,
	} {
		b, err := os.ReadFile("../../infra/terraform/" + file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("infra/terraform/%s has no %s", file, want)
		}
	}
}
