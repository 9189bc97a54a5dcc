package schedule

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/textproto"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/httpapi"
)

// FieldError says which input field is wrong and why. Field is the JSON path
// in dotted form ("target.http.url", "retry.maxAttempts"), or "" when the
// body as a whole is at fault. The API turns it into a 400 naming the field.
// It is errcode.FieldError, baton's one validation error, under the name
// callers of this package know.
type FieldError = errcode.FieldError

// fieldErr formats with httpapi.Sprintf, so an input value echoed with %q
// is cut short: the reason is sent back to the caller.
func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Reason: httpapi.Sprintf(format, args...)}
}

// ValidateOptions carries what validation needs from the deployment.
type ValidateOptions struct {
	// AllowedHosts are the BATON_ALLOWED_TARGETS entries: "host",
	// "host:port", "*.example.com" or "*.example.com:port". Empty refuses
	// every http target. See IsAllowedHost.
	AllowedHosts []string
	// Builtins are the registered builtin target names; nil skips the check.
	Builtins []string
	// RefuseSubMinute refuses a cron that can fire twice within a minute
	// (SubMinute). The deployed system ticks once a minute unless baton
	// daemon runs; it would fire such a schedule once a minute in silence.
	RefuseSubMinute bool
	// GPUTypes are the GPU types of the pool (BATON_GPU_POOL's "@type"
	// entries) that a gpu target's gpuType must be one of; nil skips the
	// check, for a process that does not know the pool. An empty non-nil
	// slice is a pool with no typed worker, where no gpuType can run.
	GPUTypes []string
	// AllowedTopics are the BATON_ALLOWED_TOPICS entries that a pubsub
	// target's topic must match: "projects/P/topics/T" or
	// "projects/P/topics/*". Empty refuses every pubsub target. See
	// IsAllowedTopic.
	AllowedTopics []string
	// AllowedJobs are the BATON_ALLOWED_JOBS entries that a cloudRunJob
	// target's job must match: "projects/P/locations/R/jobs/J" or
	// "projects/P/locations/R/jobs/*". Empty refuses every cloudRunJob
	// target. See IsAllowedJob.
	AllowedJobs []string
}

// gpuTenantPattern is a GPU tenant's name: short, and free of the "=" and
// "," that BATON_GPU_WEIGHTS and BATON_GPU_QUOTAS use as separators. It is
// here, not in shared/gpu (which imports this package), so that a
// schedule's gpu target and an API-enqueued job accept the same tenants.
var gpuTenantPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// gpuTypePattern is a GPU type's name, as Cloud Run spells accelerators
// (nvidia-l4, nvidia-rtx-pro-6000). It is shared with shared/gpu for the
// same reason as gpuTenantPattern.
var gpuTypePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// ValidGPUTenant reports whether s is a well-formed GPU tenant name (1-63
// letters, digits and ._- starting with a letter or digit).
func ValidGPUTenant(s string) bool { return gpuTenantPattern.MatchString(s) }

// ValidGPUType reports whether s is a well-formed GPU type name (1-63
// lower-case letters, digits and - starting with a letter or digit).
func ValidGPUType(s string) bool { return gpuTypePattern.MatchString(s) }

// SubMinuteHint is the reason given when RefuseSubMinute refuses a cron.
const SubMinuteHint = "fires more than once a minute, but this deployment ticks once a minute: deploy baton daemon " +
	"(Terraform: -var daemon_image=IMAGE, docs/deploy.md), which ticks every second, or use a cron of one minute or more"

// Cloud Tasks bounds: a task's dispatch deadline is 15 s to 30 min. Each run
// executes in the Run function, called by one task, so an http target must
// finish within the deadline, less what Run needs to take the job lease and
// record the outcome.
const (
	MaxDispatchDeadline = 30 * time.Minute
	RunOverhead         = time.Minute
)

