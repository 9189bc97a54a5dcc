package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/httpapi"
)

// TestFrom pins the one mapping of error codes to HTTP answers: the
// statuses and code strings clients branch on, the messages that are
// rewritten, and which errors the outermost code overrides.
func TestFrom(t *testing.T) {
	fe := &errcode.FieldError{Field: "cron", Reason: "bad cron"}
	tests := []struct {
		name     string
		err      error
		status   int
		code     string
		field    string
		msg      string // substring of the message
		internal bool
	}{
		{"InvalidArgument", errcode.New(errcode.InvalidArgument, "bad"), 400, "invalid_argument", "", "bad", false},
		{"FieldError", fmt.Errorf("create: %w", fe), 400, "invalid_argument", "cron", "bad cron", false},
		{"PermissionDenied", errcode.New(errcode.PermissionDenied, "no secret"), 403, "permission_denied", "", "no secret", false},
		{"NotFound", fmt.Errorf("get x: %w", errcode.New(errcode.NotFound, "nope")), 404, "not_found", "", "get x: nope", false},
		{"AlreadyExists", errcode.New(errcode.AlreadyExists, "taken"), 409, "conflict", "", "taken", false},
		{"Conflict", errcode.New(errcode.Conflict, "cancelled"), 409, "conflict", "", "cancelled", false},
		{"StaleFence", errcode.New(errcode.StaleFence, "stale"), 409, "conflict", "", "stale", false},
		{"FailedPrecondition", errcode.New(errcode.FailedPrecondition, "if-match"), 412, "failed_precondition", "", "if-match", false},
		{"ResourceExhausted", errcode.New(errcode.ResourceExhausted, "busy"), 429, "resource_exhausted", "", "busy", false},
		{"Unavailable", errcode.New(errcode.Unavailable, "no db"), 503, "unavailable", "", "no db", false},
		{"Aborted", errcode.New(errcode.Aborted, "lost race"), 503, "unavailable", "", "lost race; retry", false},
		{"Canceled", fmt.Errorf("read: %w", context.Canceled), 503, "unavailable", "", "request cancelled", false},
		{"DeadlineExceeded", context.DeadlineExceeded, 500, "internal", "", "internal error", true},
		{"UnknownOutcome", errcode.New(errcode.UnknownOutcome, "maybe"), 500, "internal", "", "internal error", true},
		{"Unknown", errors.New("mongo at 10.0.0.1 said no"), 500, "internal", "", "internal error", true},
		{"Internal over NotFound", errcode.Wrap(errcode.Internal, errcode.New(errcode.NotFound, "x"), ""), 500, "internal", "", "internal error", true},
		{"Internal over FieldError", errcode.Wrap(errcode.Internal, fe, ""), 500, "internal", "", "internal error", true},
		{"*Error as built", fmt.Errorf("w: %w", &httpapi.Error{Status: 421, Code: "wrong_function", Message: "call GPU"}), 421, "wrong_function", "", "call GPU", false},
		{"*Error beats Internal", errcode.Wrap(errcode.Internal, httpapi.NotFound("route"), ""), 404, "not_found", "", "route", false},
		{"MaxBytesError", fmt.Errorf("decode: %w", &http.MaxBytesError{Limit: 10}), 413, "payload_too_large", "", "10 bytes", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			he, internal := httpapi.From(tt.err)
			if he.Status != tt.status || he.Code != tt.code || he.Field != tt.field || internal != tt.internal || !strings.Contains(he.Message, tt.msg) {
				t.Errorf("From(%v) = %d %s field %q %q internal %v; want %d %s field %q, a message with %q, internal %v",
					tt.err, he.Status, he.Code, he.Field, he.Message, internal, tt.status, tt.code, tt.field, tt.msg, tt.internal)
			}
			if internal && strings.Contains(he.Message, "10.0.0.1") {
				t.Errorf("a 500 leaks the error: %q", he.Message)
			}
		})
	}
}

// TestWriteErrorUsesFrom: WriteError answers with From's status and body.
func TestWriteErrorUsesFrom(t *testing.T) {
	rec := httptest.NewRecorder()
	httpapi.WriteError(rec, httptest.NewRequest("GET", "/x", nil), fmt.Errorf("cancel j: %w", errcode.New(errcode.Conflict, "gpu: job already finished")))
	if rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), `"code":"conflict"`) || !strings.Contains(rec.Body.String(), "job already finished") {
		t.Errorf("got %d %s", rec.Code, rec.Body)
	}
}
