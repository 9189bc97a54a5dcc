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

// TestActorServerlessAuthorization: Cloud Run's invoker check verifies
// X-Serverless-Authorization when a request carries it, and then leaves
// Authorization unchecked for the service: the actor is the verified
// token's, never a claim in the unverified header.
func TestActorServerlessAuthorization(t *testing.T) {
	jwt := func(claims string) string {
		return "Bearer eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(claims)) + ".c2ln"
	}
	r := httptest.NewRequest("POST", "/", nil)
	r.Header.Set("X-Serverless-Authorization", jwt(`{"email":"ops@example.com"}`))
	r.Header.Set("Authorization", jwt(`{"email":"ceo@example.com"}`))
	if got := httpapi.Actor(r); got != "ops@example.com" {
		t.Errorf("Actor = %q; want ops@example.com, the verified X-Serverless-Authorization's", got)
	}
}
