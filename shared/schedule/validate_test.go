package schedule

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var testOpts = ValidateOptions{
	AllowedHosts: []string{"api.example.com", "hooks.example.org:8443", "*.svc.example.net", "10.1.2.3", "[::1]:9000"},
	Builtins:     []string{"noop", "sleep", "fail"},
	GPUTypes:     []string{"nvidia-l4", "nvidia-a100"},
}

func validHTTP() *Schedule {
	return &Schedule{
		ID:     "nightly-report_1",
		Cron:   "30 2 * * *",
		Target: Target{Type: TargetHTTP, HTTP: &HTTPTarget{URL: "https://api.example.com/run", Headers: map[string]string{"X-Token": "abc"}}},
	}
}

func TestNormalizeDefaults(t *testing.T) {
	t.Parallel()
	s := validHTTP()
	s.Target.HTTP.Method = "put"
	if err := s.Normalize(testOpts); err != nil {
		t.Fatalf("Normalize: %v", err)
	}
	want := validHTTP()
	want.Overlap, want.Catchup, want.MaxCatchup = OverlapBufferOne, CatchupLatest, 10
	want.CatchupWindow = Duration(time.Hour)
	want.Retry = Retry{MaxAttempts: 1, Backoff: Duration(30 * time.Second)}
	want.LeaseTTL = Duration(30 * time.Second)
	want.Target.HTTP.Method, want.Target.HTTP.Timeout = "PUT", Duration(30*time.Second)
	want.DeciderShard = 55 // FNV-1a 32 of "nightly-report_1" mod 64
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("Normalize defaults (-want,+got):\n%s", diff)
	}

	g := &Schedule{ID: "gpu", Cron: "@hourly", TimeZone: "Europe/Berlin", Target: Target{Type: TargetGPU, GPU: &GPUTarget{}}}
	if err := g.Normalize(testOpts); err != nil {
		t.Fatalf("Normalize gpu: %v", err)
	}
	if diff := cmp.Diff(GPUTarget{MaxAttempts: 3, Timeout: Duration(10 * time.Minute)}, *g.Target.GPU); diff != "" {
		t.Errorf("GPU defaults (-want,+got):\n%s", diff)
	}

	// Set values are kept, and NextRunAt is not touched.
	k := validHTTP()
	k.Overlap, k.Catchup, k.MaxCatchup, k.LeaseTTL = OverlapSkip, CatchupAll, 3, Duration(time.Minute)
	k.NextRunAt = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	before := *k
	if err := k.Normalize(testOpts); err != nil {
		t.Fatal(err)
	}
	if k.Overlap != before.Overlap || k.Catchup != before.Catchup || k.MaxCatchup != 3 || k.LeaseTTL != before.LeaseTTL || !k.NextRunAt.Equal(before.NextRunAt) {
		t.Errorf("Normalize changed set fields: got %+v", k)
	}
}

