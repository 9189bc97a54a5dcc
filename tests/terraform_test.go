package tests

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// The checks below read infra/terraform as HCL syntax, without evaluating
// it, and enforce what `terraform validate` cannot: that the deployment
// matches what the Go code reads (shared/config.Vars) and the security rules
// of the deploy design. Each check has a negative case in
// TestTerraformRulesFail that breaks the real configuration in memory and
// expects the check to name the problem.

const tfDir = "../infra/terraform"

// cloudForbidden are declared variables that must never be set in the
// cloud: the emulator host, and the local bearer token (IAM invoker checks
// authenticate callers there).
var cloudForbidden = map[string]string{
	config.EnvStorageEmu: "it points the storage client at an emulator",
	config.EnvRunEmu:     "it points the Run Admin API client at an emulator",
	config.EnvToken:      "in the cloud IAM invoker checks authenticate callers",
}

// deploymentSets are variables with a code default that the deployment must
// still set, because the default only suits local use.
var deploymentSets = []string{config.EnvWorkerCommand}

// buildEnv is what the functions' build environment may hold, with the
// value each must have.
var buildEnv = map[string]string{"GOOGLE_FUNCTION_SOURCE": "functions"}

// projectRoles are the only roles granted on the whole project: Firestore
// access is only grantable there (and is narrowed by a condition), the
// build account writes build logs (grantable only there) and reads the
// Cloud Functions source bucket, which the service creates on the first
// deploy (a condition names it), and a project that enabled Cloud Tasks
// before 19 March 2019 must give its Cloud Tasks service agent the agent
// role (opt-in, and to that agent only). The functions and the daemon
// write their metrics, a role only grantable on the project
// (checkMonitoring: to those accounts only). The Cloud Build builder role,
// which writes to every bucket and repository of the project, is not among
// them.
var projectRoles = []string{"roles/datastore.user", buildLogsRole, buildSourcesRole, tasksAgentRole, metricWriterRole}

const (
	buildLogsRole    = "roles/logging.logWriter"
	buildSourcesRole = "roles/storage.objectViewer"
	// buildSourcesCondition is the only condition the project-level read
	// of objects may carry: the Cloud Functions source bucket of this
	// project and region (text with spaces removed, as m.text gives it).
	buildSourcesCondition = `"resource.name.startsWith(\"projects/_/buckets/gcf-v2-sources-${data.google_project.this.number}-${var.region}/\")"`
)

const tasksAgentRole = "roles/cloudtasks.serviceAgent"

// deployed are the deployables Terraform runs, by config name.
var deployed = []string{config.FnTick, config.FnSchedules, config.FnGPU, config.FnGPUCallback, config.FnRent, config.FnRun, config.SvcWorker}

// tfModule is infra/terraform parsed as HCL syntax.
type tfModule struct {
	src       map[string][]byte
	resources map[string]*hclsyntax.Block // "type.name"
	locals    map[string]*hclsyntax.Attribute
	variables map[string]*hclsyntax.Block
}

