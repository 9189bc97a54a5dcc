package schedule

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/baton-cron/baton/shared/httpapi"
)

// CloudRunJobTarget runs one execution of a Cloud Run job per run, through
// the Run Admin API v2 (RunJob with overrides). The run stays running while
// the execution runs, and the sweep ends it from the execution's outcome,
// as a gpu target's run is ended from its job's.
type CloudRunJobTarget struct {
	// Job is the job's full name, "projects/P/locations/REGION/jobs/J"; it
	// must match an entry of BATON_ALLOWED_JOBS.
	Job string `bson:"job" json:"job"`
	// Region, when set, must be the job name's location; it exists so a
	// schedule file can say it, and is checked against the name.
	Region string `bson:"region,omitempty" json:"region,omitempty"`
	// Args replace the container's arguments for the execution (empty:
	// the job's own).
	Args []string `bson:"args,omitempty" json:"args,omitempty"`
	// Env are added to the container's environment for the execution,
	// beside baton's (EnvRunID, …).
	Env map[string]string `bson:"env,omitempty" json:"env,omitempty"`
	// TaskCount overrides the job's task count (0: the job's own).
	TaskCount int `bson:"taskCount,omitempty" json:"taskCount,omitempty"`
	// Timeout overrides each task's timeout (0: the job's own).
	Timeout Duration `bson:"timeout,omitempty" json:"timeout,omitempty"`
}

// The environment variables baton adds to every execution of a
// cloudRunJob target. EnvRunID is also how a repeated start finds the
// execution an earlier, unanswered RunJob created (see
// scheduler.startExecution). The prefix is reserved.
const (
	EnvRunID       = "BATON_RUN_ID"
	EnvFireTime    = "BATON_FIRE_TIME"
	EnvFence       = "BATON_FENCE"
	EnvSchedule    = "BATON_SCHEDULE"
	reservedEnvPfx = "BATON_"
)

// Cloud Run's limits on an execution, from its documentation:
//   - tasks per execution: at most 10,000
//     (https://cloud.google.com/run/quotas#cloud_run_jobs_limits);
//   - task timeout: at most 168 hours
//     (https://cloud.google.com/run/docs/configuring/task-timeout);
//   - environment variables: a name may not be empty, contain "=", or
//     start with "X_GOOGLE_"; CLOUD_RUN_* names are set by Cloud Run
//     itself, and at most 1000 variables
//     (https://cloud.google.com/run/docs/configuring/jobs/environment-variables).
const (
	MaxRunJobTasks   = 10000
	MaxRunJobTimeout = 168 * time.Hour
	MinRunJobTimeout = time.Second
	MaxRunJobEnv     = 1000 - 4 // baton adds 4
	MaxRunJobArgs    = 1000
	MaxRunJobArgLen  = 4096
)

// jobName is a Cloud Run job's full name. A job name is at most 63
// characters of lowercase letters, digits and hyphens, starting with a
// letter and not ending with a hyphen
// (https://cloud.google.com/run/docs/reference/rest/v2/projects.locations.jobs/create,
// jobId: "must be a valid RFC 1035 label").
var jobName = regexp.MustCompile(`^projects/([a-z0-9][a-z0-9.:-]{0,62})/locations/([a-z0-9-]+)/jobs/([a-z]([a-z0-9-]{0,61}[a-z0-9])?)$`)

// runRegions are the regions where Cloud Run runs jobs
// (https://cloud.google.com/run/docs/locations), and "local", the region of
// `baton local`'s Run Admin API emulator.
var runRegions = []string{
	"africa-south1", "asia-east1", "asia-east2", "asia-northeast1", "asia-northeast2", "asia-northeast3",
	"asia-south1", "asia-south2", "asia-southeast1", "asia-southeast2", "australia-southeast1", "australia-southeast2",
	"europe-central2", "europe-north1", "europe-north2", "europe-southwest1", "europe-west1", "europe-west2", "europe-west3",
	"europe-west4", "europe-west6", "europe-west8", "europe-west9", "europe-west10", "europe-west12",
	"me-central1", "me-central2", "me-west1", "northamerica-northeast1", "northamerica-northeast2", "northamerica-south1",
	"southamerica-east1", "southamerica-west1", "us-central1", "us-east1", "us-east4", "us-east5", "us-south1",
	"us-west1", "us-west2", "us-west3", "us-west4", "local",
}

// envName is a POSIX-style environment variable name, which Cloud Run's
// containers receive unchanged.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ParseJobName splits a Cloud Run job's full name into project, region and
// job id; ok is false when it is not one.
func ParseJobName(name string) (project, region, job string, ok bool) {
	m := jobName.FindStringSubmatch(name)
	if m == nil {
		return "", "", "", false
	}
	return m[1], m[2], m[3], true
}

// CheckJobName validates a Cloud Run job's full name for the field named.
func CheckJobName(field, name string) error {
	_, region, _, ok := ParseJobName(name)
	if !ok {
		return fieldErr(field, "%q is not a Cloud Run job name; want projects/PROJECT/locations/REGION/jobs/JOB, JOB a lowercase RFC 1035 label of at most 63 characters", name)
	}
	if !slices.Contains(runRegions, region) {
		return fieldErr(field, "unknown Cloud Run region %q", region)
	}
	return nil
}

