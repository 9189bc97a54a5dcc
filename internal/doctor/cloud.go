package doctor

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	admin "cloud.google.com/go/firestore/apiv1/admin"
	"cloud.google.com/go/firestore/apiv1/admin/adminpb"
	cloudscheduler "cloud.google.com/go/scheduler/apiv1"
	"cloud.google.com/go/scheduler/apiv1/schedulerpb"
	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// leasePrefix is where leases live in the bucket (functions.LeasePrefix,
// which a shared package does not import; a test holds them equal).
const leasePrefix = "leases/"

// TickFunction is the name Terraform gives the Tick function
// (infra/terraform/main.tf), which starts the host of its URL.
const TickFunction = "baton-tick"

// SchedulerAccountID is the account_id Terraform gives the service account
// whose OIDC token the Scheduler job carries (infra/terraform/iam.tf,
// google_service_account.scheduler): the one granted run.invoker on Tick.
const SchedulerAccountID = "baton-scheduler"

// schedulerAccount is the email of SchedulerAccountID in project.
func schedulerAccount(project string) string {
	return SchedulerAccountID + "@" + project + ".iam.gserviceaccount.com"
}

// attemptSlack is how late past its due time an attempt may be before it
// counts as missed: Scheduler's own delay, and the attempt itself.
const attemptSlack = 30 * time.Second

// CloudConfig names the deployment Cloud checks.
type CloudConfig struct {
	// Project is the Google Cloud project ID.
	Project string
	// Database is the Firestore database ID (Terraform's database_name).
	Database string
	// Location is the database's expected location; "" skips that check.
	Location string
	// Bucket is baton's bucket (Terraform's bucket_name).
	Bucket string
	// Region is where the Scheduler job lives (Terraform's region).
	Region string
	// Job is the Scheduler job's ID; "" skips the Scheduler checks.
	Job string
	// TickURL is the Tick function's URL (terraform output function_urls);
	// "" checks only that the job's host is the Tick function's.
	TickURL string
	// MongoURI, when set, lets the change stream check open one on
	// schedules through the MongoDB API, as `baton daemon` does.
	MongoURI string

	// AdminOptions, StorageOptions and SchedulerOptions are passed to the
	// clients; tests point them at emulators and test doubles.
	AdminOptions, StorageOptions, SchedulerOptions []option.ClientOption
}