// TestNormalizeErrors: each bad field yields a *FieldError naming it.
func TestNormalizeErrors(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 2000)
	for _, tc := range []struct {
		name  string
		edit  func(s *Schedule)
		field string
	}{
		{"no id", func(s *Schedule) { s.ID = "" }, "id"},
		{"upper-case id", func(s *Schedule) { s.ID = "Nightly" }, "id"},
		{"id with slash", func(s *Schedule) { s.ID = "a/b" }, "id"},
		{"id starting with dash", func(s *Schedule) { s.ID = "-a" }, "id"},
		{"id too long", func(s *Schedule) { s.ID = strings.Repeat("a", 64) }, "id"},
		{"long description", func(s *Schedule) { s.Description = long }, "description"},
		{"no cron", func(s *Schedule) { s.Cron = "" }, "cron"},
		{"bad cron", func(s *Schedule) { s.Cron = "61 * * * *" }, "cron"},
		{"long cron", func(s *Schedule) { s.Cron = long }, "cron"},
		{"unknown zone", func(s *Schedule) { s.TimeZone = "Europe/Atlantis" }, "timeZone"},
		{"local zone", func(s *Schedule) { s.TimeZone = "Local" }, "timeZone"},
		{"overlap", func(s *Schedule) { s.Overlap = "queue" }, "overlap"},
		{"catchup", func(s *Schedule) { s.Catchup = "some" }, "catchup"},
		{"maxCatchup negative", func(s *Schedule) { s.MaxCatchup = -1 }, "maxCatchup"},
		{"maxCatchup huge", func(s *Schedule) { s.MaxCatchup = 1001 }, "maxCatchup"},
		{"catchupWindow negative", func(s *Schedule) { s.CatchupWindow = Duration(-time.Second) }, "catchupWindow"},
		{"catchupWindow huge", func(s *Schedule) { s.CatchupWindow = Duration(8 * 24 * time.Hour) }, "catchupWindow"},
		{"retry attempts", func(s *Schedule) { s.Retry.MaxAttempts = 11 }, "retry.maxAttempts"},
		{"retry attempts negative", func(s *Schedule) { s.Retry.MaxAttempts = -1 }, "retry.maxAttempts"},
		{"retry backoff", func(s *Schedule) { s.Retry.Backoff = Duration(time.Millisecond) }, "retry.backoff"},
		{"leaseTTL short", func(s *Schedule) { s.LeaseTTL = Duration(2 * time.Second) }, "leaseTTL"},
		{"leaseTTL long", func(s *Schedule) { s.LeaseTTL = Duration(2 * time.Hour) }, "leaseTTL"},
		{"no target type", func(s *Schedule) { s.Target.Type = "" }, "target.type"},
		{"unknown target type", func(s *Schedule) { s.Target.Type = "ftp" }, "target.type"},
		{"type without its target", func(s *Schedule) { s.Target.Type = TargetGPU }, "target.gpu"},
		{"two targets", func(s *Schedule) { s.Target.Builtin = &BuiltinTarget{Name: "noop"} }, "target.builtin"},
		{"method", func(s *Schedule) { s.Target.HTTP.Method = "CONNECT" }, "target.http.method"},
		{"no url", func(s *Schedule) { s.Target.HTTP.URL = "" }, "target.http.url"},
		{"relative url", func(s *Schedule) { s.Target.HTTP.URL = "/run" }, "target.http.url"},
		{"unparsable url", func(s *Schedule) { s.Target.HTTP.URL = "http://api.example.com:port/" }, "target.http.url"},
		{"port out of range", func(s *Schedule) { s.Target.HTTP.URL = "https://api.example.com:99999/x" }, "target.http.url"},
		{"port zero", func(s *Schedule) { s.Target.HTTP.URL = "https://api.example.com:0/x" }, "target.http.url"},
		{"ssrf metadata", func(s *Schedule) { s.Target.HTTP.URL = "http://169.254.169.254/computeMetadata/v1/" }, "target.http.url"},
		{"ssrf metadata name", func(s *Schedule) { s.Target.HTTP.URL = "http://metadata.google.internal/" }, "target.http.url"},
		{"ssrf localhost", func(s *Schedule) { s.Target.HTTP.URL = "http://localhost:8080/" }, "target.http.url"},
		{"ssrf loopback", func(s *Schedule) { s.Target.HTTP.URL = "http://127.0.0.1/" }, "target.http.url"},
		{"ssrf v6 loopback other port", func(s *Schedule) { s.Target.HTTP.URL = "http://[::1]:9001/" }, "target.http.url"},
		{"userinfo", func(s *Schedule) { s.Target.HTTP.URL = "https://user:pw@api.example.com/" }, "target.http.url"},
		{"userinfo host trick", func(s *Schedule) { s.Target.HTTP.URL = "https://api.example.com@evil.test/" }, "target.http.url"},
		{"file scheme", func(s *Schedule) { s.Target.HTTP.URL = "file:///etc/passwd" }, "target.http.url"},
		{"gopher scheme", func(s *Schedule) { s.Target.HTTP.URL = "gopher://api.example.com/" }, "target.http.url"},
		{"no scheme", func(s *Schedule) { s.Target.HTTP.URL = "api.example.com/run" }, "target.http.url"},
		{"fragment", func(s *Schedule) { s.Target.HTTP.URL = "https://api.example.com/#x" }, "target.http.url"},
		{"wrong port", func(s *Schedule) { s.Target.HTTP.URL = "https://hooks.example.org/" }, "target.http.url"},
		{"suffix trick", func(s *Schedule) { s.Target.HTTP.URL = "https://api.example.com.evil.test/" }, "target.http.url"},
		{"wildcard apex", func(s *Schedule) { s.Target.HTTP.URL = "https://svc.example.net/" }, "target.http.url"},
		{"percent host", func(s *Schedule) { s.Target.HTTP.URL = "https://api%2eexample.com/" }, "target.http.url"},
		{"header name", func(s *Schedule) { s.Target.HTTP.Headers = map[string]string{"Bad Header": "x"} }, `target.http.headers["Bad Header"]`},
		{"too many headers", func(s *Schedule) { s.Target.HTTP.Headers = many(MaxHeaders+1, "x") }, "target.http.headers"},
		{"long header name", func(s *Schedule) {
			s.Target.HTTP.Headers = map[string]string{strings.Repeat("X", MaxHeaderNameLen+1): "x"}
		}, `target.http.headers["XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX…"]`},
		{"big header value", func(s *Schedule) {
			s.Target.HTTP.Headers = map[string]string{"X-A": strings.Repeat("x", MaxHeaderValueLen+1)}
		}, "target.http.headers.X-A"},
		{"$ header name", func(s *Schedule) { s.Target.HTTP.Headers = map[string]string{"$where": "1"} }, `target.http.headers["$where"]`},
		{"dotted header name", func(s *Schedule) { s.Target.HTTP.Headers = map[string]string{"X.A": "1"} }, `target.http.headers["X.A"]`},
		{"__x__ header name", func(s *Schedule) { s.Target.HTTP.Headers = map[string]string{"__name__": "1"} }, "target.http.headers.__name__"},
		{"too many args", args(many(MaxArgs+1, "v")), "target.builtin.args"},
		{"big arg", args(map[string]string{"duration": strings.Repeat("x", MaxArgValueLen+1)}), "target.builtin.args.duration"},
		{"long arg key", args(map[string]string{strings.Repeat("k", MaxArgKeyLen+1): "v"}), `target.builtin.args["kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk…"]`},
		{"empty arg key", args(map[string]string{"": "v"}), `target.builtin.args[""]`},
		{"$ arg key", args(map[string]string{"$where": "1"}), `target.builtin.args["$where"]`},
		{"dotted arg key", args(map[string]string{"a.b": "1"}), `target.builtin.args["a.b"]`},
		{"__x__ arg key", args(map[string]string{"__x__": "1"}), "target.builtin.args.__x__"},
		{"NUL arg key", args(map[string]string{"a\x00b": "1"}), `target.builtin.args["a\x00b"]`},
		{"schedule too big", args(many(MaxArgs, strings.Repeat("v", MaxArgValueLen))), "target"},
		{"gpu payload", gpu(func(g *GPUTarget) { g.Payload = strings.Repeat("x", MaxHTTPBody+1) }), "target.gpu.payload"},
		{"header value CRLF", func(s *Schedule) { s.Target.HTTP.Headers = map[string]string{"X-A": "1\r\nX-B: 2"} }, "target.http.headers.X-A"},
		{"reserved header", func(s *Schedule) { s.Target.HTTP.Headers = map[string]string{"host": "evil.test"} }, "target.http.headers.host"},
		{"baton header", func(s *Schedule) { s.Target.HTTP.Headers = map[string]string{"X-Baton-Run-Id": "x"} }, "target.http.headers.X-Baton-Run-Id"},
		{"big body", func(s *Schedule) { s.Target.HTTP.Body = strings.Repeat("x", MaxHTTPBody+1) }, "target.http.body"},
		{"http timeout short", func(s *Schedule) { s.Target.HTTP.Timeout = Duration(time.Millisecond) }, "target.http.timeout"},
		{"http timeout long", func(s *Schedule) { s.Target.HTTP.Timeout = Duration(time.Hour) }, "target.http.timeout"},
		{"gpu priority", gpu(func(g *GPUTarget) { g.Priority = -1 }), "target.gpu.priority"},
		{"gpu attempts", gpu(func(g *GPUTarget) { g.MaxAttempts = 99 }), "target.gpu.maxAttempts"},
		{"gpu timeout", gpu(func(g *GPUTarget) { g.Timeout = Duration(48 * time.Hour) }), "target.gpu.timeout"},
		{"gpu tenant with =", gpu(func(g *GPUTarget) { g.Tenant = "a=b" }), "target.gpu.tenant"},
		{"gpu tenant too long", gpu(func(g *GPUTarget) { g.Tenant = strings.Repeat("t", 64) }), "target.gpu.tenant"},
		{"gpu tenant leading dot", gpu(func(g *GPUTarget) { g.Tenant = ".batch" }), "target.gpu.tenant"},
		{"gpu type malformed", gpu(func(g *GPUTarget) { g.GPUType = "Nvidia L4" }), "target.gpu.gpuType"},
		{"gpu type not in the pool", gpu(func(g *GPUTarget) { g.GPUType = "nvidia-h100" }), "target.gpu.gpuType"},
		{"builtin unknown", builtin("reboot"), "target.builtin.name"},
		{"builtin empty", builtin(""), "target.builtin.name"},
		{"concurrency without group", func(s *Schedule) { s.Concurrency = &Concurrency{Limit: 1} }, "concurrency.group"},
		{"concurrency group upper-case", func(s *Schedule) { s.Concurrency = &Concurrency{Group: "ETL", Limit: 1} }, "concurrency.group"},
		{"concurrency group with slash", func(s *Schedule) { s.Concurrency = &Concurrency{Group: "a/b", Limit: 1} }, "concurrency.group"},
		{"concurrency group too long", func(s *Schedule) { s.Concurrency = &Concurrency{Group: strings.Repeat("g", 64), Limit: 1} }, "concurrency.group"},
		{"concurrency limit 0", func(s *Schedule) { s.Concurrency = &Concurrency{Group: "etl"} }, "concurrency.limit"},
		{"concurrency limit too big", func(s *Schedule) { s.Concurrency = &Concurrency{Group: "etl", Limit: MaxConcurrencyLimit + 1} }, "concurrency.limit"},
		{"concurrency on a gpu target", func(s *Schedule) {
			gpu(func(*GPUTarget) {})(s)
			s.Concurrency = &Concurrency{Group: "etl", Limit: 1}
		}, "concurrency"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := validHTTP()
			tc.edit(s)
			err := s.Normalize(testOpts)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Normalize: got %v, want a *FieldError on %q", err, tc.field)
			}
			if fe.Field != tc.field {
				t.Errorf("FieldError.Field (-want,+got):\n-%s\n+%s (%v)", tc.field, fe.Field, fe)
			}
			if fe.Reason == "" {
				t.Errorf("FieldError on %q has no reason", fe.Field)
			}
		})
	}
}

