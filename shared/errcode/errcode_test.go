package errcode_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/baton-cron/baton/shared/errcode"
)

var (
	errNotFound = errcode.New(errcode.NotFound, "x: not found")
	errConflict = errcode.New(errcode.Aborted, "x: conflict")
)

// TestCode covers what is not a sentinel: nil, ended contexts, unclassified
// errors, and the outermost code winning over a wrapped one.
func TestCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want errcode.ErrorCode
	}{
		{"nil", nil, errcode.OK},
		{"plain", errors.New("boom"), errcode.Unknown},
		{"sentinel through %w", fmt.Errorf("get a: %w", errNotFound), errcode.NotFound},
		{"canceled", fmt.Errorf("read: %w", context.Canceled), errcode.Canceled},
		{"deadline", fmt.Errorf("read: %w", context.DeadlineExceeded), errcode.DeadlineExceeded},
		{"classified beats context", fmt.Errorf("%w: %w", errcode.New(errcode.UnknownOutcome, "maybe"), context.DeadlineExceeded), errcode.UnknownOutcome},
		{"outer wins", errcode.Wrap(errcode.Internal, fmt.Errorf("tick: %w", errNotFound), ""), errcode.Internal},
		{"joined: first wins", errors.Join(errors.New("x"), errConflict), errcode.Aborted},
		{"field error", fmt.Errorf("create: %w", &errcode.FieldError{Field: "cron", Reason: "bad", Err: errConflict}), errcode.InvalidArgument},
	}
	for _, tt := range tests {
		if got := errcode.Code(tt.err); got != tt.want {
			t.Errorf("%s: Code(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

// TestWrapIsAndText: a wrapping sentinel is what it wraps to errors.Is,
// names itself in its text (without repeating what it wraps), and keeps
// the wrapped text when it has no message of its own.
func TestWrapIsAndText(t *testing.T) {
	w := errcode.Wrap(errcode.StaleFence, errConflict, "x: stale")
	if !errors.Is(fmt.Errorf("op: %w", w), errConflict) {
		t.Error("errors.Is(Wrap(_, errConflict, _), errConflict) = false")
	}
	if got := w.Error(); got != "x: stale" {
		t.Errorf("Wrap text = %q, want %q", got, "x: stale")
	}
	if got := errcode.Wrap(errcode.Internal, errors.New("inner"), "").Error(); got != "inner" {
		t.Errorf("Wrap with no message = %q, want %q", got, "inner")
	}
	fe := &errcode.FieldError{Field: "cron", Reason: "bad"}
	if got := fe.Error(); got != "cron: bad" {
		t.Errorf("FieldError = %q", got)
	}
	if got := (&errcode.FieldError{Reason: "bad body"}).Error(); got != "bad body" {
		t.Errorf("FieldError without a field = %q", got)
	}
}

// TestString: every code has its own name.
func TestString(t *testing.T) {
	seen := map[string]bool{}
	for c := errcode.OK; c <= errcode.UnknownOutcome; c++ {
		s := c.String()
		if s == "" || seen[s] || strings.HasPrefix(s, "ErrorCode(") {
			t.Errorf("code %d has name %q (empty, repeated or missing)", int(c), s)
		}
		seen[s] = true
	}
	if got := errcode.ErrorCode(99).String(); got != "ErrorCode(99)" {
		t.Errorf("String of an unknown code = %q", got)
	}
}
