package catalog_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-cron/baton/shared/catalog"
)

func decodeObject(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return m
}

// TestMergePatchRFC7396 runs the object cases of RFC 7396 Appendix A (the
// API only accepts objects as patches and documents).
func TestMergePatchRFC7396(t *testing.T) {
	t.Parallel()
	tests := []struct{ doc, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`},
		{`{"a":"foo"}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
	}
	for _, tc := range tests {
		got := catalog.MergePatch(decodeObject(t, tc.doc), decodeObject(t, tc.patch))
		if diff := cmp.Diff(decodeObject(t, tc.want), got); diff != "" {
			t.Errorf("MergePatch(%s, %s) (-want,+got):\n%s", tc.doc, tc.patch, diff)
		}
	}
}

// FuzzMergePatch checks the laws of a merge patch: applying it twice
// changes nothing more (idempotence), and every non-null, non-object value
// of the patch is in the result.
func FuzzMergePatch(f *testing.F) {
	f.Add(`{"a":{"b":1}}`, `{"a":{"b":null,"c":[1]},"d":"x"}`)
	f.Add(`{"target":{"type":"http","http":{"url":"u"}}}`, `{"target":{"type":"builtin","http":null,"builtin":{"name":"noop"}}}`)
	f.Fuzz(func(t *testing.T, doc, patch string) {
		var d, p map[string]any
		if json.Unmarshal([]byte(doc), &d) != nil || json.Unmarshal([]byte(patch), &p) != nil {
			t.Skip()
		}
		once := catalog.MergePatch(d, p)
		onceJSON, _ := json.Marshal(once)
		var copy map[string]any
		_ = json.Unmarshal(onceJSON, &copy)
		twice := catalog.MergePatch(copy, p)
		if diff := cmp.Diff(once, twice); diff != "" {
			t.Errorf("not idempotent (-once,+twice):\n%s", diff)
		}
		for k, v := range p {
			if _, isObj := v.(map[string]any); v != nil && !isObj && !cmp.Equal(v, once[k]) {
				t.Errorf("patch value %s=%v not in result %v", k, v, once[k])
			}
			if v == nil {
				if _, ok := once[k]; ok {
					t.Errorf("null %s in the patch left the key in the result", k)
				}
			}
		}
	})
}
