package tests

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/baton-cron/baton/functions"
	"github.com/baton-cron/baton/shared/config"
)

// The IAM rules of issue #12 item 8 (a `terraform apply` that works in a
// real organisation) and of the GPU callback split (item 3), read from the
// HCL as the rules in terraform_test.go are. Each has negative mutations in
// TestTerraformIAMRulesFail.

func init() {
	tfChecks["bucketIAM"] = checkBucketIAM
	tfChecks["gpuIAM"] = checkGPUIAM
	tfChecks["buildAccount"] = checkBuildAccount
	tfChecks["artifacts"] = checkArtifacts
	tfChecks["ordering"] = checkOrdering
	tfChecks["conditionalGrants"] = checkConditionalGrants
}

// checkConditionalGrants: every IAM member grant with a condition is
// create_before_destroy. The provider replaces a grant whose condition is
// added or changed, and Terraform destroys before it creates by default:
// the upgrade that narrowed the bucket grants would have left the
// functions, the daemon and the worker without leases/ and outputs/ until
// the new grant propagated.
func checkConditionalGrants(m *tfModule) []string {
	var problems []string
	n := 0
	for _, name := range sortedKeys(m.resources) {
		b := m.resources[name]
		typ := strings.SplitN(name, ".", 2)[0]
		if !strings.HasSuffix(typ, "_iam_member") || block(b.Body, "condition") == nil {
			continue
		}
		n++
		if a := attr(b, "lifecycle", "create_before_destroy"); a == nil || m.text(a.Expr) != "true" {
			problems = append(problems, fmt.Sprintf("%s has an IAM condition and needs lifecycle { create_before_destroy = true }: a change to its condition replaces it, and destroying first leaves its holder without access until the new grant propagates", name))
		}
	}
	if n == 0 {
		problems = append(problems, "no IAM member grant with a condition found: this check reads nothing")
	}
	sort.Strings(problems)
	return problems
}

// bucketPrefix is the object-name prefix each account may use in baton's
// bucket, by the service account resource its grant names, and the local
// holding it. The prefixes come from the code: the lease manager's prefix
// (functions.LeasePrefix, the daemon's --prefix default) and the worker's
// output path (shared/gpu/worker), checked in checkBucketIAM.
var bucketPrefix = map[string]struct{ local, value, role string }{
	"google_service_account.function[each.key].member": {"lease_prefix", functions.LeasePrefix, "roles/storage.objectUser"},
	"google_service_account.daemon[0].member":          {"lease_prefix", functions.LeasePrefix, "roles/storage.objectUser"},
	"google_service_account.gpu_worker.member":         {"output_prefix", "outputs/", "roles/storage.objectUser"},
	"google_service_account.build.member":              {"source_prefix", "source/", "roles/storage.objectViewer"},
}

// bucketGrantByResource overrides bucketPrefix for the grants that give a
// function something besides its leases: the GPU function's read of the
// job output (GET /gpu/jobs/{id}/logs) and Schedules' list of leases/
// (GET /leases), each read-only and to the functions named in forEach.
var bucketGrantByResource = map[string]struct {
	expr, role, forEach string
	functions           []string
}{
	"google_storage_bucket_iam_member.output_reader": {
		expr: `"resource.name.startsWith(\"projects/_/buckets/${google_storage_bucket.baton.name}/objects/${local.output_prefix}\")"`,
		role: "roles/storage.objectViewer", forEach: "local.output_readers", functions: []string{config.FnGPU},
	},
	"google_storage_bucket_iam_member.lease_list": {
		expr: `"api.getAttribute(\"storage.googleapis.com/objectListPrefix\",\"\").startsWith(\"${local.lease_prefix}\")"`,
		role: "roles/storage.objectViewer", forEach: "local.lease_listers", functions: []string{config.FnSchedules},
	},
}

