package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/baton-cron/baton/shared/httpapi"
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

// raw sends one request and returns a 2xx answer's body and content type.
func (c *apiClient) raw(ctx context.Context, method, path string, q url.Values, body any, accept string) ([]byte, string, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, "", fmt.Errorf("%s %s: encode body: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	// u is the configured function URL plus a path the console built
	// (ids path-escaped), never a URL from a request.
	req, err := http.NewRequestWithContext(ctx, method, u, rd) //nolint:gosec // see above

	if err != nil {
		return nil, "", fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.http.Do(req) //nolint:gosec // the configured function URL, as above
	if err != nil {
		return nil, "", &APIError{Message: fmt.Sprintf("cannot reach %s: %v", c.base, err)}
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 8<<20))
	if err != nil {
		return nil, "", &APIError{Message: fmt.Sprintf("%s %s: read answer: %v", method, path, err)}
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return nil, "", decodeError(res.StatusCode, data)
	}
	return data, res.Header.Get("Content-Type"), nil
}

func decodeError(status int, data []byte) *APIError {
	e := httpapi.ParseError(status, data)
	return &APIError{Status: status, Code: e.Code, Message: e.Message, Field: e.Field}
}