// IsAllowedJob reports whether job matches an entry of allowed: the same
// full name, or "projects/P/locations/R/jobs/*" for every job of P in R.
func IsAllowedJob(job string, allowed []string) bool {
	for _, a := range allowed {
		if a == job {
			return true
		}
		if prefix, ok := strings.CutSuffix(a, "/jobs/*"); ok && strings.HasPrefix(job, prefix+"/jobs/") {
			return true
		}
	}
	return false
}

// CheckJobAllowlist checks BATON_ALLOWED_JOBS' entries, so that a typo
// refuses to start the process instead of refusing that job forever.
func CheckJobAllowlist(allowed []string) error {
	for _, a := range allowed {
		j := a
		if p, ok := strings.CutSuffix(a, "/jobs/*"); ok {
			j = p + "/jobs/any"
		}
		if err := CheckJobName("entry", j); err != nil {
			return fmt.Errorf("%q is neither projects/P/locations/R/jobs/J nor projects/P/locations/R/jobs/*: %w", a, err)
		}
	}
	return nil
}

func (j *CloudRunJobTarget) validate(allowed []string) error {
	const f = "target.cloudRunJob"
	if j.Job == "" {
		return fieldErr(f+".job", "is required; want projects/PROJECT/locations/REGION/jobs/JOB")
	}
	if err := CheckJobName(f+".job", j.Job); err != nil {
		return err
	}
	_, region, _, _ := ParseJobName(j.Job)
	if j.Region != "" {
		if !slices.Contains(runRegions, j.Region) {
			return fieldErr(f+".region", "unknown Cloud Run region %q", j.Region)
		}
		if j.Region != region {
			return fieldErr(f+".region", "is %q but the job is in %q", j.Region, region)
		}
	}
	if !IsAllowedJob(j.Job, allowed) {
		if len(allowed) == 0 {
			return fieldErr(f+".job", "%s is not allowed: BATON_ALLOWED_JOBS is empty, which refuses every cloudRunJob target (Terraform's cloud_run_target_jobs sets it, with the grant)", j.Job)
		}
		return fieldErr(f+".job", "%s is not on BATON_ALLOWED_JOBS (%s)", j.Job, strings.Join(allowed, ", "))
	}
	if len(j.Args) > MaxRunJobArgs {
		return fieldErr(f+".args", "has %d arguments; at most %d", len(j.Args), MaxRunJobArgs)
	}
	for i, a := range j.Args {
		if len(a) > MaxRunJobArgLen {
			return fieldErr(fmt.Sprintf("%s.args[%d]", f, i), "is %d bytes; at most %d", len(a), MaxRunJobArgLen)
		}
	}
	if len(j.Env) > MaxRunJobEnv {
		return fieldErr(f+".env", "has %d variables; at most %d (Cloud Run allows 1000 and baton adds 4)", len(j.Env), MaxRunJobEnv)
	}
	keys := make([]string, 0, len(j.Env))
	for k := range j.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		field := httpapi.FieldPath(f+".env", k)
		up := strings.ToUpper(k)
		switch {
		case !envName.MatchString(k):
			return fieldErr(field, "is not an environment variable name: letters, digits and _, not starting with a digit")
		case strings.HasPrefix(up, "X_GOOGLE_"):
			return fieldErr(field, "starts with X_GOOGLE_, which Cloud Run reserves")
		case strings.HasPrefix(up, "CLOUD_RUN_"):
			return fieldErr(field, "starts with CLOUD_RUN_, which Cloud Run sets for each task")
		case strings.HasPrefix(up, reservedEnvPfx):
			return fieldErr(field, "starts with %q, which baton reserves for the run's id, fire time and fence", reservedEnvPfx)
		}
		if v := j.Env[k]; len(v) > 32<<10 {
			return fieldErr(field, "value is %d bytes; at most 32768", len(v))
		}
	}
	if j.TaskCount < 0 || j.TaskCount > MaxRunJobTasks {
		return fieldErr(f+".taskCount", "is %d; want 1 to %d (0 or absent: the job's own)", j.TaskCount, MaxRunJobTasks)
	}
	if j.Timeout.D() == 0 {
		return nil
	}
	return durationIn(f+".timeout", j.Timeout, MinRunJobTimeout, MaxRunJobTimeout)
}

// ExecutionURL is the Google Cloud console's page of the run's Cloud Run
// execution (its tasks, their logs), or "" when the run has none or it is
// the local emulator's (project "local"), which has no such page.
func (r *Run) ExecutionURL() string {
	project, region, _, ok := ParseJobName(r.RunJob)
	_, exec, found := strings.Cut(r.Execution, "/executions/")
	if !ok || !found || project == "local" {
		return ""
	}
	return "https://console.cloud.google.com/run/jobs/executions/details/" + region + "/" + url.PathEscape(exec) + "/tasks?project=" + url.QueryEscape(project)
}
