package httpapi

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// RequireToken wraps next with a bearer-token check when token is non-empty.
// An empty token disables the check: in the cloud, the IAM invoker check on
// the function has already authenticated the caller.
func RequireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(strings.TrimSpace(r.Header.Get("Authorization")))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="baton"`)
			WriteError(w, r, &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Message: "missing or wrong bearer token (Authorization: Bearer $BATON_TOKEN)"})
			return
		}
		next.ServeHTTP(w, r)
	})
}