func readTerraform(t *testing.T) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(tfDir, "*.tf"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no .tf files in %s (err %v)", tfDir, err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

func parseTerraform(src map[string][]byte) (*tfModule, error) {
	m := &tfModule{src: src, resources: map[string]*hclsyntax.Block{}, locals: map[string]*hclsyntax.Attribute{}, variables: map[string]*hclsyntax.Block{}}
	names := make([]string, 0, len(src))
	for n := range src {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		f, diags := hclsyntax.ParseConfig(src[name], name, hcl.InitialPos)
		if diags.HasErrors() {
			return nil, fmt.Errorf("parse %s: %s", name, diags.Error())
		}
		for _, b := range f.Body.(*hclsyntax.Body).Blocks {
			switch b.Type {
			case "resource":
				m.resources[b.Labels[0]+"."+b.Labels[1]] = b
			case "variable":
				m.variables[b.Labels[0]] = b
			case "locals":
				for n, a := range b.Body.Attributes {
					m.locals[n] = a
				}
			}
		}
	}
	return m, nil
}

// text is an expression's source, with all white space removed, for
// comparing references such as google_service_account.function[each.key].email.
func (m *tfModule) text(e hclsyntax.Expression) string {
	r := e.Range()
	b := m.src[r.Filename][r.Start.Byte:r.End.Byte]
	return strings.Join(strings.Fields(string(b)), "")
}

// literal evaluates an expression that needs no variables.
func literal(e hclsyntax.Expression) (cty.Value, bool) {
	v, diags := e.Value(nil)
	if diags.HasErrors() || !v.IsWhollyKnown() {
		return cty.NilVal, false
	}
	return v, true
}

func literalString(e hclsyntax.Expression) (string, bool) {
	v, ok := literal(e)
	if !ok || v.IsNull() || v.Type() != cty.String {
		return "", false
	}
	return v.AsString(), true
}

// attr finds an attribute by a path of nested blocks ("template",
// "containers", "resources", "cpu_idle"); the first block of each type.
func attr(b *hclsyntax.Block, path ...string) *hclsyntax.Attribute {
	body := b.Body
	for _, p := range path[:len(path)-1] {
		nb := block(body, p)
		if nb == nil {
			return nil
		}
		body = nb.Body
	}
	return body.Attributes[path[len(path)-1]]
}

// block returns the first nested block of a type, looking through
// `dynamic "type"` blocks' content.
func block(body *hclsyntax.Body, typ string) *hclsyntax.Block {
	for _, b := range body.Blocks {
		if b.Type == typ {
			return b
		}
		if b.Type == "dynamic" && len(b.Labels) == 1 && b.Labels[0] == typ {
			if c := block(b.Body, "content"); c != nil {
				return c
			}
		}
	}
	return nil
}

func dynamicBlock(body *hclsyntax.Body, typ string) *hclsyntax.Block {
	for _, b := range body.Blocks {
		if b.Type == "dynamic" && len(b.Labels) == 1 && b.Labels[0] == typ {
			return b
		}
	}
	return nil
}

// objectKeys returns the keys of an object constructor ({ A = ..., B = ... })
// and the items by key.
func objectKeys(e hclsyntax.Expression) (map[string]hclsyntax.Expression, bool) {
	o, ok := e.(*hclsyntax.ObjectConsExpr)
	if !ok {
		return nil, false
	}
	out := map[string]hclsyntax.Expression{}
	for _, it := range o.Items {
		k, ok := literal(it.KeyExpr)
		if !ok {
			// A bare identifier key: ObjectConsKeyExpr evaluates it as its
			// name when it is not a traversal in scope.
			if kw := hcl.ExprAsKeyword(it.KeyExpr); kw != "" {
				out[kw] = it.ValueExpr
				continue
			}
			return nil, false
		}
		out[k.AsString()] = it.ValueExpr
	}
	return out, true
}

// deployedEnv returns the runtime environment variable names of each
// deployable, or problems when the configuration is not shaped so that it
// can be read (the env maps live in local.functions and local.worker_env).
func deployedEnv(m *tfModule) (map[string][]string, []string) {
	var problems []string
	env := map[string][]string{}
	fl := m.locals["functions"]
	if fl == nil {
		return nil, []string{"local.functions is missing: the functions' settings and env must live there"}
	}
	fns, ok := objectKeys(fl.Expr)
	if !ok {
		return nil, []string{"local.functions must be an object constructor keyed by entry point"}
	}
	for name, item := range fns {
		fields, ok := objectKeys(item)
		if !ok {
			problems = append(problems, fmt.Sprintf("local.functions.%s must be an object", name))
			continue
		}
		e, ok := fields["env"]
		if !ok {
			problems = append(problems, fmt.Sprintf("local.functions.%s has no env", name))
			continue
		}
		keys, ok := objectKeys(e)
		if !ok {
			problems = append(problems, fmt.Sprintf("local.functions.%s.env must be a literal object of NAME = value", name))
			continue
		}
		env[name] = sortedKeys(keys)
	}
	if wl := m.locals["worker_env"]; wl == nil {
		problems = append(problems, "local.worker_env is missing: the GPU worker's env must live there")
	} else if keys, ok := objectKeys(wl.Expr); !ok {
		problems = append(problems, "local.worker_env must be a literal object of NAME = value")
	} else {
		env[config.SvcWorker] = sortedKeys(keys)
	}

	// The locals must be what the resources deploy.
	fn := m.resources["google_cloudfunctions2_function.fn"]
	if fn == nil {
		problems = append(problems, "resource google_cloudfunctions2_function.fn is missing")
	} else {
		if a := fn.Body.Attributes["for_each"]; a == nil || m.text(a.Expr) != "local.functions" {
			problems = append(problems, "google_cloudfunctions2_function.fn must have for_each = local.functions")
		}
		if a := attr(fn, "service_config", "environment_variables"); a == nil || m.text(a.Expr) != "each.value.env" {
			problems = append(problems, "google_cloudfunctions2_function.fn: service_config.environment_variables must be each.value.env")
		}
		if a := attr(fn, "build_config", "entry_point"); a == nil || m.text(a.Expr) != "each.key" {
			problems = append(problems, "google_cloudfunctions2_function.fn: build_config.entry_point must be each.key (the registered function name)")
		}
	}
	// Every worker service, the default one and one per gpu_worker_types
	// entry, runs with the same environment.
	for _, ws := range workerServices {
		w := m.resources[ws.resource]
		if w == nil {
			problems = append(problems, "resource "+ws.resource+" is missing")
			continue
		}
		var d *hclsyntax.Block
		if t := block(w.Body, "template"); t != nil {
			if c := block(t.Body, "containers"); c != nil {
				d = dynamicBlock(c.Body, "env")
			}
		}
		if d == nil || d.Body.Attributes["for_each"] == nil || m.text(d.Body.Attributes["for_each"].Expr) != "local.worker_env" {
			problems = append(problems, ws.short+": containers must set env with dynamic \"env\" { for_each = local.worker_env }")
		}
	}
	return env, problems
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkEnv: every variable the code reads is set where it is read, and
// nothing unknown, misplaced or cloud-forbidden is set.
func checkEnv(m *tfModule) []string {
	env, problems := deployedEnv(m)
	if env == nil {
		return problems
	}
	declared := map[string]config.Var{}
	for _, v := range config.Vars {
		declared[v.Name] = v
	}
	for _, d := range deployed {
		if _, ok := env[d]; !ok {
			problems = append(problems, fmt.Sprintf("%s is not deployed (no env found for it)", d))
		}
	}
	for d, names := range env {
		if !slices.Contains(deployed, d) {
			problems = append(problems, fmt.Sprintf("%s is deployed but is not a deployable in shared/config (users: %v)", d, deployed))
		}
		for _, n := range names {
			v, ok := declared[n]
			switch {
			case !ok && buildEnv[n] != "":
				problems = append(problems, fmt.Sprintf("%s: %s is a build environment variable; set it in build_config, not the runtime env", d, n))
			case !ok:
				problems = append(problems, fmt.Sprintf("%s: %s is set but unknown: it is not declared in shared/config.Vars", d, n))
			case cloudForbidden[n] != "":
				problems = append(problems, fmt.Sprintf("%s: %s must not be set in the cloud: %s", d, n, cloudForbidden[n]))
			case len(v.Users) > 0 && !slices.Contains(v.Users, d):
				problems = append(problems, fmt.Sprintf("%s: %s is set on %s, which does not read it (config.Vars users: %v)", d, n, d, v.Users))
			}
		}
	}
	for _, v := range config.Vars {
		if cloudForbidden[v.Name] != "" {
			continue
		}
		if v.Default != "" && !slices.Contains(deploymentSets, v.Name) {
			continue
		}
		for _, u := range v.Users {
			names, ok := env[u]
			if !ok {
				continue // the CLI, or a deployable reported missing above
			}
			if !slices.Contains(names, v.Name) {
				problems = append(problems, fmt.Sprintf("%s: %s is read by %s (config.Vars) but not set", u, v.Name, u))
			}
		}
	}
	// The build environment: GOOGLE_FUNCTION_SOURCE points at functions/.
	if fn := m.resources["google_cloudfunctions2_function.fn"]; fn != nil {
		a := attr(fn, "build_config", "environment_variables")
		var keys map[string]hclsyntax.Expression
		if a != nil {
			keys, _ = objectKeys(a.Expr)
		}
		for n, want := range buildEnv {
			got, ok := "", false
			if e, found := keys[n]; found {
				got, ok = literalString(e)
			}
			if !ok || got != want {
				problems = append(problems, fmt.Sprintf("functions: build_config.environment_variables must set %s = %q (got %q)", n, want, got))
			}
		}
		for n := range keys {
			if _, ok := buildEnv[n]; !ok {
				problems = append(problems, fmt.Sprintf("functions: build env %s is unknown", n))
			}
		}
	}
	sort.Strings(problems)
	return problems
}

// checkServiceAccounts: every function and service runs as a service
// account of its own, created here.
func checkServiceAccounts(m *tfModule) []string {
	var problems []string
	uses := map[string][]string{} // service account reference -> users
	ref := regexp.MustCompile(`^google_service_account\.([a-z0-9_]+)(\[each\.key\]|\[0\])?\.(email|id|member)$`)
	use := func(who string, a *hclsyntax.Attribute) {
		if a == nil {
			problems = append(problems, fmt.Sprintf("%s has no dedicated service account (it would run as the default compute account)", who))
			return
		}
		mm := ref.FindStringSubmatch(m.text(a.Expr))
		if mm == nil {
			problems = append(problems, fmt.Sprintf("%s must run as a google_service_account created here, not %s", who, m.text(a.Expr)))
			return
		}
		// [0] is a count-gated account (the daemon's): still one account.
		key := mm[1]
		if mm[2] == "[each.key]" {
			key += mm[2]
		}
		if !slices.Contains(uses[key], who) {
			uses[key] = append(uses[key], who)
		}
	}
	if fn := m.resources["google_cloudfunctions2_function.fn"]; fn != nil {
		a := attr(fn, "service_config", "service_account_email")
		use("functions (runtime)", a)
		if a != nil && !strings.HasSuffix(m.text(a.Expr), "[each.key].email") {
			problems = append(problems, "functions: service_config.service_account_email must be per function (google_service_account.X[each.key].email)")
		}
		use("functions (build)", attr(fn, "build_config", "service_account"))
	}
	// The worker services are one deployable (one worker, several GPU
	// types): one account, the one its grants (outputs/, GPUCallback) go to.
	var workerAccount string
	for i, ws := range workerServices {
		w := m.resources[ws.resource]
		if w == nil {
			continue
		}
		a := attr(w, "template", "service_account")
		use(config.SvcWorker, a)
		if a == nil {
			continue
		}
		if i == 0 {
			workerAccount = m.text(a.Expr)
		} else if m.text(a.Expr) != workerAccount {
			problems = append(problems, fmt.Sprintf("%s runs as %s, not as the default worker service's %s, which the worker's grants go to", ws.short, m.text(a.Expr), workerAccount))
		}
	}
	if d := m.resources["google_cloud_run_v2_service.daemon"]; d != nil {
		use("daemon", attr(d, "template", "service_account"))
	}
	for name, b := range m.resources {
		if strings.HasPrefix(name, "google_cloud_scheduler_job.") {
			use(name, attr(b, "http_target", "oidc_token", "service_account_email"))
		}
	}
	for sa, who := range uses {
		if len(who) > 1 {
			sort.Strings(who)
			problems = append(problems, fmt.Sprintf("google_service_account.%s is shared by %s: each deployable needs its own", sa, strings.Join(who, " and ")))
		}
		if strings.HasSuffix(sa, "[each.key]") {
			base := strings.TrimSuffix(sa, "[each.key]")
			b := m.resources["google_service_account."+base]
			if b == nil || b.Body.Attributes["for_each"] == nil || m.text(b.Body.Attributes["for_each"].Expr) != "local.functions" {
				problems = append(problems, fmt.Sprintf("google_service_account.%s must have for_each = local.functions (one per function)", base))
			}
		} else if m.resources["google_service_account."+sa] == nil {
			problems = append(problems, fmt.Sprintf("google_service_account.%s is used but not declared", sa))
		}
	}
	// Least privilege: nothing else is granted on the whole project.
	for name, b := range m.resources {
		if !strings.HasPrefix(name, "google_project_iam_") {
			continue
		}
		role, _ := literalString(attrOrEmpty(b, "role"))
		if !slices.Contains(projectRoles, role) {
			problems = append(problems, fmt.Sprintf("%s grants %q on the whole project; grant it on the bucket or the exact service", name, role))
		}
		if role == "roles/datastore.user" && block(b.Body, "condition") == nil {
			problems = append(problems, fmt.Sprintf("%s: roles/datastore.user needs a condition naming baton's database", name))
		}
		if role == buildLogsRole || role == buildSourcesRole {
			if mem := m.text(attrOrEmpty(b, "member")); mem != "google_service_account.build.member" {
				problems = append(problems, fmt.Sprintf("%s: %s on the project is for the build account only, not %s", name, role, mem))
			}
		}
		if role == buildSourcesRole {
			var cond string
			if c := block(b.Body, "condition"); c != nil {
				cond = m.text(attrOrEmpty(c, "expression"))
			}
			if cond != buildSourcesCondition {
				problems = append(problems, fmt.Sprintf("%s: %s on the project must carry the condition %s (the Cloud Functions source bucket only), got %q: without it the build reads every bucket of the project", name, role, buildSourcesCondition, cond))
			}
		}
		if role == tasksAgentRole {
			if !strings.Contains(m.text(attrOrEmpty(b, "member")), "@gcp-sa-cloudtasks.iam.gserviceaccount.com") {
				problems = append(problems, fmt.Sprintf("%s: %s may only go to the Cloud Tasks service agent (service-PROJECT_NUMBER@gcp-sa-cloudtasks.iam.gserviceaccount.com)", name, tasksAgentRole))
			}
			if c := b.Body.Attributes["count"]; c == nil || !strings.Contains(m.text(c.Expr), "var.") {
				problems = append(problems, fmt.Sprintf("%s: %s must be opt-in (count on a variable): on a project that has it from Google, a destroy would remove Google's own binding", name, tasksAgentRole))
			}
		}
	}
	sort.Strings(problems)
	return problems
}

func attrOrEmpty(b *hclsyntax.Block, name string) hclsyntax.Expression {
	if a := b.Body.Attributes[name]; a != nil {
		return a.Expr
	}
	return &hclsyntax.LiteralValueExpr{Val: cty.NullVal(cty.String)}
}

// checkPublic: allUsers (or allAuthenticatedUsers) appears only in an IAM
// member grant on the Rent function, and Rent is public.
func checkPublic(m *tfModule) []string {
	var problems []string
	rentPublic := 0
	public := regexp.MustCompile(`"(allUsers|allAuthenticatedUsers)"`)
	for name, src := range m.src {
		f, _ := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
		for _, b := range f.Body.(*hclsyntax.Body).Blocks {
			walkAttrs(b, func(owner *hclsyntax.Block, a *hclsyntax.Attribute) {
				r := a.Expr.Range()
				mm := public.FindSubmatch(src[r.Start.Byte:r.End.Byte])
				if mm == nil {
					return
				}
				where := fmt.Sprintf("%s:%d", name, r.Start.Line)
				isGrant := b.Type == "resource" && regexp.MustCompile(`_iam_(member|binding)$`).MatchString(b.Labels[0]) && (a.Name == "member" || a.Name == "members")
				target := ""
				for _, n := range []string{"name", "service", "cloud_function"} {
					if t := b.Body.Attributes[n]; t != nil {
						target = m.text(t.Expr)
					}
				}
				if isGrant && strings.Contains(target, `fn["Rent"]`) {
					rentPublic++
					// Organisations with domain-restricted sharing refuse
					// allUsers: the grant must be one they can turn off.
					if c := b.Body.Attributes["count"]; c == nil || !strings.Contains(m.text(c.Expr), "var.rent_public?1:0") {
						problems = append(problems, fmt.Sprintf("%s: allUsers on Rent must follow var.rent_public (count = var.rent_public ? 1 : 0)", where))
					}
					return
				}
				problems = append(problems, fmt.Sprintf("%s: %s is granted outside the Rent function (only Rent is public)", where, mm[1]))
			})
		}
	}
	if rentPublic == 0 {
		problems = append(problems, "Rent is not public: grant roles/run.invoker to allUsers on its service")
	}
	sort.Strings(problems)
	return problems
}

// walkAttrs calls fn for every attribute in b and its nested blocks.
func walkAttrs(b *hclsyntax.Block, fn func(*hclsyntax.Block, *hclsyntax.Attribute)) {
	for _, a := range b.Body.Attributes {
		fn(b, a)
	}
	for _, nb := range b.Body.Blocks {
		walkAttrs(nb, fn)
	}
}

// checkScheduler: the Cloud Scheduler job calls Tick with an OIDC token,
// with a retry config and an attempt deadline.
func checkScheduler(m *tfModule) []string {
	var problems []string
	n := 0
	for name, b := range m.resources {
		if !strings.HasPrefix(name, "google_cloud_scheduler_job.") {
			continue
		}
		n++
		ht := block(b.Body, "http_target")
		if ht == nil {
			problems = append(problems, name+": has no http_target")
			continue
		}
		o := block(ht.Body, "oidc_token")
		if o == nil {
			problems = append(problems, name+": http_target must authenticate with an oidc_token (Cloud Run checks ID tokens)")
		} else {
			for _, a := range []string{"service_account_email", "audience"} {
				if o.Body.Attributes[a] == nil {
					problems = append(problems, fmt.Sprintf("%s: oidc_token needs %s", name, a))
				}
			}
		}
		if block(ht.Body, "oauth_token") != nil {
			problems = append(problems, name+": oauth_token is for Google APIs; Tick needs an oidc_token")
		}
		if u := ht.Body.Attributes["uri"]; u == nil || !strings.Contains(m.text(u.Expr), `fn["Tick"]`) {
			problems = append(problems, name+": uri must be the Tick function's URL")
		}
		if block(b.Body, "retry_config") == nil {
			problems = append(problems, name+": needs a retry_config")
		}
		if b.Body.Attributes["attempt_deadline"] == nil {
			problems = append(problems, name+": needs an attempt_deadline")
		}
	}
	if n == 0 {
		problems = append(problems, "no google_cloud_scheduler_job calls Tick")
	}
	sort.Strings(problems)
	return problems
}

// workerService is one resource deploying cmd/gpu-worker, with what its
// scaling and GPU must come from.
type workerService struct {
	resource    string // "type.name"
	short       string // its name in problems
	slots       string // max_instance_count
	accelerator string // node_selector.accelerator
}

// workerServices: the default worker service, from gpu_accelerator and
// gpu_slots, and one per var.gpu_worker_types entry. Both run the same
// worker as the same account, so every rule on one holds on the other.
var workerServices = []workerService{
	{"google_cloud_run_v2_service.gpu_worker", "gpu_worker", "var.gpu_slots", "var.gpu_accelerator"},
	{"google_cloud_run_v2_service.gpu_worker_type", "gpu_worker_type", "each.value.slots", "each.value.accelerator"},
}

// checkGPUService: every GPU worker service runs one job per instance with
// its CPU always on, on a GPU.
func checkGPUService(m *tfModule) []string {
	var problems []string
	for _, ws := range workerServices {
		problems = append(problems, checkGPUWorker(m, ws)...)
	}
	sort.Strings(problems)
	return problems
}

func checkGPUWorker(m *tfModule, ws workerService) []string {
	w := m.resources[ws.resource]
	if w == nil {
		return []string{"resource " + ws.resource + " is missing"}
	}
	var problems []string
	want := func(path []string, ok func(hclsyntax.Expression) bool, why string) {
		a := attr(w, path...)
		if a == nil || !ok(a.Expr) {
			problems = append(problems, fmt.Sprintf("%s: %s %s", ws.short, strings.Join(path, "."), why))
		}
	}
	isLit := func(v cty.Value) func(hclsyntax.Expression) bool {
		return func(e hclsyntax.Expression) bool {
			got, ok := literal(e)
			if !ok {
				return false
			}
			if got.Type() == cty.String && v.Type() == cty.Number {
				return got.AsString() == v.AsBigFloat().String()
			}
			return got.Type().Equals(v.Type()) && got.Equals(v).True()
		}
	}
	isText := func(s string) func(hclsyntax.Expression) bool {
		return func(e hclsyntax.Expression) bool { return m.text(e) == s }
	}
	want([]string{"template", "containers", "resources", "cpu_idle"}, isLit(cty.False), "must be false (CPU stays allocated while a job runs)")
	want([]string{"template", "max_instance_request_concurrency"}, isLit(cty.NumberIntVal(1)), "must be 1 (one job per GPU)")
	want([]string{"template", "scaling", "max_instance_count"}, isText(ws.slots), "must be "+ws.slots)
	want([]string{"template", "node_selector", "accelerator"}, isText(ws.accelerator), "must be "+ws.accelerator)
	want([]string{"template", "containers", "image"}, isText("var.worker_image"), "must be var.worker_image")
	want([]string{"template", "gpu_zonal_redundancy_disabled"}, isText("var.gpu_zonal_redundancy_disabled"), "must be var.gpu_zonal_redundancy_disabled")
	want([]string{"template", "timeout"}, func(e hclsyntax.Expression) bool { return true }, "must be set")
	if a := attr(w, "template", "containers", "resources", "limits"); a == nil {
		problems = append(problems, ws.short+": containers.resources.limits is missing")
	} else if keys, ok := objectKeys(a.Expr); !ok {
		problems = append(problems, ws.short+": resources.limits must be a literal object")
	} else if g, ok := keys["nvidia.com/gpu"]; !ok || !isLit(cty.StringVal("1"))(g) {
		problems = append(problems, ws.short+`: resources.limits must set "nvidia.com/gpu" = "1"`)
	}
	return problems
}

// checkFirestore: Enterprise edition with the MongoDB API, and every index
// scoped to it.
func checkFirestore(m *tfModule) []string {
	var problems []string
	db := m.resources["google_firestore_database.baton"]
	if db == nil {
		return []string{"resource google_firestore_database.baton is missing"}
	}
	for a, v := range map[string]string{"database_edition": "ENTERPRISE", "mongodb_compatible_data_access_mode": "DATA_ACCESS_MODE_ENABLED", "type": "FIRESTORE_NATIVE"} {
		if got, _ := literalString(attrOrEmpty(db, a)); got != v {
			problems = append(problems, fmt.Sprintf("firestore database: %s must be %q, got %q", a, v, got))
		}
	}
	n := 0
	for name, b := range m.resources {
		if !strings.HasPrefix(name, "google_firestore_index.") {
			continue
		}
		n++
		if got, _ := literalString(attrOrEmpty(b, "api_scope")); got != "MONGODB_COMPATIBLE_API" {
			problems = append(problems, fmt.Sprintf("%s: api_scope must be \"MONGODB_COMPATIBLE_API\", got %q", name, got))
		}
		if fe := b.Body.Attributes["for_each"]; fe == nil || !strings.Contains(m.text(fe.Expr), "local.firestore_indexes") {
			problems = append(problems, name+": indexes must come from local.firestore_indexes, the one list to compare with the code")
		}
		// The list spells the document id as the code does (_id); the
		// resource declares it as var.index_id_field, __name__ unless the
		// operator's apply refused that (issue 26, finding 3).
		if fp := attr(b, "fields", "field_path"); fp == nil || m.text(fp.Expr) != strings.Join(strings.Fields(idFieldPath), "") {
			got := "nothing"
			if fp != nil {
				got = m.text(fp.Expr)
			}
			problems = append(problems, fmt.Sprintf("%s: fields.field_path must be %s, got %s", name, idFieldPath, got))
		}
	}
	if v := m.variables["index_id_field"]; v == nil {
		problems = append(problems, "variable index_id_field is missing")
	} else if d := v.Body.Attributes["default"]; d == nil || m.text(d.Expr) != `"__name__"` {
		problems = append(problems, `variable index_id_field must default to "__name__", the field path Google's admin API documents`)
	}
	if n == 0 {
		problems = append(problems, "no google_firestore_index")
	}
	sort.Strings(problems)
	return problems
}

// idFieldPath is the field_path expression of google_firestore_index.baton:
// the code's _id becomes var.index_id_field, every other path stays.
const idFieldPath = `fields.value.path == "_id" ? var.index_id_field : fields.value.path`

// indexPackages are the packages whose Indexes the deployment must declare,
// by directory under shared/. codeIndexes refuses to run when another
// package declares mongostore.Index values, so a new one cannot be missed.
var indexPackages = map[string][]mongostore.Index{
	"scheduler": mongostore.SchedulerIndexes,
	"gpu":       mongostore.GPUIndexes,
}

// codeIndexes are the indexes the Go code declares, one string per index
// ("runs(scheduleId ASCENDING, fireTime DESCENDING, _id DESCENDING)"),
// sorted and without duplicates (two packages may need the same one).
func codeIndexes() ([]string, error) {
	declaring, err := packagesDeclaringIndexes("../shared")
	if err != nil {
		return nil, err
	}
	for _, p := range declaring {
		if _, ok := indexPackages[p]; !ok {
			return nil, fmt.Errorf("shared/%s declares mongostore.Index values: add its Indexes to indexPackages in tests/terraform_test.go and to local.firestore_indexes", p)
		}
	}
	var all []mongostore.Index
	for _, p := range sortedKeys(indexPackages) {
		all = append(all, indexPackages[p]...)
	}
	set := map[string]bool{}
	for _, ix := range all {
		key, err := indexString(ix)
		if err != nil {
			return nil, err
		}
		set[key] = true
	}
	return sortedKeys(set), nil
}

// indexString spells ix as local.firestore_indexes does
// ("runs(scheduleId ASCENDING, _id DESCENDING)"), or says why Terraform
// cannot declare it.
func indexString(ix mongostore.Index) (string, error) {
	var fields []string
	for i, k := range ix.Keys {
		var dir int64
		switch v := k.Value.(type) {
		case int:
			dir = int64(v)
		case int32:
			dir = int64(v)
		case int64:
			dir = v
		default:
			return "", fmt.Errorf("index %s.%s: key %s has direction %v (%T); Terraform can only express 1 and -1", ix.Collection, ix.Name, k.Key, k.Value, k.Value)
		}
		order := map[int64]string{1: "ASCENDING", -1: "DESCENDING"}[dir]
		if order == "" {
			return "", fmt.Errorf("index %s.%s: key %s has direction %d", ix.Collection, ix.Name, k.Key, dir)
		}
		// Firestore's admin API takes the document name (__name__, which
		// Terraform declares for _id by default) only as the last field.
		if k.Key == "_id" && i != len(ix.Keys)-1 {
			return "", fmt.Errorf("index %s.%s: _id is key %d of %d; Firestore takes the document name (__name__) only as an index's last field", ix.Collection, ix.Name, i+1, len(ix.Keys))
		}
		fields = append(fields, k.Key+" "+order)
	}
	key := ix.Collection + "(" + strings.Join(fields, ", ") + ")"
	if ix.Unique {
		key += " unique"
	}
	return key, nil
}

// TestIndexIDOnlyLast: an index of the code that sorts on _id before another
// field could not be declared in the __name__ form, so it is refused.
func TestIndexIDOnlyLast(t *testing.T) {
	if _, err := indexString(mongostore.Index{Collection: "runs", Name: "x", Keys: bson.D{{Key: "scheduleId", Value: 1}, {Key: "_id", Value: -1}}}); err != nil {
		t.Errorf("_id last: %v", err)
	}
	_, err := indexString(mongostore.Index{Collection: "runs", Name: "x", Keys: bson.D{{Key: "_id", Value: 1}, {Key: "fireTime", Value: -1}}})
	if err == nil || !strings.Contains(err.Error(), "only as an index's last field") {
		t.Errorf("_id first: got %v, want the last-field refusal", err)
	}
}

// packagesDeclaringIndexes lists the directories under root whose non-test
// Go files build a []mongostore.Index.
func packagesDeclaringIndexes(root string) ([]string, error) {
	set := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), "[]mongostore.Index{") {
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			set[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	return sortedKeys(set), err
}

// checkIndexes: local.firestore_indexes is exactly the set of indexes the
// code declares.
func checkIndexes(m *tfModule) []string {
	want, err := codeIndexes()
	if err != nil {
		return []string{err.Error()}
	}
	l := m.locals["firestore_indexes"]
	if l == nil {
		return []string{"local.firestore_indexes is missing"}
	}
	v, ok := literal(l.Expr)
	if !ok || (!v.Type().IsTupleType() && !v.Type().IsListType()) {
		return []string{"local.firestore_indexes must be a literal list of { collection, fields = [{ path, order }] }"}
	}
	var got []string
	for it := v.ElementIterator(); it.Next(); {
		_, ix := it.Element()
		var fields []string
		coll := ix.GetAttr("collection").AsString()
		for ft := ix.GetAttr("fields").ElementIterator(); ft.Next(); {
			_, f := ft.Element()
			fields = append(fields, f.GetAttr("path").AsString()+" "+f.GetAttr("order").AsString())
		}
		key := coll + "(" + strings.Join(fields, ", ") + ")"
		if ix.Type().IsObjectType() && ix.Type().HasAttribute("unique") && ix.GetAttr("unique").True() {
			key += " unique"
		}
		got = append(got, key)
	}
	var problems []string
	for _, w := range want {
		if !slices.Contains(got, w) {
			problems = append(problems, "local.firestore_indexes lacks "+w+", which the code declares")
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			problems = append(problems, "local.firestore_indexes has "+g+", which no code declares (indexPackages)")
		}
	}
	sort.Strings(problems)
	return problems
}

// checkValidations: every variable without a default-only boolean meaning
// is validated.
func checkValidations(m *tfModule) []string {
	var problems []string
	for name, v := range m.variables {
		if t := v.Body.Attributes["type"]; t != nil && m.text(t.Expr) == "bool" {
			continue
		}
		if block(v.Body, "validation") == nil {
			problems = append(problems, fmt.Sprintf("variable %q has no validation block", name))
		}
	}
	sort.Strings(problems)
	return problems
}

// functionFields returns the fields of each entry of local.functions, by
// entry point, and the env expressions of each.
func functionFields(m *tfModule) (fields map[string]map[string]hclsyntax.Expression, env map[string]map[string]hclsyntax.Expression) {
	fields, env = map[string]map[string]hclsyntax.Expression{}, map[string]map[string]hclsyntax.Expression{}
	fl := m.locals["functions"]
	if fl == nil {
		return fields, env
	}
	fns, ok := objectKeys(fl.Expr)
	if !ok {
		return fields, env
	}
	for name, item := range fns {
		f, ok := objectKeys(item)
		if !ok {
			continue
		}
		fields[name] = f
		if e, ok := f["env"]; ok {
			if keys, ok := objectKeys(e); ok {
				env[name] = keys
			}
		}
	}
	return fields, env
}

// evalContext evaluates expressions that depend only on literal locals,
// the region and the project number, which stand for themselves as REGION
// and NUMBER, so that a computed URL can be compared with its expected form.
func evalContext(m *tfModule) *hcl.EvalContext {
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{
		"var":  cty.ObjectVal(map[string]cty.Value{"region": cty.StringVal("REGION"), "project": cty.StringVal("PROJECT")}),
		"data": cty.ObjectVal(map[string]cty.Value{"google_project": cty.ObjectVal(map[string]cty.Value{"this": cty.ObjectVal(map[string]cty.Value{"number": cty.StringVal("NUMBER")})})}),
	}}
	known := map[string]cty.Value{}
	// Locals may refer to locals: a few passes settle the chains used here.
	for range 4 {
		ctx.Variables["local"] = cty.ObjectVal(known)
		for n, a := range m.locals {
			if _, done := known[n]; done {
				continue
			}
			if v, diags := a.Expr.Value(ctx); !diags.HasErrors() && v.IsWhollyKnown() {
				known[n] = v
			}
		}
	}
	ctx.Variables["local"] = cty.ObjectVal(known)
	return ctx
}

func evalString(ctx *hcl.EvalContext, e hclsyntax.Expression) (string, bool) {
	v, diags := e.Value(ctx)
	if diags.HasErrors() || !v.IsWhollyKnown() || v.IsNull() || v.Type() != cty.String {
		return "", false
	}
	return v.AsString(), true
}

// deterministicURL is the URL Cloud Run gives service NAME, with the
// project number and region standing for themselves (see evalContext).
func deterministicURL(name string) string {
	return "https://" + name + "-NUMBER.REGION.run.app"
}

// functionSet reads a for_each that names a set of functions: a local or
// toset() of literal names, of keys(local.functions), or of the functions
// whose env holds one variable
// (toset([for k, f in local.functions : k if contains(keys(f.env), "VAR")])).
func functionSet(m *tfModule, e hclsyntax.Expression) ([]string, error) {
	fields, env := functionFields(m)
	if s, ok := e.(*hclsyntax.ScopeTraversalExpr); ok && len(s.Traversal) == 2 && s.Traversal.RootName() == "local" {
		name := s.Traversal[1].(hcl.TraverseAttr).Name
		l := m.locals[name]
		if l == nil {
			return nil, fmt.Errorf("local.%s is not declared", name)
		}
		return functionSet(m, l.Expr)
	}
	call, ok := e.(*hclsyntax.FunctionCallExpr)
	if !ok || call.Name != "toset" || len(call.Args) != 1 {
		return nil, fmt.Errorf("cannot read %s as a set of functions: use toset([...]) or a local holding one", m.text(e))
	}
	switch a := call.Args[0].(type) {
	case *hclsyntax.TupleConsExpr:
		var out []string
		for _, it := range a.Exprs {
			s, ok := literalString(it)
			if !ok {
				return nil, fmt.Errorf("cannot read %s: names must be literal", m.text(e))
			}
			out = append(out, s)
		}
		sort.Strings(out)
		return out, nil
	case *hclsyntax.FunctionCallExpr:
		if a.Name == "keys" && len(a.Args) == 1 && m.text(a.Args[0]) == "local.functions" {
			return sortedKeys(fields), nil
		}
	case *hclsyntax.ForExpr:
		cond := regexp.MustCompile(`^contains\(keys\(` + regexp.QuoteMeta(a.ValVar) + `\.env\),"([A-Z0-9_]+)"\)$`)
		if a.KeyVar != "" && m.text(a.CollExpr) == "local.functions" && m.text(a.ValExpr) == a.KeyVar && a.CondExpr != nil {
			if mm := cond.FindStringSubmatch(m.text(a.CondExpr)); mm != nil {
				var out []string
				for fn, keys := range env {
					if _, ok := keys[mm[1]]; ok {
						out = append(out, fn)
					}
				}
				sort.Strings(out)
				return out, nil
			}
		}
	}
	return nil, fmt.Errorf("cannot read %s as a set of functions", m.text(e))
}

// usersOf are the functions that config.Vars says read a variable.
func usersOf(name string) []string {
	for _, v := range config.Vars {
		if v.Name == name {
			var out []string
			for _, u := range v.Users {
				if slices.Contains([]string{config.FnTick, config.FnSchedules, config.FnGPU, config.FnGPUCallback, config.FnRent, config.FnRun}, u) {
					out = append(out, u)
				}
			}
			sort.Strings(out)
			return out
		}
	}
	return nil
}

// varRef returns X when e is exactly var.X, or "${var.X}s" (a duration in
// seconds built from a variable).
func varRef(m *tfModule, e hclsyntax.Expression) string {
	mm := regexp.MustCompile(`^(?:var\.([a-z0-9_]+)|"\$\{var\.([a-z0-9_]+)\}s")$`).FindStringSubmatch(m.text(e))
	if mm == nil {
		return ""
	}
	return mm[1] + mm[2]
}

// maxDispatchDeadline is the longest dispatch deadline Cloud Tasks allows
// for an HTTP task (30 minutes): Run must outlive it.
const maxDispatchDeadline = 1800

// checkTasks: the queue's retry and rate settings are variables with
// validation; Tick, Schedules and Run are told the queue's ID, the Run
// function's deterministic URL and baton-tasks' email; Run outlives the
// longest dispatch deadline and scales with the queue's concurrency.
func checkTasks(m *tfModule) []string {
	var problems []string
	q := m.resources["google_cloud_tasks_queue.runs"]
	if q == nil {
		return []string{"resource google_cloud_tasks_queue.runs is missing"}
	}
	for blk, attrs := range map[string][]string{
		"retry_config": {"max_attempts", "min_backoff", "max_backoff", "max_doublings", "max_retry_duration"},
		"rate_limits":  {"max_dispatches_per_second", "max_concurrent_dispatches"},
	} {
		for _, a := range attrs {
			at := attr(q, blk, a)
			if at == nil {
				problems = append(problems, fmt.Sprintf("queue: %s.%s is not set (Cloud Tasks would pick its own default)", blk, a))
				continue
			}
			v := varRef(m, at.Expr)
			switch {
			case v == "":
				problems = append(problems, fmt.Sprintf("queue: %s.%s must come from a variable (var.X, or \"${var.X}s\"), got %s", blk, a, m.text(at.Expr)))
			case m.variables[v] == nil:
				problems = append(problems, fmt.Sprintf("queue: %s.%s uses var.%s, which is not declared", blk, a, v))
			case block(m.variables[v].Body, "validation") == nil:
				problems = append(problems, fmt.Sprintf("queue: var.%s needs a validation block stating Cloud Tasks' limit", v))
			}
		}
	}
	if attr(q, "stackdriver_logging_config", "sampling_ratio") == nil {
		problems = append(problems, "queue: stackdriver_logging_config.sampling_ratio is not set (failed dispatches would leave no log)")
	}

	tasksSA := m.resources["google_service_account.tasks"]
	if tasksSA == nil {
		problems = append(problems, "resource google_service_account.tasks (baton-tasks) is missing")
	} else if id, _ := literalString(attrOrEmpty(tasksSA, "account_id")); id != "baton-tasks" {
		problems = append(problems, fmt.Sprintf("google_service_account.tasks must have account_id \"baton-tasks\", got %q", id))
	}

	fields, env := functionFields(m)
	ctx := evalContext(m)
	run := fields[config.FnRun]
	if run == nil {
		return append(problems, "local.functions has no Run")
	}
	runName, ok := evalString(ctx, run["name"])
	if !ok {
		problems = append(problems, "local.functions.Run.name must be a literal or a literal local")
	}
	for _, fn := range usersOf(config.EnvRunURL) {
		e, ok := env[fn][config.EnvRunURL]
		if !ok {
			continue // checkEnv reports it
		}
		got, ok := evalString(ctx, e)
		if want := deterministicURL(runName); !ok || got != want {
			problems = append(problems, fmt.Sprintf("%s: %s = %s evaluates to %q, want Cloud Run's deterministic URL of the Run function %q, %s (the tasks' target and OIDC audience)", fn, config.EnvRunURL, m.text(e), got, runName, want))
		}
	}
	for _, fn := range usersOf(config.EnvTasksQueue) {
		if e, ok := env[fn][config.EnvTasksQueue]; ok && m.text(e) != "local.tasks_queues" {
			problems = append(problems, fmt.Sprintf("%s: %s must be local.tasks_queues (every run queue's projects/P/locations/L/queues/Q, in index order), got %s", fn, config.EnvTasksQueue, m.text(e)))
		}
	}
	for _, fn := range usersOf(config.EnvTasksAccount) {
		if e, ok := env[fn][config.EnvTasksAccount]; ok && m.text(e) != "google_service_account.tasks.email" {
			problems = append(problems, fmt.Sprintf("%s: %s must be google_service_account.tasks.email (baton-tasks, the only invoker of Run), got %s", fn, config.EnvTasksAccount, m.text(e)))
		}
	}

	// Run's timeout: a literal, or a variable whose default and validation
	// both keep it at or above the longest dispatch deadline.
	if t, ok := run["timeout"]; !ok {
		problems = append(problems, "Run has no timeout")
	} else if v := varRef(m, t); v != "" {
		vb := m.variables[v]
		var def *big.Float
		if vb != nil && vb.Body.Attributes["default"] != nil {
			if d, ok := literal(vb.Body.Attributes["default"].Expr); ok && d.Type() == cty.Number {
				def = d.AsBigFloat()
			}
		}
		if def == nil || def.Cmp(big.NewFloat(maxDispatchDeadline)) < 0 {
			problems = append(problems, fmt.Sprintf("Run: timeout var.%s must default to at least %d s (Cloud Tasks' longest dispatch deadline)", v, maxDispatchDeadline))
		}
		lower := regexp.MustCompile(`var\.` + regexp.QuoteMeta(v) + `>=([0-9]+)`)
		var cond string
		if vb != nil {
			if vv := block(vb.Body, "validation"); vv != nil && vv.Body.Attributes["condition"] != nil {
				cond = m.text(vv.Body.Attributes["condition"].Expr)
			}
		}
		if mm := lower.FindStringSubmatch(cond); mm == nil || atoi(mm[1]) < maxDispatchDeadline {
			problems = append(problems, fmt.Sprintf("Run: var.%s's validation must refuse less than %d s (var.%s >= %d), the longest dispatch deadline Run must outlive", v, maxDispatchDeadline, v, maxDispatchDeadline))
		}
	} else if n, ok := literal(t); !ok || n.Type() != cty.Number || n.AsBigFloat().Cmp(big.NewFloat(maxDispatchDeadline)) < 0 {
		problems = append(problems, fmt.Sprintf("Run: timeout %s must be at least %d s, Cloud Tasks' longest dispatch deadline", m.text(t), maxDispatchDeadline))
	}
	// Run's instances hold every dispatch in flight: queues × concurrent
	// dispatches / requests per instance, or the excess dispatches get 429
	// and use up attempts.
	needed := m.locals["run_instances_needed"]
	if mi, ok := run["max_instances"]; !ok || m.text(mi) != "local.run_max_instances" || needed == nil ||
		m.text(needed.Expr) != "ceil(var.tasks_queue_count*"+m.text(attrOrEmpty(block(q.Body, "rate_limits"), "max_concurrent_dispatches"))+"/var.run_concurrency)" {
		problems = append(problems, "Run: max_instances must be local.run_max_instances, at least local.run_instances_needed = ceil(var.tasks_queue_count * the queue's rate_limits.max_concurrent_dispatches / var.run_concurrency): fewer instances than dispatches in flight answer 429s that use up attempts")
	}
	sort.Strings(problems)
	return problems
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// checkTasksIAM: enqueuing is granted on the queue only, to exactly the
// functions that read BATON_TASKS_QUEUE; actAs only on baton-tasks, to the
// same functions; run.invoker on Run only to baton-tasks, and baton-tasks
// invokes nothing else; nobody invokes the daemon.
func checkTasksIAM(m *tfModule) []string {
	var problems []string
	enqueuers := usersOf(config.EnvTasksQueue)
	wantMembers := func(name string, b *hclsyntax.Block, what string) {
		mem := m.text(attrOrEmpty(b, "member"))
		if mem != "google_service_account.function[each.key].member" && mem != "google_service_account.function[each.value.fn].member" {
			problems = append(problems, fmt.Sprintf("%s: %s must go to the functions' own accounts (google_service_account.function[each.key].member), not %s", name, what, mem))
			return
		}
		fe := b.Body.Attributes["for_each"]
		if fe == nil {
			problems = append(problems, fmt.Sprintf("%s: needs for_each over the functions that enqueue", name))
			return
		}
		set := fe.Expr
		if mem == "google_service_account.function[each.value.fn].member" {
			// One grant per function and queue: a local of
			// setproduct(sort(tolist(<set of functions>)), range(queues)).
			pairs := regexp.MustCompile(`^\{forpinsetproduct\(sort\(tolist\(local\.([a-z_]+)\)\),range\(var\.tasks_queue_count\)\):"\$\{p\[0\]\}/\$\{p\[1\]\}"=>\{fn=p\[0\],queue=p\[1\]\}\}$`)
			l, ok := fe.Expr.(*hclsyntax.ScopeTraversalExpr)
			var mm []string
			if ok && len(l.Traversal) == 2 && m.locals[l.Traversal[1].(hcl.TraverseAttr).Name] != nil {
				mm = pairs.FindStringSubmatch(m.text(m.locals[l.Traversal[1].(hcl.TraverseAttr).Name].Expr))
			}
			if mm == nil || m.locals[mm[1]] == nil {
				problems = append(problems, fmt.Sprintf("%s: for_each %s must be a local of {Fn/queue: {fn, queue}} pairs over a set of functions and range(var.tasks_queue_count)", name, m.text(fe.Expr)))
				return
			}
			set = m.locals[mm[1]].Expr
		}
		got, err := functionSet(m, set)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", name, err))
		} else if !slices.Equal(got, enqueuers) {
			problems = append(problems, fmt.Sprintf("%s: %s is granted to %v, want exactly the functions that read %s (config.Vars: %v)", name, what, got, config.EnvTasksQueue, enqueuers))
		}
	}
	nEnq, nActAs := 0, 0
	for _, name := range sortedKeys(m.resources) {
		b := m.resources[name]
		role, _ := literalString(attrOrEmpty(b, "role"))
		typ := strings.SplitN(name, ".", 2)[0]
		switch {
		case role == "roles/cloudtasks.enqueuer" || strings.HasPrefix(role, "roles/cloudtasks.") && role != tasksAgentRole:
			if role != "roles/cloudtasks.enqueuer" {
				problems = append(problems, fmt.Sprintf("%s grants %s; the functions only need roles/cloudtasks.enqueuer", name, role))
				continue
			}
			if typ == "google_cloud_tasks_queue_iam_member" && m.text(attrOrEmpty(b, "name")) == tickQueueName {
				continue // the tick queue's: checkTickIAM
			}
			nEnq++
			if typ != "google_cloud_tasks_queue_iam_member" {
				problems = append(problems, fmt.Sprintf("%s grants roles/cloudtasks.enqueuer on more than the queue; grant it with google_cloud_tasks_queue_iam_member on google_cloud_tasks_queue.runs only", name))
				continue
			}
			if q := m.text(attrOrEmpty(b, "name")); q != "google_cloud_tasks_queue.runs.name" && q != "google_cloud_tasks_queue.runs.id" && q != "google_cloud_tasks_queue.runs[each.value.queue].name" {
				problems = append(problems, fmt.Sprintf("%s: roles/cloudtasks.enqueuer must be on google_cloud_tasks_queue.runs, not %s", name, q))
			}
			wantMembers(name, b, "roles/cloudtasks.enqueuer")
		case role == "roles/iam.serviceAccountUser" || role == "roles/iam.serviceAccountTokenCreator" || strings.HasPrefix(typ, "google_service_account_iam_"):
			if role != "roles/iam.serviceAccountUser" || typ != "google_service_account_iam_member" {
				problems = append(problems, fmt.Sprintf("%s grants %q with %s; only roles/iam.serviceAccountUser on baton-tasks (google_service_account_iam_member) is needed, to create tasks carrying its OIDC token", name, role, typ))
				continue
			}
			if m.text(attrOrEmpty(b, "service_account_id")) == tickTasksAccountName {
				continue // actAs on baton-tick-tasks: checkTickIAM
			}
			nActAs++
			if sa := m.text(attrOrEmpty(b, "service_account_id")); sa != "google_service_account.tasks.name" && sa != "google_service_account.tasks.id" {
				problems = append(problems, fmt.Sprintf("%s: roles/iam.serviceAccountUser is only granted on baton-tasks (google_service_account.tasks.name), not on %s: actAs on another account lets the holder run as it", name, sa))
			}
			wantMembers(name, b, "roles/iam.serviceAccountUser on baton-tasks")
		case role == "roles/run.invoker":
			target := m.text(attrOrEmpty(b, "name"))
			if strings.Contains(target, "google_cloud_run_v2_service.daemon") {
				problems = append(problems, fmt.Sprintf("%s grants roles/run.invoker on the daemon; nothing may call it", name))
			}
			if strings.Contains(target, `fn["Run"]`) {
				problems = append(problems, fmt.Sprintf("%s grants roles/run.invoker on Run outside local.function_invokers' Run/tasks; only baton-tasks may invoke Run", name))
			}
			if strings.Contains(m.text(attrOrEmpty(b, "member")), "google_service_account.tasks.") {
				problems = append(problems, fmt.Sprintf("%s grants roles/run.invoker to baton-tasks on %s; baton-tasks invokes Run only", name, target))
			}
		}
	}
	if nEnq == 0 {
		problems = append(problems, "no roles/cloudtasks.enqueuer grant: Tick, Schedules and Run cannot create tasks")
	}
	if nActAs == 0 {
		problems = append(problems, "no roles/iam.serviceAccountUser on baton-tasks: creating a task with its OIDC token needs actAs on it")
	}

	// local.function_invokers: merge() of { "KEY" = { fn, member } } objects
	// and for expressions over operator lists.
	var call *hclsyntax.FunctionCallExpr
	if fi := m.locals["function_invokers"]; fi != nil {
		call, _ = fi.Expr.(*hclsyntax.FunctionCallExpr)
	}
	if call == nil || call.Name != "merge" {
		return append(problems, "local.function_invokers must be merge() of { key = { fn, member } } objects")
	}
	runTasks := 0
	check := func(where string, item hclsyntax.Expression) {
		f, ok := objectKeys(item)
		if !ok {
			problems = append(problems, fmt.Sprintf("function_invokers %s: want { fn = \"...\", member = ... }", where))
			return
		}
		fn, _ := literalString(f["fn"])
		member := ""
		if e, ok := f["member"]; ok {
			member = m.text(e)
		}
		isTasks := member == "google_service_account.tasks.member"
		switch {
		case fn == config.FnRun && isTasks:
			runTasks++
		case fn == config.FnRun:
			problems = append(problems, fmt.Sprintf("function_invokers %s: grants run.invoker on Run to %s; Run may be invoked only by baton-tasks (runs must go through the queue)", where, member))
		case isTasks:
			problems = append(problems, fmt.Sprintf("function_invokers %s: grants baton-tasks run.invoker on %s; baton-tasks invokes Run only", where, fn))
		}
	}
	var visit func(arg hclsyntax.Expression)
	visit = func(arg hclsyntax.Expression) {
		switch a := arg.(type) {
		case *hclsyntax.ObjectConsExpr:
			for _, it := range a.Items {
				check(m.text(it.KeyExpr), it.ValueExpr)
			}
		case *hclsyntax.ForExpr:
			check(m.text(a), a.ValExpr)
		case *hclsyntax.ConditionalExpr:
			// cond ? {…} : {…}: either side may be applied.
			visit(a.TrueResult)
			visit(a.FalseResult)
		default:
			problems = append(problems, fmt.Sprintf("function_invokers: cannot read %s", m.text(arg)))
		}
	}
	for _, arg := range call.Args {
		visit(arg)
	}
	if runTasks != 1 {
		problems = append(problems, fmt.Sprintf("function_invokers: baton-tasks must invoke Run exactly once, found %d (tasks could not reach Run)", runTasks))
	}
	sort.Strings(problems)
	return problems
}

// cloudSet are variables a deployable reads that the platform sets itself.
var cloudSet = map[string]string{config.EnvPort: "Cloud Run sets it and refuses it in a service's env"}

// daemonReads are the variables cmd/baton/daemon.go reads: every config.EnvX
// it names, resolved to the names shared/config/config.go gives them.
func daemonReads() ([]string, error) {
	fset := token.NewFileSet()
	cf, err := parser.ParseFile(fset, "../shared/config/config.go", nil, 0)
	if err != nil {
		return nil, err
	}
	consts := map[string]string{}
	for _, d := range cf.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						consts[n.Name] = strings.Trim(lit.Value, "\"`")
					}
				}
			}
		}
	}
	df, err := parser.ParseFile(fset, "../cmd/baton/daemon.go", nil, 0)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	var bad []string
	ast.Inspect(df, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && x.Name == "config" && strings.HasPrefix(sel.Sel.Name, "Env") {
			if v, ok := consts[sel.Sel.Name]; ok {
				set[v] = true
			} else {
				bad = append(bad, sel.Sel.Name)
			}
		}
		return true
	})
	if len(bad) > 0 {
		return nil, fmt.Errorf("cmd/baton/daemon.go names config.%v, not found in shared/config/config.go", bad)
	}
	return sortedKeys(set), nil
}