func gpu(edit func(*GPUTarget)) func(*Schedule) {
	return func(s *Schedule) {
		s.Target = Target{Type: TargetGPU, GPU: &GPUTarget{}}
		s.Target.GPU.MaxAttempts, s.Target.GPU.Timeout = 1, Duration(time.Minute)
		edit(s.Target.GPU)
	}
}

// args sets a noop builtin target with these args.
func args(a map[string]string) func(*Schedule) {
	return func(s *Schedule) {
		s.Target = Target{Type: TargetBuiltin, Builtin: &BuiltinTarget{Name: "noop", Args: a}}
	}
}

// many returns n entries k0…, each with value v.
func many(n int, v string) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprintf("k%d", i)] = v
	}
	return m
}

func builtin(name string) func(*Schedule) {
	return func(s *Schedule) { s.Target = Target{Type: TargetBuiltin, Builtin: &BuiltinTarget{Name: name}} }
}

func TestNormalizeAccepts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		edit func(s *Schedule)
	}{
		{"allowed v4 literal", func(s *Schedule) { s.Target.HTTP.URL = "http://10.1.2.3:8080/x" }},
		{"allowed v6 with port", func(s *Schedule) { s.Target.HTTP.URL = "http://[::1]:9000/" }},
		{"port-pinned host", func(s *Schedule) { s.Target.HTTP.URL = "https://hooks.example.org:8443/h" }},
		{"wildcard subdomain", func(s *Schedule) { s.Target.HTTP.URL = "https://a.b.svc.example.net/" }},
		{"host case and dot", func(s *Schedule) { s.Target.HTTP.URL = "https://API.Example.com./x?q=1" }},
		{"builtin", builtin("sleep")},
		{"builtin unchecked", func(s *Schedule) { builtin("anything")(s) }},
		{"gpu", gpu(func(*GPUTarget) {})},
		{"gpu tenant, type and preemptible", gpu(func(g *GPUTarget) {
			g.Tenant, g.GPUType, g.Preemptible = strings.Repeat("t", 63), "nvidia-a100", true
		})},
		{"gpu type unchecked", gpu(func(g *GPUTarget) { g.GPUType = "nvidia-h100" })},
		{"every", func(s *Schedule) { s.Cron = "@every 90s"; s.TimeZone = "America/New_York" }},
		{"zero catchup window stays default", func(s *Schedule) { s.CatchupWindow = 0 }},
	} {
		s := validHTTP()
		tc.edit(s)
		opts := testOpts
		if tc.name == "builtin unchecked" {
			opts.Builtins = nil
		}
		if tc.name == "gpu type unchecked" {
			// A process that does not know the pool (nil) checks only
			// the type's form.
			opts.GPUTypes = nil
		}
		if err := s.Normalize(opts); err != nil {
			t.Errorf("%s: Normalize: %v", tc.name, err)
		}
	}
}

