package mongostore

import (
	"strings"
	"testing"
	"time"
)

// TestRedact: the password never survives, wherever its special characters
// fall; the user, hosts, database and options do.
func TestRedact(t *testing.T) {
	for _, c := range []struct{ uri, want, secret string }{
		{"mongodb://baton:secret@127.0.0.1:1/baton", "mongodb://baton:xxxxx@127.0.0.1:1/baton", "secret"},
		// Unescaped "/" and "?" in the password: cutting the authority at
		// the first of them printed the URI whole.
		{"mongodb://baton:s3cr/et@127.0.0.1:1/baton", "mongodb://baton:xxxxx@127.0.0.1:1/baton", "s3cr/et"},
		{"mongodb://baton:s3cr?et@127.0.0.1:1/baton?tls=true", "mongodb://baton:xxxxx@127.0.0.1:1/baton?tls=true", "s3cr?et"},
		{"mongodb://baton:a/b?c@d@h1:27017,h2:27017/db", "mongodb://baton:xxxxx@h1:27017,h2:27017/db", "a/b?c@d"},
		{"mongodb+srv://u:p@ss@cluster.example.com/?retryWrites=false", "mongodb+srv://u:xxxxx@cluster.example.com/?retryWrites=false", "p@ss"},
		{"mongodb://u:pw@[::1]:27017", "mongodb://u:xxxxx@[::1]:27017", "pw"},
		// An "@" in the query masks more, never less.
		{"mongodb://u:pw@h/db?appName=me@x", "mongodb://u:xxxxx@x", "pw"},
		// Nothing to hide.
		{"mongodb://127.0.0.1:1/baton?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:gcp,TOKEN_RESOURCE:FIRESTORE",
			"mongodb://127.0.0.1:1/baton?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:gcp,TOKEN_RESOURCE:FIRESTORE", ""},
		{"mongodb://user@h/db", "mongodb://user@h/db", ""},
		{"no scheme", "<not a URI>", ""},
	} {
		got := redact(c.uri)
		if got != c.want {
			t.Errorf("redact(%q) = %q, want %q", c.uri, got, c.want)
		}
		if c.secret != "" && strings.Contains(got, c.secret) {
			t.Errorf("redact(%q) = %q keeps the password", c.uri, got)
		}
	}
}

// TestOpenErrorHidesPassword: the error Open returns for a URI the driver
// refuses (an unescaped "/" in the password) names the URI without it.
func TestOpenErrorHidesPassword(t *testing.T) {
	for _, uri := range []string{"mongodb://baton:s3cr/et@127.0.0.1:1/baton", "mongodb://baton:s3cr?et@127.0.0.1:1/baton"} {
		_, err := Open(t.Context(), uri, Options{ConnectTimeout: 100 * time.Millisecond})
		if err == nil {
			t.Fatalf("Open(%q) succeeded", uri)
		}
		if strings.Contains(err.Error(), "s3cr") {
			t.Errorf("Open(%q): %v: the password is in the error", uri, err)
		}
	}
}