// checkDaemon: when daemon_image is set, `baton daemon` runs as exactly one
// always-on Cloud Run instance, internal only, with the env daemon.go
// reads; Schedules accepts sub-minute crons exactly then.
func checkDaemon(m *tfModule) []string {
	d := m.resources["google_cloud_run_v2_service.daemon"]
	if d == nil {
		return []string{"resource google_cloud_run_v2_service.daemon is missing (sub-minute schedules need it)"}
	}
	var problems []string
	gate := d.Body.Attributes["count"]
	if gate == nil {
		gate = d.Body.Attributes["for_each"]
	}
	gated := gate != nil && strings.Contains(m.text(gate.Expr), "var.daemon_image")
	if gate != nil && !gated {
		if s, ok := gate.Expr.(*hclsyntax.ScopeTraversalExpr); ok && s.Traversal.RootName() == "local" {
			if l := m.locals[s.Traversal[1].(hcl.TraverseAttr).Name]; l != nil {
				gated = strings.Contains(m.text(l.Expr), "var.daemon_image")
			}
		}
	}
	if !gated {
		problems = append(problems, "daemon: must be deployed only when var.daemon_image is set (count or for_each on it)")
	}
	isLit := func(want cty.Value) func(hclsyntax.Expression) bool {
		return func(e hclsyntax.Expression) bool {
			v, ok := literal(e)
			return ok && v.Type().Equals(want.Type()) && v.Equals(want).True()
		}
	}
	for _, w := range []struct {
		path []string
		ok   func(hclsyntax.Expression) bool
		why  string
	}{
		{[]string{"template", "scaling", "min_instance_count"}, isLit(cty.NumberIntVal(1)), "must be 1: the daemon never sleeps"},
		{[]string{"template", "scaling", "max_instance_count"}, isLit(cty.NumberIntVal(1)), "must be 1: a second instance would only wait for the tick lease"},
		{[]string{"template", "containers", "resources", "cpu_idle"}, isLit(cty.False), "must be false: it ticks with no request to wake it"},
		{[]string{"template", "containers", "resources", "startup_cpu_boost"}, isLit(cty.True), "must be true"},
		{[]string{"ingress"}, isLit(cty.StringVal("INGRESS_TRAFFIC_INTERNAL_ONLY")), `must be "INGRESS_TRAFFIC_INTERNAL_ONLY": nothing calls it`},
		{[]string{"template", "containers", "image"}, func(e hclsyntax.Expression) bool { return m.text(e) == "var.daemon_image" }, "must be var.daemon_image"},
		{[]string{"template", "containers", "args"}, func(e hclsyntax.Expression) bool { return strings.HasPrefix(m.text(e), `["daemon"`) }, `must run baton daemon (["daemon", ...])`},
	} {
		if a := attr(d, w.path...); a == nil || !w.ok(a.Expr) {
			problems = append(problems, fmt.Sprintf("daemon: %s %s", strings.Join(w.path, "."), w.why))
		}
	}

	// Its env is exactly what daemon.go reads, less what the cloud forbids
	// or sets.
	var c *hclsyntax.Block
	if t := block(d.Body, "template"); t != nil {
		c = block(t.Body, "containers")
	}
	var de *hclsyntax.Block
	if c != nil {
		de = dynamicBlock(c.Body, "env")
	}
	if de == nil || de.Body.Attributes["for_each"] == nil || m.text(de.Body.Attributes["for_each"].Expr) != "local.daemon_env" {
		problems = append(problems, "daemon: containers must set env with dynamic \"env\" { for_each = local.daemon_env }")
	}
	reads, err := daemonReads()
	if err != nil {
		return append(problems, err.Error())
	}
	var set map[string]hclsyntax.Expression
	if l := m.locals["daemon_env"]; l == nil {
		problems = append(problems, "local.daemon_env is missing")
	} else if set, _ = objectKeys(l.Expr); set == nil {
		problems = append(problems, "local.daemon_env must be a literal object of NAME = value")
	}
	for _, n := range reads {
		_, has := set[n]
		switch {
		case cloudForbidden[n] != "" && has:
			problems = append(problems, fmt.Sprintf("daemon: %s must not be set in the cloud: %s", n, cloudForbidden[n]))
		case cloudSet[n] != "" && has:
			problems = append(problems, fmt.Sprintf("daemon: %s must not be set: %s", n, cloudSet[n]))
		case cloudForbidden[n] == "" && cloudSet[n] == "" && !has && set != nil:
			problems = append(problems, fmt.Sprintf("daemon: %s is read by cmd/baton/daemon.go but not set in local.daemon_env", n))
		}
	}
	for n := range set {
		if !slices.Contains(reads, n) {
			problems = append(problems, fmt.Sprintf("daemon: %s is set but cmd/baton/daemon.go does not read it", n))
		}
	}
	if e, ok := set[config.EnvTargetIDToken]; ok && !isLit(cty.StringVal("true"))(e) {
		problems = append(problems, fmt.Sprintf("daemon: %s must be \"true\": targets authenticate the daemon's runs as in the functions", config.EnvTargetIDToken))
	}

	// BATON_SUBMINUTE on Schedules follows the daemon.
	_, env := functionFields(m)
	for _, fn := range usersOf(config.EnvSubMinute) {
		e, ok := env[fn][config.EnvSubMinute]
		if !ok {
			continue // checkEnv reports it
		}
		if t := m.text(e); !strings.Contains(t, "google_cloud_run_v2_service.daemon") && !strings.Contains(t, "var.daemon_image") {
			problems = append(problems, fmt.Sprintf("%s: %s = %s must follow the daemon (\"true\" only when google_cloud_run_v2_service.daemon is deployed)", fn, config.EnvSubMinute, t))
		}
	}
	sort.Strings(problems)
	return problems
}

