package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/baton-cron/baton/shared/httpapi"
)

// TestDecodeJSONHidesGoTypes: a JSON value of the wrong type is a 400 that
// says what JSON is wanted, never the Go type behind it (an internal name
// such as "httpapi_test.payload").
func TestDecodeJSONHidesGoTypes(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]wire{
		`[]`:               {400, httpapi.CodeInvalidArgument, ""},
		`{"inner":[1]}`:    {400, httpapi.CodeInvalidArgument, "inner"},
		`{"count":"many"}`: {400, httpapi.CodeInvalidArgument, "count"},
	} {
		got, raw := serve(t, decodeHandler(0), func(url string) *http.Request {
			r, _ := http.NewRequest("POST", url, strings.NewReader(body))
			return r
		})
		if got != want || strings.Contains(raw, "payload") || strings.Contains(raw, "httpapi") {
			t.Errorf("POST %s (-want,+got): -%v without Go type names +%v %s", body, want, got, raw)
		}
	}
}