// Check refuses a config that cannot name what to check.
func (c CloudConfig) Check() error {
	var missing []string
	if c.Project == "" {
		missing = append(missing, "project")
	}
	if c.Database == "" {
		missing = append(missing, "database")
	}
	if c.Bucket == "" {
		missing = append(missing, "bucket")
	}
	if c.Job != "" && c.Region == "" {
		missing = append(missing, "region (for the scheduler job)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("doctor: cloud: missing %s", strings.Join(missing, ", "))
	}
	return nil
}

// Cloud checks a deployment in Google Cloud. It only reads. An error is
// returned only for a config that fails Check; everything else, including a
// client that cannot be made, is a FAIL line.
func Cloud(ctx context.Context, c CloudConfig) (*Report, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	r := &Report{Mode: "cloud"}
	cloudFirestore(ctx, c, r)
	cloudChangeStream(ctx, c, r)
	cloudBucket(ctx, c, r)
	cloudScheduler(ctx, c, r)
	return r.finish(), nil
}

func (c CloudConfig) dbName() string {
	return "projects/" + c.Project + "/databases/" + c.Database
}

// cloudFirestore checks the database and its indexes.
func cloudFirestore(ctx context.Context, c CloudConfig, r *Report) {
	cl, err := admin.NewFirestoreAdminClient(ctx, c.AdminOptions...)
	if err != nil {
		r.fail("firestore: database", fmt.Sprintf("open the Firestore admin client: %v", err), "gcloud auth application-default login")
		skipIndexes(r, "no Firestore admin client")
		return
	}
	defer cl.Close()

	db, err := cl.GetDatabase(ctx, &adminpb.GetDatabaseRequest{Name: c.dbName()})
	if err != nil {
		fix := "check the project and database ID, and that you hold roles/datastore.viewer: gcloud firestore databases describe --project=" + c.Project + " --database=" + c.Database
		if status.Code(err) == codes.NotFound {
			fix = "terraform apply (infra/terraform creates google_firestore_database.baton), then run baton doctor again"
		}
		r.fail("firestore: database", fmt.Sprintf("get %s: %v", c.dbName(), err), fix)
		skipIndexes(r, "the database could not be read")
		return
	}
	r.pass("firestore: database", db.GetName())
	const immutable = "the edition is fixed at creation: create the database with terraform apply (firestore.tf sets database_edition = \"ENTERPRISE\") under a new database_name, and move the data"
	r.check(db.GetDatabaseEdition() == adminpb.Database_ENTERPRISE, "firestore: edition",
		db.GetDatabaseEdition().String()+" (want ENTERPRISE: only it has the MongoDB-compatible API)", immutable)
	r.check(db.GetMongodbCompatibleDataAccessMode() == adminpb.Database_DATA_ACCESS_MODE_ENABLED, "firestore: MongoDB-compatible access",
		"mongodb_compatible_data_access_mode "+db.GetMongodbCompatibleDataAccessMode().String()+" (want DATA_ACCESS_MODE_ENABLED)",
		"terraform apply (firestore.tf sets mongodb_compatible_data_access_mode = \"DATA_ACCESS_MODE_ENABLED\"); a database created as Native cannot be switched: create one with Terraform under a new database_name")
	switch c.Location {
	case "":
		r.skip("firestore: location", db.GetLocationId()+" (no expected location given: pass --location)")
	default:
		r.check(strings.EqualFold(db.GetLocationId(), c.Location), "firestore: location",
			fmt.Sprintf("%s (want %s)", db.GetLocationId(), c.Location),
			"the location is fixed at creation: pass --location "+db.GetLocationId()+" if that is the one you chose, or recreate the database with Terraform's firestore_location")
	}
	// point_in_time_recovery = false is a supported Terraform choice (it
	// saves the storage of 7 days of versions), so it is a WARN that says
	// what is given up, not a FAIL.
	switch pitr := db.GetPointInTimeRecoveryEnablement(); pitr {
	case adminpb.Database_POINT_IN_TIME_RECOVERY_ENABLED:
		r.pass("firestore: point-in-time recovery", pitr.String())
	default:
		r.warn("firestore: point-in-time recovery",
			pitr.String()+": no reads or exports of the data as it was in the last 7 days, so a bad write or delete cannot be undone from Firestore itself",
			"if you want it: gcloud firestore databases update --project="+c.Project+" --database="+c.Database+" --enable-pitr (Terraform: point_in_time_recovery = true, the default)")
	}

	cloudIndexes(ctx, cl, c, r)
}

func skipIndexes(r *Report, why string) {
	for _, ix := range Needed() {
		r.skip(indexName(ix), why)
	}
}

// cloudIndexes lists the indexes of each collection group the code uses and
// finds each needed one among them.
func cloudIndexes(ctx context.Context, cl *admin.FirestoreAdminClient, c CloudConfig, r *Report) {
	byGroup := map[string][]*adminpb.Index{}
	listErr := map[string]error{}
	for _, ix := range Needed() {
		if _, done := byGroup[ix.Collection]; done || listErr[ix.Collection] != nil {
			continue
		}
		parent := c.dbName() + "/collectionGroups/" + ix.Collection
		it := cl.ListIndexes(ctx, &adminpb.ListIndexesRequest{Parent: parent})
		all := []*adminpb.Index{}
		for {
			got, err := it.Next()
			if errors.Is(err, iterator.Done) {
				break
			}
			if err != nil {
				listErr[ix.Collection] = fmt.Errorf("list indexes of %s: %w", parent, err)
				break
			}
			all = append(all, got)
		}
		if listErr[ix.Collection] == nil {
			byGroup[ix.Collection] = all
		}
	}
	for _, ix := range Needed() {
		name := indexName(ix)
		if err := listErr[ix.Collection]; err != nil {
			r.fail(name, err.Error(), "check that you hold roles/datastore.indexAdmin or roles/datastore.viewer on "+c.Project)
			continue
		}
		found := matchIndex(byGroup[ix.Collection], ix)
		switch {
		case found == nil:
			r.fail(name, "missing: no MongoDB-compatible index on "+ix.Collection+" "+keysText(ix)+"; its queries are billed scans", createIndexFix(c.Project, c.Database, ix))
		case found.GetState() == adminpb.Index_READY && found.GetDensity() != adminpb.Index_DENSE && found.GetDensity() != adminpb.Index_DENSITY_UNSPECIFIED:
			// A sparse index leaves out documents that lack a field, which a
			// MongoDB index (and Terraform's DENSE one) keeps.
			r.warn(name, keysText(ix)+" READY but "+found.GetDensity().String()+", not DENSE as Terraform declares it",
				"recreate it: terraform apply -replace='"+terraformAddress(ix)+"' (infra/terraform)")
		case found.GetState() == adminpb.Index_READY:
			r.pass(name, keysText(ix)+" READY")
		case found.GetState() == adminpb.Index_CREATING:
			r.fail(name, keysText(ix)+" CREATING: still building, and until it is READY its queries are scans",
				"wait, then run baton doctor again: gcloud firestore indexes composite describe "+found.GetName())
		default:
			r.fail(name, keysText(ix)+" "+found.GetState().String(),
				"recreate it: terraform apply -replace='"+terraformAddress(ix)+"' (infra/terraform)")
		}
	}
}

// matchIndex finds ix among the listed indexes: the MongoDB-compatible API
// scope and the same fields in the same order. The code names the document
// id _id; Terraform declares it as __name__ by default and as _id when the
// operator set index_id_field = "_id" (infra/terraform/firestore.tf), and the
// admin API ends every index with __name__, appended when it was not given
// (https://firebase.google.com/docs/firestore/reference/rest/v1/projects.databases.collectionGroups.indexes).
// So each of these lists matches the code's (a, _id): (a, __name__),
// (a, _id, __name__), and the code's (a) matches (a, __name__) too. Of
// several matches the READY one wins, so that a stray duplicate does not hide
// a good index.
func matchIndex(listed []*adminpb.Index, ix mongostore.Index) *adminpb.Index {
	want := fields(ix)
	var best *adminpb.Index
	for _, got := range listed {
		if got.GetApiScope() != adminpb.Index_MONGODB_COMPATIBLE_API {
			continue
		}
		if !sameFields(idFields(got.GetFields()), want) {
			continue
		}
		if best == nil || got.GetState() == adminpb.Index_READY {
			best = got
		}
	}
	return best
}

// idField is the code's name for the document id, the last key of the
// indexes that sort or page on it.
const idField = "_id"

// nameField is the admin API's field path for the document name, from which
// Firestore computes _id.
const nameField = "__name__"

// idFields spells a listed index's fields as the code would: __name__
// becomes _id, and the __name__ the admin API appends after an explicit _id
// (the index_id_field = "_id" form) is dropped as the same key twice.
func idFields(listed []*adminpb.Index_IndexField) []field {
	out := make([]field, 0, len(listed))
	for _, f := range listed {
		p := f.GetFieldPath()
		if p == nameField {
			p = idField
		}
		out = append(out, field{Path: p, Order: f.GetOrder().String()})
	}
	if n := len(out); n >= 2 && out[n-1].Path == idField && out[n-2].Path == idField {
		out = out[:n-1]
	}
	return out
}

// sameFields compares a listed index, spelled by idFields, with the code's
// keys: equal, or equal but for a trailing _id the code does not declare
// (the __name__ the admin API appends to every index, in whichever
// direction).
func sameFields(got, want []field) bool {
	if slices.Equal(got, want) {
		return true
	}
	n := len(got)
	return n == len(want)+1 && got[n-1].Path == idField && slices.Equal(got[:n-1], want)
}

// cloudChangeStream checks the change stream on schedules. The Firestore
// admin client of cloud.google.com/go/firestore v1.29 has no change stream
// API (Terraform's google_firestore_change_stream calls a REST surface the
// Go client does not have), so the only honest check is the daemon's own:
// open one through the MongoDB API.
//
// Nothing here can FAIL: without a change stream baton daemon polls, and
// Terraform's change_stream = false chooses exactly that, so a server that
// refuses one is a WARN. A connection that fails (a URI with
// ENVIRONMENT:gcp run from a laptop has no metadata server to get a token
// from) says nothing about the change stream: SKIP, saying so.
func cloudChangeStream(ctx context.Context, c CloudConfig, r *Report) {
	const name = "firestore: change stream baton-schedules"
	if c.MongoURI == "" {
		r.skip(name, "the Go Firestore admin client has no change stream API; set BATON_MONGO_URI to check by opening one on schedules as baton daemon does (without one, the daemon polls)")
		return
	}
	err := openChangeStream(ctx, c.MongoURI, c.Database)
	switch {
	case err == nil:
		r.pass(name, "opened a change stream on schedules")
	case errors.Is(err, store.ErrCannotWatch):
		r.warn(name, "the server refused a change stream on schedules ("+err.Error()+"): baton daemon polls on (updatedAt, _id) instead, as Terraform's change_stream = false chooses",
			"if you want the daemon to watch: terraform apply with change_stream = true (infra/terraform creates google_firestore_change_stream.schedules[0], a Firestore preview)")
	default:
		r.skip(name, "not checked: could not reach the database through BATON_MONGO_URI ("+err.Error()+"); a URI with ENVIRONMENT:gcp connects only from Google Cloud (run baton doctor there, or set BATON_MONGO_URI to one that works from here)")
	}
}

// openChangeStream opens and closes a change stream on schedules through
// the store's watch capability, the one baton daemon uses. An error
// wrapping store.ErrCannotWatch is the server's own refusal; every other
// error is the connection's.
func openChangeStream(ctx context.Context, uri, database string) error {
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	st, err := mongostore.Open(cctx, uri, mongostore.Options{Database: database})
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer st.Close(context.WithoutCancel(ctx))
	w, ok := st.Schedules().(store.ScheduleWatcher)
	if !ok {
		return fmt.Errorf("open a change stream on %s: %w", schedule.SchedulesCollection, store.ErrCannotWatch)
	}
	cs, err := w.WatchSchedules(cctx)
	if err != nil {
		return fmt.Errorf("open a change stream on %s: %w", schedule.SchedulesCollection, err)
	}
	_ = cs.Close(context.WithoutCancel(ctx))
	return nil
}

// cloudBucket checks the bucket's attributes.
func cloudBucket(ctx context.Context, c CloudConfig, r *Report) {
	const name = "bucket"
	cl, err := storage.NewClient(ctx, c.StorageOptions...)
	if err != nil {
		r.fail(name, fmt.Sprintf("open the storage client: %v", err), "gcloud auth application-default login")
		return
	}
	defer cl.Close()
	attrs, err := cl.Bucket(c.Bucket).Attrs(ctx)
	if err != nil {
		fix := "check the name (terraform output bucket) and that you can read it: gcloud storage buckets describe gs://" + c.Bucket
		if errors.Is(err, storage.ErrBucketNotExist) {
			fix = "terraform apply (infra/terraform creates google_storage_bucket.baton from bucket_name)"
		}
		r.fail(name, fmt.Sprintf("gs://%s: %v", c.Bucket, err), fix)
		return
	}
	r.pass(name, "gs://"+attrs.Name+" in "+attrs.Location)
	judgeBucket(attrs, r)
}

// judgeBucket checks the attributes baton depends on.
func judgeBucket(a *storage.BucketAttrs, r *Report) {
	gs := "gs://" + a.Name
	r.check(a.UniformBucketLevelAccess.Enabled, "bucket: uniform access",
		fmt.Sprintf("uniform bucket-level access %s (leases are guarded by IAM alone, not per-object ACLs)", onOff(a.UniformBucketLevelAccess.Enabled)),
		"gcloud storage buckets update "+gs+" --uniform-bucket-level-access (Terraform: uniform_bucket_level_access = true)")
	r.check(!a.VersioningEnabled, "bucket: versioning",
		fmt.Sprintf("versioning %s (want off: every lease write would keep a noncurrent copy)", onOff(a.VersioningEnabled)),
		"gcloud storage buckets update "+gs+" --no-versioning")
	// A lease is overwritten on every renewal and deleted on release; a
	// retained or held object can be neither, so the first holder keeps it.
	var held []string
	var fixes []string
	if rp := a.RetentionPolicy; rp != nil && rp.RetentionPeriod > 0 {
		held = append(held, fmt.Sprintf("a retention policy of %s", rp.RetentionPeriod))
		if rp.IsLocked {
			fixes = append(fixes, "the retention policy is locked and cannot be removed: move baton to a new bucket (Terraform's bucket_name)")
		} else {
			fixes = append(fixes, "gcloud storage buckets update "+gs+" --clear-retention-period")
		}
	}
	if a.DefaultEventBasedHold {
		held = append(held, "a default event-based hold")
		fixes = append(fixes, "gcloud storage buckets update "+gs+" --no-default-event-based-hold (and release the objects already held: gcloud storage objects update "+gs+"/"+leasePrefix+"** --no-event-based-hold)")
	}
	if len(held) > 0 {
		r.fail("bucket: retention", strings.Join(held, " and ")+": lease objects under "+leasePrefix+" cannot be overwritten or deleted, so leases cannot be renewed, taken over or released",
			strings.Join(fixes, "; "))
	} else {
		r.pass("bucket: retention", "no retention policy, no default event-based hold")
	}
	var bad []string
	for i, rule := range a.Lifecycle.Rules {
		if rule.Action.Type != storage.DeleteAction {
			continue
		}
		if touchesPrefix(rule.Condition.MatchesPrefix, leasePrefix) {
			what := "every object"
			if len(rule.Condition.MatchesPrefix) > 0 {
				what = "prefixes " + strings.Join(rule.Condition.MatchesPrefix, ",")
			}
			bad = append(bad, fmt.Sprintf("rule %d deletes %s", i, what))
		}
	}
	if len(bad) > 0 {
		r.fail("bucket: lifecycle", strings.Join(bad, "; ")+": it could delete a live lease under "+leasePrefix+", and two holders would run",
			"limit every Delete rule to outputs/ (Terraform's lifecycle_rule has matches_prefix = [\"outputs/\"]) and apply, or: gcloud storage buckets update "+gs+" --lifecycle-file=FILE")
		return
	}
	r.pass("bucket: lifecycle", fmt.Sprintf("%d rule(s), none deletes under %s", len(a.Lifecycle.Rules), leasePrefix))
}

// touchesPrefix reports whether a rule limited to prefixes (none: every
// object) can match an object under p. A suffix condition is not trusted to
// spare leases: lease objects are names ending in .json like others.
func touchesPrefix(prefixes []string, p string) bool {
	if len(prefixes) == 0 {
		return true
	}
	return slices.ContainsFunc(prefixes, func(q string) bool {
		return strings.HasPrefix(p, q) || strings.HasPrefix(q, p)
	})
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// cloudScheduler checks the job that calls Tick.
func cloudScheduler(ctx context.Context, c CloudConfig, r *Report) {
	name := "scheduler: job " + c.Job
	if c.Job == "" {
		r.skip("scheduler: job", "no job given (--job)")
		return
	}
	cl, err := cloudscheduler.NewCloudSchedulerClient(ctx, c.SchedulerOptions...)
	if err != nil {
		r.fail(name, fmt.Sprintf("open the Cloud Scheduler client: %v", err), "gcloud auth application-default login")
		return
	}
	defer cl.Close()
	full := "projects/" + c.Project + "/locations/" + c.Region + "/jobs/" + c.Job
	job, err := cl.GetJob(ctx, &schedulerpb.GetJobRequest{Name: full})
	if err != nil {
		fix := "check --region and --job: gcloud scheduler jobs list --project=" + c.Project + " --location=" + c.Region
		if status.Code(err) == codes.NotFound {
			fix = "terraform apply (infra/terraform/scheduler.tf creates google_cloud_scheduler_job.tick)"
		}
		r.fail(name, fmt.Sprintf("get %s: %v", full, err), fix)
		return
	}
	r.pass(name, full+" "+job.GetSchedule()+" "+job.GetTimeZone())
	state := job.GetState()
	switch state {
	case schedulerpb.Job_ENABLED:
		r.pass("scheduler: enabled", state.String())
	case schedulerpb.Job_PAUSED:
		r.fail("scheduler: enabled", "PAUSED: nothing ticks, no schedule fires",
			"gcloud scheduler jobs resume "+c.Job+" --project="+c.Project+" --location="+c.Region)
	default:
		r.fail("scheduler: enabled", state.String()+": nothing ticks, no schedule fires",
			"terraform apply -replace=google_cloud_scheduler_job.tick (infra/terraform)")
	}
	cloudLastAttempt(job, c, r, time.Now())
	ht := job.GetHttpTarget()
	if ht == nil {
		r.fail("scheduler: target", "the job has no HTTP target", "terraform apply -replace=google_cloud_scheduler_job.tick (infra/terraform)")
		return
	}
	uri := ht.GetUri()
	var problems []string
	if c.TickURL != "" {
		if strings.TrimRight(uri, "/") != strings.TrimRight(c.TickURL, "/") {
			problems = append(problems, "calls "+uri+", not the Tick function "+c.TickURL)
		}
	} else if u, err := url.Parse(uri); err != nil || !strings.HasPrefix(u.Hostname(), TickFunction+"-") {
		problems = append(problems, "calls "+uri+", whose host is not the "+TickFunction+" function's")
	}
	if ht.GetHttpMethod() != schedulerpb.HttpMethod_POST {
		problems = append(problems, "method "+ht.GetHttpMethod().String()+", want POST")
	}
	if tok := ht.GetOidcToken(); tok == nil {
		problems = append(problems, "no OIDC token: Tick refuses unauthenticated calls")
	} else {
		if aud := tok.GetAudience(); aud != "" && strings.TrimRight(aud, "/") != strings.TrimRight(uri, "/") {
			problems = append(problems, "OIDC audience "+aud+" is not the target URL")
		}
		// Only Terraform's scheduler account holds run.invoker on Tick
		// (iam.tf): a token for any other is refused with 403.
		if sa, want := tok.GetServiceAccountEmail(), schedulerAccount(c.Project); sa != want {
			problems = append(problems, "OIDC token as "+sa+", not "+want+" (the account iam.tf grants run.invoker on Tick)")
		}
	}
	if len(problems) > 0 {
		r.fail("scheduler: target", strings.Join(problems, "; "), "terraform apply (infra/terraform/scheduler.tf sets the target to the Tick function's URL and the token to the scheduler account)")
		return
	}
	detail := "POST " + uri + " with an OIDC token as " + schedulerAccount(c.Project)
	if c.TickURL == "" {
		// A host prefix does not tell this project's Tick from another
		// deployment's: not a PASS.
		r.warn("scheduler: target", detail+"; only the host's "+TickFunction+"- prefix was compared",
			"pass --tick-url to check exactly: --tick-url \"$(terraform -chdir=infra/terraform output -json function_urls | jq -r .Tick)\"")
		return
	}
	r.pass("scheduler: target", detail)
}

// cloudLastAttempt checks that Scheduler is calling Tick, and that Tick
// answered: a job can be present, enabled and aimed right while every call
// is refused (a lost invoker grant) or none is made.
func cloudLastAttempt(job *schedulerpb.Job, c CloudConfig, r *Report, now time.Time) {
	const name = "scheduler: last attempt"
	logs := "read Tick's logs: gcloud functions logs read " + TickFunction + " --project=" + c.Project + " --region=" + c.Region +
		"; a PERMISSION_DENIED or UNAUTHENTICATED means " + schedulerAccount(c.Project) + " lacks roles/run.invoker on " + TickFunction + ": terraform apply (iam.tf grants it)"
	last := job.GetLastAttemptTime()
	if st := job.GetStatus(); st != nil && codes.Code(st.GetCode()) != codes.OK { //nolint:gosec // a gRPC status code from the API: an out-of-range one still differs from OK and prints as Code(n)
		at := "the last attempt"
		if last != nil {
			at += " at " + last.AsTime().UTC().Format(time.RFC3339)
		}
		r.fail(name, fmt.Sprintf("%s failed: %s: %s", at, codes.Code(st.GetCode()), st.GetMessage()), logs) //nolint:gosec // as above: a status code, only printed
		return
	}
	if job.GetState() != schedulerpb.Job_ENABLED {
		r.skip(name, "the job is not ENABLED, so no attempts are due")
		return
	}
	// Two intervals of the job's own schedule, in its time zone: one
	// attempt may be in flight or just late, two missed ones are not.
	tz := job.GetTimeZone()
	if tz == "" {
		tz = "Etc/UTC" // Scheduler's default
	}
	twoAfter := func(t time.Time) (time.Time, error) {
		n1, err := schedule.NextFire(job.GetSchedule(), tz, t)
		if err != nil {
			return time.Time{}, err
		}
		return schedule.NextFire(job.GetSchedule(), tz, n1)
	}
	if last == nil {
		since := job.GetUserUpdateTime()
		if since == nil {
			r.skip(name, "no attempt recorded yet")
			return
		}
		due, err := twoAfter(since.AsTime())
		switch {
		case err != nil:
			r.skip(name, fmt.Sprintf("no attempt recorded, and the job's schedule %q does not parse here: %v", job.GetSchedule(), err))
		case now.After(due.Add(attemptSlack)):
			r.fail(name, "no attempt since the job was set up at "+since.AsTime().UTC().Format(time.RFC3339)+", though two were due by "+due.UTC().Format(time.RFC3339)+": Scheduler is not calling Tick",
				"gcloud scheduler jobs describe "+c.Job+" --project="+c.Project+" --location="+c.Region+"; try one: gcloud scheduler jobs run "+c.Job+" --project="+c.Project+" --location="+c.Region)
		default:
			r.skip(name, "no attempt yet: the job was set up at "+since.AsTime().UTC().Format(time.RFC3339)+"; run baton doctor again after the next tick")
		}
		return
	}
	due, err := twoAfter(last.AsTime())
	lastText := last.AsTime().UTC().Format(time.RFC3339)
	switch {
	case err != nil:
		r.warn(name, fmt.Sprintf("last attempt at %s answered OK, but the job's schedule %q does not parse here (%v), so its age was not judged", lastText, job.GetSchedule(), err),
			"terraform apply (tick_schedule is a 5-field cron)")
	case now.After(due.Add(attemptSlack)):
		r.fail(name, "last attempt at "+lastText+", but two more were due by "+due.UTC().Format(time.RFC3339)+" under "+job.GetSchedule()+": Scheduler has stopped calling Tick",
			"gcloud scheduler jobs describe "+c.Job+" --project="+c.Project+" --location="+c.Region+"; try one: gcloud scheduler jobs run "+c.Job+" --project="+c.Project+" --location="+c.Region)
	default:
		r.pass(name, "at "+lastText+", OK")
	}
}