// checkSecrets: BATON_PAGE_TOKEN_SECRET, wherever it is set, is a sensitive
// input variable with no default whose validation demands the 32 bytes the
// functions demand. A literal or a default would put the secret in the
// repository (anyone could sign page tokens, as with the old built-in key),
// a non-sensitive variable would print it in every plan, and a variable
// without the length rule would let a deployment apply whose functions then
// refuse to start.
func checkSecrets(m *tfModule) []string {
	var problems []string
	_, env := functionFields(m)
	for _, fn := range sortedKeys(env) {
		e, ok := env[fn][config.EnvPageSecret]
		if !ok {
			continue // checkEnv reports a missing one
		}
		name, ok := strings.CutPrefix(m.text(e), "var.")
		v := m.variables[name]
		if !ok || v == nil {
			problems = append(problems, fmt.Sprintf("%s: %s = %s must be an input variable (var.…), never a value in the repository", fn, config.EnvPageSecret, m.text(e)))
			continue
		}
		if s := v.Body.Attributes["sensitive"]; s == nil || m.text(s.Expr) != "true" {
			problems = append(problems, fmt.Sprintf("%s: variable %q holds %s and must be sensitive = true", fn, name, config.EnvPageSecret))
		}
		if v.Body.Attributes["default"] != nil {
			problems = append(problems, fmt.Sprintf("%s: variable %q holds %s and must have no default: a default is public", fn, name, config.EnvPageSecret))
		}
		val := block(v.Body, "validation")
		want := fmt.Sprintf("length(var.%s)>=%d", name, config.MinPageSecretLen) // text drops spaces
		if val == nil || val.Body.Attributes["condition"] == nil || !strings.Contains(m.text(val.Body.Attributes["condition"].Expr), want) {
			problems = append(problems, fmt.Sprintf("%s: variable %q holds %s and its validation must require %s (the functions refuse a shorter one)", fn, name, config.EnvPageSecret, want))
		}
	}
	sort.Strings(problems)
	return problems
}