// checkBucketIAM: every grant on baton's bucket is a member grant with an
// IAM condition on the object name that limits its holder to its prefix,
// the bucket has uniform bucket-level access (conditions need it), and the
// prefixes are the ones the code writes.
func checkBucketIAM(m *tfModule) []string {
	var problems []string
	bucket := m.resources["google_storage_bucket.baton"]
	if bucket == nil {
		return []string{"resource google_storage_bucket.baton is missing"}
	}
	if a := bucket.Body.Attributes["uniform_bucket_level_access"]; a == nil || m.text(a.Expr) != "true" {
		problems = append(problems, "google_storage_bucket.baton: uniform_bucket_level_access must be true: Cloud Storage evaluates IAM conditions only on such buckets, and ACLs would bypass them")
	}
	ctx := evalContext(m)
	for local, want := range map[string]string{"lease_prefix": functions.LeasePrefix, "output_prefix": workerOutputPrefix(), "source_prefix": "source/"} {
		l := m.locals[local]
		got := ""
		if l != nil {
			got, _ = evalString(ctx, l.Expr)
		}
		if got != want {
			problems = append(problems, fmt.Sprintf("local.%s = %q, want %q (what the code uses)", local, got, want))
		}
	}
	if o := m.resources["google_storage_bucket_object.source"]; o == nil || !strings.HasPrefix(m.text(attrOrEmpty(o, "name")), `"${local.source_prefix}`) {
		problems = append(problems, "google_storage_bucket_object.source: name must start with ${local.source_prefix}, the only prefix the build may read")
	}
	n := 0
	for _, name := range sortedKeys(m.resources) {
		b := m.resources[name]
		typ := strings.SplitN(name, ".", 2)[0]
		if !strings.HasPrefix(typ, "google_storage_bucket_iam_") {
			continue
		}
		n++
		if typ != "google_storage_bucket_iam_member" {
			problems = append(problems, fmt.Sprintf("%s: grant bucket roles with google_storage_bucket_iam_member (an IAM condition each); %s replaces other grants", name, typ))
			continue
		}
		if bk := m.text(attrOrEmpty(b, "bucket")); bk != "google_storage_bucket.baton.name" {
			problems = append(problems, fmt.Sprintf("%s: grants on %s; baton grants only on its own bucket", name, bk))
			continue
		}
		member := m.text(attrOrEmpty(b, "member"))
		want, ok := bucketPrefix[member]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: %s gets access to baton's bucket, and no code of it uses the bucket", name, member))
			continue
		}
		wantRole := want.role
		wantExpr := `"resource.name.startsWith(\"projects/_/buckets/${google_storage_bucket.baton.name}/objects/${local.` + want.local + `}\")"`
		if g, ok := bucketGrantByResource[name]; ok {
			wantRole, wantExpr = g.role, g.expr
			fe := b.Body.Attributes["for_each"]
			if fe == nil || m.text(fe.Expr) != g.forEach {
				problems = append(problems, fmt.Sprintf("%s: for_each must be %s", name, g.forEach))
			} else if got, err := functionSet(m, fe.Expr); err != nil || !slices.Equal(got, g.functions) {
				problems = append(problems, fmt.Sprintf("%s: %s = %v (%v), want exactly %v: no other function reads that", name, g.forEach, got, err, g.functions))
			}
		}
		if role, _ := literalString(attrOrEmpty(b, "role")); role != wantRole {
			problems = append(problems, fmt.Sprintf("%s: %s gets %q, want %q", name, member, role, wantRole))
		}
		cond := block(b.Body, "condition")
		if cond == nil {
			problems = append(problems, fmt.Sprintf("%s: %s needs an IAM condition limiting it to %s (resource.name.startsWith(\"projects/_/buckets/BUCKET/objects/%s\")): without one it reaches every object, the function source included", name, member, want.value, want.value))
		} else if got := m.text(attrOrEmpty(cond, "expression")); got != wantExpr {
			problems = append(problems, fmt.Sprintf("%s: the condition of %s must be %s (its prefix %s), got %s", name, member, wantExpr, want.value, got))
		}
	}
	if n == 0 {
		problems = append(problems, "no grant on baton's bucket: the leases and the job output could not be written")
	}
	sort.Strings(problems)
	return problems
}

// workerOutputPrefix is the prefix of the objects the GPU worker writes,
// read from its source (the path is built with Sprintf there).
func workerOutputPrefix() string {
	b, err := os.ReadFile("../shared/gpu/worker/worker.go")
	if err != nil {
		return "(cannot read shared/gpu/worker/worker.go: " + err.Error() + ")"
	}
	mm := regexp.MustCompile(`prefix := fmt\.Sprintf\("([a-z]+/)%s/%d/"`).FindSubmatch(b)
	if mm == nil {
		return "(shared/gpu/worker/worker.go builds no output prefix this test can read)"
	}
	return string(mm[1])
}

// invokerGrants lists local.function_invokers as (key, fn, member text)
// triples, for expressions it can read.
func invokerGrants(m *tfModule) [][3]string {
	var out [][3]string
	fi := m.locals["function_invokers"]
	if fi == nil {
		return nil
	}
	call, _ := fi.Expr.(*hclsyntax.FunctionCallExpr)
	if call == nil {
		return nil
	}
	add := func(key string, item hclsyntax.Expression) {
		f, ok := objectKeys(item)
		if !ok {
			return
		}
		fn, _ := literalString(f["fn"])
		mem := ""
		if e, ok := f["member"]; ok {
			mem = m.text(e)
		}
		out = append(out, [3]string{key, fn, mem})
	}
	var visit func(hclsyntax.Expression)
	visit = func(e hclsyntax.Expression) {
		switch a := e.(type) {
		case *hclsyntax.ObjectConsExpr:
			for _, it := range a.Items {
				add(m.text(it.KeyExpr), it.ValueExpr)
			}
		case *hclsyntax.ForExpr:
			add(m.text(a), a.ValExpr)
		case *hclsyntax.ConditionalExpr:
			visit(a.TrueResult)
			visit(a.FalseResult)
		}
	}
	for _, a := range call.Args {
		visit(a)
	}
	return out
}