func TestIsAllowedHost(t *testing.T) {
	t.Parallel()
	allow := []string{"api.example.com", "hooks.example.org:8443", "*.svc.example.net", "*.x.test:443", "10.1.2.3", "[::1]:9000", "2001:db8::1", " spaced.example.com "}
	for _, tc := range []struct {
		url  string
		want bool
	}{
		{"https://api.example.com/", true},
		{"http://api.example.com:8080/", true}, // a bare host allows any port
		{"https://API.EXAMPLE.COM./", true},
		{"https://hooks.example.org:8443/", true},
		{"https://hooks.example.org/", false},    // 443 is not 8443
		{"http://hooks.example.org:8443/", true}, // the port decides, not the scheme
		{"https://a.svc.example.net/", true},
		{"https://a.b.svc.example.net/", true},
		{"https://svc.example.net/", false}, // a wildcard is not the apex
		{"https://evilsvc.example.net/", false},
		{"https://a.x.test/", true}, // default 443 matches the pinned port
		{"http://a.x.test/", false}, // default 80 does not
		{"http://10.1.2.3/", true},
		{"http://10.1.2.4/", false},
		{"http://[::1]:9000/", true},
		{"http://[::1]/", false},
		{"http://[2001:db8:0::1]/", true}, // canonical IPv6 form
		{"http://spaced.example.com/", true},
		{"http://169.254.169.254/", false},
		{"http://localhost/", false},
		{"http://127.0.0.1/", false},
		{"http://1.svc.example.net.evil.test/", false},
		{"ftp://api.example.com/", false},
		{"https://u:p@api.example.com/", false},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := IsAllowedHost(u, allow); got != tc.want {
			t.Errorf("IsAllowedHost(%s) (-want,+got): -%v +%v", tc.url, tc.want, got)
		}
	}
	// Wildcards never admit IP literals, and an empty list admits nothing.
	u, _ := url.Parse("http://169.254.169.254/")
	if IsAllowedHost(u, []string{"*.254.169.254"}) {
		t.Error("a wildcard entry admitted an IP literal")
	}
	u, _ = url.Parse("https://api.example.com/")
	if IsAllowedHost(u, nil) || IsAllowedHost(nil, allow) {
		t.Error("an empty allowlist or a nil URL admitted a host")
	}
	if _, err := CheckTargetURL("https://api.example.com/", nil); err == nil || !strings.Contains(err.Error(), "BATON_ALLOWED_TARGETS is empty") {
		t.Errorf("CheckTargetURL with no allowlist: got %v, want an error saying the allowlist is empty", err)
	}
}