// doctorEnv are the variables `baton doctor` takes its flags' defaults
// from, each with what cli_env must export it as (text without spaces): the
// values Terraform used, so that eval "$(terraform output -raw cli_env)"
// leaves doctor nothing to be told.
var doctorEnv = map[string]string{
	config.EnvProject:  "${var.project}",
	config.EnvRegion:   "${var.region}",
	config.EnvBucket:   "${google_storage_bucket.baton.name}",
	config.EnvDatabase: "${google_firestore_database.baton.name}",
	// Not var.firestore_location, which is empty when it means the region.
	config.EnvFirestoreLocation: "${local.firestore_location}",
	config.EnvTickURL:           `${google_cloudfunctions2_function.fn["Tick"].service_config[0].uri}`,
}

// checkCLIEnv: output cli_env exports every doctorEnv variable, and the
// location it exports is the database's own.
func checkCLIEnv(m *tfModule) []string {
	var problems []string
	var value string
	for name, src := range m.src {
		f, diags := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
		if diags.HasErrors() {
			continue
		}
		for _, b := range f.Body.(*hclsyntax.Body).Blocks {
			if b.Type == "output" && len(b.Labels) == 1 && b.Labels[0] == "cli_env" && b.Body.Attributes["value"] != nil {
				value = m.text(b.Body.Attributes["value"].Expr)
			}
		}
	}
	if value == "" {
		return []string{"output cli_env is missing"}
	}
	for _, name := range sortedKeys(doctorEnv) {
		if want := `"export` + name + "=" + doctorEnv[name] + `"`; !strings.Contains(value, want) {
			problems = append(problems, fmt.Sprintf("output cli_env must export %s=%s (baton doctor reads it)", name, doctorEnv[name]))
		}
	}
	if db := m.resources["google_firestore_database.baton"]; db == nil || db.Body.Attributes["location_id"] == nil ||
		m.text(db.Body.Attributes["location_id"].Expr) != "local.firestore_location" {
		problems = append(problems, "google_firestore_database.baton.location_id must be local.firestore_location, which cli_env exports as "+config.EnvFirestoreLocation)
	}
	return problems
}

