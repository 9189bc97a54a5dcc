package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/baton-cron/baton/shared/openapi"
)

// route is one path item of the contract, compiled.
type route struct {
	function string // the function whose base URL the path item's servers name
	template string
	re       *regexp.Regexp
	params   []string
	item     *openapi3.PathItem
}

// Validator checks requests and responses against the contract and keeps
// the violations it found.
type Validator struct {
	doc    *openapi3.T
	routes []route
	errs   *openapi3.Schema // the ErrorResponse schema

	mu         sync.Mutex
	violations []string
	checked    int
}

// New loads and validates the embedded contract.
func New() (*Validator, error) {
	return NewFromYAML(openapi.YAML())
}

// NewFromYAML is New with another document (the package's own tests use
// it to show that a drifted contract is caught).
func NewFromYAML(src []byte) (*Validator, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(src)
	if err != nil {
		return nil, fmt.Errorf("openapitest: load contract: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapitest: contract is not valid OpenAPI: %w", err)
	}
	v := &Validator{doc: doc}
	if s := doc.Components.Schemas["ErrorResponse"]; s != nil {
		v.errs = s.Value
	} else {
		return nil, errors.New("openapitest: contract has no ErrorResponse schema")
	}
	for _, tmpl := range doc.Paths.InMatchingOrder() {
		item := doc.Paths.Value(tmpl)
		fn, err := functionOf(item, doc.Servers)
		if err != nil {
			return nil, fmt.Errorf("openapitest: %s: %w", tmpl, err)
		}
		re, params := compile(tmpl)
		v.routes = append(v.routes, route{function: fn, template: tmpl, re: re, params: params, item: item})
	}
	// Literal segments before parameters: /schedules/{id}:pause before
	// /schedules/{id}, so the longer template wins.
	sort.SliceStable(v.routes, func(i, j int) bool { return len(v.routes[i].template) > len(v.routes[j].template) })
	return v, nil
}

// functionOf is the function a path item belongs to: the last segment of
// the path of its server's default URL (`http://127.0.0.1:8080/Schedules`),
// which is where `baton local` mounts that function.
func functionOf(item *openapi3.PathItem, top openapi3.Servers) (string, error) {
	servers := item.Servers
	if len(servers) == 0 {
		servers = top
	}
	if len(servers) == 0 {
		return "", errors.New("no servers")
	}
	s := servers[0]
	u := s.URL
	for name, sv := range s.Variables {
		u = strings.ReplaceAll(u, "{"+name+"}", sv.Default)
	}
	pu, err := url.Parse(u)
	if err != nil {
		return "", fmt.Errorf("server %q: %w", s.URL, err)
	}
	fn := strings.Trim(pu.Path, "/")
	if fn == "" || strings.Contains(fn, "/") {
		return "", fmt.Errorf("server %q: want a base URL ending in the function name", s.URL)
	}
	return fn, nil
}

// paramRE matches a path parameter of a template.
var paramRE = regexp.MustCompile(`\{([^}]+)\}`)

// compile turns a template into a regexp. A parameter never holds '/' or
// ':' (ids are refused with them), so "{id}:pause" splits at the colon.
func compile(tmpl string) (*regexp.Regexp, []string) {
	var params []string
	var b strings.Builder
	b.WriteString("^")
	last := 0
	for _, m := range paramRE.FindAllStringSubmatchIndex(tmpl, -1) {
		b.WriteString(regexp.QuoteMeta(tmpl[last:m[0]]))
		b.WriteString(`([^/:]+)`)
		params = append(params, tmpl[m[2]:m[3]])
		last = m[1]
	}
	b.WriteString(regexp.QuoteMeta(tmpl[last:]))
	b.WriteString("$")
	return regexp.MustCompile(b.String()), params
}