func TestLoadLocation(t *testing.T) {
	t.Parallel()
	for _, tz := range []string{"", "UTC", "Europe/Berlin", "America/New_York", "Pacific/Apia"} {
		if _, err := LoadLocation(tz); err != nil {
			t.Errorf("LoadLocation(%q): %v", tz, err)
		}
	}
	for _, tz := range []string{"Local", "Europe/Atlantis", "../../etc/passwd", "Europe/Berlin ", strings.Repeat("A", 100)} {
		_, err := LoadLocation(tz)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "timeZone" {
			t.Errorf("LoadLocation(%q): got %v, want a *FieldError on timeZone", tz, err)
		}
	}
}

func TestFieldErrorString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		e    FieldError
		want string
	}{
		{FieldError{Field: "cron", Reason: "is empty"}, "cron: is empty"},
		{FieldError{Reason: "body is empty"}, "body is empty"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() (-want,+got):\n-%s\n+%s", tc.want, got)
		}
	}
}

func TestCheckAllowlist(t *testing.T) {
	t.Parallel()
	if err := CheckAllowlist([]string{"api.example.com", "h.example.org:8443", "*.svc.example.net", "10.1.2.3", "[::1]:9000", "2001:db8::1", " x.test "}); err != nil {
		t.Errorf("CheckAllowlist of good entries: %v", err)
	}
	for _, bad := range []string{"", "*", "https://api.example.com", "api.example.com:http", "a.test:70000", "*.10.0.0.1", "bad host", "[::1"} {
		if err := CheckAllowlist([]string{bad}); err == nil {
			t.Errorf("CheckAllowlist(%q): got nil, want an error", bad)
		}
	}
}

