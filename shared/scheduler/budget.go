package scheduler

import (
	"context"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
)

// DefaultRunBudget is how long one Run invocation may keep starting runs:
// Cloud Tasks' longest dispatch deadline less the overhead of the Run
// function's own writes. One run always fits (validation bounds an http
// target's timeout to schedule.MaxHTTPTimeout); a batch, the misfire runs
// buffered meanwhile and the retries that waited for the lease may not, and
// an invocation that outlived its deadline would be ended mid-target with
// the job lease held: the sweep would fail that run over and, with
// retries, call a target that may have answered 2xx.
const DefaultRunBudget = schedule.MaxDispatchDeadline - schedule.RunOverhead

// nonHTTPRunEstimate is the longest a builtin or gpu target (which only
// enqueues) is taken to run, for the budget.
const nonHTTPRunEstimate = time.Minute

type budgetKey struct{}

// withBudget bounds the runs started under ctx to those that can end by
// deadline.
func withBudget(ctx context.Context, deadline time.Time) context.Context {
	return context.WithValue(ctx, budgetKey{}, deadline)
}

// fits reports whether one more run of s can start under ctx's budget and
// end within it. Without a budget (a tick executing inline, baton daemon)
// everything fits.
func fits(ctx context.Context, s *schedule.Schedule) bool {
	deadline, ok := ctx.Value(budgetKey{}).(time.Time)
	if !ok {
		return true
	}
	return !time.Now().Add(longestRun(s)).After(deadline)
}

// longestRun is how long one run of s can take.
func longestRun(s *schedule.Schedule) time.Duration {
	if s.Target.Type == schedule.TargetHTTP && s.Target.HTTP != nil {
		if d := s.Target.HTTP.Timeout.D(); d > 0 {
			return d
		}
		return schedule.DefaultHTTPTimeout
	}
	if s.Target.Type == schedule.TargetPubSub && s.Target.PubSub != nil {
		if d := s.Target.PubSub.Timeout.D(); d > 0 {
			return d
		}
		return schedule.DefaultPubSubTimeout
	}
	return nonHTTPRunEstimate
}
