package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
)

// Actor names the caller of r for audit fields (who paused a schedule):
// the email of the Google ID token it carries, which Cloud Run's invoker
// check has verified before the request reaches the function; "local" for
// the local bearer token (baton local); "anonymous" without credentials.
// It reads claims and verifies nothing: it must only run behind a check
// that did (IAM in the cloud, RequireToken locally).
func Actor(r *http.Request) string {
	// When a request carries X-Serverless-Authorization, Cloud Run checks
	// that header instead, and Authorization reaches us unverified.
	h := r.Header.Get("X-Serverless-Authorization")
	if h == "" {
		h = r.Header.Get("Authorization")
	}
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" {
		return "anonymous"
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "local"
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "local"
	}
	var claims struct {
		Email string `json:"email"`
		Sub   string `json:"sub"`
	}
	if json.Unmarshal(raw, &claims) != nil {
		return "local"
	}
	switch {
	case claims.Email != "":
		return claims.Email
	case claims.Sub != "":
		return "sub:" + claims.Sub
	}
	return "local"
}