// TestNormalizeBoundsAccept: the largest maps each bound allows pass, so
// the bounds refuse only what is over them.
func TestNormalizeBoundsAccept(t *testing.T) {
	t.Parallel()
	s := validHTTP()
	s.Target.HTTP.Headers = many(MaxHeaders, strings.Repeat("v", 1<<10))
	s.Target.HTTP.Body = strings.Repeat("b", MaxHTTPBody)
	if err := s.Normalize(testOpts); err != nil {
		t.Errorf("%d headers of 1 KiB and a body of %d bytes: %v", MaxHeaders, MaxHTTPBody, err)
	}
	s = validHTTP()
	args(many(MaxArgs, strings.Repeat("v", 512)))(s)
	if err := s.Normalize(testOpts); err != nil {
		t.Errorf("%d args of 512 bytes: %v", MaxArgs, err)
	}
}

// TestNormalizeCutsEchoedInput: a reason quotes at most a short prefix of a
// huge input, since it is sent back to the caller.
func TestNormalizeCutsEchoedInput(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("X", 900<<10)
	for name, edit := range map[string]func(*Schedule){
		"id":       func(s *Schedule) { s.ID = huge },
		"timeZone": func(s *Schedule) { s.TimeZone = huge },
		"overlap":  func(s *Schedule) { s.Overlap = Overlap(huge) },
		"method":   func(s *Schedule) { s.Target.HTTP.Method = huge },
		"arg key":  args(map[string]string{"$" + huge: "1"}),
	} {
		s := validHTTP()
		edit(s)
		err := s.Normalize(testOpts)
		if err == nil || len(err.Error()) > 1<<10 {
			t.Errorf("%s of 900 KB: error of %d bytes, want one under 1 KiB: %.200v", name, len(fmt.Sprint(err)), err)
		}
	}
}

// TestGPUTypeUntypedPool: a pool that is known but has no typed worker
// (an empty GPUTypes, not nil) can run no gpuType, and the error says so.
func TestGPUTypeUntypedPool(t *testing.T) {
	t.Parallel()
	s := validHTTP()
	gpu(func(g *GPUTarget) { g.GPUType = "nvidia-l4" })(s)
	opts := testOpts
	opts.GPUTypes = []string{}
	var fe *FieldError
	if err := s.Normalize(opts); !errors.As(err, &fe) || fe.Field != "target.gpu.gpuType" || !strings.Contains(fe.Reason, "declares a GPU type") {
		t.Fatalf("Normalize with an untyped pool: got %v, want a FieldError on target.gpu.gpuType saying no worker declares a type", err)
	}
	s.Target.GPU.GPUType = ""
	if err := s.Normalize(opts); err != nil {
		t.Fatalf("Normalize without gpuType on an untyped pool: %v", err)
	}
}
