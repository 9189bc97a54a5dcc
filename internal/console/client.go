package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/baton-cron/baton/client"
)

// apiClient calls one baton function, as the CLI's client does.
type apiClient struct {
	base  string
	token string
	http  *http.Client
}

// APIError is an error answer of the API in the shared shape, or a
// failure to reach it (Status 0); the pages show its message and field.
type APIError struct {
	Status               int
	Code, Message, Field string
}

// Error names the field first, as the CLI does.
func (e *APIError) Error() string {
	msg := e.Message
	if e.Field != "" {
		msg = e.Field + ": " + msg
	}
	if e.Status == 0 {
		return msg
	}
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, msg)
}

// do sends one request and decodes a 2xx JSON answer into out; body, when
// non-nil, is sent as JSON.
func (c *apiClient) do(ctx context.Context, method, path string, q url.Values, body, out any) error {
	data, _, err := c.raw(ctx, method, path, q, body, "application/json")
	if err != nil {
		return err
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return &APIError{Message: fmt.Sprintf("%s %s: decode answer: %v", method, path, err)}
		}
	}
	return nil
}

// raw sends one request through the client package (client.Client.Do),
// the one HTTP client of the API, and returns a 2xx answer's body and
// content type. path is one the console built (ids path-escaped) on the
// configured function URL, never a URL from a request.
func (c *apiClient) raw(ctx context.Context, method, path string, q url.Values, body any, accept string) ([]byte, string, error) {
	opts := []client.Option{client.WithToken(c.token), client.WithUserAgent("baton-console")}
	if c.http != nil {
		opts = append(opts, client.WithHTTPClient(c.http))
	}
	sdk, err := client.New(c.base, opts...)
	if err != nil {
		return nil, "", &APIError{Message: err.Error()}
	}
	var data []byte
	h, err := sdk.Do(ctx, method, path, q, http.Header{"Accept": {accept}}, body, &data)
	var ce *client.Error
	switch {
	case err == nil:
		return data, h.Get("Content-Type"), nil
	case errors.As(err, &ce) && ce.Status != 0:
		return nil, "", &APIError{Status: ce.Status, Code: ce.Code, Message: ce.Message, Field: ce.Field}
	case errors.As(err, &ce):
		return nil, "", &APIError{Message: ce.Err.Error()}
	}
	return nil, "", &APIError{Message: err.Error()}
}
