package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"google.golang.org/api/idtoken"
)

// staticSource is a fake token source at the edge: no Google endpoint is
// reachable from a test, so idtoken and x/oauth2/google are replaced by
// what they would return.
type staticSource struct {
	tok *oauth2.Token
	err error
}

func (s staticSource) Token() (*oauth2.Token, error) { return s.tok, s.err }

// TestIDTokenTransport: each function gets the ID token of its own
// audience; with user credentials (idtoken refuses them) the refresh's
// id_token is sent; a host that is not a function's gets no token; and
// credentials without an ID token say what to do.
func TestIDTokenTransport(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Host+" "+r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a request reached a host that is not a function's, with %q", r.Header.Get("Authorization"))
	}))
	defer other.Close()
	ctx := context.Background()
	schedules, gpu := srv.URL+"/Schedules", strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)+"/GPU"
	future := time.Now().Add(time.Hour)

	// Service account, impersonation, metadata server: idtoken's source.
	audiences := []string{}
	newID := func(_ context.Context, aud string, _ ...idtoken.ClientOption) (oauth2.TokenSource, error) {
		audiences = append(audiences, aud)
		return staticSource{tok: &oauth2.Token{AccessToken: "id-for-" + aud, Expiry: future}}, nil
	}
	noDefault := func(context.Context, ...string) (oauth2.TokenSource, error) {
		t.Fatal("the ADC fallback was used although idtoken had a source")
		return nil, nil
	}
	rt, err := idTokenTransport(ctx, []string{schedules, gpu}, newID, noDefault, http.DefaultTransport)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: rt}
	for _, u := range []string{schedules + "/schedules", gpu + "/gpu/pool"} {
		res, err := c.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		_ = res.Body.Close()
	}
	if want := []string{schedules, gpu}; strings.Join(audiences, ",") != strings.Join(want, ",") {
		t.Errorf("audiences = %v, want the function URLs %v", audiences, want)
	}
	if len(got) != 2 || !strings.HasSuffix(got[0], "Bearer id-for-"+schedules) || !strings.HasSuffix(got[1], "Bearer id-for-"+gpu) {
		t.Errorf("Authorization headers = %q", got)
	}
	if err := get(c, other.URL+"/x"); err == nil || !strings.Contains(err.Error(), "no credentials sent") {
		t.Errorf("GET another host: %v, want a refusal", err)
	}

	// User credentials: idtoken refuses authorized_user; the refresh's
	// id_token goes out instead.
	refuse := func(context.Context, string, ...idtoken.ClientOption) (oauth2.TokenSource, error) {
		return nil, errors.New(`idtoken: unsupported credentials type "authorized_user"`)
	}
	user := func(context.Context, ...string) (oauth2.TokenSource, error) {
		tok := (&oauth2.Token{AccessToken: "access", Expiry: future}).WithExtra(map[string]any{"id_token": "user-id-token"})
		return staticSource{tok: tok}, nil
	}
	got = nil
	rt, err = idTokenTransport(ctx, []string{schedules, gpu}, refuse, user, http.DefaultTransport)
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&http.Client{Transport: rt}).Get(schedules + "/schedules")
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if len(got) != 1 || !strings.HasSuffix(got[0], "Bearer user-id-token") {
		t.Errorf("user credentials sent %q, want the id_token", got)
	}

	// A user credential without an ID token: an error that says what to do.
	bare := func(context.Context, ...string) (oauth2.TokenSource, error) {
		return staticSource{tok: &oauth2.Token{AccessToken: "access", Expiry: future}}, nil
	}
	rt, err = idTokenTransport(ctx, []string{schedules}, refuse, bare, http.DefaultTransport)
	if err != nil {
		t.Fatal(err)
	}
	if err := get(&http.Client{Transport: rt}, schedules+"/schedules"); err == nil || !strings.Contains(err.Error(), "gcloud auth application-default login") {
		t.Errorf("no id_token: %v, want advice", err)
	}

	// No credentials at all.
	none := func(context.Context, ...string) (oauth2.TokenSource, error) {
		return nil, errors.New("google: could not find default credentials")
	}
	if _, err := idTokenTransport(ctx, []string{schedules}, refuse, none, http.DefaultTransport); err == nil || !strings.Contains(err.Error(), "BATON_TOKEN") {
		t.Errorf("no ADC: %v, want advice naming BATON_TOKEN", err)
	}
}

// get sends a GET and closes the answer's body.
func get(c *http.Client, u string) error {
	res, err := c.Get(u)
	if err != nil {
		return err
	}
	return res.Body.Close()
}

// TestConsoleAddrLoopbackOnly: `baton console` refuses to listen anywhere
// but loopback, before reading any credentials, with exit 2.
func TestConsoleAddrLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:8090", ":8090", "192.0.2.7:8090", "example.com:8090", "nonsense"} {
		_, _, err := runRoot(t, "console", "--addr", addr)
		if exitCode(err) != 2 || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("console --addr %s: exit %d, %v; want 2 naming loopback", addr, exitCode(err), err)
		}
	}
	_ = consoleCmdReset()
}

// consoleCmdReset puts --addr back to its default for later tests.
func consoleCmdReset() error {
	c, _, err := rootCmd.Find([]string{"console"})
	if err != nil {
		return err
	}
	return c.Flags().Set("addr", defaultConsoleAddr)
}
