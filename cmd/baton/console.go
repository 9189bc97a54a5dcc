package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"google.golang.org/api/idtoken"

	"github.com/baton-cron/baton/internal/console"
	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/logging"
)

// defaultConsoleAddr is where `baton console` listens unless told.
const defaultConsoleAddr = "127.0.0.1:8090"

// newConsoleCmd builds `baton console`: the operator console of
// internal/console served on a loopback address against a deployed baton,
// calling its functions with the operator's credentials, the way `kubectl
// proxy` serves the cluster's API. Nothing of the console is deployed.
func newConsoleCmd() *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve the operator console on 127.0.0.1 against a deployed baton",
		Long: `Serve the web console on a loopback address. It calls the Schedules and GPU
functions at BATON_SCHEDULES_URL and BATON_GPU_URL (or $BATON_URL/Schedules
and $BATON_URL/GPU), as the other commands do.

Credentials: with BATON_TOKEN set, it sends that bearer token (a local stack).
Otherwise it sends Google ID tokens made from Application Default Credentials,
one per function URL (the audience): a service account key, impersonation
(gcloud auth application-default login --impersonate-service-account=…) or the
metadata server; for user credentials (gcloud auth application-default login)
it sends the ID token of the user's own refresh, which Cloud Run accepts for
users with the invoker role.

The console refuses requests whose Host is not a loopback name (DNS
rebinding) and cross-origin form posts; it listens only on loopback: no
public UI surface is deployed.`,
		Example: "  BATON_SCHEDULES_URL=https://schedules-….run.app BATON_GPU_URL=https://gpu-….run.app baton console\n  baton console --addr 127.0.0.1:9000",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if host, _, err := net.SplitHostPort(addr); err != nil || host == "" || !console.IsLoopbackHost(host) {
				return usageError("console: --addr %q must be a loopback address such as %s: the console holds your credentials, and no public UI surface is deployed", addr, defaultConsoleAddr)
			}
			sc, err := schedulesClientFromEnv()
			if err != nil {
				return err
			}
			gc, err := gpuClientFromEnv()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			cfg := console.Config{SchedulesURL: sc.base, GPUURL: gc.base, LoopbackOnly: true, Logger: logging.New(cmd.ErrOrStderr(), config.Get(config.EnvLogLevel))}
			if tok := config.Get(config.EnvToken); tok != "" {
				cfg.Token = tok
				cfg.HTTP = &http.Client{Timeout: 60 * time.Second}
			} else {
				rt, err := idTokenTransport(ctx, []string{sc.base, gc.base}, idtoken.NewTokenSource, google.DefaultTokenSource, http.DefaultTransport)
				if err != nil {
					return fmt.Errorf("console: credentials: %w", err)
				}
				cfg.HTTP = &http.Client{Timeout: 60 * time.Second, Transport: rt}
			}
			h, err := console.New(cfg)
			if err != nil {
				return err
			}
			mux := http.NewServeMux()
			mux.Handle(console.DefaultPrefix+"/", http.StripPrefix(console.DefaultPrefix, h))
			mux.Handle("/", http.RedirectHandler(console.DefaultPrefix+"/", http.StatusFound))
			ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
			if err != nil {
				return fmt.Errorf("console: listen %s: %w", addr, err)
			}
			srv := httpapi.NewServer(mux, httpapi.DefaultTimeouts)
			fmt.Fprintf(cmd.OutOrStdout(), "baton console: open http://%s%s/ (Schedules %s, GPU %s). Ctrl-C stops it.\n", ln.Addr(), console.DefaultPrefix, sc.base, gc.base)
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ln) }()
			select {
			case err := <-served:
				return fmt.Errorf("console: serve: %w", err)
			case <-ctx.Done():
			}
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil {
				return fmt.Errorf("console: shut down: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", defaultConsoleAddr, "loopback address to listen on (host:port)")
	flagUsage(cmd)
	return cmd
}

// Token-source constructors, as idtoken and x/oauth2/google spell them; the
// test passes fakes, since no Google endpoint is reachable from a test.
type (
	newIDTokenSource  func(ctx context.Context, audience string, opts ...idtoken.ClientOption) (oauth2.TokenSource, error)
	newDefaultSources func(ctx context.Context, scopes ...string) (oauth2.TokenSource, error)
)

// idTokenTransport returns a RoundTripper that adds a Google ID token for
// the request's function (audience: its base URL, one of bases) to every
// request. Each audience gets idtoken's source, which handles service
// accounts, impersonation and the metadata server; when idtoken refuses the
// credentials (ADC of a user, "authorized_user"), the ID token that
// Google's token endpoint returns with the user's own refresh is used, as
// `gcloud auth print-identity-token` does.
func idTokenTransport(ctx context.Context, bases []string, newID newIDTokenSource, newDefault newDefaultSources, next http.RoundTripper) (http.RoundTripper, error) {
	t := &idTransport{next: next, sources: map[string]oauth2.TokenSource{}}
	var userSource oauth2.TokenSource
	for _, base := range bases {
		u, err := url.Parse(base)
		if err != nil {
			return nil, fmt.Errorf("function URL %q: %w", base, err)
		}
		ts, err := newID(ctx, base)
		if err != nil {
			if userSource == nil {
				def, derr := newDefault(ctx, "openid", "https://www.googleapis.com/auth/userinfo.email")
				if derr != nil {
					return nil, fmt.Errorf("no Application Default Credentials (run `gcloud auth application-default login`, or set BATON_TOKEN for a local stack): %w", errors.Join(err, derr))
				}
				userSource = oauth2.ReuseTokenSource(nil, userIDTokens{def})
			}
			ts = userSource
		}
		t.sources[u.Scheme+"://"+u.Host] = ts
	}
	return t, nil
}

// userIDTokens is the ID token that comes with a user credential's access
// token (Extra "id_token"), as a token source.
type userIDTokens struct{ src oauth2.TokenSource }

// Token refreshes the user's credential and returns its ID token.
func (u userIDTokens) Token() (*oauth2.Token, error) {
	tok, err := u.src.Token()
	if err != nil {
		return nil, fmt.Errorf("refresh user credentials: %w", err)
	}
	id, _ := tok.Extra("id_token").(string)
	if id == "" {
		return nil, errors.New("the Application Default Credentials gave no ID token: log in again with `gcloud auth application-default login`, or use a service account (impersonation)")
	}
	return &oauth2.Token{AccessToken: id, TokenType: "Bearer", Expiry: tok.Expiry}, nil
}

// idTransport adds the ID token of the request's origin.
type idTransport struct {
	next    http.RoundTripper
	sources map[string]oauth2.TokenSource
}

// RoundTrip adds Authorization and sends the request; a request to a host
// that is none of the functions' is refused rather than sent with a token.
func (t *idTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ts, ok := t.sources[r.URL.Scheme+"://"+r.URL.Host]
	if !ok {
		return nil, fmt.Errorf("console: %s is not one of the functions' URLs; no credentials sent", r.URL.Host)
	}
	tok, err := ts.Token()
	if err != nil {
		return nil, fmt.Errorf("console: ID token for %s: %w", r.URL.Host, err)
	}
	r2 := r.Clone(r.Context())
	r2.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	return t.next.RoundTrip(r2)
}

func init() { rootCmd.AddCommand(newConsoleCmd()) }
