package tests

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// The IAM of the pubsub and cloudRunJob targets (issue #31): the accounts
// that execute runs may publish to the topics of pubsub_target_topics and
// run the jobs of cloud_run_target_jobs, and nothing wider: no grant on a
// topic or a job the operator did not list, no role broader than the
// narrowest predefined one, and no project-level Pub/Sub or Cloud Run
// role that would reach every topic or job. Each rule has a negative
// mutation in TestTerraformTargetIAMRulesFail.

func init() { tfChecks["targetIAM"] = checkTargetIAM }

func checkTargetIAM(m *tfModule) []string {
	var problems []string
	want := func(res, path, val string) {
		b, ok := m.resources[res]
		if !ok {
			problems = append(problems, fmt.Sprintf("resource %s is missing", res))
			return
		}
		a := attr(b, strings.Split(path, ".")...)
		if a == nil {
			problems = append(problems, fmt.Sprintf("%s has no %s", res, path))
			return
		}
		if got := m.text(a.Expr); got != val {
			problems = append(problems, fmt.Sprintf("%s: %s = %s, want %s", res, path, got, val))
		}
	}
	// Pub/Sub: one grant per listed topic and executing account.
	want("google_pubsub_topic_iam_member.target_publisher", "role", `"roles/pubsub.publisher"`)
	want("google_pubsub_topic_iam_member.target_publisher", "for_each", "local.target_topic_grants")
	want("google_pubsub_topic_iam_member.target_publisher", "topic", "each.value.topic")
	if l, ok := m.locals["target_topic_grants"]; !ok || !strings.Contains(m.text(l.Expr), "setproduct(var.pubsub_target_topics,") {
		problems = append(problems, "local.target_topic_grants must range over var.pubsub_target_topics (setproduct), so only listed topics are granted")
	}
	// Cloud Run jobs: the two narrow roles, on each listed job.
	want("google_cloud_run_v2_job_iam_member.target_executor", "for_each", "local.run_job_grants")
	want("google_cloud_run_v2_job_iam_member.target_executor", "role", "each.value.role")
	want("google_cloud_run_v2_job_iam_member.target_executor", "name", `split("/",each.value.job)[5]`)
	if l, ok := m.locals["run_job_roles"]; !ok || m.text(l.Expr) != `["roles/run.jobsExecutorWithOverrides","roles/run.viewer"]` {
		problems = append(problems, `local.run_job_roles must be ["roles/run.jobsExecutorWithOverrides", "roles/run.viewer"]: the narrowest roles that run a job with overrides and read its executions`)
	}
	if l, ok := m.locals["run_job_grants"]; !ok || !strings.Contains(m.text(l.Expr), "setproduct(var.cloud_run_target_jobs,") {
		problems = append(problems, "local.run_job_grants must range over var.cloud_run_target_jobs (setproduct), so only listed jobs are granted")
	}
	// Nothing project-wide: a project-level Pub/Sub or Cloud Run role
	// would reach every topic or job of the project.
	for _, name := range sortedKeys(m.resources) {
		if !strings.HasPrefix(name, "google_project_iam_member.") {
			continue
		}
		role := m.text(attrOrEmpty(m.resources[name], "role"))
		if strings.Contains(role, "roles/pubsub.") || strings.Contains(role, "roles/run.") {
			problems = append(problems, fmt.Sprintf("%s grants %s on the whole project: grant it on the listed topics or jobs", name, role))
		}
	}
	sort.Strings(problems)
	return problems
}

// TestTerraformTargetIAMRulesFail: each rule of checkTargetIAM reports the
// configuration broken in the way it guards against.
func TestTerraformTargetIAMRulesFail(t *testing.T) {
	checkMutations(t, []tfMutation{
		{"publisher widened to editor", "targetIAM", "monitoring.tf",
			"  topic      = each.value.topic\n  role       = \"roles/pubsub.publisher\"",
			"  topic      = each.value.topic\n  role       = \"roles/pubsub.editor\"",
			`target_publisher: role = "roles/pubsub.editor", want "roles/pubsub.publisher"`},
		{"publisher on every topic of the notify list", "targetIAM", "monitoring.tf",
			"setproduct(var.pubsub_target_topics, keys(local.target_publishers))",
			"setproduct(concat(var.pubsub_target_topics, [\"projects/x/topics/all\"]), keys(local.target_publishers))",
			"local.target_topic_grants must range over var.pubsub_target_topics"},
		{"publisher granted on the project", "targetIAM", "monitoring.tf",
			"resource \"google_pubsub_topic_iam_member\" \"target_publisher\" {\n  for_each = local.target_topic_grants\n\n  project    = split(\"/\", each.value.topic)[1]\n  topic      = each.value.topic\n",
			"resource \"google_project_iam_member\" \"target_publisher\" {\n  for_each = local.target_topic_grants\n\n  project    = split(\"/\", each.value.topic)[1]\n",
			"google_project_iam_member.target_publisher grants \"roles/pubsub.publisher\" on the whole project"},
		{"job role widened to developer", "targetIAM", "monitoring.tf",
			`run_job_roles = ["roles/run.jobsExecutorWithOverrides", "roles/run.viewer"]`,
			`run_job_roles = ["roles/run.developer", "roles/run.viewer"]`,
			"local.run_job_roles must be"},
		{"job grants beyond the list", "targetIAM", "monitoring.tf",
			"setproduct(var.cloud_run_target_jobs, keys(local.target_publishers), local.run_job_roles)",
			"setproduct(concat(var.cloud_run_target_jobs, [\"projects/x/locations/y/jobs/all\"]), keys(local.target_publishers), local.run_job_roles)",
			"local.run_job_grants must range over var.cloud_run_target_jobs"},
		{"job grant on another job", "targetIAM", "monitoring.tf",
			"  name       = split(\"/\", each.value.job)[5]",
			"  name       = \"nightly\"",
			`target_executor: name = "nightly", want split("/",each.value.job)[5]`},
	})
}
