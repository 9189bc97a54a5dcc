package scheduler

import (
	"context"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
)

// ExpireBatch bounds the expired runs (and, apart, change records) one
// sweep deletes: the local stand-in for Firestore's TTL policy, bounded so
// that a backlog (a long-stopped baton local) drains over several sweeps
// instead of stalling one.
const ExpireBatch = 500

// expireAt is when a run of s finished at finished may be deleted: the
// schedule's history.keep, or the configured default (s may be nil, a
// deleted schedule or one not read).
func (e *Engine) expireAt(s *schedule.Schedule, finished time.Time) time.Time {
	return finished.Add(s.KeepOr(e.cfg.HistoryKeep)).UTC()
}

// expire deletes one bounded batch of the finished runs and one of the
// change records whose expireAt has passed. Where Firestore's TTL policy
// runs (the cloud) it finds little or nothing; locally (FerretDB, no TTL)
// it is what deletes them. Runs that are not finished carry no expireAt,
// so they are never deleted. A failure is logged and retried by the next
// sweep: nothing depends on the exact moment of a deletion.
func (e *Engine) expire(ctx context.Context, now time.Time, c *counters) {
	if n, err := e.runs.DeleteExpired(ctx, now, ExpireBatch); err != nil {
		c.errors.Add(1)
		e.log.Warn("deleting expired runs failed; the next sweep tries again", "err", err)
	} else if n > 0 {
		e.log.Info("deleted expired runs", "count", n)
	}
	if n, err := e.cfg.Store.Catalog().DeleteExpiredVersions(ctx, now, ExpireBatch); err != nil {
		c.errors.Add(1)
		e.log.Warn("deleting expired change records failed; the next sweep tries again", "err", err)
	} else if n > 0 {
		e.log.Info("deleted expired change records", "count", n)
	}
}

// copyForward records the change that produced s's stored version in the
// history, final, before the scheduler's own write (the end of a timed
// pause) replaces it in the document: shared/catalog's protocol, which
// every writer of a version follows (catalog.Service.copyForward).
func (e *Engine) copyForward(ctx context.Context, s *schedule.Schedule) error {
	if s.LastChange == nil || s.LastChange.Version != s.Version {
		return nil
	}
	return e.cfg.Store.Catalog().PutVersion(ctx, s.LastChange.Record(s.ID, s.CreatedAt, s.KeepOr(e.cfg.HistoryKeep), true))
}