// checkGPUIAM: the worker invokes GPUCallback and no other function,
// nobody else invokes GPUCallback, the worker calls GPUCallback back, and
// GPUCallback is told the pool (a completion dispatches the next job).
func checkGPUIAM(m *tfModule) []string {
	var problems []string
	const worker = "google_service_account.gpu_worker.member"
	callbackByWorker := 0
	for _, g := range invokerGrants(m) {
		key, fn, mem := g[0], g[1], g[2]
		switch {
		case mem == worker && fn == config.FnGPUCallback:
			callbackByWorker++
		case mem == worker:
			problems = append(problems, fmt.Sprintf("function_invokers %s: the GPU worker may invoke only %s, not %s: code in one job would reach the operators' routes", key, config.FnGPUCallback, fn))
		case fn == config.FnGPUCallback:
			problems = append(problems, fmt.Sprintf("function_invokers %s: only the GPU worker may invoke %s, not %s", key, config.FnGPUCallback, mem))
		}
	}
	if callbackByWorker != 1 {
		problems = append(problems, fmt.Sprintf("function_invokers: the GPU worker must invoke %s exactly once, found %d (its heartbeats and completions would be refused)", config.FnGPUCallback, callbackByWorker))
	}
	// Grants outside local.function_invokers must not give the worker
	// invoker on a function either.
	for _, name := range sortedKeys(m.resources) {
		b := m.resources[name]
		if role, _ := literalString(attrOrEmpty(b, "role")); role == "roles/run.invoker" && m.text(attrOrEmpty(b, "member")) == worker {
			problems = append(problems, fmt.Sprintf("%s grants the GPU worker roles/run.invoker outside local.function_invokers", name))
		}
	}
	if wl := m.locals["worker_env"]; wl != nil {
		keys, _ := objectKeys(wl.Expr)
		if e, ok := keys[config.EnvControlURL]; !ok || m.text(e) != `google_cloudfunctions2_function.fn["GPUCallback"].service_config[0].uri` {
			problems = append(problems, fmt.Sprintf("gpu-worker: %s must be google_cloudfunctions2_function.fn[\"GPUCallback\"].service_config[0].uri: the operators' GPU function refuses callbacks", config.EnvControlURL))
		}
	}
	sort.Strings(problems)
	return problems
}

// checkBuildAccount: the functions are built as baton-build, into baton's
// own image repository, and baton-build holds exactly the roles a Cloud
// Functions build needs, each on the narrowest resource.
func checkBuildAccount(m *tfModule) []string {
	var problems []string
	if fn := m.resources["google_cloudfunctions2_function.fn"]; fn != nil {
		if a := attr(fn, "build_config", "service_account"); a == nil || m.text(a.Expr) != "google_service_account.build.id" {
			problems = append(problems, "functions: build_config.service_account must be google_service_account.build.id")
		}
		if a := attr(fn, "build_config", "docker_repository"); a == nil || m.text(a.Expr) != "google_artifact_registry_repository.functions.id" {
			problems = append(problems, "functions: build_config.docker_repository must be google_artifact_registry_repository.functions.id: the build account may write there only, and the cleanup policy applies there")
		}
	}
	// What baton-build holds: type -> role.
	want := map[string]string{
		"google_project_iam_member":                      "", // buildLogsRole and buildSourcesRole, checked by serviceAccounts
		"google_artifact_registry_repository_iam_member": "roles/artifactregistry.writer",
		"google_storage_bucket_iam_member":               "roles/storage.objectViewer",
	}
	got := map[string]bool{}
	for _, name := range sortedKeys(m.resources) {
		b := m.resources[name]
		if m.text(attrOrEmpty(b, "member")) != "google_service_account.build.member" {
			continue
		}
		typ := strings.SplitN(name, ".", 2)[0]
		role, _ := literalString(attrOrEmpty(b, "role"))
		w, ok := want[typ]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s grants the build account %q with %s; it needs logs, its image repository and its source only", name, role, typ))
		case typ == "google_project_iam_member":
			if role != buildLogsRole && role != buildSourcesRole {
				problems = append(problems, fmt.Sprintf("%s grants the build account %q on the project; only %s and %s (on the source bucket) are needed", name, role, buildLogsRole, buildSourcesRole))
			}
			got[role] = true
		case role != w:
			problems = append(problems, fmt.Sprintf("%s grants the build account %q; want %q", name, role, w))
		case typ == "google_artifact_registry_repository_iam_member" && m.text(attrOrEmpty(b, "repository")) != "google_artifact_registry_repository.functions.name":
			problems = append(problems, fmt.Sprintf("%s: the build account may write to google_artifact_registry_repository.functions only, not %s", name, m.text(attrOrEmpty(b, "repository"))))
		default:
			got[role] = true
		}
	}
	for _, r := range []string{buildLogsRole, buildSourcesRole, "roles/artifactregistry.writer"} {
		if !got[r] {
			problems = append(problems, fmt.Sprintf("the build account lacks %s: function builds would fail", r))
		}
	}
	sort.Strings(problems)
	return problems
}

// checkArtifacts: the image repository is a Docker repository whose
// cleanup policy really runs, keeps a validated number of recent versions
// and deletes what is older than a validated age.
func checkArtifacts(m *tfModule) []string {
	r := m.resources["google_artifact_registry_repository.functions"]
	if r == nil {
		return []string{"resource google_artifact_registry_repository.functions is missing: the function images would go to gcf-artifacts, kept forever"}
	}
	var problems []string
	if f, _ := literalString(attrOrEmpty(r, "format")); f != "DOCKER" {
		problems = append(problems, fmt.Sprintf("image repository: format must be \"DOCKER\", got %q", f))
	}
	if a := r.Body.Attributes["cleanup_policy_dry_run"]; a == nil || m.text(a.Expr) != "false" {
		problems = append(problems, "image repository: cleanup_policy_dry_run must be false, or the policy deletes nothing")
	}
	validated := func(e hclsyntax.Expression, what string) {
		v := varRef(m, e)
		if v == "" {
			mm := regexp.MustCompile(`^"\$\{var\.([a-z0-9_]+)\*86400\}s"$`).FindStringSubmatch(m.text(e))
			if mm != nil {
				v = mm[1]
			}
		}
		switch {
		case v == "":
			problems = append(problems, fmt.Sprintf("image repository: %s must come from a variable, got %s", what, m.text(e)))
		case m.variables[v] == nil || block(m.variables[v].Body, "validation") == nil:
			problems = append(problems, fmt.Sprintf("image repository: %s uses var.%s, which must be declared with a validation block", what, v))
		}
	}
	keep, del := 0, 0
	for _, p := range r.Body.Blocks {
		if p.Type != "cleanup_policies" {
			continue
		}
		action, _ := literalString(attrOrEmpty(p, "action"))
		switch action {
		case "KEEP":
			if a := attr(p, "most_recent_versions", "keep_count"); a != nil {
				keep++
				validated(a.Expr, "most_recent_versions.keep_count")
			}
		case "DELETE":
			if a := attr(p, "condition", "older_than"); a != nil {
				del++
				validated(a.Expr, "condition.older_than")
			}
		}
	}
	if keep != 1 {
		problems = append(problems, fmt.Sprintf("image repository: want one KEEP policy with most_recent_versions.keep_count (found %d): a rollback needs the recent images", keep))
	}
	if del != 1 {
		problems = append(problems, fmt.Sprintf("image repository: want one DELETE policy with condition.older_than (found %d): old images would be kept forever", del))
	}
	sort.Strings(problems)
	return problems
}

