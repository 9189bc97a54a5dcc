package scheduler

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"golang.org/x/oauth2"
)

// TestIDTokenNotSentOnRedirectToAnotherHost: with BATON_TARGET_ID_TOKEN, a
// target that redirects to another allowed host must not hand that host
// the ID token minted for the target (it could replay it). A static token
// source stands in for Google's, which needs credentials and the network.
func TestIDTokenNotSentOnRedirectToAnotherHost(t *testing.T) {
	var mu sync.Mutex
	got := map[string]string{}
	seen := func(who string, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got[who] = r.Header.Get("Authorization")
	}
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen("other", r)
	}))
	defer other.Close()
	// Two hosts on the allowlist: 127.0.0.1 (the target) and localhost
	// (the other host).
	ou, _ := url.Parse(other.URL)
	otherURL := "http://localhost:" + ou.Port()
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen("target", r)
		http.Redirect(w, r, otherURL+"/next", http.StatusFound)
	}))
	defer target.Close()
	e := &Engine{cfg: Config{AllowedTargets: []string{"127.0.0.1", "localhost"}}}
	base := guardClient(&http.Client{}, e.cfg.AllowedTargets, nil)
	ts := oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "id-token-for-target", TokenType: "Bearer"})
	c := e.withRedirectCheck(idTokenClient(base, target.URL+"/run", ts))
	resp, err := c.Get(target.URL + "/run")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	want := map[string]string{"target": "Bearer id-token-for-target", "other": ""}
	if got["target"] != want["target"] || got["other"] != want["other"] {
		t.Errorf("Authorization seen (-want,+got): -%q +%q", want, got)
	}
}