// Functions are the functions the contract describes, as `baton local`
// mounts them (/Schedules, /GPU, /GPUCallback, /Rent).
func (v *Validator) Functions() []string {
	var out []string
	for _, r := range v.routes {
		if !slices.Contains(out, r.function) {
			out = append(out, r.function)
		}
	}
	sort.Strings(out)
	return out
}

// split cuts a local URL path into the function and the path inside it,
// or reports that the path is not a described function's.
func (v *Validator) split(p string) (fn, rest string, ok bool) {
	seg, rest, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	for _, r := range v.routes {
		if r.function == seg {
			return seg, "/" + rest, true
		}
	}
	return "", "", false
}

// Exchange is one request and its answer, bodies read.
type Exchange struct {
	Request      *http.Request
	RequestBody  []byte
	Status       int
	Header       http.Header
	ResponseBody []byte
}

// Covers reports whether the contract describes req's function.
func (v *Validator) Covers(req *http.Request) bool {
	_, _, ok := v.split(req.URL.Path)
	return ok
}

// Check validates one exchange and returns the drift it shows, or nil.
// The error is also kept for Violations.
func (v *Validator) Check(ctx context.Context, ex Exchange) error {
	err := v.check(ctx, ex)
	v.mu.Lock()
	v.checked++
	if err != nil {
		v.violations = append(v.violations, err.Error())
	}
	v.mu.Unlock()
	return err
}

// Violations returns every drift found so far, and how many exchanges were
// checked.
func (v *Validator) Violations() (violations []string, checked int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.violations), v.checked
}

func (v *Validator) check(ctx context.Context, ex Exchange) error {
	req := ex.Request
	what := fmt.Sprintf("openapi contract: %s %s → %d", req.Method, req.URL.RequestURI(), ex.Status)
	fn, rest, ok := v.split(req.URL.Path)
	if !ok {
		return nil
	}
	method := req.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	var (
		found   *route
		match   []string
		foreign bool // the path is another function's
	)
	for i := range v.routes {
		r := &v.routes[i]
		m := r.re.FindStringSubmatch(rest)
		if m == nil {
			continue
		}
		if r.function != fn {
			foreign = true
			continue
		}
		found, match = r, m
		break
	}
	if found == nil {
		// Not a route of this function: the server must refuse it.
		want := []int{http.StatusNotFound, http.StatusUnauthorized}
		if foreign {
			want = append(want, http.StatusMisdirectedRequest)
		}
		if !slices.Contains(want, ex.Status) {
			return fmt.Errorf("%s: the contract has no route %s on the %s function, but the server answered %d (want one of %v)", what, rest, fn, ex.Status, want)
		}
		return v.checkError(what, ex)
	}
	op := found.item.GetOperation(method)
	if op == nil {
		want := []int{http.StatusMethodNotAllowed, http.StatusUnauthorized, http.StatusMisdirectedRequest, http.StatusNotFound}
		if !slices.Contains(want, ex.Status) {
			return fmt.Errorf("%s: the contract has no %s on %s, but the server answered %d (want 405)", what, req.Method, found.template, ex.Status)
		}
		return v.checkError(what, ex)
	}
	params := map[string]string{}
	for i, name := range found.params {
		params[name] = match[i+1]
	}
	rr := &routers.Route{Spec: v.doc, Path: found.template, PathItem: found.item, Method: method, Operation: op}
	// The request as kin-openapi should see it: the path inside the
	// function, a body that can be read again, and JSON when a client
	// sent a body without saying (the server reads every body as JSON).
	vreq := req.Clone(ctx)
	vreq.Method = method
	vreq.URL.Path = rest
	vreq.URL.RawPath = ""
	vreq.Body = io.NopCloser(bytes.NewReader(ex.RequestBody))
	vreq.ContentLength = int64(len(ex.RequestBody))
	if len(bytes.TrimSpace(ex.RequestBody)) > 0 && vreq.Header.Get("Content-Type") == "" {
		vreq.Header.Set("Content-Type", "application/json")
	}
	opts := &openapi3filter.Options{
		AuthenticationFunc:         openapi3filter.NoopAuthenticationFunc,
		ExcludeReadOnlyValidations: true, // a schedule read with GET may be sent back whole
		IncludeResponseStatus:      true,
		MultiError:                 true,
	}
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: rr, Options: opts}
	if reqErr := openapi3filter.ValidateRequest(ctx, in); reqErr != nil {
		// The contract refuses the request: so must the server.
		if ex.Status < 400 || ex.Status >= 500 {
			return fmt.Errorf("%s: the server accepted a request the contract refuses: %w", what, reqErr)
		}
	}
	if ex.Status == http.StatusUnauthorized || ex.Status == http.StatusMisdirectedRequest {
		// Both come before the route's own handling (the token check, the
		// GPU/GPUCallback split); the status is not the operation's.
		return v.checkError(what, ex)
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 ex.Status,
		Header:                 ex.Header,
		Body:                   io.NopCloser(bytes.NewReader(ex.ResponseBody)),
		Options:                opts,
	}
	if req.Method == http.MethodHead {
		return nil
	}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Errorf("%s: the answer is not the contract's (%s %s): %w\nbody: %s", what, method, found.template, err, cut(ex.ResponseBody))
	}
	return nil
}

