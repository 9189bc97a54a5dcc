package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/stack"
)

// TestBoundsRefuseCleanly is issue #12's first promise, over HTTP against
// baton local's stack: each oversized or unstorable input is a 400 that
// names the field, nothing is stored, and the error body stays small
// however large the input. Before the bounds, 20,000 args and a 1 MB arg
// were stored (and every list carried them), and a "$where" header or a
// "__x__" arg passed validation and failed the write with a 500.
func TestBoundsRefuseCleanly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: -1})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	defer func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	call := func(method, path, body string) (int, string) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequestWithContext(ctx, method, s.URL+"/Schedules"+path, rd)
		req.Header.Set("Authorization", "Bearer "+s.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	builtin := func(id string, args map[string]string) string {
		b, _ := json.Marshal(map[string]any{"id": id, "cron": "@hourly",
			"target": map[string]any{"type": "builtin", "builtin": map[string]any{"name": "noop", "args": args}}})
		return string(b)
	}
	manyArgs := make(map[string]string, 20000)
	for i := range 20000 {
		manyArgs[fmt.Sprintf("k%d", i)] = "v"
	}
	huge := strings.Repeat("x", 900<<10)
	tests := []struct {
		name, id, body, field string
	}{
		{"20,000 args", "many-args", builtin("many-args", manyArgs), "target.builtin.args"},
		{"a 1 MB arg", "big-arg", builtin("big-arg", map[string]string{"blob": strings.Repeat("x", 1_000_000)}), "target.builtin.args.blob"},
		{"a $where header", "dollar-header", `{"id":"dollar-header","cron":"@hourly","target":{"type":"http","http":{"url":"http://127.0.0.1:9/","headers":{"$where":"1"}}}}`, `target.http.headers["$where"]`},
		{"a __x__ arg", "reserved-arg", builtin("reserved-arg", map[string]string{"__x__": "1"}), "target.builtin.args.__x__"},
		{"a dotted arg", "dotted-arg", builtin("dotted-arg", map[string]string{"a.b": "1"}), `target.builtin.args["a.b"]`},
		{"a duplicate field", "dup", `{"id":"dup","cron":"@hourly","cron":"@daily","target":{"type":"builtin","builtin":{"name":"noop"}}}`, "cron"},
		{"a 900 KB id", "", builtin("a"+huge, nil), "id"},
		{"a 900 KB cron", "big-cron", `{"id":"big-cron","cron":"` + huge + `","target":{"type":"builtin","builtin":{"name":"noop"}}}`, "cron"},
		{"a 900 KB time zone", "big-tz", `{"id":"big-tz","cron":"@hourly","timeZone":"` + huge + `","target":{"type":"builtin","builtin":{"name":"noop"}}}`, "timeZone"},
		{"a 900 KB unknown field", "big-key", `{"id":"big-key","cron":"@hourly","` + huge + `":1,"target":{"type":"builtin","builtin":{"name":"noop"}}}`, `["` + strings.Repeat("x", 64) + `…"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, raw := call("POST", "/schedules", tt.body)
			var e struct {
				Error struct{ Code, Message, Field string } `json:"error"`
			}
			_ = json.Unmarshal([]byte(raw), &e)
			if code != http.StatusBadRequest || e.Error.Field != tt.field {
				t.Errorf("POST = %d, field %q; want 400 naming %q: %.300s", code, e.Error.Field, tt.field, raw)
			}
			if len(raw) >= 2<<10 {
				t.Errorf("error body is %d bytes, want under 2 KB: %.300s…", len(raw), raw)
			}
			if tt.id != "" {
				if code, raw := call("GET", "/schedules/"+tt.id, ""); code != http.StatusNotFound {
					t.Errorf("GET %s after the refusal = %d, want 404: %.200s", tt.id, code, raw)
				}
			}
		})
	}
	code, raw := call("GET", "/schedules", "")
	var page struct{ Schedules []json.RawMessage }
	if err := json.Unmarshal([]byte(raw), &page); code != http.StatusOK || err != nil || len(page.Schedules) != 0 {
		t.Errorf("GET /schedules after the refusals = %d with %d schedules (%v), want 200 and none", code, len(page.Schedules), err)
	}
}