// Defaults and bounds applied by Normalize. They are exported so that docs,
// the API and the scheduler quote the same numbers.
const (
	DefaultMaxCatchup    = 10
	DefaultCatchupWindow = time.Hour
	DefaultRetryAttempts = 1
	DefaultRetryBackoff  = 30 * time.Second
	DefaultLeaseTTL      = 30 * time.Second
	DefaultHTTPMethod    = "POST"
	DefaultHTTPTimeout   = 30 * time.Second
	DefaultGPUAttempts   = 3
	DefaultGPUTimeout    = 10 * time.Minute

	MaxMaxCatchup    = 1000
	MaxCatchupWindow = 7 * 24 * time.Hour
	MaxRetryAttempts = 10
	MinRetryBackoff  = time.Second
	MaxRetryBackoff  = 24 * time.Hour
	MinLeaseTTL      = 3 * time.Second
	MaxLeaseTTL      = time.Hour
	MinHTTPTimeout   = time.Second
	// MaxHTTPTimeout leaves RunOverhead of Cloud Tasks' longest dispatch
	// deadline (MaxDispatchDeadline) to the Run function's own writes: a
	// target that may take the whole deadline would see its task retried
	// while it still runs.
	MaxHTTPTimeout = MaxDispatchDeadline - RunOverhead
	MaxGPUAttempts = 10
	// MaxGPUPriority is the GPU queue's own limit (gpu.MaxPriority): a
	// higher one would be accepted here and refused by every run.
	MaxGPUPriority = 1000
	MinGPUTimeout  = time.Second
	MaxGPUTimeout  = 24 * time.Hour
	MaxDescription = 1024
	// MaxHTTPBody bounds an http target's body and a gpu target's payload.
	// A schedule is read whole on every list and every tick; a bigger
	// input belongs in the bucket, named by the payload.
	MaxHTTPBody = 16 << 10
	// MaxHeaders, MaxHeaderNameLen and MaxHeaderValueLen bound an http
	// target's headers: their count, and each name's and value's bytes.
	MaxHeaders        = 32
	MaxHeaderNameLen  = 128
	MaxHeaderValueLen = 4 << 10
	// MaxArgs, MaxArgKeyLen and MaxArgValueLen bound a builtin target's
	// args the same way: 40 schedules with 1 MB of args each took the
	// Schedules server from 102 MB to 379 MB on one list.
	MaxArgs        = 64
	MaxArgKeyLen   = 128
	MaxArgValueLen = 4 << 10
	MaxURLLen      = 2048
	MaxCronLen     = 256
	// MaxRemainingRuns bounds remainingRuns (a billion fires).
	MaxRemainingRuns = 1_000_000_000
	// MaxScheduleJSON bounds a whole schedule, encoded as JSON, as the API
	// returns it: the per-field bounds alone would allow several hundred
	// KiB (32 headers of 4 KiB, 64 args of 4 KiB). With it, a list page
	// of catalog.MaxPageSize schedules is at most MaxPageSize ×
	// MaxScheduleJSON bytes of schedules.
	MaxScheduleJSON = 64 << 10
)

// IDPattern is what a schedule id must look like: lower-case letters and
// digits, then up to 62 more of those, '-' or '_'. It is safe in a URL path,
// a run id and a lease object name.
var IDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// httpMethods are the methods an http target may use.
var httpMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}

// reservedHeaders are set by the transport or by baton itself and may not be
// overridden by a schedule (compared in canonical form).
var reservedHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Upgrade", "Te", "Trailer", "Keep-Alive", "Proxy-Connection", "X-Baton-Run-Id", "X-Baton-Fire-Time", "X-Baton-Fence"}

// Normalize fills the defaults of unset fields (Overlap buffer_one, Catchup
// latest, MaxCatchup 10, CatchupWindow 1h, Retry.MaxAttempts 1, Retry.Backoff
// 30s, LeaseTTL 30s, HTTP method POST and timeout 30s, GPU MaxAttempts 3 and
// timeout 10m), upper-cases the HTTP method, and then validates every field.
// It returns the first problem as a *FieldError. It does not touch NextRunAt
// or any other server-managed field.
func (s *Schedule) Normalize(o ValidateOptions) error {
	s.fillDefaults()
	return s.validate(o)
}

