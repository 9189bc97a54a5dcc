package httpapi_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-cron/baton/shared/httpapi"
)

type payload struct {
	embedded
	Name  string `json:"name"`
	Count int    `json:"count"`
	Inner struct {
		Flag bool `json:"flag"`
	} `json:"inner"`
	Tags map[string]string `json:"tags"`
	Any  any               `json:"any"`
}

// embedded checks that promoted fields are known by their exact names.
type embedded struct {
	Slot string `json:"slot"`
}

// wire is the error shape as a client sees it, plus the status.
type wire struct {
	Status int
	Code   string
	Field  string
}

// serve runs h on a real server and returns the status and decoded error.
func serve(t *testing.T, h http.Handler, req func(url string) *http.Request) (wire, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	resp, err := http.DefaultClient.Do(req(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var body struct {
		Error struct {
			Code, Message, Field string
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &body)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 && !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q, want JSON", ct)
	}
	return wire{resp.StatusCode, body.Error.Code, body.Error.Field}, string(raw)
}

func decodeHandler(limit int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p payload
		if err := httpapi.DecodeJSON(w, r, limit, &p); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, p)
	})
}

func TestDecodeJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		body  string
		limit int64
		want  wire
	}{
		{"ok", `{"name":"a","count":2,"inner":{"flag":true}}`, 0, wire{Status: 200}},
		{"unknown field", `{"name":"a","colour":"red"}`, 0, wire{400, httpapi.CodeInvalidArgument, "colour"}},
		{"unknown nested field", `{"inner":{"flag":true,"extra":1}}`, 0, wire{400, httpapi.CodeInvalidArgument, "inner.extra"}},
		{"promoted field", `{"slot":"s1","tags":{"a":"b"},"any":{"x":[1,{"y":2}]}}`, 0, wire{Status: 200}},
		{"duplicate key", `{"name":"a","name":"b"}`, 0, wire{400, httpapi.CodeInvalidArgument, "name"}},
		{"duplicate nested key", `{"inner":{"flag":true,"flag":false}}`, 0, wire{400, httpapi.CodeInvalidArgument, "inner.flag"}},
		{"duplicate map key", `{"tags":{"a":"1","a":"2"}}`, 0, wire{400, httpapi.CodeInvalidArgument, "tags.a"}},
		{"duplicate key deep in an interface value", `{"any":[{"k":1,"k":2}]}`, 0, wire{400, httpapi.CodeInvalidArgument, "any.k"}},
		{"odd map key is bracketed", `{"tags":{"$where":"1","$where":"2"}}`, 0, wire{400, httpapi.CodeInvalidArgument, `tags["$where"]`}},
		{"wrong case", `{"Name":"a"}`, 0, wire{400, httpapi.CodeInvalidArgument, "Name"}},
		{"wrong case nested", `{"inner":{"FLAG":true}}`, 0, wire{400, httpapi.CodeInvalidArgument, "inner.FLAG"}},
		{"wrong case promoted", `{"Slot":"s1"}`, 0, wire{400, httpapi.CodeInvalidArgument, "Slot"}},
		{"too deep", `{"any":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, 0, wire{400, httpapi.CodeInvalidArgument, "any"}},
		{"type error names field", `{"count":"many"}`, 0, wire{400, httpapi.CodeInvalidArgument, "count"}},
		{"nested type error names path", `{"inner":{"flag":"yes"}}`, 0, wire{400, httpapi.CodeInvalidArgument, "inner.flag"}},
		{"trailing object", `{"name":"a"}{"name":"b"}`, 0, wire{400, httpapi.CodeInvalidArgument, ""}},
		{"trailing garbage", `{"name":"a"} x`, 0, wire{400, httpapi.CodeInvalidArgument, ""}},
		{"syntax", `{"name":`, 0, wire{400, httpapi.CodeInvalidArgument, ""}},
		{"empty", ``, 0, wire{400, httpapi.CodeInvalidArgument, ""}},
		{"oversize", `{"name":"` + strings.Repeat("x", 200) + `"}`, 64, wire{413, httpapi.CodeTooLarge, ""}},
		{"oversize default limit", `{"name":"` + strings.Repeat("x", httpapi.MaxBodyBytes) + `"}`, 0, wire{413, httpapi.CodeTooLarge, ""}},
		{"trailing data past the limit", `{"name":"a"}` + strings.Repeat(" ", 100), 64, wire{413, httpapi.CodeTooLarge, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, raw := serve(t, decodeHandler(tt.limit), func(url string) *http.Request {
				r, _ := http.NewRequest("POST", url, strings.NewReader(tt.body))
				return r
			})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("POST %.60q (-want,+got):\n%s\nbody: %s", tt.body, diff, raw)
			}
		})
	}
}

func TestRequireToken(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteJSON(w, 200, map[string]string{"ok": "yes"})
	})
	tests := []struct {
		name, token, header string
		want                int
	}{
		{"right token", "s3cret", "Bearer s3cret", 200},
		{"no header", "s3cret", "", 401},
		{"wrong token", "s3cret", "Bearer nope", 401},
		{"prefix of token", "s3cret", "Bearer s3cre", 401},
		{"wrong scheme", "s3cret", "Basic s3cret", 401},
		{"disabled when empty", "", "", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(httpapi.RequireToken(tt.token, ok))
			defer srv.Close()
			req, _ := http.NewRequest("GET", srv.URL, nil)
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.want)
			}
			if tt.want == 401 && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without a Bearer WWW-Authenticate challenge: %q", resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
}

func TestWriteErrorHidesInternals(t *testing.T) {
	// Not parallel: it swaps the default logger to capture the log line.
	var logged bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(&logged, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })

	secret := errors.New("dial mongodb://admin:hunter2@10.0.0.7: refused")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, r, fmt.Errorf("load schedule: %w", secret))
	})
	got, raw := serve(t, h, func(url string) *http.Request { r, _ := http.NewRequest("GET", url+"/x", nil); return r })
	if diff := cmp.Diff(wire{500, httpapi.CodeInternal, ""}, got); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	if strings.Contains(raw, "hunter2") || strings.Contains(raw, "mongodb") {
		t.Errorf("internal detail leaked to the caller: %s", raw)
	}
	if !strings.Contains(logged.String(), "hunter2") || !strings.Contains(logged.String(), "/x") {
		t.Errorf("internal error not logged for operators: %s", logged.String())
	}
}

func TestWriteErrorKeepsTypedErrors(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, r, fmt.Errorf("wrapped: %w", httpapi.BadRequest("cron", "bad cron %q", "* *")))
	})
	got, raw := serve(t, h, func(url string) *http.Request { r, _ := http.NewRequest("GET", url, nil); return r })
	if diff := cmp.Diff(wire{400, httpapi.CodeInvalidArgument, "cron"}, got); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	if !strings.Contains(raw, `bad cron \"* *\"`) {
		t.Errorf("message lost: %s", raw)
	}
}

// TestErrorsCutEchoedInput: a 900 KB value must not come back as a 900 KB
// error, however the error was built.
func TestErrorsCutEchoedInput(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("x", 900<<10)
	tests := []struct {
		name string
		err  error
	}{
		{"BadRequest %q", httpapi.BadRequest("name", "unknown name %q", huge)},
		{"NotFound %q", httpapi.NotFound("no schedule %q", huge)},
		{"BadRequest %s", httpapi.BadRequest("name", "%s", huge)},
		{"huge field", httpapi.BadRequest(huge, "bad")},
		{"built by hand", &httpapi.Error{Status: 400, Code: httpapi.CodeInvalidArgument, Field: huge, Message: huge}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { httpapi.WriteError(w, r, tt.err) })
			_, raw := serve(t, h, func(url string) *http.Request { r, _ := http.NewRequest("GET", url, nil); return r })
			if len(raw) >= 2<<10 {
				t.Errorf("error body is %d bytes, want under 2 KB: %.200s…", len(raw), raw)
			}
		})
	}
	if got := httpapi.BadRequest("x", "bad %q", huge).Message; !strings.HasSuffix(got, `…"`) || len(got) > httpapi.MaxEcho+20 {
		t.Errorf("%%q of a huge value = %.100q (%d bytes), want it cut to %d bytes and …", got, len(got), httpapi.MaxEcho)
	}
	if got := httpapi.BadRequest("x", "bad %q", "short").Message; got != `bad "short"` {
		t.Errorf("short value: %q", got)
	}
	// A typed enum (schedule.Overlap, gpu.JobStatus) holds input as a
	// string does, and is cut the same; one with its own String is left
	// to format itself.
	if got := httpapi.BadRequest("x", "bad %q", enumLike(huge)).Message; !strings.HasSuffix(got, `…"`) || len(got) > httpapi.MaxEcho+20 {
		t.Errorf("%%q of a huge named string = %.100q (%d bytes), want it cut to %d bytes and …", got, len(got), httpapi.MaxEcho)
	}
	if got := httpapi.BadRequest("x", "bad %q, %v", enumLike("short"), enumLike("v")).Message; got != `bad "short", v` {
		t.Errorf("short named string: %q", got)
	}
	if got := httpapi.BadRequest("x", "%v", stringer("raw")).Message; got != "<raw>" {
		t.Errorf("named string with String: %q, want its String", got)
	}
	for _, body := range []string{
		`{"name":"a","` + huge + `":1}`,                    // unknown field
		`{"count":1` + strings.Repeat("1", 900<<10) + `}`,  // a number too big, echoed by encoding/json
		`{"tags":{"` + huge + `":"1","` + huge + `":"2"}}`, // duplicate key
	} {
		got, raw := serve(t, decodeHandler(2<<20), func(url string) *http.Request {
			r, _ := http.NewRequest("POST", url, strings.NewReader(body))
			return r
		})
		if got.Status != 400 || len(raw) >= 2<<10 {
			t.Errorf("POST %.40q…: status %d, error body %d bytes, want 400 under 2 KB: %.300s", body, got.Status, len(raw), raw)
		}
	}
}

func TestFieldPath(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ path, key, want string }{
		{"", "name", "name"},
		{"target.http.headers", "X-Team", "target.http.headers.X-Team"},
		{"target.builtin.args", "$where", `target.builtin.args["$where"]`},
		{"target.builtin.args", "a.b", `target.builtin.args["a.b"]`},
		{"args", "", `args[""]`},
	} {
		if got := httpapi.FieldPath(tt.path, tt.key); got != tt.want {
			t.Errorf("FieldPath(%q, %q) = %q, want %q", tt.path, tt.key, got, tt.want)
		}
	}
	if got := httpapi.FieldPath("args", strings.Repeat("é", 1000)); len(got) > 100 {
		t.Errorf("FieldPath of a huge key is %d bytes", len(got))
	}
}

// enumLike is a named string type, as baton's enums are.
type enumLike string

// stringer is a named string type that formats itself.
type stringer string

func (s stringer) String() string { return "<" + string(s) + ">" }