// depGraph is what each resource ("type.name") is ordered after: its
// depends_on and every resource its body refers to, directly or through
// locals (data sources are read at plan and order nothing).
type depGraph map[string]map[string]bool

func buildDepGraph(m *tfModule) depGraph {
	localRefs := map[string]map[string]bool{}
	var refsOf func(ts []hcl.Traversal, seen map[string]bool) map[string]bool
	refsOf = func(ts []hcl.Traversal, seen map[string]bool) map[string]bool {
		out := map[string]bool{}
		for _, t := range ts {
			root := t.RootName()
			if len(t) < 2 {
				continue
			}
			next, ok := t[1].(hcl.TraverseAttr)
			if !ok {
				continue
			}
			switch {
			case root == "local":
				if seen[next.Name] {
					continue
				}
				r, done := localRefs[next.Name]
				if !done {
					l := m.locals[next.Name]
					if l == nil {
						continue
					}
					seen[next.Name] = true
					r = refsOf(l.Expr.Variables(), seen)
					localRefs[next.Name] = r
				}
				for k := range r {
					out[k] = true
				}
			case m.resources[root+"."+next.Name] != nil:
				out[root+"."+next.Name] = true
			}
		}
		return out
	}
	var bodyTraversals func(b *hclsyntax.Body) []hcl.Traversal
	bodyTraversals = func(b *hclsyntax.Body) []hcl.Traversal {
		var ts []hcl.Traversal
		// depends_on is a list of bare references: its traversals name
		// the resources just as a reference in any other attribute does.
		for _, a := range b.Attributes {
			ts = append(ts, a.Expr.Variables()...)
		}
		for _, nb := range b.Blocks {
			ts = append(ts, bodyTraversals(nb.Body)...)
		}
		return ts
	}
	g := depGraph{}
	for name, b := range m.resources {
		g[name] = refsOf(bodyTraversals(b.Body), map[string]bool{})
		delete(g[name], name)
	}
	return g
}

// after reports whether a is ordered after b.
func (g depGraph) after(a, b string) bool {
	seen := map[string]bool{}
	var walk func(string) bool
	walk = func(n string) bool {
		if seen[n] {
			return false
		}
		seen[n] = true
		for d := range g[n] {
			if d == b || walk(d) {
				return true
			}
		}
		return false
	}
	return walk(a)
}

// waitSleeps: a terraform_data wait sleeps var.propagation_wait_seconds,
// and exists only when that is positive (at 0 nothing runs, so a runner
// needs no sleep).
func waitSleeps(m *tfModule, name string) bool {
	b := m.resources[name]
	if b == nil || m.text(attrOrEmpty(b, "count")) != "var.propagation_wait_seconds>0?1:0" {
		return false
	}
	for _, p := range b.Body.Blocks {
		if p.Type == "provisioner" && len(p.Labels) == 1 && p.Labels[0] == "local-exec" && m.text(attrOrEmpty(p, "command")) == `"sleep${var.propagation_wait_seconds}"` {
			return true
		}
	}
	return false
}

// deployableAccounts are the accounts whose grants a deployable needs, by
// the resource that deploys it.
var deployableAccounts = map[string][]string{
	"google_cloudfunctions2_function.fn":          {"google_service_account.build", "google_service_account.function"},
	"google_cloud_run_v2_service.gpu_worker":      {"google_service_account.gpu_worker"},
	"google_cloud_run_v2_service.gpu_worker_type": {"google_service_account.gpu_worker"},
	"google_cloud_run_v2_service.daemon":          {"google_service_account.daemon"},
}

