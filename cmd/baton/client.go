package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/client"
	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/config"
)

// apiClient talks to one baton function over HTTP with the bearer token.
type apiClient struct {
	// base is the function's URL, such as http://127.0.0.1:8080/Schedules.
	base  string
	token string
	http  *http.Client
}

// schedulesClientFromEnv builds the client for the Schedules function:
// BATON_SCHEDULES_URL when set (in the cloud every function has its own
// URL), else $BATON_URL/Schedules (`baton local` serves all functions on
// one port).
func schedulesClientFromEnv() (*apiClient, error) {
	base, from := config.Get(config.EnvSchedulesURL), config.EnvSchedulesURL
	if base == "" {
		base, from = strings.TrimRight(config.Get(config.EnvURL), "/")+"/"+config.FnSchedules, config.EnvURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError("%s=%q is not an http(s) URL", from, base)
	}
	return &apiClient{base: strings.TrimRight(base, "/"), token: config.Get(config.EnvToken), http: &http.Client{Timeout: 60 * time.Second}}, nil
}

// sdk is the client package's Client on the same function, token and
// HTTP client: the commands move to it one by one.
func (c *apiClient) sdk() (*client.Client, error) {
	return client.New(c.base, client.WithToken(c.token), client.WithHTTPClient(c.http), client.WithUserAgent("baton-cli"))
}

// apiError is an error answer from the API, in the shared shape.
type apiError struct {
	Status               int
	Code, Message, Field string
}

// Error names the field first, so the operator sees what to fix.
func (e *apiError) Error() string {
	msg := fmt.Sprintf("HTTP %d %s: ", e.Status, e.Code)
	if e.Field != "" {
		msg += e.Field
		if f, ok := fieldFlags[e.Field]; ok {
			msg += " (" + f + ")"
		}
		msg += ": "
	}
	return msg + e.Message
}

// do sends one request through the client package (client.Client.Do),
// the one HTTP client of the API. body, when non-nil, is sent as JSON (a
// []byte is sent as is). A 2xx answer is decoded into out (when non-nil);
// an error answer becomes an *apiError, which names the flag of the
// field at fault.
func (c *apiClient) do(ctx context.Context, method, path string, q url.Values, header http.Header, body any, out any) (http.Header, error) {
	sdk, err := c.sdk()
	if err != nil {
		return nil, usageError("%v", err)
	}
	h, err := sdk.Do(ctx, method, path, q, header, body, out)
	if err != nil {
		return nil, c.cliError(err, config.EnvSchedulesURL)
	}
	return h, nil
}

// cliError is a client error as the CLI reports it: the API's answer as
// an *apiError (its exit code and field), no answer at all as unreachable
// naming env (the variable that sets this function's URL), and anything
// else as it is.
func (c *apiClient) cliError(err error, env string) error {
	var ce *client.Error
	switch {
	case errors.As(err, &ce) && ce.Status != 0:
		return &apiError{Status: ce.Status, Code: ce.Code, Message: ce.Message, Field: ce.Field}
	case errors.As(err, &ce):
		return unreachable(c.base, env, ce)
	}
	return err
}

// unreachable says that no answer came from base, and which variables
// point the CLI there (env is the function's own URL variable).
func unreachable(base, env string, ce *client.Error) error {
	cause := ce.Err
	if u := errors.Unwrap(cause); u != nil {
		cause = u // the client's own "cannot reach" is said here
	}
	return fmt.Errorf("cannot reach %s (is `baton local` running? check %s / %s): %w", base, config.EnvURL, env, cause)
}

// checkPageSize validates --page-size on a list command before any
// request: unset means the server's default, anything else must be 1 to
// catalog.MaxPageSize (an explicit 0 included), else a usage error (exit 2)
// naming the flag.
func checkPageSize(cmd *cobra.Command, n int) error {
	if !cmd.Flags().Changed("page-size") {
		return nil
	}
	if n < 1 || n > catalog.MaxPageSize {
		// "runs list: ...", as the other usage errors say it: main adds
		// the "baton: ".
		path := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
		return usageError("%s: --page-size must be from 1 to %d, not %d", path, catalog.MaxPageSize, n)
	}
	return nil
}

// fetchPages GETs path one page at a time from token on, with the query q,
// collecting each page's items; it follows nextPageToken only when all is
// set. items picks a page's items and next token out of the decoded page P.
// It returns the items and the token that continues after them ("" at the
// end of the list).
func fetchPages[P, T any](ctx context.Context, c *apiClient, path string, q url.Values, pageSize int, token string, all bool, items func(*P) ([]T, string)) ([]T, string, error) {
	var out []T
	for {
		pq := url.Values{}
		for k, v := range q {
			pq[k] = v
		}
		if pageSize > 0 {
			pq.Set("pageSize", strconv.Itoa(pageSize))
		}
		if token != "" {
			pq.Set("pageToken", token)
		}
		var page P
		if _, err := c.do(ctx, http.MethodGet, path, pq, nil, nil, &page); err != nil {
			return nil, "", err
		}
		got, next := items(&page)
		out = append(out, got...)
		token = next
		if !all || token == "" {
			return out, token, nil
		}
	}
}
