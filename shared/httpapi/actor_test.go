package httpapi_test

import (
	"encoding/base64"
	"net/http/httptest"
	"testing"

	"github.com/baton-cron/baton/shared/httpapi"
)

func TestActor(t *testing.T) {
	jwt := func(claims string) string {
		return "Bearer eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(claims)) + ".c2ln"
	}
	for auth, want := range map[string]string{
		"":                                 "anonymous",
		"Bearer local-token":               "local",
		jwt(`{"email":"ops@example.com"}`): "ops@example.com",
		jwt(`{"sub":"1234"}`):              "sub:1234",
		jwt(`not json`):                    "local",
		"Basic dXNlcjpwYXNz":               "anonymous",
	} {
		r := httptest.NewRequest("POST", "/", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		if got := httpapi.Actor(r); got != want {
			t.Errorf("Actor(%q) = %q; want %q", auth, got, want)
		}
	}
}