func (s *Schedule) fillDefaults() {
	// A pure function of the id: every write stores it, so an update can
	// never move a schedule out of its shard.
	s.DeciderShard = DeciderShardOf(s.ID, DeciderShards())
	if s.Enabled {
		// A reason, its author and its end belong to a pause, and end
		// with it.
		s.PauseReason, s.PausedBy, s.PausedAt, s.PausedUntil = "", "", time.Time{}, time.Time{}
	}
	if s.Overlap == "" {
		s.Overlap = OverlapBufferOne
		if s.Shards > 0 {
			// buffer_one's misfire flag is one per schedule, not per
			// shard: a sharded schedule skips an overlapping shard.
			s.Overlap = OverlapSkip
		}
	}
	if s.Catchup == "" {
		s.Catchup = CatchupLatest
	}
	if s.MaxCatchup == 0 {
		s.MaxCatchup = DefaultMaxCatchup
	}
	if s.CatchupWindow == 0 {
		s.CatchupWindow = Duration(DefaultCatchupWindow)
	}
	if s.Retry.MaxAttempts == 0 {
		s.Retry.MaxAttempts = DefaultRetryAttempts
	}
	if s.Retry.Backoff == 0 {
		s.Retry.Backoff = Duration(DefaultRetryBackoff)
	}
	if s.LeaseTTL == 0 {
		s.LeaseTTL = Duration(DefaultLeaseTTL)
	}
	if h := s.Target.HTTP; h != nil {
		if h.Method == "" {
			h.Method = DefaultHTTPMethod
		}
		h.Method = strings.ToUpper(h.Method)
		if h.Timeout == 0 {
			h.Timeout = Duration(DefaultHTTPTimeout)
		}
	}
	if g := s.Target.GPU; g != nil {
		if g.MaxAttempts == 0 {
			g.MaxAttempts = DefaultGPUAttempts
		}
		if g.Timeout == 0 {
			g.Timeout = Duration(DefaultGPUTimeout)
		}
	}
}

