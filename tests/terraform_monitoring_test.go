package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/baton-cron/baton/shared/metrics"
)

// The monitoring rules of issue #15 item 4, read from the HCL as the other
// rules are: the alerts and the dashboard watch metrics the code emits
// (shared/metrics.Names), under the names Cloud Monitoring gives them.

// metricWriterRole lets an account write time series; it is only
// grantable on the project.
const metricWriterRole = "roles/monitoring.metricWriter"

// metricWriters are the members that may hold metricWriterRole: the
// accounts of the processes that record metrics.
var metricWriters = []string{"google_service_account.function[each.key].member", "google_service_account.daemon[0].member"}

// requiredAlerts are the alert policies the issue asks for, by resource
// name, each with the metric it must watch.
var requiredAlerts = map[string]string{
	"no_tick":           "workload.googleapis.com/" + metrics.TicksTotal,
	"run_failures":      "workload.googleapis.com/" + metrics.RunsTotal,
	"tick_errors":       "run.googleapis.com/request_count",
	"missed_runs":       "workload.googleapis.com/" + metrics.RunsMissedTotal,
	"gpu_wait":          "workload.googleapis.com/" + metrics.GPUWait,
	"gpu_worker_errors": "logging.googleapis.com/user/",
}

func init() { tfChecks["monitoring"] = checkMonitoring }

var workloadMetric = regexp.MustCompile(`workload\.googleapis\.com/(?:\$\{[a-z_.]+\})?([a-z_0-9]+)|\$\{(?:local\.metric_)?prefix\}([a-z_0-9]+)`)

// checkMonitoring: every metric named in an alert or on the dashboard is
// one the code emits; every emitted metric is on the dashboard; the
// required alerts exist, watch their metric and notify local.alert_channels;
// and the metric writer role goes to the recording accounts only.
func checkMonitoring(m *tfModule) []string {
	var problems []string
	emitted := metrics.Names()
	named := func(text string) []string {
		var out []string
		for _, mm := range workloadMetric.FindAllStringSubmatch(text, -1) {
			out = append(out, mm[1]+mm[2])
		}
		return out
	}
	for _, name := range sortedKeys(m.resources) {
		if !strings.HasPrefix(name, "google_monitoring_alert_policy.") {
			continue
		}
		b := m.resources[name]
		text := string(b.Range().SliceBytes(m.src[b.Range().Filename]))
		text = strings.ReplaceAll(text, `${local.metric_prefix}`, "workload.googleapis.com/")
		for _, n := range named(text) {
			if !slices.Contains(emitted, n) {
				problems = append(problems, fmt.Sprintf("%s watches workload.googleapis.com/%s, which the code does not emit (shared/metrics.Names: %v)", name, n, emitted))
			}
		}
		if ch := b.Body.Attributes["notification_channels"]; ch == nil || m.text(ch.Expr) != "local.alert_channels" {
			problems = append(problems, name+": notification_channels must be local.alert_channels, so every alert reaches the operator's channels")
		}
		if block(b.Body, "documentation") == nil {
			problems = append(problems, name+": needs a documentation block saying what to do")
		}
	}
	for short, metric := range requiredAlerts {
		b := m.resources["google_monitoring_alert_policy."+short]
		if b == nil {
			problems = append(problems, fmt.Sprintf("alert policy google_monitoring_alert_policy.%s is missing (it watches %s)", short, metric))
			continue
		}
		text := strings.ReplaceAll(string(b.Range().SliceBytes(m.src[b.Range().Filename])), `${local.metric_prefix}`, "workload.googleapis.com/")
		if !strings.Contains(text, metric) {
			problems = append(problems, fmt.Sprintf("google_monitoring_alert_policy.%s must watch %s", short, metric))
		}
	}
	dash, err := os.ReadFile(filepath.Join(tfDir, "dashboards", "baton.json"))
	if err != nil {
		problems = append(problems, "dashboards/baton.json: "+err.Error())
	}
	onDash := named(string(dash))
	for _, n := range onDash {
		if !slices.Contains(emitted, n) {
			problems = append(problems, fmt.Sprintf("dashboards/baton.json charts %s, which the code does not emit", n))
		}
	}
	for _, n := range emitted {
		if !slices.Contains(onDash, n) {
			problems = append(problems, fmt.Sprintf("dashboards/baton.json has no chart of %s", n))
		}
	}
	if d := m.resources["google_monitoring_dashboard.baton"]; d == nil || !strings.Contains(m.text(attrOrEmpty(d, "dashboard_json")), "dashboards/baton.json") {
		problems = append(problems, "google_monitoring_dashboard.baton must load dashboards/baton.json")
	}
	for name, b := range m.resources {
		if !strings.HasPrefix(name, "google_project_iam_") {
			continue
		}
		role, _ := literalString(attrOrEmpty(b, "role"))
		if role != metricWriterRole {
			continue
		}
		if mem := m.text(attrOrEmpty(b, "member")); !slices.Contains(metricWriters, mem) {
			problems = append(problems, fmt.Sprintf("%s: %s is for the accounts that record metrics (%v), not %s", name, metricWriterRole, metricWriters, mem))
		}
	}
	sort.Strings(problems)
	return problems
}

// TestTerraformMonitoringRulesFail: each monitoring rule reports the
// configuration broken in the way it guards against.
func TestTerraformMonitoringRulesFail(t *testing.T) {
	checkMutations(t, []tfMutation{
		{"alert on a metric nobody emits", "monitoring", "monitoring.tf",
			`${local.metric_prefix}baton_gpu_wait_seconds\""`, `${local.metric_prefix}baton_gpu_wait_secs\""`,
			"watches workload.googleapis.com/baton_gpu_wait_secs, which the code does not emit"},
		{"required alert missing", "monitoring", "monitoring.tf",
			`resource "google_monitoring_alert_policy" "no_tick" {`, `resource "google_monitoring_alert_policy" "no_tick_renamed" {`,
			"google_monitoring_alert_policy.no_tick is missing"},
		{"alert without the channels", "monitoring", "monitoring.tf",
			"  display_name          = \"baton: Tick answers 5xx\"\n  combiner              = \"OR\"\n  notification_channels = local.alert_channels\n",
			"  display_name          = \"baton: Tick answers 5xx\"\n  combiner              = \"OR\"\n  notification_channels = []\n",
			"google_monitoring_alert_policy.tick_errors: notification_channels must be local.alert_channels"},
		{"metric writer to another account", "monitoring", "monitoring.tf",
			"member     = google_service_account.daemon[0].member", "member     = google_service_account.gpu_worker.member",
			"roles/monitoring.metricWriter is for the accounts that record metrics"},
		{"metric writer without iam_ready", "ordering", "iam.tf",
			"    [for g in google_project_iam_member.function_metrics : g.id],\n", "",
			"is not ordered after google_project_iam_member.function_metrics"},
	})
}

// TestDashboardNamesEveryMetric fails when a metric is added to the code
// without a chart: the dashboard is read as the operator sees it.
func TestDashboardNamesEveryMetric(t *testing.T) {
	m, err := parseTerraform(readTerraform(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkMonitoring(m) {
		if strings.Contains(p, "dashboards/baton.json") {
			t.Error(p)
		}
	}
}