var tfChecks = map[string]func(*tfModule) []string{
	"cliEnv":          checkCLIEnv,
	"env":             checkEnv,
	"serviceAccounts": checkServiceAccounts,
	"public":          checkPublic,
	"scheduler":       checkScheduler,
	"gpuService":      checkGPUService,
	"firestore":       checkFirestore,
	"indexes":         checkIndexes,
	"validations":     checkValidations,
	"tasks":           checkTasks,
	"tasksIAM":        checkTasksIAM,
	"daemon":          checkDaemon,
	"secrets":         checkSecrets,
}

// TestTerraformRules runs every check on infra/terraform as committed.
func TestTerraformRules(t *testing.T) {
	m, err := parseTerraform(readTerraform(t))
	if err != nil {
		t.Fatal(err)
	}
	for name, check := range tfChecks {
		t.Run(name, func(t *testing.T) {
			for _, p := range check(m) {
				t.Error(p)
			}
		})
	}
}

// TestTerraformRulesFail breaks the real configuration in memory, one rule
// at a time, and expects the rule's check to report it. A mutation that no
// longer matches the files fails the test too, so these cases follow the
// configuration as it changes.
func TestTerraformRulesFail(t *testing.T) {
	checkMutations(t, []tfMutation{
		{"env missing", "env", "main.tf",
			"        BATON_GPU_POOL              = local.gpu_pool\n        BATON_GPU_WEIGHTS           = local.gpu_weights\n        BATON_GPU_QUOTAS            = local.gpu_quotas\n        BATON_TICK_LEASE_TTL",
			"        BATON_GPU_WEIGHTS           = local.gpu_weights\n        BATON_GPU_QUOTAS            = local.gpu_quotas\n        BATON_TICK_LEASE_TTL",
			"Tick: BATON_GPU_POOL is read by Tick (config.Vars) but not set"},
		{"env default-only var still required", "env", "main.tf",
			"    BATON_WORKER_COMMAND = jsonencode(var.worker_command)\n", "",
			"gpu-worker: BATON_WORKER_COMMAND is read by gpu-worker (config.Vars) but not set"},
		{"env unknown", "env", "main.tf",
			"        BATON_LOG_LEVEL = var.log_level\n      }\n    }\n  }\n",
			"        BATON_LOG_LEVEL = var.log_level\n        BATON_LOG_LEVLE = \"debug\"\n      }\n    }\n  }\n",
			"Rent: BATON_LOG_LEVLE is set but unknown"},
		{"env token in cloud", "env", "main.tf",
			"        BATON_PAGE_TOKEN_SECRET = var.page_token_secret\n      }\n    }\n    # The operators' GPU API.",
			"        BATON_PAGE_TOKEN_SECRET = var.page_token_secret\n        BATON_TOKEN = \"s3cret\"\n      }\n    }\n    # The operators' GPU API.",
			"Schedules: BATON_TOKEN must not be set in the cloud"},
		{"env emulator in cloud", "env", "main.tf",
			"    BATON_LOG_LEVEL      = var.log_level\n",
			"    BATON_LOG_LEVEL      = var.log_level\n    STORAGE_EMULATOR_HOST = \"localhost:4443\"\n",
			"gpu-worker: STORAGE_EMULATOR_HOST must not be set in the cloud"},
		{"env on a deployable that does not read it", "env", "main.tf",
			"        BATON_PAGE_TOKEN_SECRET = var.page_token_secret\n      }\n    }\n    # The operators' GPU API.",
			"        BATON_PAGE_TOKEN_SECRET = var.page_token_secret\n        BATON_TICK_LEASE_TTL = var.tick_lease_ttl\n      }\n    }\n    # The operators' GPU API.",
			"Schedules: BATON_TICK_LEASE_TTL is set on Schedules, which does not read it"},
		{"page token secret as a literal", "secrets", "main.tf",
			"        BATON_PAGE_TOKEN_SECRET = var.page_token_secret\n      }\n    }\n    # The operators' GPU API.",
			"        BATON_PAGE_TOKEN_SECRET = \"baton page token v1\"\n      }\n    }\n    # The operators' GPU API.",
			"Schedules: BATON_PAGE_TOKEN_SECRET = \"batonpagetokenv1\" must be an input variable"},
		{"page token secret not sensitive", "secrets", "variables.tf",
			"  type        = string\n  sensitive   = true\n", "  type        = string\n",
			"GPU: variable \"page_token_secret\" holds BATON_PAGE_TOKEN_SECRET and must be sensitive = true"},
		{"page token secret short", "secrets", "variables.tf",
			"length(var.page_token_secret) >= 32", "length(var.page_token_secret) >= 8",
			"its validation must require length(var.page_token_secret)>=32"},
		{"page token secret with a default", "secrets", "variables.tf",
			"  sensitive   = true\n", "  sensitive   = true\n  default     = \"0123456789abcdef0123456789abcdef\"\n",
			"must have no default"},
		{"build env at runtime", "env", "main.tf",
			"        BATON_LOG_LEVEL = var.log_level\n      }\n    }\n  }\n",
			"        BATON_LOG_LEVEL = var.log_level\n        GOOGLE_FUNCTION_SOURCE = \"functions\"\n      }\n    }\n  }\n",
			"Rent: GOOGLE_FUNCTION_SOURCE is a build environment variable"},
		{"build env wrong", "env", "functions.tf",
			`GOOGLE_FUNCTION_SOURCE = "functions"`, `GOOGLE_FUNCTION_SOURCE = "."`,
			`must set GOOGLE_FUNCTION_SOURCE = "functions" (got ".")`},
		{"env not wired", "env", "functions.tf",
			"environment_variables          = each.value.env", "environment_variables          = {}",
			"service_config.environment_variables must be each.value.env"},
		{"function without service account", "serviceAccounts", "functions.tf",
			"    service_account_email          = google_service_account.function[each.key].email\n", "",
			"functions (runtime) has no dedicated service account"},
		{"shared service account", "serviceAccounts", "gpu_worker.tf",
			"service_account                  = google_service_account.gpu_worker.email",
			"service_account                  = google_service_account.scheduler.email",
			"google_service_account.scheduler is shared by google_cloud_scheduler_job.tick and gpu-worker"},
		{"project-wide role", "serviceAccounts", "iam.tf",
			`role    = "roles/logging.logWriter"`, `role    = "roles/editor"`,
			`google_project_iam_member.build_logs grants "roles/editor" on the whole project`},
		{"build account back on the Cloud Build builder role", "serviceAccounts", "iam.tf",
			`role    = "roles/logging.logWriter"`, `role    = "roles/cloudbuild.builds.builder"`,
			`google_project_iam_member.build_logs grants "roles/cloudbuild.builds.builder" on the whole project`},
		{"build account reads every bucket", "serviceAccounts", "iam.tf",
			"    title      = \"Cloud Functions source bucket only\"\n    expression = \"resource.name.startsWith(\\\"projects/_/buckets/gcf-v2-sources-${data.google_project.this.number}-${var.region}/\\\")\"",
			"    title      = \"Cloud Functions source bucket only\"\n    expression = \"resource.name.startsWith(\\\"projects/_/buckets/\\\")\"",
			"google_project_iam_member.build_sources: roles/storage.objectViewer on the project must carry the condition"},
		{"log writer for a runtime account", "serviceAccounts", "iam.tf",
			"  role    = \"roles/logging.logWriter\"\n  member  = google_service_account.build.member",
			"  role    = \"roles/logging.logWriter\"\n  member  = google_service_account.gpu_worker.member",
			"roles/logging.logWriter on the project is for the build account only"},
		{"allUsers outside Rent", "public", "iam.tf",
			"  name     = google_cloudfunctions2_function.fn[\"Rent\"].service_config[0].service\n  role     = \"roles/run.invoker\"\n  member   = \"allUsers\"",
			"  name     = google_cloudfunctions2_function.fn[\"GPU\"].service_config[0].service\n  role     = \"roles/run.invoker\"\n  member   = \"allUsers\"",
			"allUsers is granted outside the Rent function"},
		{"allAuthenticatedUsers in a default", "public", "variables.tf",
			"  type        = list(string)\n  default     = []\n\n  validation {\n    condition     = alltrue([for m in var.operator_members",
			"  type        = list(string)\n  default     = [\"allAuthenticatedUsers\"]\n\n  validation {\n    condition     = alltrue([for m in var.operator_members",
			"allAuthenticatedUsers is granted outside the Rent function"},
		{"scheduler without oidc", "scheduler", "scheduler.tf",
			"oidc_token {", "oauth_token {",
			"http_target must authenticate with an oidc_token"},
		{"scheduler without retry", "scheduler", "scheduler.tf",
			"retry_config {", "retry_policy_removed {",
			"needs a retry_config"},
		{"cpu idle", "gpuService", "gpu_worker.tf",
			"cpu_idle          = false", "cpu_idle          = true",
			"cpu_idle must be false"},
		{"concurrency", "gpuService", "gpu_worker.tf",
			"max_instance_request_concurrency = 1", "max_instance_request_concurrency = 4",
			"max_instance_request_concurrency must be 1"},
		{"no gpu", "gpuService", "gpu_worker.tf",
			`"nvidia.com/gpu" = "1"`, `"nvidia.com/gpu" = "0"`,
			`must set "nvidia.com/gpu" = "1"`},
		// The same rules on every gpu_worker_types service.
		{"typed cpu idle", "gpuService", "gpu_worker_types.tf",
			"cpu_idle          = false", "cpu_idle          = true",
			"gpu_worker_type: template.containers.resources.cpu_idle must be false"},
		{"typed concurrency", "gpuService", "gpu_worker_types.tf",
			"max_instance_request_concurrency = 1", "max_instance_request_concurrency = 4",
			"gpu_worker_type: template.max_instance_request_concurrency must be 1"},
		{"typed no gpu", "gpuService", "gpu_worker_types.tf",
			`"nvidia.com/gpu" = "1"`, `"nvidia.com/gpu" = "0"`,
			`gpu_worker_type: resources.limits must set "nvidia.com/gpu" = "1"`},
		{"typed slots not the entry's", "gpuService", "gpu_worker_types.tf",
			"max_instance_count = each.value.slots", "max_instance_count = var.gpu_slots",
			"gpu_worker_type: template.scaling.max_instance_count must be each.value.slots"},
		{"typed accelerator not the entry's", "gpuService", "gpu_worker_types.tf",
			"accelerator = each.value.accelerator", "accelerator = var.gpu_accelerator",
			"gpu_worker_type: template.node_selector.accelerator must be each.value.accelerator"},
		{"typed other image", "gpuService", "gpu_worker_types.tf",
			"image = var.worker_image", `image = "gpu-worker:latest"`,
			"gpu_worker_type: template.containers.image must be var.worker_image"},
		{"typed env", "env", "gpu_worker_types.tf",
			"for_each = local.worker_env", "for_each = local.daemon_env",
			`gpu_worker_type: containers must set env with dynamic "env" { for_each = local.worker_env }`},
		{"typed other account", "serviceAccounts", "gpu_worker_types.tf",
			"service_account                  = google_service_account.gpu_worker.email",
			"service_account                  = google_service_account.tasks.email",
			"gpu_worker_type runs as google_service_account.tasks.email, not as the default worker service's google_service_account.gpu_worker.email"},
		{"index scope", "firestore", "firestore.tf",
			`api_scope   = "MONGODB_COMPATIBLE_API"`, `api_scope   = "ANY_API"`,
			`api_scope must be "MONGODB_COMPATIBLE_API", got "ANY_API"`},
		{"standard edition", "firestore", "firestore.tf",
			`database_edition                    = "ENTERPRISE"`, `database_edition                    = "STANDARD"`,
			`database_edition must be "ENTERPRISE"`},
		{"index differs from the code", "indexes", "firestore.tf",
			`{ path = "status", order = "ASCENDING" }, { path = "sweepAt", order = "ASCENDING" }`,
			`{ path = "status", order = "ASCENDING" }, { path = "heartbeatAt", order = "ASCENDING" }`,
			"local.firestore_indexes has runs(vshard ASCENDING, status ASCENDING, heartbeatAt ASCENDING), which no code declares"},
		{"index names _id whatever the variable says", "firestore", "firestore.tf",
			`field_path = fields.value.path == "_id" ? var.index_id_field : fields.value.path`, `field_path = fields.value.path`,
			"fields.field_path must be " + idFieldPath + ", got fields.value.path"},
		{"index_id_field defaults to _id", "firestore", "variables.tf",
			`default     = "__name__"`, `default     = "_id"`,
			`variable index_id_field must default to "__name__"`},
		{"index missing", "indexes", "firestore.tf",
			"    { collection = \"gpu_slots\", fields = [{ path = \"leaseUntil\", order = \"ASCENDING\" }, { path = \"_id\", order = \"ASCENDING\" }] },\n", "",
			"local.firestore_indexes lacks gpu_slots(leaseUntil ASCENDING, _id ASCENDING), which the code declares"},
		{"run.invoker on Run for operators", "tasksIAM", "iam.tf",
			`{ "Run/tasks" = { fn = "Run", member = google_service_account.tasks.member } },`,
			`{ "Run/tasks" = { fn = "Run", member = google_service_account.tasks.member } },
    { for m in var.operator_members : "Run/${m}" => { fn = "Run", member = m } },`,
			"grants run.invoker on Run to m; Run may be invoked only by baton-tasks"},
		{"run.invoker on Run through the private-Rent branch", "tasksIAM", "iam.tf",
			`"Rent/${m}" => { fn = "Rent", member = m }`,
			`"Run/${m}" => { fn = "Run", member = m }`,
			"grants run.invoker on Run to m; Run may be invoked only by baton-tasks"},
		{"allUsers on Rent even when rent_public is false", "public", "iam.tf",
			`count = var.rent_public ? 1 : 0`,
			`count = 1`,
			"allUsers on Rent must follow var.rent_public"},
		{"run.invoker on Run for another account", "tasksIAM", "iam.tf",
			`"Run/tasks" = { fn = "Run", member = google_service_account.tasks.member }`,
			`"Run/tasks" = { fn = "Run", member = google_service_account.scheduler.member }`,
			"Run may be invoked only by baton-tasks"},
		{"baton-tasks invokes another function", "tasksIAM", "iam.tf",
			`"Run/tasks" = { fn = "Run", member = google_service_account.tasks.member }`,
			`"Run/tasks" = { fn = "Tick", member = google_service_account.tasks.member }`,
			"grants baton-tasks run.invoker on Tick; baton-tasks invokes Run only"},
		{"enqueuer on the project", "tasksIAM", "iam.tf",
			`role    = "roles/logging.logWriter"`, `role    = "roles/cloudtasks.enqueuer"`,
			"google_project_iam_member.build_logs grants roles/cloudtasks.enqueuer on more than the queue"},
		{"enqueuer for every function", "tasksIAM", "tasks.tf",
			`tasks_functions = toset([for k, f in local.functions : k if contains(keys(f.env), "BATON_TASKS_QUEUE")])`,
			"tasks_functions = toset(keys(local.functions))",
			"roles/cloudtasks.enqueuer is granted to [GPU GPUCallback Rent Run Schedules Tick], want exactly the functions that read BATON_TASKS_QUEUE"},
		{"enqueuers chosen by the wrong variable", "tasksIAM", "tasks.tf",
			`contains(keys(f.env), "BATON_TASKS_QUEUE")`, `contains(keys(f.env), "BATON_MONGO_URI")`,
			"is granted to [GPU GPUCallback Run Schedules Tick], want exactly the functions that read BATON_TASKS_QUEUE"},
		{"actAs on another account", "tasksIAM", "tasks.tf",
			"service_account_id = google_service_account.tasks.name", "service_account_id = google_service_account.scheduler.name",
			"roles/iam.serviceAccountUser is only granted on baton-tasks"},
		{"token creator on baton-tasks", "tasksIAM", "tasks.tf",
			`role               = "roles/iam.serviceAccountUser"`, `role               = "roles/iam.serviceAccountTokenCreator"`,
			`google_service_account_iam_member.tasks_actas grants "roles/iam.serviceAccountTokenCreator"`},
		{"invoker on the daemon", "tasksIAM", "daemon.tf",
			"name     = google_cloud_run_v2_service.gpu_worker.name", "name     = google_cloud_run_v2_service.daemon[0].name",
			"grants roles/run.invoker on the daemon; nothing may call it"},
		{"service agent role to another account", "serviceAccounts", "tasks.tf",
			`member  = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-cloudtasks.iam.gserviceaccount.com"`,
			`member  = google_service_account.tasks.member`,
			"roles/cloudtasks.serviceAgent may only go to the Cloud Tasks service agent"},
		{"service agent role always on", "serviceAccounts", "tasks.tf",
			"count = var.tasks_service_agent_grant ? 1 : 0", "count = 1",
			"roles/cloudtasks.serviceAgent must be opt-in"},
		{"run URL not deterministic", "tasks", "main.tf",
			`run_url  = "https://${local.run_name}-${data.google_project.this.number}.${var.region}.run.app"`,
			`run_url  = "https://${local.run_name}-uc.a.run.app"`,
			`Tick: BATON_RUN_URL = local.run_url evaluates to "https://baton-run-uc.a.run.app", want Cloud Run's deterministic URL of the Run function "baton-run"`},
		{"run URL of another name", "tasks", "main.tf",
			"      name        = local.run_name\n", "      name        = \"baton-runner\"\n",
			`evaluates to "https://baton-run-NUMBER.REGION.run.app", want Cloud Run's deterministic URL of the Run function "baton-runner"`},
		{"queue given by name", "tasks", "main.tf",
			"BATON_TASKS_QUEUE           = local.tasks_queues\n        BATON_RUN_URL               = local.run_url\n        BATON_TASKS_SERVICE_ACCOUNT = google_service_account.tasks.email\n        # Seconds-level", "BATON_TASKS_QUEUE           = \"baton-runs\"\n        BATON_RUN_URL               = local.run_url\n        BATON_TASKS_SERVICE_ACCOUNT = google_service_account.tasks.email\n        # Seconds-level",
			"Schedules: BATON_TASKS_QUEUE must be local.tasks_queues"},
		{"tasks account of another account", "tasks", "main.tf",
			"BATON_TASKS_QUEUE           = local.tasks_queues\n        BATON_RUN_URL               = local.run_url\n        BATON_TASKS_SERVICE_ACCOUNT = google_service_account.tasks.email\n        # Seconds-level", "BATON_TASKS_QUEUE           = local.tasks_queues\n        BATON_RUN_URL               = local.run_url\n        BATON_TASKS_SERVICE_ACCOUNT = google_service_account.scheduler.email\n        # Seconds-level",
			"Schedules: BATON_TASKS_SERVICE_ACCOUNT must be google_service_account.tasks.email"},
		{"tasks account renamed", "tasks", "tasks.tf",
			`account_id   = "baton-tasks"`, `account_id   = "baton-dispatch"`,
			`google_service_account.tasks must have account_id "baton-tasks"`},
		{"retry attempts hard-coded", "tasks", "tasks.tf",
			"max_attempts  = var.tasks_max_attempts", "max_attempts  = -1",
			"queue: retry_config.max_attempts must come from a variable"},
		{"rate limit hard-coded", "tasks", "tasks.tf",
			"max_concurrent_dispatches = var.tasks_max_concurrent_dispatches", "max_concurrent_dispatches = 1000",
			"queue: rate_limits.max_concurrent_dispatches must come from a variable"},
		{"retry backoff missing", "tasks", "tasks.tf",
			"    min_backoff   = \"${var.tasks_min_backoff_seconds}s\"\n", "",
			"queue: retry_config.min_backoff is not set"},
		{"Run timeout below the dispatch deadline", "tasks", "main.tf",
			"timeout = var.run_timeout_seconds", "timeout = 540",
			"Run: timeout 540 must be at least 1800 s"},
		{"Run timeout variable allows less", "tasks", "variables.tf",
			"var.run_timeout_seconds >= 1800", "var.run_timeout_seconds >= 60",
			"Run: var.run_timeout_seconds's validation must refuse less than 1800 s"},
		{"Run timeout default too short", "tasks", "variables.tf",
			"  default     = 1860\n", "  default     = 900\n",
			"Run: timeout var.run_timeout_seconds must default to at least 1800 s"},
		{"Run scales apart from the queue", "tasks", "main.tf",
			"max_instances = local.run_max_instances", "max_instances = 10",
			"Run: max_instances must be local.run_max_instances"},
		{"Run sized without its concurrency", "tasks", "main.tf",
			"var.tasks_max_concurrent_dispatches / var.run_concurrency", "var.tasks_max_concurrent_dispatches",
			"Run: max_instances must be local.run_max_instances"},
		{"daemon may scale to zero", "daemon", "daemon.tf",
			"min_instance_count = 1", "min_instance_count = 0",
			"daemon: template.scaling.min_instance_count must be 1"},
		{"two daemons", "daemon", "daemon.tf",
			"max_instance_count = 1", "max_instance_count = 2",
			"daemon: template.scaling.max_instance_count must be 1"},
		{"daemon CPU throttled", "daemon", "daemon.tf",
			"cpu_idle          = false", "cpu_idle          = true",
			"daemon: template.containers.resources.cpu_idle must be false"},
		{"daemon always deployed", "daemon", "daemon.tf",
			"  count = local.daemon_count\n\n  project             = var.project", "  project             = var.project",
			"daemon: must be deployed only when var.daemon_image is set"},
		{"daemon public", "daemon", "daemon.tf",
			`ingress             = "INGRESS_TRAFFIC_INTERNAL_ONLY"`, `ingress             = "INGRESS_TRAFFIC_ALL"`,
			`daemon: ingress must be "INGRESS_TRAFFIC_INTERNAL_ONLY"`},
		{"daemon env missing", "daemon", "daemon.tf",
			"    BATON_TICK_LEASE_TTL    = var.tick_lease_ttl\n", "",
			"daemon: BATON_TICK_LEASE_TTL is read by cmd/baton/daemon.go but not set"},
		{"daemon token in cloud", "daemon", "daemon.tf",
			"    BATON_LOG_LEVEL         = var.log_level\n  }\n}", "    BATON_LOG_LEVEL         = var.log_level\n    BATON_TOKEN             = \"s3cret\"\n  }\n}",
			"daemon: BATON_TOKEN must not be set in the cloud"},
		{"daemon port set", "daemon", "daemon.tf",
			"    BATON_LOG_LEVEL         = var.log_level\n  }\n}", "    BATON_LOG_LEVEL         = var.log_level\n    PORT                    = \"8080\"\n  }\n}",
			"daemon: PORT must not be set"},
		{"daemon env it does not read", "daemon", "daemon.tf",
			"    BATON_LOG_LEVEL         = var.log_level\n  }\n}", "    BATON_LOG_LEVEL         = var.log_level\n    BATON_TASKS_QUEUE       = google_cloud_tasks_queue.runs[0].id\n  }\n}",
			"daemon: BATON_TASKS_QUEUE is set but cmd/baton/daemon.go does not read it"},
		{"daemon runs another command", "daemon", "daemon.tf",
			`args  = ["daemon", "--poll=${var.daemon_poll}"]`, `args  = ["local"]`,
			"daemon: template.containers.args must run baton daemon"},
		{"sub-minute without the daemon", "daemon", "main.tf",
			`BATON_SUBMINUTE = var.daemon_image != "" ? "true" : "false"`, `BATON_SUBMINUTE = "true"`,
			`Schedules: BATON_SUBMINUTE = "true" must follow the daemon`},
		{"daemon shares an account", "serviceAccounts", "daemon.tf",
			"service_account = google_service_account.daemon[0].email", "service_account = google_service_account.gpu_worker.email",
			"google_service_account.gpu_worker is shared by daemon and gpu-worker"},
		{"cli_env without the database location", "cliEnv", "outputs.tf",
			"    \"export BATON_FIRESTORE_LOCATION=${local.firestore_location}\",\n", "",
			"output cli_env must export BATON_FIRESTORE_LOCATION=${local.firestore_location}"},
		{"cli_env exports the variable, not the location", "cliEnv", "outputs.tf",
			"BATON_FIRESTORE_LOCATION=${local.firestore_location}", "BATON_FIRESTORE_LOCATION=${var.firestore_location}",
			"output cli_env must export BATON_FIRESTORE_LOCATION=${local.firestore_location}"},
		{"variable without validation", "validations", "variables.tf",
			"  validation {\n    condition     = contains([\"debug\", \"info\", \"warn\", \"error\"], var.log_level)\n    error_message = \"log_level must be debug, info, warn or error.\"\n  }\n", "",
			`variable "log_level" has no validation block`},
	})
}