func (s *Schedule) validate(o ValidateOptions) error {
	if s.ID == "" {
		return fieldErr("id", "is required")
	}
	if !IDPattern.MatchString(s.ID) {
		return fieldErr("id", "%q must match %s (lower-case letters, digits, '-' and '_', at most 63 characters, starting with a letter or digit)", s.ID, IDPattern)
	}
	if len(s.Description) > MaxDescription {
		return fieldErr("description", "is %d bytes; at most %d", len(s.Description), MaxDescription)
	}
	if err := s.Labels.Validate(); err != nil {
		return err
	}
	if len(s.PauseReason) > MaxDescription {
		return fieldErr("pauseReason", "is %d bytes; at most %d", len(s.PauseReason), MaxDescription)
	}
	if s.Cron == "" {
		return fieldErr("cron", "is required")
	}
	if len(s.Cron) > MaxCronLen {
		return fieldErr("cron", "is %d bytes; at most %d", len(s.Cron), MaxCronLen)
	}
	spec, err := ParseFor(s.Cron, s.ID)
	if err != nil {
		return err
	}
	if err := s.validateHistory(); err != nil {
		return err
	}
	if s.DST != nil {
		if err := s.DST.validate(); err != nil {
			return err
		}
		if _, err := withDST(spec, *s.DST); err != nil {
			return err
		}
	}
	if !s.StartAt.IsZero() && !s.EndAt.IsZero() && !s.StartAt.Before(s.EndAt) {
		return fieldErr("endAt", "%s is not after startAt %s", s.EndAt.UTC().Format(time.RFC3339), s.StartAt.UTC().Format(time.RFC3339))
	}
	if s.RemainingRuns != nil && (*s.RemainingRuns < 0 || *s.RemainingRuns > MaxRemainingRuns) {
		return fieldErr("remainingRuns", "is %d; want 0 to %d (leave it out for no limit)", *s.RemainingRuns, MaxRemainingRuns)
	}
	if err := s.validateShards(); err != nil {
		return err
	}
	if s.Concurrency != nil {
		if err := s.Concurrency.validate(s.Target); err != nil {
			return err
		}
	}
	if j := s.Jitter.D(); j < 0 || j > MaxJitter || j%time.Second != 0 {
		return fieldErr("jitter", "is %s; want whole seconds from 0 to %s", j, MaxJitter)
	}
	if o.RefuseSubMinute && SubMinute(spec) {
		return fieldErr("cron", "%q %s", s.Cron, SubMinuteHint)
	}
	if _, err := LoadLocation(s.TimeZone); err != nil {
		return err
	}
	if err := s.Target.validate(o); err != nil {
		return err
	}
	if !s.Overlap.Valid() {
		return fieldErr("overlap", "unknown policy %q; want skip, buffer_one or allow", s.Overlap)
	}
	if !s.Catchup.Valid() {
		return fieldErr("catchup", "unknown policy %q; want latest, all or none", s.Catchup)
	}
	if s.MaxCatchup < 1 || s.MaxCatchup > MaxMaxCatchup {
		return fieldErr("maxCatchup", "is %d; want 1 to %d", s.MaxCatchup, MaxMaxCatchup)
	}
	if err := durationIn("catchupWindow", s.CatchupWindow, 0, MaxCatchupWindow); err != nil {
		return err
	}
	if s.Retry.MaxAttempts < 1 || s.Retry.MaxAttempts > MaxRetryAttempts {
		return fieldErr("retry.maxAttempts", "is %d; want 1 (no retry) to %d", s.Retry.MaxAttempts, MaxRetryAttempts)
	}
	if err := durationIn("retry.backoff", s.Retry.Backoff, MinRetryBackoff, MaxRetryBackoff); err != nil {
		return err
	}
	if err := durationIn("leaseTTL", s.LeaseTTL, MinLeaseTTL, MaxLeaseTTL); err != nil {
		return err
	}
	if err := s.Notify.validate(o.AllowedHosts); err != nil {
		return err
	}
	if err := s.validateCalendarRefs(); err != nil {
		return err
	}
	return s.checkSize()
}

// checkSize refuses a schedule whose JSON encoding is over MaxScheduleJSON.
// Every field but the target is bounded far below it, so the target is
// named.
func (s *Schedule) checkSize() error {
	// Measure with the server's fields at their longest, so the schedule
	// stays within the bound once it has timestamps and a version.
	worst := *s
	longest := time.Date(2000, 1, 1, 0, 0, 0, 123456789, time.UTC)
	worst.NextRunAt, worst.CreatedAt, worst.UpdatedAt = longest, longest, longest
	worst.Version, worst.Misfire = math.MaxInt64, false
	b, err := json.Marshal(&worst)
	if err != nil {
		return fmt.Errorf("schedule: encode to check its size: %w", err)
	}
	if len(b) > MaxScheduleJSON {
		return fieldErr("target", "the schedule is %d bytes as JSON; at most %d (the target's body or payload, headers and args together)", len(b), MaxScheduleJSON)
	}
	return nil
}

