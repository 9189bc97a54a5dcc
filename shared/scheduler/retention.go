package scheduler

import (
	"context"
	"errors"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
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

// dropChange moves the change that produced s's version out of its
// document, once per version: its record is written into the history
// (copyForward; the catalog writes the same record after its own write, so
// this is idempotent), then the document's copy is removed
// (store.Schedules.DropChange). The copy is how a write cannot land without
// its change; once the record is written it only makes every advance
// rewrite a larger document: a schedule's create carries a change of about
// 800 bytes, which puts the advance over 1 KiB, two Firestore write units a
// run instead of one (docs/cost.md). The record keeps its expiry (its time
// plus history.keep), as every change record does. Best effort, after the
// advance landed: a failure leaves the copy for the next tick, and an edit
// that landed meanwhile brings its own.
func (e *Engine) dropChange(ctx context.Context, s *schedule.Schedule) {
	if s.LastChange == nil || s.LastChange.Version != s.Version {
		return
	}
	if err := e.copyForward(ctx, s); err != nil {
		e.log.Debug("recording a change before dropping its copy failed; the next tick tries again", "schedule", s.ID, "err", err)
		return
	}
	if err := e.schedules.DropChange(ctx, s.ID, s.Version); err != nil && (!errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrContended)) {
		e.log.Debug("dropping a recorded change from its schedule failed; the next tick tries again", "schedule", s.ID, "err", err)
	}
}