// checkOrdering: on a fresh project nothing calls an API before it is
// enabled and propagated, and nothing is built or started before the
// grants it needs exist:
//   - every google_* resource but the APIs themselves is ordered after
//     terraform_data.apis_ready, which follows google_project_service.api
//     and sleeps;
//   - every grant to a deployable's accounts that does not need the
//     deployable itself is ordered before it;
//   - the build account's grants reach the functions through
//     terraform_data.iam_ready, which sleeps, and so do the daemon's;
//   - the worker's invoker on GPUCallback reaches the worker through
//     terraform_data.callback_invoker_ready, replaced with that grant;
//   - each wait exists only when var.propagation_wait_seconds > 0;
//   - the scheduler job is created after its invoker grant on Tick.
func checkOrdering(m *tfModule) []string {
	var problems []string
	g := buildDepGraph(m)
	const apis, ready, iamReady = "google_project_service.api", "terraform_data.apis_ready", "terraform_data.iam_ready"
	const cbReady, cbGrant, worker = "terraform_data.callback_invoker_ready", `google_cloud_run_v2_service_iam_member.function_invoker["GPUCallback/worker"].id`, "google_cloud_run_v2_service.gpu_worker"
	if m.resources[apis] == nil {
		return []string{"resource google_project_service.api is missing"}
	}
	for _, w := range []string{ready, iamReady, cbReady} {
		if !waitSleeps(m, w) {
			problems = append(problems, fmt.Sprintf("%s must exist, with count = var.propagation_wait_seconds > 0 ? 1 : 0, and sleep var.propagation_wait_seconds (provisioner \"local-exec\" { command = \"sleep ${var.propagation_wait_seconds}\" })", w))
		}
	}
	// The worker's invoker on GPUCallback needs the function, so it cannot
	// be in iam_ready (which the functions follow): its own wait, replaced
	// with the grant, comes between it and the worker.
	if b := m.resources[cbReady]; b == nil || m.text(attrOrEmpty(b, "triggers_replace")) != "["+cbGrant+"]" {
		problems = append(problems, fmt.Sprintf("%s must be triggered by the worker's invoker grant on GPUCallback: triggers_replace = [%s]", cbReady, cbGrant))
	}
	for _, w := range []string{worker, "google_cloud_run_v2_service.gpu_worker_type"} {
		if m.resources[w] != nil && !g.after(w, cbReady) {
			problems = append(problems, fmt.Sprintf("%s must be ordered after %s: its first heartbeat would be refused while its invoker grant on GPUCallback propagates", w, cbReady))
		}
	}
	if !g.after(ready, apis) {
		problems = append(problems, ready+" must be ordered after "+apis+" (depends_on)")
	}
	for _, name := range sortedKeys(m.resources) {
		if !strings.HasPrefix(name, "google_") || name == apis {
			continue
		}
		if !g.after(name, ready) {
			problems = append(problems, fmt.Sprintf("%s is not ordered after %s: on a fresh project it may call its API before the API is enabled and propagated (add depends_on = [%s])", name, ready, ready))
		}
	}
	grantsTo := func(accounts []string) []string {
		var out []string
		for _, name := range sortedKeys(m.resources) {
			if !regexp.MustCompile(`_iam_member\.`).MatchString(name) {
				continue
			}
			b := m.resources[name]
			mem := attrOrEmpty(b, "member")
			refs := map[string]bool{}
			ts := mem.Variables()
			if strings.HasPrefix(m.text(mem), "each.value") {
				ts = append(ts, attrOrEmpty(b, "for_each").Variables()...)
			}
			for _, t := range ts {
				if len(t) >= 2 {
					if a, ok := t[1].(hcl.TraverseAttr); ok {
						refs[t.RootName()+"."+a.Name] = true
					}
					if t.RootName() == "local" {
						if l := m.locals[t[1].(hcl.TraverseAttr).Name]; l != nil {
							for _, lt := range l.Expr.Variables() {
								if a, ok := lt[1].(hcl.TraverseAttr); ok && len(lt) >= 2 {
									refs[lt.RootName()+"."+a.Name] = true
								}
							}
						}
					}
				}
			}
			for _, acc := range accounts {
				if refs[acc] {
					out = append(out, name)
					break
				}
			}
		}
		return out
	}
	for _, d := range sortedKeys(deployableAccounts) {
		if m.resources[d] == nil {
			continue
		}
		for _, gr := range grantsTo(deployableAccounts[d]) {
			if g.after(gr, d) {
				continue // it needs d itself (invoker on d, or on a service that needs d)
			}
			if !g.after(d, gr) {
				problems = append(problems, fmt.Sprintf("%s is not ordered after %s, a grant its account needs: on a fresh project it may start (or build) before the grant exists", d, gr))
			}
		}
	}
	for _, d := range []string{"google_cloudfunctions2_function.fn", "google_cloud_run_v2_service.daemon"} {
		if m.resources[d] != nil && !g.after(d, iamReady) {
			problems = append(problems, fmt.Sprintf("%s must be ordered after %s: the grants it needs at build or start take minutes to propagate", d, iamReady))
		}
	}
	for _, gr := range append(grantsTo([]string{"google_service_account.build"}), grantsTo([]string{"google_service_account.daemon"})...) {
		// A grant that needs what waits for iam_ready (the daemon's invoker
		// on the worker, which follows the functions) cannot come first.
		if !g.after(iamReady, gr) && !g.after(gr, iamReady) {
			problems = append(problems, fmt.Sprintf("%s must be ordered after %s, so that the build (or the daemon) waits for it to propagate", iamReady, gr))
		}
	}
	for _, name := range sortedKeys(m.resources) {
		if strings.HasPrefix(name, "google_cloud_scheduler_job.") && !g.after(name, "google_cloud_run_v2_service_iam_member.function_invoker") {
			problems = append(problems, fmt.Sprintf("%s must be ordered after google_cloud_run_v2_service_iam_member.function_invoker (its invoker grant on Tick)", name))
		}
	}
	sort.Strings(problems)
	return slices.Compact(problems)
}