// CheckKey refuses a map key (a header name, a builtin arg) that the
// stores cannot hold as a field name: MongoDB refuses a leading '$' and a
// '.', Firestore refuses names of the form __x__, and BSON ends a name at
// NUL. Such a key would pass validation and fail the write with a 500.
func CheckKey(field, key string, maxLen int) error {
	switch {
	case key == "":
		return fieldErr(field, "has an empty name")
	case len(key) > maxLen:
		return fieldErr(field, "name is %d bytes; at most %d", len(key), maxLen)
	case strings.HasPrefix(key, "$"):
		return fieldErr(field, "name must not start with '$' (the database refuses such field names)")
	case strings.Contains(key, "."):
		return fieldErr(field, "name must not contain '.' (the database refuses such field names)")
	case len(key) >= 4 && strings.HasPrefix(key, "__") && strings.HasSuffix(key, "__"):
		return fieldErr(field, "name must not have the form __name__ (Firestore reserves such field names)")
	case strings.ContainsRune(key, 0):
		return fieldErr(field, "name must not contain NUL")
	case !utf8.ValidString(key):
		return fieldErr(field, "name must be valid UTF-8")
	}
	return nil
}

// sortedKeys returns m's keys in order, so that the same key is reported
// first on every call.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func durationIn(field string, d Duration, lo, hi time.Duration) error {
	if d.D() < lo || d.D() > hi {
		return fieldErr(field, "is %s; want %s to %s", d, lo, hi)
	}
	return nil
}

func (t *Target) validate(o ValidateOptions) error {
	set := map[string]bool{TargetHTTP: t.HTTP != nil, TargetGPU: t.GPU != nil, TargetBuiltin: t.Builtin != nil, TargetPubSub: t.PubSub != nil, TargetCloudRunJob: t.CloudRunJob != nil}
	switch t.Type {
	case "":
		return fieldErr("target.type", "is required; want http, gpu, builtin, pubsub or cloudRunJob")
	case TargetHTTP, TargetGPU, TargetBuiltin, TargetPubSub, TargetCloudRunJob:
	default:
		return fieldErr("target.type", "unknown target type %q; want http, gpu, builtin, pubsub or cloudRunJob", t.Type)
	}
	if !set[t.Type] {
		return fieldErr("target."+t.Type, "is required when target.type is %q", t.Type)
	}
	for _, other := range []string{TargetHTTP, TargetGPU, TargetBuiltin, TargetPubSub, TargetCloudRunJob} {
		if other != t.Type && set[other] {
			return fieldErr("target."+other, "must be absent when target.type is %q", t.Type)
		}
	}
	switch t.Type {
	case TargetHTTP:
		return t.HTTP.validate(o.AllowedHosts)
	case TargetGPU:
		return t.GPU.validate(o.GPUTypes)
	case TargetPubSub:
		return t.PubSub.validate(o.AllowedTopics)
	case TargetCloudRunJob:
		return t.CloudRunJob.validate(o.AllowedJobs)
	default:
		return t.Builtin.validate(o.Builtins)
	}
}

func (h *HTTPTarget) validate(allowed []string) error {
	if !slices.Contains(httpMethods, h.Method) {
		return fieldErr("target.http.method", "%q is not allowed; want one of %s", h.Method, strings.Join(httpMethods, ", "))
	}
	if _, err := CheckTargetURL(h.URL, allowed); err != nil {
		return err
	}
	if len(h.Headers) > MaxHeaders {
		return fieldErr("target.http.headers", "has %d headers; at most %d", len(h.Headers), MaxHeaders)
	}
	for _, k := range sortedKeys(h.Headers) {
		v := h.Headers[k]
		field := httpapi.FieldPath("target.http.headers", k)
		if err := CheckKey(field, k, MaxHeaderNameLen); err != nil {
			return err
		}
		if !httpguts.ValidHeaderFieldName(k) {
			return fieldErr(field, "%q is not a valid header name", k)
		}
		if slices.Contains(reservedHeaders, textproto.CanonicalMIMEHeaderKey(k)) {
			return fieldErr(field, "is set by baton or the transport and cannot be overridden")
		}
		if len(v) > MaxHeaderValueLen {
			return fieldErr(field, "value is %d bytes; at most %d", len(v), MaxHeaderValueLen)
		}
		if !httpguts.ValidHeaderFieldValue(v) {
			return fieldErr(field, "value holds a control character (CR, LF, NUL …)")
		}
	}
	if len(h.Body) > MaxHTTPBody {
		return fieldErr("target.http.body", "is %d bytes; at most %d", len(h.Body), MaxHTTPBody)
	}
	if h.Timeout.D() > MaxHTTPTimeout {
		return fieldErr("target.http.timeout", "is %s; at most %s: each run executes in one Cloud Tasks dispatch, whose deadline is at most %s, and Run keeps %s of it for the job lease and the outcome. "+
			"For longer work use a gpu target (it only enqueues; its timeout may be up to %s) or have the target start the job and return",
			h.Timeout, MaxHTTPTimeout, MaxDispatchDeadline, RunOverhead, MaxGPUTimeout)
	}
	return durationIn("target.http.timeout", h.Timeout, MinHTTPTimeout, MaxHTTPTimeout)
}

