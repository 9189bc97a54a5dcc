package lease

import (
	"context"
	"errors"
	"time"
)

// Run acquires the lease (failing with ErrHeld when it is busy), runs fn
// with a context that is cancelled when ctx is or when the lease is lost,
// and releases the lease when fn returns. The result joins fn's error with
// the lease's: errors.Is(err, ErrLost) is true when the lease was lost while
// fn ran.
func Run(ctx context.Context, m *Manager, name string, ttl time.Duration, fn func(ctx context.Context, l *Lease) error) error {
	l, err := m.Acquire(ctx, name, ttl)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(l.Context(), func() { cancel(context.Cause(l.Context())) }) //nolint:contextcheck // the AfterFunc callback only cancels; it makes no call that takes a context
	ferr := fn(fctx, l)
	stop()
	cancel(nil)
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), ttl)
	defer rcancel()
	rerr := l.Release(rctx)
	return errors.Join(ferr, rerr)
}