// checkError checks that an answer outside any operation is the one error
// shape.
func (v *Validator) checkError(what string, ex Exchange) error {
	if ex.Status < 400 {
		return fmt.Errorf("%s: want an error answer", what)
	}
	var body any
	if err := json.Unmarshal(ex.ResponseBody, &body); err != nil {
		return fmt.Errorf("%s: the error answer is not JSON: %w\nbody: %s", what, err, cut(ex.ResponseBody))
	}
	if err := v.errs.VisitJSON(body, openapi3.EnableJSONSchema2020()); err != nil {
		return fmt.Errorf("%s: the error answer is not ErrorResponse: %w\nbody: %s", what, err, cut(ex.ResponseBody))
	}
	return nil
}

func cut(b []byte) string {
	if len(b) > 512 {
		return string(b[:512]) + "…"
	}
	return string(b)
}

// transport validates the exchanges of the functions the contract
// describes and passes every other request back to the transport it is
// registered on.
type transport struct {
	v     *Validator
	inner http.RoundTripper
}

// Install makes t validate its plain-HTTP exchanges with the functions the
// contract describes (every baton server a test starts listens on plain
// HTTP), through t.RegisterProtocol: t stays an *http.Transport, so code
// that clones http.DefaultTransport keeps working, and every client built
// on t (the http.DefaultClient, clients with a nil Transport) is covered.
// Requests to anything else are left to t as they are.
func (v *Validator) Install(t *http.Transport) {
	t.RegisterProtocol("http", &transport{v: v, inner: t.Clone()})
}

// RoundTrip implements http.RoundTripper. A drift fails the request with
// the violation, so the test that made it stops there, naming it.
func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !tr.v.Covers(req) {
		return nil, http.ErrSkipAltProtocol
	}
	var reqBody []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("openapitest: read request body: %w", err)
		}
		reqBody = b
		// The body as read decides the length: net/http sends none for
		// http.NoBody whatever ContentLength says, and so must this copy.
		req = req.Clone(req.Context())
		req.ContentLength = int64(len(b))
		req.Body, req.GetBody = http.NoBody, func() (io.ReadCloser, error) { return http.NoBody, nil }
		if len(b) > 0 {
			req.Body = io.NopCloser(bytes.NewReader(b))
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
		}
	}
	resp, err := tr.inner.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	respBody, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	if err != nil {
		// A cut connection is the test's business, not the contract's.
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(respBody), errReader{err}))
		return resp, nil
	}
	if verr := tr.v.Check(context.WithoutCancel(req.Context()), Exchange{Request: req, RequestBody: reqBody, Status: resp.StatusCode, Header: resp.Header, ResponseBody: respBody}); verr != nil {
		return nil, verr
	}
	return resp, nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
