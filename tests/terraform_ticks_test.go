package tests

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/baton-cron/baton/shared/config"
)

// The partitioned deciders' deployment (infra/terraform/ticks.tf, issue
// 28), read from the HCL as the other rules are: the partition tasks carry
// baton-tick-tasks' token, which may invoke Tick and nothing else; exactly
// the functions that read BATON_TICK_QUEUE (Tick) enqueue on baton-ticks and
// act as baton-tick-tasks; and the functions agree on V. Each rule has a
// negative mutation in TestTerraformTickIAMRulesFail.

func init() { tfChecks["tickIAM"] = checkTickIAM }

// The tick queue's and baton-tick-tasks' references, as m.text gives them.
const (
	tickQueueName        = "google_cloud_tasks_queue.ticks[0].name"
	tickTasksAccountName = "google_service_account.tick_tasks[0].name"
	tickTasksRef         = "google_service_account.tick_tasks"
	tickEnqueuersLocal   = "local.tick_enqueuers"
)

func checkTickIAM(m *tfModule) []string {
	var problems []string
	for _, r := range []string{"google_cloud_tasks_queue.ticks", "google_service_account.tick_tasks"} {
		b := m.resources[r]
		if b == nil {
			problems = append(problems, fmt.Sprintf("resource %s is missing: partition tasks need their queue and their own OIDC identity", r))
			continue
		}
		if c := b.Body.Attributes["count"]; c == nil || m.text(c.Expr) != "local.tick_queue_count" {
			problems = append(problems, fmt.Sprintf("%s: count must be local.tick_queue_count (none with decider_partitions = 0)", r))
		}
	}
	if sa := m.resources["google_service_account.tick_tasks"]; sa != nil {
		if id, _ := literalString(attrOrEmpty(sa, "account_id")); id != "baton-tick-tasks" {
			problems = append(problems, fmt.Sprintf("google_service_account.tick_tasks must have account_id \"baton-tick-tasks\", got %q", id))
		}
	}

	// Who enqueues and acts as baton-tick-tasks: exactly the readers of
	// BATON_TICK_QUEUE, through local.tick_enqueuers, which is
	// local.tick_functions while there is a queue.
	want := usersOf(config.EnvTickQueue)
	if l := m.locals["tick_enqueuers"]; l == nil || m.text(l.Expr) != "local.tick_queue_count>0?local.tick_functions:toset([])" {
		problems = append(problems, "local.tick_enqueuers must be local.tick_queue_count > 0 ? local.tick_functions : toset([])")
	}
	if l := m.locals["tick_functions"]; l == nil {
		problems = append(problems, "local.tick_functions is missing")
	} else if got, err := functionSet(m, l.Expr); err != nil {
		problems = append(problems, fmt.Sprintf("local.tick_functions: %v", err))
	} else if !slices.Equal(got, want) {
		problems = append(problems, fmt.Sprintf("local.tick_functions is %v, want exactly the functions that read %s (config.Vars: %v)", got, config.EnvTickQueue, want))
	}
	grant := func(name string, b *hclsyntax.Block, what string) {
		if fe := b.Body.Attributes["for_each"]; fe == nil || m.text(fe.Expr) != tickEnqueuersLocal {
			problems = append(problems, fmt.Sprintf("%s: %s must have for_each = %s (the functions that read %s)", name, what, tickEnqueuersLocal, config.EnvTickQueue))
		}
		if mem := m.text(attrOrEmpty(b, "member")); mem != "google_service_account.function[each.key].member" {
			problems = append(problems, fmt.Sprintf("%s: %s must go to the functions' own accounts (google_service_account.function[each.key].member), not %s", name, what, mem))
		}
	}
	nEnq, nActAs := 0, 0
	for _, name := range sortedKeys(m.resources) {
		b := m.resources[name]
		typ := strings.SplitN(name, ".", 2)[0]
		role, _ := literalString(attrOrEmpty(b, "role"))
		switch {
		case typ == "google_cloud_tasks_queue_iam_member" && m.text(attrOrEmpty(b, "name")) == tickQueueName:
			nEnq++
			if role != "roles/cloudtasks.enqueuer" {
				problems = append(problems, fmt.Sprintf("%s grants %q on baton-ticks; creating partition tasks needs roles/cloudtasks.enqueuer only", name, role))
			}
			grant(name, b, "roles/cloudtasks.enqueuer on baton-ticks")
		case m.text(attrOrEmpty(b, "service_account_id")) == tickTasksAccountName:
			nActAs++
			if role != "roles/iam.serviceAccountUser" || typ != "google_service_account_iam_member" {
				problems = append(problems, fmt.Sprintf("%s grants %q with %s on baton-tick-tasks; only roles/iam.serviceAccountUser (google_service_account_iam_member) is needed, to create tasks carrying its token", name, role, typ))
			}
			grant(name, b, "roles/iam.serviceAccountUser on baton-tick-tasks")
		}
		// baton-tick-tasks holds invoker on Tick through
		// local.function_invokers and nothing else anywhere.
		if mem := m.text(attrOrEmpty(b, "member")); strings.Contains(mem, tickTasksRef+"[") || strings.Contains(mem, tickTasksRef+".") {
			problems = append(problems, fmt.Sprintf("%s grants %q to baton-tick-tasks; it may only invoke Tick, through local.function_invokers", name, role))
		}
	}
	if nEnq != 1 {
		problems = append(problems, fmt.Sprintf("want exactly one roles/cloudtasks.enqueuer grant on baton-ticks (google_cloud_tasks_queue_iam_member on %s), found %d", tickQueueName, nEnq))
	}
	if nActAs != 1 {
		problems = append(problems, fmt.Sprintf("want exactly one roles/iam.serviceAccountUser grant on baton-tick-tasks (service_account_id = %s), found %d: creating a task with its token needs actAs on it", tickTasksAccountName, nActAs))
	}
	tickInvokes := 0
	for _, g := range invokerGrants(m) {
		key, fn, mem := g[0], g[1], g[2]
		if !strings.HasPrefix(mem, tickTasksRef) {
			continue
		}
		if fn != config.FnTick {
			problems = append(problems, fmt.Sprintf("function_invokers %s: baton-tick-tasks may invoke only %s, not %s: a partition task could reach it", key, config.FnTick, fn))
			continue
		}
		tickInvokes++
	}
	if tickInvokes != 1 {
		problems = append(problems, fmt.Sprintf("function_invokers: baton-tick-tasks must invoke %s exactly once, found %d (partition tasks would be refused)", config.FnTick, tickInvokes))
	}

	// What Tick is told, and V everywhere it is read.
	_, env := functionFields(m)
	tellTick := map[string]string{
		config.EnvPartitions:       "tostring(local.decider_partitions)",
		config.EnvTickQueue:        `join("",google_cloud_tasks_queue.ticks[*].id)`,
		config.EnvTickTasksAccount: `join("",google_service_account.tick_tasks[*].email)`,
	}
	for _, n := range sortedKeys(tellTick) {
		for _, fn := range usersOf(n) {
			e, ok := env[fn][n]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: %s is not set", fn, n))
			} else if got := m.text(e); got != tellTick[n] {
				problems = append(problems, fmt.Sprintf("%s: %s = %s, want %s", fn, n, got, tellTick[n]))
			}
		}
	}
	for _, fn := range usersOf(config.EnvDeciderShards) {
		e, ok := env[fn][config.EnvDeciderShards]
		if !ok || m.text(e) != "tostring(var.decider_shards)" {
			problems = append(problems, fmt.Sprintf("%s: %s must be tostring(var.decider_shards): every function that stores or reads a schedule's decider shard must agree on V", fn, config.EnvDeciderShards))
		}
	}
	sort.Strings(problems)
	return problems
}