// tfMutation breaks one rule: old (exactly once in file) becomes new, and
// check must then report a problem containing want.
type tfMutation struct {
	name, check, file, old, new, want string
}

// checkMutations applies each mutation to the real configuration in memory
// and expects its check to report it.
func checkMutations(t *testing.T, cases []tfMutation) {
	t.Helper()
	orig := readTerraform(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := map[string][]byte{}
			for k, v := range orig {
				src[k] = v
			}
			if n := strings.Count(string(src[tc.file]), tc.old); n != 1 {
				t.Fatalf("mutation: %q occurs %d times in %s, want exactly 1; update this case to the configuration", tc.old, n, tc.file)
			}
			src[tc.file] = []byte(strings.Replace(string(src[tc.file]), tc.old, tc.new, 1))
			m, err := parseTerraform(src)
			if err != nil {
				t.Fatalf("mutated configuration does not parse: %v", err)
			}
			got := tfChecks[tc.check](m)
			for _, p := range got {
				if strings.Contains(p, tc.want) {
					return
				}
			}
			t.Errorf("check %s did not report %q; it reported %q", tc.check, tc.want, got)
		})
	}
}

// TestIndexPackagesGuard: a package that starts declaring indexes is found,
// so codeIndexes cannot silently miss it.
func TestIndexPackagesGuard(t *testing.T) {
	root := t.TempDir()
	for name, body := range map[string]string{
		"foo/foo.go":      "package foo\n\nvar Indexes = []mongostore.Index{{Collection: \"foo\"}}\n",
		"foo/foo_test.go": "package foo\n\nvar x = []mongostore.Index{}\n",
		"bar/bar_test.go": "package bar\n\nvar x = []mongostore.Index{}\n",
		"baz/baz.go":      "package baz\n",
	} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := packagesDeclaringIndexes(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"foo"}; !slices.Equal(got, want) {
		t.Errorf("packagesDeclaringIndexes = %v, want %v", got, want)
	}
}