// CheckTargetURL parses an http target URL and checks it: absolute http or
// https, a host, no userinfo, no fragment, and a host on the allowlist (see
// IsAllowedHost). Errors are *FieldError naming "target.http.url".
func CheckTargetURL(raw string, allowed []string) (*url.URL, error) {
	return checkURL("target.http.url", raw, allowed)
}

// checkURL is CheckTargetURL for the URL at field: a notification webhook
// goes out through the same allowlist and the same rules as a target.
func checkURL(field, raw string, allowed []string) (*url.URL, error) {
	if raw == "" {
		return nil, fieldErr(field, "is required")
	}
	if len(raw) > MaxURLLen {
		return nil, fieldErr(field, "is %d bytes; at most %d", len(raw), MaxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fieldErr(field, "is not a valid URL: %v", unwrapURLError(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fieldErr(field, "scheme %q is not allowed; want an absolute http or https URL", u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, fieldErr(field, "has no host; want an absolute URL such as https://example.com/path")
	}
	if u.User != nil {
		return nil, fieldErr(field, "must not carry credentials (user:password@); send them in a header")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return nil, fieldErr(field, "must not have a fragment (#…)")
	}
	if _, ok := hostKey(u.Hostname()); !ok {
		return nil, fieldErr(field, "host %q is not a valid host name or IP address", u.Hostname())
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fieldErr(field, "port %q is out of range 1..65535", p)
		}
	}
	if !IsAllowedHost(u, allowed) {
		if len(allowed) == 0 {
			return nil, fieldErr(field, "host %q is not allowed: BATON_ALLOWED_TARGETS is empty, so no http target is allowed", u.Host)
		}
		return nil, fieldErr(field, "host %q is not on the allowlist (BATON_ALLOWED_TARGETS)", u.Host)
	}
	return u, nil
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// IsAllowedHost reports whether the host (and port) of u is on the allowlist.
// Entries:
//
//   - "api.example.com" allows that host on any port;
//   - "api.example.com:8443" allows that host on that port only (a URL
//     without a port uses 80 for http and 443 for https);
//   - "*.example.com" allows every subdomain of example.com, at any depth,
//     but not example.com itself; "*.example.com:443" adds a port;
//   - an IP literal ("10.0.0.7", "[::1]:8080") allows exactly that address;
//   - any of these after PrivatePrefix ("private:*.corp.internal") allows
//     the same hosts, and also lets their names resolve to private, CGNAT,
//     NAT64 and ULA addresses (AllowsPrivate), which an http target may not
//     reach otherwise.
//
// Host names compare case-insensitively and without a trailing dot. An IP
// literal in the URL is only allowed by an entry naming that same address:
// wildcards never match IP literals, so 169.254.169.254 (the metadata
// server) or 127.0.0.1 pass only if listed. An empty allowlist allows
// nothing. The scheduler calls this again before every request, because the
// allowlist may have changed since the schedule was written.
func IsAllowedHost(u *url.URL, allowed []string) bool {
	if u == nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil {
		return false
	}
	host, port, ok := hostPort(u)
	return ok && matchEntries(host, port, allowed, false)
}

// hostPort is u's normalised host and its port, the scheme's default when
// u names none.
func hostPort(u *url.URL) (host, port string, ok bool) {
	host, ok = hostKey(u.Hostname())
	if !ok {
		return "", "", false
	}
	port = u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return host, port, true
}

// PrivatePrefix marks an allowlist entry whose hosts may resolve to private
// networks: a deployment opts in per host, not for every allowed name.
const PrivatePrefix = "private:"

// AllowsPrivate reports whether an entry with PrivatePrefix allows u's host
// (and port): only such a host may resolve to a private, CGNAT, NAT64 or
// ULA address.
func AllowsPrivate(u *url.URL, allowed []string) bool {
	if u == nil {
		return false
	}
	host, port, ok := hostPort(u)
	return ok && matchEntries(host, port, allowed, true)
}

// matchEntries matches a normalised host and port against the allowlist;
// privateOnly looks at PrivatePrefix entries alone.
func matchEntries(host, port string, allowed []string, privateOnly bool) bool {
	isIP := net.ParseIP(host) != nil
	for _, entry := range allowed {
		entry = strings.TrimSpace(entry)
		rest, private := strings.CutPrefix(entry, PrivatePrefix)
		if privateOnly && !private {
			continue
		}
		eh, ep, ok := splitEntry(rest)
		if !ok || (ep != "" && ep != port) {
			continue
		}
		if strings.HasPrefix(eh, "*.") {
			if !isIP && strings.HasSuffix(host, eh[1:]) && len(host) > len(eh)-1 {
				return true
			}
			continue
		}
		if eh == host {
			return true
		}
	}
	return false
}

// CheckAllowlist reports the first malformed BATON_ALLOWED_TARGETS entry
// (IsAllowedHost ignores those), so a deployment can refuse to start on a
// typo instead of silently refusing that target.
func CheckAllowlist(entries []string) error {
	for _, e := range entries {
		e = strings.TrimPrefix(strings.TrimSpace(e), PrivatePrefix)
		_, p, ok := splitEntry(e)
		if !ok {
			return fmt.Errorf("allowlist entry %q: want host, host:port, *.domain, *.domain:port or an IP address ([v6]:port), optionally after %q", e, PrivatePrefix)
		}
		if p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return fmt.Errorf("allowlist entry %q: port %q is not a number from 1 to 65535", e, p)
			}
		}
	}
	return nil
}

// splitEntry splits an allowlist entry into its normalised host and port.
func splitEntry(e string) (host, port string, ok bool) {
	if e == "" {
		return "", "", false
	}
	switch {
	case strings.HasPrefix(e, "["): // [v6] or [v6]:port
		h, p, err := net.SplitHostPort(e)
		if err != nil {
			if !strings.HasSuffix(e, "]") {
				return "", "", false
			}
			h, p = e[1:len(e)-1], ""
		}
		host, port = h, p
	case strings.Count(e, ":") == 1:
		host, port, _ = strings.Cut(e, ":")
	default: // a name, an IPv4 address, or a bare IPv6 address
		host = e
	}
	if strings.HasPrefix(host, "*.") {
		rest, ok := hostKey(host[2:])
		if !ok || net.ParseIP(rest) != nil {
			return "", "", false
		}
		return "*." + rest, port, true
	}
	host, ok = hostKey(host)
	return host, port, ok
}

// hostKey normalises a host for comparison: lower case, no trailing dot, IP
// addresses in canonical form. It refuses anything that is neither an IP
// address nor a DNS name (percent-escapes, zones, spaces …).
func hostKey(h string) (string, bool) {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "" || len(h) > 253 {
		return "", false
	}
	if ip := net.ParseIP(h); ip != nil {
		return ip.String(), true
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", false
		}
		for _, c := range label {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
				return "", false
			}
		}
	}
	return h, true
}