// TestTerraformTickIAMRulesFail: each rule of checkTickIAM reports the
// configuration broken in the way it guards against.
func TestTerraformTickIAMRulesFail(t *testing.T) {
	checkMutations(t, []tfMutation{
		{"tick-tasks invokes Run too", "tickIAM", "iam.tf",
			`{ "Tick/tick-tasks" = { fn = "Tick", member = google_service_account.tick_tasks[0].member } }`,
			`{ "Tick/tick-tasks" = { fn = "Tick", member = google_service_account.tick_tasks[0].member }, "Run/tick-tasks" = { fn = "Run", member = google_service_account.tick_tasks[0].member } }`,
			"baton-tick-tasks may invoke only Tick, not Run"},
		{"tick-tasks invokes Schedules instead", "tickIAM", "iam.tf",
			`{ "Tick/tick-tasks" = { fn = "Tick", member = google_service_account.tick_tasks[0].member } }`,
			`{ "Tick/tick-tasks" = { fn = "Schedules", member = google_service_account.tick_tasks[0].member } }`,
			"baton-tick-tasks must invoke Tick exactly once, found 0"},
		{"tick-tasks granted a role outside the invokers", "tickIAM", "ticks.tf",
			"# Enqueuing partition tasks is granted on baton-ticks only.\n",
			"resource \"google_project_iam_member\" \"tick_tasks_wide\" {\n  project = var.project\n  role    = \"roles/run.invoker\"\n  member  = google_service_account.tick_tasks[0].member\n}\n",
			`google_project_iam_member.tick_tasks_wide grants "roles/run.invoker" to baton-tick-tasks`},
		{"tick queue role widened", "tickIAM", "ticks.tf",
			"name     = google_cloud_tasks_queue.ticks[0].name\n  role     = \"roles/cloudtasks.enqueuer\"",
			"name     = google_cloud_tasks_queue.ticks[0].name\n  role     = \"roles/cloudtasks.queueAdmin\"",
			`grants "roles/cloudtasks.queueAdmin" on baton-ticks`},
		{"tick queue enqueued by every function", "tickIAM", "ticks.tf",
			"resource \"google_cloud_tasks_queue_iam_member\" \"tick_enqueuer\" {\n  for_each = local.tick_enqueuers",
			"resource \"google_cloud_tasks_queue_iam_member\" \"tick_enqueuer\" {\n  for_each = local.functions",
			"tick_enqueuer: roles/cloudtasks.enqueuer on baton-ticks must have for_each = local.tick_enqueuers"},
		{"tick functions beyond the readers", "tickIAM", "ticks.tf",
			`tick_functions = toset([for k, f in local.functions : k if contains(keys(f.env), "BATON_TICK_QUEUE")])`,
			`tick_functions = toset([for k, f in local.functions : k if contains(keys(f.env), "BATON_TASKS_QUEUE")])`,
			"local.tick_functions is [Run Schedules Tick], want exactly the functions that read BATON_TICK_QUEUE"},
		{"actAs on baton-tasks instead", "tickIAM", "ticks.tf",
			"service_account_id = google_service_account.tick_tasks[0].name",
			"service_account_id = google_service_account.tasks.name",
			"want exactly one roles/iam.serviceAccountUser grant on baton-tick-tasks"},
		{"token creator on tick-tasks", "tickIAM", "ticks.tf",
			"service_account_id = google_service_account.tick_tasks[0].name\n  role               = \"roles/iam.serviceAccountUser\"",
			"service_account_id = google_service_account.tick_tasks[0].name\n  role               = \"roles/iam.serviceAccountTokenCreator\"",
			`grants "roles/iam.serviceAccountTokenCreator" with google_service_account_iam_member on baton-tick-tasks`},
		{"partition tasks carry baton-tasks' token", "tickIAM", "main.tf",
			`BATON_TICK_TASKS_SERVICE_ACCOUNT = join("", google_service_account.tick_tasks[*].email)`,
			`BATON_TICK_TASKS_SERVICE_ACCOUNT = google_service_account.tasks.email`,
			"Tick: BATON_TICK_TASKS_SERVICE_ACCOUNT = google_service_account.tasks.email, want"},
		{"V not told to Schedules", "tickIAM", "main.tf",
			"        # A schedule's decider shard is stored on every write.\n        BATON_DECIDER_SHARDS = tostring(var.decider_shards)\n", "",
			"Schedules: BATON_DECIDER_SHARDS must be tostring(var.decider_shards)"},
		{"tick queue always deployed", "tickIAM", "ticks.tf",
			"resource \"google_cloud_tasks_queue\" \"ticks\" {\n  count = local.tick_queue_count",
			"resource \"google_cloud_tasks_queue\" \"ticks\" {\n  count = 1",
			"google_cloud_tasks_queue.ticks: count must be local.tick_queue_count"},
	})
}
