package errcode_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/fence"
	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/rent"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/taskqueue"
)

// TestSentinels is the contract in one table: every sentinel of baton's
// domain packages has the code the HTTP layer and the retry logic expect,
// and is (or is not) the storage sentinels named, through a wrapping
// operation error as callers see it.
func TestSentinels(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		code  errcode.ErrorCode
		is    []error // errors.Is must hold
		isNot []error // errors.Is must not hold
	}{
		{"store.ErrNotFound", store.ErrNotFound, errcode.NotFound, nil, []error{store.ErrConflict}},
		{"store.ErrConflict", store.ErrConflict, errcode.Aborted, nil, []error{store.ErrStaleFence, store.ErrNotFound}},
		{"store.ErrStaleFence", store.ErrStaleFence, errcode.StaleFence, []error{store.ErrConflict}, nil},
		{"store.ErrContended", store.ErrContended, errcode.Aborted, []error{store.ErrConflict}, []error{store.ErrStaleFence, store.ErrUnknownOutcome}},
		{"store.ErrUnknownOutcome", store.ErrUnknownOutcome, errcode.UnknownOutcome, nil, []error{store.ErrConflict, store.ErrStaleFence}},
		{"store.ErrRetryableWrites", store.ErrRetryableWrites, errcode.InvalidArgument, nil, nil},
		{"store.ErrBadPageToken", store.ErrBadPageToken, errcode.InvalidArgument, nil, nil},
		{"store.ErrCannotWatch", store.ErrCannotWatch, errcode.Unimplemented, nil, []error{store.ErrConflict, store.ErrNotFound}},

		{"catalog.ErrNotFound", catalog.ErrNotFound, errcode.NotFound, []error{store.ErrNotFound}, nil},
		{"catalog.ErrExists", catalog.ErrExists, errcode.AlreadyExists, nil, []error{store.ErrConflict}},
		{"catalog.ErrVersionMismatch", catalog.ErrVersionMismatch, errcode.FailedPrecondition, nil, nil},
		{"catalog.ErrBusy", catalog.ErrBusy, errcode.Conflict, nil, nil},
		{"catalog.ErrNoTrigger", catalog.ErrNoTrigger, errcode.Unavailable, nil, nil},

		{"gpu.ErrNotFound", gpu.ErrNotFound, errcode.NotFound, []error{store.ErrNotFound}, nil},
		{"gpu.ErrStaleFence", gpu.ErrStaleFence, errcode.StaleFence, []error{store.ErrStaleFence, store.ErrConflict}, nil},
		{"gpu.ErrForbidden", gpu.ErrForbidden, errcode.PermissionDenied, nil, []error{store.ErrStaleFence}},
		{"gpu.ErrCancelled", gpu.ErrCancelled, errcode.Conflict, nil, []error{store.ErrStaleFence}},
		{"gpu.ErrFinished", gpu.ErrFinished, errcode.Conflict, nil, nil},
		{"gpu.ErrBadPool", gpu.ErrBadPool, errcode.InvalidArgument, nil, nil},
		{"gpu.ErrRefused", gpu.ErrRefused, errcode.Unavailable, nil, nil},
		{"gpu.ErrUnanswered", gpu.ErrUnanswered, errcode.UnknownOutcome, nil, nil},

		{"scheduler.ErrNoGPU", scheduler.ErrNoGPU, errcode.FailedPrecondition, nil, nil},
		{"scheduler.ErrTargetNotAllowed", scheduler.ErrTargetNotAllowed, errcode.PermissionDenied, nil, nil},
		{"scheduler.ErrTargetAddress", scheduler.ErrTargetAddress, errcode.PermissionDenied, nil, nil},
		{"schedule.ErrInvalidGPUTarget", schedule.ErrInvalidGPUTarget, errcode.InvalidArgument, nil, nil},
		{"taskqueue.ErrConfig", taskqueue.ErrConfig, errcode.InvalidArgument, nil, nil},

		{"lease.ErrHeld", lease.ErrHeld, errcode.Conflict, nil, nil},
		{"lease.HeldError", &lease.HeldError{Name: "tick", Holder: "h"}, errcode.Conflict, []error{lease.ErrHeld}, nil},
		{"lease.ErrLost", lease.ErrLost, errcode.Aborted, nil, nil},
		{"lease.ErrNotHeld", lease.ErrNotHeld, errcode.FailedPrecondition, nil, nil},
		{"lease.ErrNotFound", lease.ErrNotFound, errcode.NotFound, []error{store.ErrNotFound}, nil},
		{"lease.ErrBadTTL", lease.ErrBadTTL, errcode.InvalidArgument, nil, nil},

		{"fence.ErrStale", fence.ErrStale, errcode.StaleFence, nil, nil},
		{"fence.ErrMalformed", fence.ErrMalformed, errcode.InvalidArgument, nil, nil},

		{"scheduler.ErrRetryTask", scheduler.ErrRetryTask, errcode.Unavailable, nil, nil},

		{"rent.ErrMissing", rent.ErrMissing, errcode.InvalidArgument, nil, nil},
		{"rent.ErrSyntax", rent.ErrSyntax, errcode.InvalidArgument, nil, nil},
		{"rent.ErrNegative", rent.ErrNegative, errcode.InvalidArgument, nil, nil},
		{"rent.ErrRange", rent.ErrRange, errcode.InvalidArgument, nil, nil},
		{"rent.ErrConflict", rent.ErrConflict, errcode.InvalidArgument, nil, []error{store.ErrConflict}},
		{"rent.ErrUnknown", rent.ErrUnknown, errcode.InvalidArgument, nil, nil},
		{"rent.FieldError", &rent.FieldError{Field: "jeonse", Err: rent.ErrNegative, Reason: "must not be negative"}, errcode.InvalidArgument, []error{rent.ErrNegative}, nil},
		{"schedule.FieldError", &schedule.FieldError{Field: "cron", Reason: "bad"}, errcode.InvalidArgument, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// As callers see it: wrapped by the operation that failed.
			err := fmt.Errorf("op x: %w", tt.err)
			if got := errcode.Code(err); got != tt.code {
				t.Errorf("Code(%v) = %v, want %v", err, got, tt.code)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("errors.Is(%v, itself) = false", err)
			}
			for _, target := range tt.is {
				if !errors.Is(err, target) {
					t.Errorf("errors.Is(%v, %v) = false, want true", err, target)
				}
			}
			for _, target := range tt.isNot {
				if errors.Is(err, target) {
					t.Errorf("errors.Is(%v, %v) = true, want false", err, target)
				}
			}
		})
	}
}

// TestSchedAndRentFieldErrorAreOne: the two packages' FieldErrors are one
// type, so a caller (the HTTP layer) needs one errors.As.
func TestSchedAndRentFieldErrorAreOne(t *testing.T) {
	var err error = &rent.FieldError{Field: "rate", Reason: "r"}
	var fe *schedule.FieldError
	if !errors.As(err, &fe) || fe.Field != "rate" {
		t.Fatalf("errors.As(rent.FieldError, *schedule.FieldError) = false")
	}
}

// TestSentinelText: the wrapping sentinels kept the texts their callers
// and logs know.
func TestSentinelText(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{gpu.ErrNotFound, "gpu: job not found"},
		{store.ErrStaleFence, "store: conflict: stale fencing token"},
		{catalog.ErrNotFound, "catalog: schedule not found"},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("text = %q, want %q", got, tt.want)
		}
	}
}