func (g *GPUTarget) validate(types []string) error {
	if g.Tenant != "" && !ValidGPUTenant(g.Tenant) {
		return fieldErr("target.gpu.tenant", "must be 1-63 letters, digits and ._- starting with a letter or digit, not %q", g.Tenant)
	}
	if g.GPUType != "" {
		if !ValidGPUType(g.GPUType) {
			return fieldErr("target.gpu.gpuType", "must be 1-63 lower-case letters, digits and - (a pool type such as nvidia-l4), not %q", g.GPUType)
		}
		if types != nil && !slices.Contains(types, g.GPUType) {
			if len(types) == 0 {
				return fieldErr("target.gpu.gpuType", "%q: no worker in the pool (BATON_GPU_POOL) declares a GPU type; omit gpuType", g.GPUType)
			}
			return fieldErr("target.gpu.gpuType", "%q: no worker in the pool (BATON_GPU_POOL) has that type; the pool has %s", g.GPUType, strings.Join(types, ", "))
		}
	}
	if g.Priority < 0 || g.Priority > MaxGPUPriority {
		return fieldErr("target.gpu.priority", "is %d; want 0 to %d", g.Priority, MaxGPUPriority)
	}
	if g.MaxAttempts < 1 || g.MaxAttempts > MaxGPUAttempts {
		return fieldErr("target.gpu.maxAttempts", "is %d; want 1 to %d", g.MaxAttempts, MaxGPUAttempts)
	}
	if len(g.Payload) > MaxHTTPBody {
		return fieldErr("target.gpu.payload", "is %d bytes; at most %d", len(g.Payload), MaxHTTPBody)
	}
	return durationIn("target.gpu.timeout", g.Timeout, MinGPUTimeout, MaxGPUTimeout)
}