// TestTerraformIAMRulesFail: each rule above reports the configuration
// broken in the way it guards against.
func TestTerraformIAMRulesFail(t *testing.T) {
	checkMutations(t, []tfMutation{
		// bucketIAM
		{"worker grant without condition", "bucketIAM", "iam.tf",
			"  member = google_service_account.gpu_worker.member\n\n  condition {\n    title      = \"job output only\"\n    expression = \"resource.name.startsWith(\\\"projects/_/buckets/${google_storage_bucket.baton.name}/objects/${local.output_prefix}\\\")\"\n  }\n",
			"  member = google_service_account.gpu_worker.member\n",
			"google_storage_bucket_iam_member.worker_bucket: google_service_account.gpu_worker.member needs an IAM condition limiting it to outputs/"},
		{"worker on the leases", "bucketIAM", "iam.tf",
			"title      = \"job output only\"\n    expression = \"resource.name.startsWith(\\\"projects/_/buckets/${google_storage_bucket.baton.name}/objects/${local.output_prefix}",
			"title      = \"job output only\"\n    expression = \"resource.name.startsWith(\\\"projects/_/buckets/${google_storage_bucket.baton.name}/objects/${local.lease_prefix}",
			"the condition of google_service_account.gpu_worker.member must be"},
		{"GPU function writes the output", "bucketIAM", "iam.tf",
			"  for_each = local.output_readers\n\n  bucket = google_storage_bucket.baton.name\n  role   = \"roles/storage.objectViewer\"",
			"  for_each = local.output_readers\n\n  bucket = google_storage_bucket.baton.name\n  role   = \"roles/storage.objectUser\"",
			`google_storage_bucket_iam_member.output_reader: google_service_account.function[each.key].member gets "roles/storage.objectUser", want "roles/storage.objectViewer"`},
		{"GPU function reads the leases", "bucketIAM", "iam.tf",
			"title      = \"job output only, read-only\"\n    expression = \"resource.name.startsWith(\\\"projects/_/buckets/${google_storage_bucket.baton.name}/objects/${local.output_prefix}",
			"title      = \"job output only, read-only\"\n    expression = \"resource.name.startsWith(\\\"projects/_/buckets/${google_storage_bucket.baton.name}/objects/${local.lease_prefix}",
			"google_storage_bucket_iam_member.output_reader: the condition of google_service_account.function[each.key].member must be"},
		{"every function reads the output", "bucketIAM", "iam.tf",
			`output_readers = toset(["GPU"])`, `output_readers = toset(["GPU", "Tick"])`,
			"google_storage_bucket_iam_member.output_reader: local.output_readers = [GPU Tick]"},
		{"lease list on any prefix", "bucketIAM", "iam.tf",
			`startsWith(\"${local.lease_prefix}\")"`, `startsWith(\"\")"`,
			"google_storage_bucket_iam_member.lease_list: the condition of google_service_account.function[each.key].member must be"},
		{"every function lists leases", "bucketIAM", "iam.tf",
			"  for_each = local.lease_listers\n", "  for_each = local.functions\n",
			"google_storage_bucket_iam_member.lease_list: for_each must be local.lease_listers"},
		{"functions on the whole bucket", "bucketIAM", "iam.tf",
			"    title      = \"leases only\"\n    expression = \"resource.name.startsWith(\\\"projects/_/buckets/${google_storage_bucket.baton.name}/objects/${local.lease_prefix}\\\")\"",
			"    title      = \"leases only\"\n    expression = \"resource.name.startsWith(\\\"projects/_/buckets/${google_storage_bucket.baton.name}/objects/\\\")\"",
			"google_storage_bucket_iam_member.function_bucket: the condition of google_service_account.function[each.key].member must be"},
		{"daemon without condition", "bucketIAM", "daemon.tf",
			"  # The leases only, as for the functions (iam.tf).\n  condition {", "  # The leases only, as for the functions (iam.tf).\n  dropped {",
			"google_storage_bucket_iam_member.daemon_bucket: google_service_account.daemon[0].member needs an IAM condition"},
		{"lease prefix unlike the code", "bucketIAM", "iam.tf",
			`lease_prefix  = "leases/"`, `lease_prefix  = "lease/"`,
			`local.lease_prefix = "lease/", want "leases/"`},
		{"output prefix matches everything", "bucketIAM", "iam.tf",
			`output_prefix = "outputs/"`, `output_prefix = ""`,
			`local.output_prefix = "", want "outputs/"`},
		{"source outside its prefix", "bucketIAM", "storage.tf",
			`name   = "${local.source_prefix}functions-`, `name   = "functions-`,
			"google_storage_bucket_object.source: name must start with ${local.source_prefix}"},
		{"worker gets admin", "bucketIAM", "iam.tf",
			"  role   = \"roles/storage.objectUser\"\n  member = google_service_account.gpu_worker.member",
			"  role   = \"roles/storage.objectAdmin\"\n  member = google_service_account.gpu_worker.member",
			`gets "roles/storage.objectAdmin", want "roles/storage.objectUser"`},
		{"GPU functions get the bucket", "bucketIAM", "iam.tf",
			"  for_each = local.bucket_functions\n\n  bucket = google_storage_bucket.baton.name\n  role   = \"roles/storage.objectUser\"",
			"  for_each = local.bucket_functions\n\n  bucket = google_storage_bucket.baton.name\n  role   = \"roles/storage.objectUser\"\n}\n\nresource \"google_storage_bucket_iam_member\" \"gpu_bucket\" {\n  bucket = google_storage_bucket.baton.name\n  role   = \"roles/storage.objectUser\"\n  member = google_service_account.scheduler.member\n}\n\nresource \"google_storage_bucket_iam_member\" \"x\" {\n  for_each = local.bucket_functions\n  bucket = google_storage_bucket.baton.name\n  role   = \"roles/storage.objectUser\"",
			"google_storage_bucket_iam_member.gpu_bucket: google_service_account.scheduler.member gets access to baton's bucket"},
		{"bucket without uniform access", "bucketIAM", "storage.tf",
			"uniform_bucket_level_access = true", "uniform_bucket_level_access = false",
			"uniform_bucket_level_access must be true"},
		// gpuIAM
		{"worker invokes the operators' GPU function", "gpuIAM", "iam.tf",
			`{ "GPUCallback/worker" = { fn = "GPUCallback", member = google_service_account.gpu_worker.member } },`,
			`{ "GPUCallback/worker" = { fn = "GPUCallback", member = google_service_account.gpu_worker.member } },
    { "GPU/worker" = { fn = "GPU", member = google_service_account.gpu_worker.member } },`,
			"the GPU worker may invoke only GPUCallback, not GPU"},
		{"worker invokes GPU instead of GPUCallback", "gpuIAM", "iam.tf",
			`"GPUCallback/worker" = { fn = "GPUCallback", member = google_service_account.gpu_worker.member }`,
			`"GPU/worker" = { fn = "GPU", member = google_service_account.gpu_worker.member }`,
			"the GPU worker must invoke GPUCallback exactly once, found 0"},
		{"operators on the callbacks", "gpuIAM", "iam.tf",
			`{ for m in var.operator_members : "GPU/${m}" => { fn = "GPU", member = m } },`,
			`{ for m in var.operator_members : "GPU/${m}" => { fn = "GPUCallback", member = m } },`,
			"only the GPU worker may invoke GPUCallback, not m"},
		{"worker calls back the operators' function", "gpuIAM", "main.tf",
			`BATON_CONTROL_URL    = google_cloudfunctions2_function.fn["GPUCallback"].service_config[0].uri`,
			`BATON_CONTROL_URL    = google_cloudfunctions2_function.fn["GPU"].service_config[0].uri`,
			"gpu-worker: BATON_CONTROL_URL must be"},
		// buildAccount
		{"build into gcf-artifacts", "buildAccount", "functions.tf",
			"    docker_repository = google_artifact_registry_repository.functions.id\n", "",
			"build_config.docker_repository must be google_artifact_registry_repository.functions.id"},
		{"build account writes every repository", "buildAccount", "iam.tf",
			"  repository = google_artifact_registry_repository.functions.name\n  role       = \"roles/artifactregistry.writer\"",
			"  repository = \"gcf-artifacts\"\n  role       = \"roles/artifactregistry.writer\"",
			"the build account may write to google_artifact_registry_repository.functions only"},
		{"build account is repository admin", "buildAccount", "iam.tf",
			`role       = "roles/artifactregistry.writer"`, `role       = "roles/artifactregistry.repoAdmin"`,
			`grants the build account "roles/artifactregistry.repoAdmin"; want "roles/artifactregistry.writer"`},
		{"build account without logs", "buildAccount", "iam.tf",
			"  role    = \"roles/logging.logWriter\"\n  member  = google_service_account.build.member",
			"  role    = \"roles/logging.logWriter\"\n  member  = google_service_account.scheduler.member",
			"the build account lacks roles/logging.logWriter"},
		{"build account acts as the runtime accounts", "buildAccount", "tasks.tf",
			"  member             = google_service_account.function[each.key].member\n}",
			"  member             = google_service_account.build.member\n}",
			"grants the build account \"roles/iam.serviceAccountUser\" with google_service_account_iam_member"},
		// artifacts
		{"cleanup only simulated", "artifacts", "artifacts.tf",
			"cleanup_policy_dry_run = false", "cleanup_policy_dry_run = true",
			"cleanup_policy_dry_run must be false"},
		{"nothing kept", "artifacts", "artifacts.tf",
			`action = "KEEP"`, `action = "DELETE"`,
			"want one KEEP policy"},
		{"nothing deleted", "artifacts", "artifacts.tf",
			`      older_than = "${var.image_max_age_days * 86400}s"` + "\n", "",
			"want one DELETE policy"},
		{"keep count hard-coded", "artifacts", "artifacts.tf",
			"keep_count = var.image_keep_count", "keep_count = 0",
			"most_recent_versions.keep_count must come from a variable"},
		{"no image repository", "artifacts", "artifacts.tf",
			`resource "google_artifact_registry_repository" "functions" {`, `resource "google_artifact_registry_repository" "images" {`,
			"google_artifact_registry_repository.functions is missing"},
		// conditionalGrants
		{"worker output grant destroyed first", "conditionalGrants", "iam.tf",
			"objects/${local.output_prefix}\\\")\"\n  }\n\n  # Adding or changing a condition replaces the grant: create the new one\n  # before removing the old, so the holder never goes without access\n  # (docs/deploy.md, upgrading).\n  lifecycle {\n    create_before_destroy = true\n  }\n}\n\n# Every function told",
			"objects/${local.output_prefix}\\\")\"\n  }\n}\n\n# Every function told",
			"google_storage_bucket_iam_member.worker_bucket has an IAM condition and needs lifecycle { create_before_destroy = true }"},
		{"daemon database grant destroyed first", "conditionalGrants", "daemon.tf",
			"databases/${var.database_name}\\\"\"\n  }\n\n  # Adding or changing a condition replaces the grant: create the new one\n  # before removing the old, so the holder never goes without access\n  # (docs/deploy.md, upgrading).\n  lifecycle {\n    create_before_destroy = true",
			"databases/${var.database_name}\\\"\"\n  }\n\n  lifecycle {\n    create_before_destroy = false",
			"google_project_iam_member.daemon_datastore has an IAM condition and needs lifecycle { create_before_destroy = true }"},
		// ordering
		{"wait that sleeps 0 seconds", "ordering", "iam.tf",
			"  count = var.propagation_wait_seconds > 0 ? 1 : 0 # none at 0: see apis_ready\n\n  triggers_replace = concat(",
			"  triggers_replace = concat(",
			"terraform_data.iam_ready must exist, with count = var.propagation_wait_seconds > 0 ? 1 : 0"},
		{"worker deployed before its callback grant propagates", "ordering", "gpu_worker.tf",
			"    terraform_data.callback_invoker_ready,\n", "",
			"google_cloud_run_v2_service.gpu_worker must be ordered after terraform_data.callback_invoker_ready"},
		{"typed worker deployed before its callback grant propagates", "ordering", "gpu_worker_types.tf",
			"    terraform_data.callback_invoker_ready,\n", "",
			"google_cloud_run_v2_service.gpu_worker_type must be ordered after terraform_data.callback_invoker_ready"},
		{"daemon started before its invoker on the typed workers", "ordering", "daemon.tf",
			"    google_cloud_run_v2_service_iam_member.daemon_worker_type_invoker,\n", "",
			"google_cloud_run_v2_service.daemon is not ordered after google_cloud_run_v2_service_iam_member.daemon_worker_type_invoker"},
		{"callback wait not replaced with the grant", "ordering", "iam.tf",
			`triggers_replace = [google_cloud_run_v2_service_iam_member.function_invoker["GPUCallback/worker"].id]`,
			`triggers_replace = [google_cloud_run_v2_service_iam_member.function_invoker["Tick/scheduler"].id]`,
			"terraform_data.callback_invoker_ready must be triggered by the worker's invoker grant on GPUCallback"},
		{"bucket before its API", "ordering", "storage.tf",
			"  depends_on = [terraform_data.apis_ready]\n}\n\n# The function source", "}\n\n# The function source",
			"google_storage_bucket.baton is not ordered after terraform_data.apis_ready"},
		{"image repository before its API", "ordering", "artifacts.tf",
			"  depends_on = [terraform_data.apis_ready]\n", "",
			"google_artifact_registry_repository.functions is not ordered after terraform_data.apis_ready"},
		{"API wait before the APIs", "ordering", "apis.tf",
			"  depends_on = [google_project_service.api]\n", "",
			"terraform_data.apis_ready must be ordered after google_project_service.api"},
		{"API wait that does not wait", "ordering", "apis.tf",
			"  provisioner \"local-exec\" {\n    command = \"sleep ${var.propagation_wait_seconds}\"\n  }\n\n  depends_on = [google_project_service.api]",
			"  depends_on = [google_project_service.api]",
			"terraform_data.apis_ready must exist, with count = var.propagation_wait_seconds > 0 ? 1 : 0, and sleep var.propagation_wait_seconds"},
		{"functions built before the build account's grants", "ordering", "functions.tf",
			"    terraform_data.iam_ready,\n  ]", "  ]",
			"google_cloudfunctions2_function.fn is not ordered after google_artifact_registry_repository_iam_member.build_writer"},
		{"a build grant the wait does not wait for", "ordering", "iam.tf",
			"      google_artifact_registry_repository_iam_member.build_writer.id,\n", "",
			"terraform_data.iam_ready must be ordered after google_artifact_registry_repository_iam_member.build_writer"},
		{"daemon started before its grants", "ordering", "daemon.tf",
			"    terraform_data.apis_ready,\n    terraform_data.iam_ready,\n    google_project_iam_member.daemon_datastore,\n    google_storage_bucket_iam_member.daemon_bucket,\n    google_cloud_run_v2_service_iam_member.daemon_worker_invoker,\n    google_cloud_run_v2_service_iam_member.daemon_worker_type_invoker,\n", "    terraform_data.apis_ready,\n",
			"google_cloud_run_v2_service.daemon is not ordered after google_project_iam_member.daemon_datastore"},
		{"daemon started without waiting", "ordering", "daemon.tf",
			"    terraform_data.apis_ready,\n    terraform_data.iam_ready,\n    google_project_iam_member.daemon_datastore,\n    google_storage_bucket_iam_member.daemon_bucket,\n    google_cloud_run_v2_service_iam_member.daemon_worker_invoker,\n    google_cloud_run_v2_service_iam_member.daemon_worker_type_invoker,\n", "    terraform_data.apis_ready,\n",
			"google_cloud_run_v2_service.daemon must be ordered after terraform_data.iam_ready"},
		{"worker deployed before its callback grant", "ordering", "gpu_worker.tf",
			"    google_cloud_run_v2_service_iam_member.function_invoker,\n    terraform_data.callback_invoker_ready,\n", "",
			"google_cloud_run_v2_service.gpu_worker is not ordered after google_cloud_run_v2_service_iam_member.function_invoker"},
		{"scheduler job before its invoker grant", "ordering", "scheduler.tf",
			"  depends_on = [google_cloud_run_v2_service_iam_member.function_invoker]\n", "",
			"google_cloud_scheduler_job.tick must be ordered after google_cloud_run_v2_service_iam_member.function_invoker"},
	})
}
