package gpu

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"golang.org/x/oauth2"
	"google.golang.org/api/idtoken"
)

// BearerAuthorizer adds "Authorization: Bearer token" (local use, where
// every baton process shares BATON_TOKEN).
func BearerAuthorizer(token string) func(*http.Request) error {
	return func(r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
}

// IDTokenAuthorizer adds a Google-signed ID token whose audience is the
// worker's URL, which is what Cloud Run IAM checks on a private service.
// Token sources are made once per worker and cache their tokens. A plain
// http:// worker is local (Cloud Run URLs are https) and gets no token, so
// a local pool works without Google credentials.
func IDTokenAuthorizer(ctx context.Context) func(*http.Request) error {
	var (
		mu      sync.Mutex
		sources = map[string]oauth2.TokenSource{}
	)
	return func(r *http.Request) error {
		if r.URL.Scheme != "https" {
			return nil
		}
		aud := r.URL.Scheme + "://" + r.URL.Host
		mu.Lock()
		ts, ok := sources[aud]
		if !ok {
			var err error
			if ts, err = idtoken.NewTokenSource(ctx, aud); err != nil {
				mu.Unlock()
				return fmt.Errorf("gpu: ID token source for %s: %w", aud, err)
			}
			sources[aud] = ts
		}
		mu.Unlock()
		tok, err := ts.Token()
		if err != nil {
			return fmt.Errorf("gpu: ID token for %s: %w", aud, err)
		}
		tok.SetAuthHeader(r)
		return nil
	}
}