func (b *BuiltinTarget) validate(known []string) error {
	if b.Name == "" {
		return fieldErr("target.builtin.name", "is required")
	}
	if known != nil && !slices.Contains(known, b.Name) {
		return fieldErr("target.builtin.name", "unknown builtin %q; want one of %s", b.Name, strings.Join(known, ", "))
	}
	if len(b.Args) > MaxArgs {
		return fieldErr("target.builtin.args", "has %d arguments; at most %d", len(b.Args), MaxArgs)
	}
	for _, k := range sortedKeys(b.Args) {
		field := httpapi.FieldPath("target.builtin.args", k)
		if err := CheckKey(field, k, MaxArgKeyLen); err != nil {
			return err
		}
		if v := b.Args[k]; len(v) > MaxArgValueLen {
			return fieldErr(field, "value is %d bytes; at most %d", len(v), MaxArgValueLen)
		}
	}
	return nil
}

// validateShards checks shards and shardParams, and the overlap policies a
// sharded schedule can have.
func (s *Schedule) validateShards() error {
	if s.Shards < 0 || s.Shards > MaxShards {
		return fieldErr("shards", "is %d; want 1 to %d (leave it out for an unsharded schedule)", s.Shards, MaxShards)
	}
	if s.ShardParams != nil {
		if s.Shards == 0 {
			return fieldErr("shardParams", "is given without shards; set shards to its length (%d)", len(s.ShardParams))
		}
		if len(s.ShardParams) != s.Shards {
			return fieldErr("shardParams", "has %d entries; want one per shard (shards is %d)", len(s.ShardParams), s.Shards)
		}
		for i, p := range s.ShardParams {
			if len(p) > MaxShardParamLen || !utf8.ValidString(p) || !httpguts.ValidHeaderFieldValue(p) {
				return fieldErr(fmt.Sprintf("shardParams[%d]", i), "must be valid UTF-8 of at most %d bytes and a valid header value: it is sent as X-Baton-Shard-Param", MaxShardParamLen)
			}
		}
	}
	if s.Shards > 0 && s.Overlap == OverlapBufferOne {
		return fieldErr("overlap", "buffer_one is not supported with shards (its misfire flag is one per schedule); use skip (the default for sharded schedules) or allow")
	}
	return nil
}
