package openapi

import (
	_ "embed"
	"fmt"
	"net/http"
	"sync"

	"sigs.k8s.io/yaml"

	"github.com/baton-cron/baton/shared/httpapi"
)

// Path is where the document is served, relative to the Schedules function
// and to the root of `baton local`.
const Path = "/openapi.json"

//go:embed openapi.yaml
var source []byte

// YAML returns the document as written, YAML with anchors for the repeated
// server lists.
func YAML() []byte { return source }

var (
	jsonOnce sync.Once
	jsonDoc  []byte
	jsonErr  error
)

// JSON returns the document as JSON (anchors expanded), converted once.
// Clients and generators that take only JSON read this form.
func JSON() ([]byte, error) {
	jsonOnce.Do(func() {
		jsonDoc, jsonErr = yaml.YAMLToJSON(source)
		if jsonErr != nil {
			jsonErr = fmt.Errorf("openapi: convert openapi.yaml to JSON: %w", jsonErr)
		}
	})
	return jsonDoc, jsonErr
}

// Handler serves the document as JSON to GET and HEAD, without
// authentication: the contract is public, like the code it describes, and a
// client generator should not need a token to fetch it.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			httpapi.WriteError(w, r, httpapi.MethodNotAllowed(r.Method))
			return
		}
		doc, err := JSON()
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(doc)
	})
}

// WithDocument serves the document at Path ahead of next, outside any
// authentication next does; every other request goes to next.
func WithDocument(next http.Handler) http.Handler {
	doc := Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == Path {
			doc.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
