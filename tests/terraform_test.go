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

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store"
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
	config.EnvToken:      "in the cloud IAM invoker checks authenticate callers",
}

// deploymentSets are variables with a code default that the deployment must
// still set, because the default only suits local use.
var deploymentSets = []string{config.EnvWorkerCommand}

// buildEnv is what the functions' build environment may hold, with the
// value each must have.
var buildEnv = map[string]string{"GOOGLE_FUNCTION_SOURCE": "functions"}

// projectRoles are the only roles granted on the whole project: Firestore
// access is only grantable there (and is narrowed by a condition), and the
// build account needs the Cloud Build builder role.
var projectRoles = []string{"roles/datastore.user", "roles/cloudbuild.builds.builder"}

// deployed are the deployables Terraform runs, by config name.
var deployed = []string{config.FnTick, config.FnSchedules, config.FnGPU, config.FnRent, config.SvcWorker}

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
		k, ok := literal(it.KeyExpr.(hclsyntax.Expression))
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
	w := m.resources["google_cloud_run_v2_service.gpu_worker"]
	if w == nil {
		problems = append(problems, "resource google_cloud_run_v2_service.gpu_worker is missing")
	} else {
		var d *hclsyntax.Block
		if t := block(w.Body, "template"); t != nil {
			if c := block(t.Body, "containers"); c != nil {
				d = dynamicBlock(c.Body, "env")
			}
		}
		if d == nil || d.Body.Attributes["for_each"] == nil || m.text(d.Body.Attributes["for_each"].Expr) != "local.worker_env" {
			problems = append(problems, "gpu_worker: containers must set env with dynamic \"env\" { for_each = local.worker_env }")
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
	ref := regexp.MustCompile(`^google_service_account\.([a-z0-9_]+)(\[each\.key\])?\.(email|id|member)$`)
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
		uses[mm[1]+mm[2]] = append(uses[mm[1]+mm[2]], who)
	}
	if fn := m.resources["google_cloudfunctions2_function.fn"]; fn != nil {
		a := attr(fn, "service_config", "service_account_email")
		use("functions (runtime)", a)
		if a != nil && !strings.HasSuffix(m.text(a.Expr), "[each.key].email") {
			problems = append(problems, "functions: service_config.service_account_email must be per function (google_service_account.X[each.key].email)")
		}
		use("functions (build)", attr(fn, "build_config", "service_account"))
	}
	if w := m.resources["google_cloud_run_v2_service.gpu_worker"]; w != nil {
		use(config.SvcWorker, attr(w, "template", "service_account"))
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

// checkGPUService: the GPU worker runs one job per instance with its CPU
// always on, on a GPU.
func checkGPUService(m *tfModule) []string {
	w := m.resources["google_cloud_run_v2_service.gpu_worker"]
	if w == nil {
		return []string{"resource google_cloud_run_v2_service.gpu_worker is missing"}
	}
	var problems []string
	want := func(path []string, ok func(hclsyntax.Expression) bool, why string) {
		a := attr(w, path...)
		if a == nil || !ok(a.Expr) {
			problems = append(problems, fmt.Sprintf("gpu_worker: %s %s", strings.Join(path, "."), why))
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
	want([]string{"template", "scaling", "max_instance_count"}, isText("var.gpu_slots"), "must be var.gpu_slots")
	want([]string{"template", "node_selector", "accelerator"}, isText("var.gpu_accelerator"), "must be var.gpu_accelerator")
	want([]string{"template", "gpu_zonal_redundancy_disabled"}, isText("var.gpu_zonal_redundancy_disabled"), "must be var.gpu_zonal_redundancy_disabled")
	want([]string{"template", "timeout"}, func(e hclsyntax.Expression) bool { return true }, "must be set")
	if a := attr(w, "template", "containers", "resources", "limits"); a == nil {
		problems = append(problems, "gpu_worker: containers.resources.limits is missing")
	} else if keys, ok := objectKeys(a.Expr); !ok {
		problems = append(problems, "gpu_worker: resources.limits must be a literal object")
	} else if g, ok := keys["nvidia.com/gpu"]; !ok || !isLit(cty.StringVal("1"))(g) {
		problems = append(problems, `gpu_worker: resources.limits must set "nvidia.com/gpu" = "1"`)
	}
	sort.Strings(problems)
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
	}
	if n == 0 {
		problems = append(problems, "no google_firestore_index")
	}
	sort.Strings(problems)
	return problems
}

// indexPackages are the packages whose Indexes the deployment must declare,
// by directory under shared/. codeIndexes refuses to run when another
// package declares store.Index values, so a new one cannot be missed.
var indexPackages = map[string][]store.Index{
	"scheduler": scheduler.Indexes,
	"gpu":       gpu.Indexes,
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
			return nil, fmt.Errorf("shared/%s declares store.Index values: add its Indexes to indexPackages in tests/terraform_test.go and to local.firestore_indexes", p)
		}
	}
	var all []store.Index
	for _, p := range sortedKeys(indexPackages) {
		all = append(all, indexPackages[p]...)
	}
	set := map[string]bool{}
	for _, ix := range all {
		var fields []string
		for _, k := range ix.Keys {
			var dir int64
			switch v := k.Value.(type) {
			case int:
				dir = int64(v)
			case int32:
				dir = int64(v)
			case int64:
				dir = v
			default:
				return nil, fmt.Errorf("index %s.%s: key %s has direction %v (%T); Terraform can only express 1 and -1", ix.Collection, ix.Name, k.Key, k.Value, k.Value)
			}
			order := map[int64]string{1: "ASCENDING", -1: "DESCENDING"}[dir]
			if order == "" {
				return nil, fmt.Errorf("index %s.%s: key %s has direction %d", ix.Collection, ix.Name, k.Key, dir)
			}
			fields = append(fields, k.Key+" "+order)
		}
		key := ix.Collection + "(" + strings.Join(fields, ", ") + ")"
		if ix.Unique {
			key += " unique"
		}
		set[key] = true
	}
	return sortedKeys(set), nil
}

// packagesDeclaringIndexes lists the directories under root whose non-test
// Go files build a []store.Index.
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
		if strings.Contains(string(b), "[]store.Index{") {
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
	if !ok || !(v.Type().IsTupleType() || v.Type().IsListType()) {
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

var tfChecks = map[string]func(*tfModule) []string{
	"env":             checkEnv,
	"serviceAccounts": checkServiceAccounts,
	"public":          checkPublic,
	"scheduler":       checkScheduler,
	"gpuService":      checkGPUService,
	"firestore":       checkFirestore,
	"indexes":         checkIndexes,
	"validations":     checkValidations,
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
	cases := []struct {
		name, check, file, old, new, want string
	}{
		{"env missing", "env", "main.tf",
			"        BATON_GPU_POOL        = local.gpu_pool\n        BATON_TICK_LEASE_TTL", "        BATON_TICK_LEASE_TTL",
			"Tick: BATON_GPU_POOL is read by Tick (config.Vars) but not set"},
		{"env default-only var still required", "env", "main.tf",
			"    BATON_WORKER_COMMAND = jsonencode(var.worker_command)\n", "",
			"gpu-worker: BATON_WORKER_COMMAND is read by gpu-worker (config.Vars) but not set"},
		{"env unknown", "env", "main.tf",
			"        BATON_LOG_LEVEL = var.log_level\n      }\n    }\n  }\n",
			"        BATON_LOG_LEVEL = var.log_level\n        BATON_LOG_LEVLE = \"debug\"\n      }\n    }\n  }\n",
			"Rent: BATON_LOG_LEVLE is set but unknown"},
		{"env token in cloud", "env", "main.tf",
			"        BATON_LOG_LEVEL       = var.log_level\n      }\n    }\n    GPU = {",
			"        BATON_LOG_LEVEL       = var.log_level\n        BATON_TOKEN = \"s3cret\"\n      }\n    }\n    GPU = {",
			"Schedules: BATON_TOKEN must not be set in the cloud"},
		{"env emulator in cloud", "env", "main.tf",
			"    BATON_LOG_LEVEL      = var.log_level\n",
			"    BATON_LOG_LEVEL      = var.log_level\n    STORAGE_EMULATOR_HOST = \"localhost:4443\"\n",
			"gpu-worker: STORAGE_EMULATOR_HOST must not be set in the cloud"},
		{"env on a deployable that does not read it", "env", "main.tf",
			"        BATON_LOG_LEVEL       = var.log_level\n      }\n    }\n    GPU = {",
			"        BATON_LOG_LEVEL       = var.log_level\n        BATON_TICK_LEASE_TTL = var.tick_lease_ttl\n      }\n    }\n    GPU = {",
			"Schedules: BATON_TICK_LEASE_TTL is set on Schedules, which does not read it"},
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
			`role    = "roles/cloudbuild.builds.builder"`, `role    = "roles/editor"`,
			`google_project_iam_member.build grants "roles/editor" on the whole project`},
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
		{"index scope", "firestore", "firestore.tf",
			`api_scope   = "MONGODB_COMPATIBLE_API"`, `api_scope   = "ANY_API"`,
			`api_scope must be "MONGODB_COMPATIBLE_API", got "ANY_API"`},
		{"standard edition", "firestore", "firestore.tf",
			`database_edition                    = "ENTERPRISE"`, `database_edition                    = "STANDARD"`,
			`database_edition must be "ENTERPRISE"`},
		{"index differs from the code", "indexes", "firestore.tf",
			`{ path = "status", order = "ASCENDING" }, { path = "sweepAt", order = "ASCENDING" }`,
			`{ path = "status", order = "ASCENDING" }, { path = "heartbeatAt", order = "ASCENDING" }`,
			"local.firestore_indexes has runs(status ASCENDING, heartbeatAt ASCENDING), which no code declares"},
		{"index missing", "indexes", "firestore.tf",
			"    { collection = \"gpu_slots\", fields = [{ path = \"leaseUntil\", order = \"ASCENDING\" }, { path = \"_id\", order = \"ASCENDING\" }] },\n", "",
			"local.firestore_indexes lacks gpu_slots(leaseUntil ASCENDING, _id ASCENDING), which the code declares"},
		{"variable without validation", "validations", "variables.tf",
			"  validation {\n    condition     = contains([\"debug\", \"info\", \"warn\", \"error\"], var.log_level)\n    error_message = \"log_level must be debug, info, warn or error.\"\n  }\n", "",
			`variable "log_level" has no validation block`},
	}
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
		"foo/foo.go":      "package foo\n\nvar Indexes = []store.Index{{Collection: \"foo\"}}\n",
		"foo/foo_test.go": "package foo\n\nvar x = []store.Index{}\n",
		"bar/bar_test.go": "package bar\n\nvar x = []store.Index{}\n",
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
